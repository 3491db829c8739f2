#!/usr/bin/env bash
# tests/install_test.sh BUILD_DIR WORK_DIR — roost as a user installs and
# finds it.  Installs BUILD_DIR into a prefix and moves the prefix (nothing
# installed may point back at the build, but the .pc files' prefix= line,
# which names the prefix installed to), then:
#   - pkg-config on the moved install, with --define-prefix (the prefix
#     from where the .pc file lies): -I<prefix>/include and <prefix>/lib
#     exactly; builds tests/install/probe.c against roost, roost-prefixed,
#     roost-secure and roost-hardened and runs each;
#   - find_package(roost) on the moved install: builds tests/install/
#     (roost::roost, roost::prefixed, roost::shared, roost::secure,
#     roost::secure_shared, roost::hardened, roost::hardened_shared) and
#     runs each probe;
#   - the README's install recipe for a prefix off the loader's path
#     (PKG_CONFIG_PATH, an rpath), run as the README writes it; then plain
#     pkg-config there prints the prefix's folders exactly (no `..` in any
#     package's flags) and the program's RUNPATH is the prefix's lib folder;
#   - roost-run: --version, --help listing every option of src/options.def,
#     and python3 under --stats=json with the JSON parsed.
# Each probe exits 0 only if roost's counters moved by what it allocated.
#
# A cross build's install (make test-aarch64-install): ROOSTTEST_TOOLCHAIN
# names the CMake toolchain file the consumer is configured with (which
# finds roost through CMAKE_FIND_ROOT_PATH, as a cross build finds any
# package), CC the C compiler for the pkg-config probes, and
# ROOSTTEST_EMULATOR the command that runs what they build (qemu-user);
# roost-run is only asked for --version and --help there (its program would
# be exec'd, which qemu-user does not emulate without binfmt_misc).
set -euo pipefail
build=$(cd "$1" && pwd)
work=$2
src=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

step() { echo "--- $*"; }
toolchain=${ROOSTTEST_TOOLCHAIN:-}
# shellcheck disable=SC2206
emu=(${ROOSTTEST_EMULATOR:-})

step "install"
cmake --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
libdir=$(dirname "$(find "$prefix" -name roost.pc)")/..
libdir=$(cd "$libdir" && pwd)
pcs=(roost roost-prefixed roost-secure roost-hardened)
# Each .pc file names the prefix it was installed under (which lies in the
# build folder when the work folder does), and nothing else may name the
# build folder.
if grep -rIlF --exclude='*.pc' -- "$build" "$prefix"; then
  echo "FAIL: installed text files name the build folder" >&2
  exit 1
fi
for pc in "${pcs[@]}"; do
  f=$libdir/pkgconfig/$pc.pc
  [ -f "$f" ] || { echo "FAIL: $pc.pc not installed" >&2; exit 1; }
  grep -qxF -- "prefix=$work/staged" "$f" ||
    { echo "FAIL: $pc.pc does not say prefix=$work/staged" >&2; exit 1; }
  if grep -vxF -- "prefix=$work/staged" "$f" | grep -F -- "$build"; then
    echo "FAIL: $pc.pc names the build folder" >&2
    exit 1
  fi
done
for f in include/roost.h include/roost_stats.def bin/roost-run; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
soname=$(objdump -p "$libdir/libroost.so" | awk '$1 == "SONAME" {print $2}')
[[ "$soname" =~ ^libroost\.so\.[0-9]+$ ]] || { echo "FAIL: SONAME '$soname'" >&2; exit 1; }
echo "SONAME $soname"

# pkg-config's output as one line of words (it ends its flags with a blank).
words_of() { local w; read -r -a w <<<"$(pkg-config "$@")"; echo "${w[*]}"; }
# For each package: no `..` in its flags, its include flag exactly
# -IPREFIX/include and its libdir exactly LIBDIR.
check_pc_paths() { # PREFIX LIBDIR [pkg-config option...]
  local p=$1 l=$2 pc flags
  shift 2
  for pc in "${pcs[@]}"; do
    flags=$(words_of "$@" --cflags --libs "$pc")
    echo "$pc: $flags"
    case "$flags" in
      *..*) echo "FAIL: pkg-config's flags for $pc hold '..'" >&2; return 1 ;;
    esac
    [ "$(words_of "$@" --cflags "$pc")" = "-I$p/include" ] ||
      { echo "FAIL: $pc's include flag is not -I$p/include" >&2; return 1; }
    [ "$(words_of "$@" --variable=libdir "$pc")" = "$l" ] ||
      { echo "FAIL: $pc's libdir is not $l" >&2; return 1; }
  done
}

step "pkg-config, the install moved (--define-prefix)"
export PKG_CONFIG_PATH=$libdir/pkgconfig
check_pc_paths "$prefix" "$libdir" --define-prefix
pc() { pkg-config --define-prefix "$@"; }
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -o "$work/probe_pc" "$src/tests/install/probe.c" $(pc --cflags --libs roost)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc"
# shellcheck disable=SC2046
$cc -DPROBE_PREFIXED -o "$work/probe_pc_prefixed" "$src/tests/install/probe.c" \
  $(pc --cflags --libs roost-prefixed)
"${emu[@]}" "$work/probe_pc_prefixed"
# shellcheck disable=SC2046
$cc -o "$work/probe_pc_secure" "$src/tests/install/probe.c" $(pc --cflags --libs roost-secure)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc_secure"
# shellcheck disable=SC2046
$cc -o "$work/probe_pc_hardened" "$src/tests/install/probe.c" \
  $(pc --cflags --libs roost-hardened)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc_hardened"
[ "$(pc --modversion roost)" = "$("${emu[@]}" "$prefix/bin/roost-run" --version | awk '{print $2}')" ]

step "the README's recipe for a prefix off the loader's path"
# The block after the README's marker, run as written with HOME in the work
# folder, main.c the probe, and `make install` as the cmake --install it
# stands for (a make inside a test would rebuild the tree under test).
recipe=$(awk '/<!-- install recipe:/ {found = 1; next}
              found && /^```sh$/ {inside = 1; next}
              inside && /^```$/ {exit}
              inside {print}' "$src/README.md")
grep -q '^make install PREFIX=\$HOME/.local$' <<<"$recipe" ||
  { echo "FAIL: the README's install recipe has no 'make install PREFIX=\$HOME/.local'" >&2; exit 1; }
mkdir -p "$work/recipe/home"
cp "$src/tests/install/probe.c" "$work/recipe/main.c"
(
  cd "$work/recipe"
  export HOME=$work/recipe/home
  unset LD_LIBRARY_PATH PKG_CONFIG_PATH
  # A cross build compiles with $CC and runs ./main under the emulator.
  sed -e "s|^make install PREFIX=\(.*\)$|cmake --install '$build' --prefix \1 >/dev/null|" \
    -e "s|^cc |$cc |" -e "s|^\./main$|${emu[*]:-} ./main|" <<<"$recipe" |
    bash -euo pipefail
)
# The recipe's install, where it was installed: plain pkg-config prints its
# folders, and the rpath the recipe wrote is its lib folder, exactly.
home_prefix=$work/recipe/home/.local
home_libdir=$home_prefix/${libdir#"$prefix"/}
PKG_CONFIG_PATH=$home_libdir/pkgconfig check_pc_paths "$home_prefix" "$home_libdir"
runpath=$(readelf -d "$work/recipe/main" | sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]$/\2/p')
echo "the recipe's program: RUNPATH $runpath"
[ "$runpath" = "$home_libdir" ] ||
  { echo "FAIL: the recipe's program has RUNPATH '$runpath', not $home_libdir" >&2; exit 1; }

step "find_package"
if [ -n "$toolchain" ]; then
  where=(-DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_FIND_ROOT_PATH="$prefix")
else
  where=(-DCMAKE_PREFIX_PATH="$prefix")
fi
cmake -S "$src/tests/install" -B "$work/consumer" "${where[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/consumer" >/dev/null
for p in probe_roost probe_prefixed probe_shared probe_secure probe_secure_shared probe_hardened \
  probe_hardened_shared; do
  "${emu[@]}" "$work/consumer/$p"
done

step "roost-run"
run=$prefix/bin/roost-run
"${emu[@]}" "$run" --version
help=$("${emu[@]}" "$run" --help)
for var in $(grep -o '"ROOST_[A-Z_]*"' "$src/src/options.def" | tr -d '"'); do
  grep -q "^  $var " <<<"$help" || { echo "FAIL: --help does not list $var" >&2; exit 1; }
done
if [ "${#emu[@]}" -gt 0 ]; then
  echo "roost-run under the emulator: --version and --help only"
  echo "install test: ok"
  exit 0
fi
# The interpreter itself, not a wrapper script (pyenv's shim runs several
# processes, each with its own report).
python=$(python3 -c 'import sys; print(sys.executable)')
"$run" --stats=json -- "$python" -c 'print(sum(range(1000)))' 2>"$work/stats.json" >"$work/out"
[ "$(cat "$work/out")" = 499500 ]
python3 - "$work/stats.json" <<'PY'
import json, sys
stats = json.load(open(sys.argv[1]))
totals = stats["totals"]
assert totals["allocations"] > 1000, totals
assert totals["bytes_reserved"] > 0, totals
print("stats=json: %d allocations, %d frees" % (totals["allocations"], totals["frees"]))
PY
echo "install test: ok"
