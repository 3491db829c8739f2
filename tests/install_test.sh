#!/usr/bin/env bash
# tests/install_test.sh BUILD_DIR WORK_DIR — roost as a user installs and
# finds it.  Installs BUILD_DIR into a prefix, moves the prefix (nothing
# installed may point back at the build), then:
#   - pkg-config: builds tests/install/probe.c against roost,
#     roost-prefixed, roost-secure and roost-hardened and runs each;
#   - find_package(roost): builds tests/install/ (roost::roost,
#     roost::prefixed, roost::shared, roost::secure, roost::secure_shared,
#     roost::hardened, roost::hardened_shared) and runs each probe;
#   - the README's install recipe for a prefix off the loader's path
#     (PKG_CONFIG_PATH, an rpath), run as the README writes it;
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
if grep -rIl -- "$build" "$prefix" 2>/dev/null; then
  echo "FAIL: installed text files name the build folder" >&2
  exit 1
fi
libdir=$(dirname "$(find "$prefix" -name roost.pc)")/..
libdir=$(cd "$libdir" && pwd)
for f in include/roost.h include/roost_stats.def bin/roost-run; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
soname=$(objdump -p "$libdir/libroost.so" | awk '$1 == "SONAME" {print $2}')
[[ "$soname" =~ ^libroost\.so\.[0-9]+$ ]] || { echo "FAIL: SONAME '$soname'" >&2; exit 1; }
echo "SONAME $soname"

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -o "$work/probe_pc" "$src/tests/install/probe.c" $(pkg-config --cflags --libs roost)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc"
# shellcheck disable=SC2046
$cc -DPROBE_PREFIXED -o "$work/probe_pc_prefixed" "$src/tests/install/probe.c" \
  $(pkg-config --cflags --libs roost-prefixed)
"${emu[@]}" "$work/probe_pc_prefixed"
# shellcheck disable=SC2046
$cc -o "$work/probe_pc_secure" "$src/tests/install/probe.c" $(pkg-config --cflags --libs roost-secure)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc_secure"
# shellcheck disable=SC2046
$cc -o "$work/probe_pc_hardened" "$src/tests/install/probe.c" \
  $(pkg-config --cflags --libs roost-hardened)
LD_LIBRARY_PATH=$libdir "${emu[@]}" "$work/probe_pc_hardened"
[ "$(pkg-config --modversion roost)" = "$("${emu[@]}" "$prefix/bin/roost-run" --version | awk '{print $2}')" ]

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
