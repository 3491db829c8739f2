#!/usr/bin/env bash
# tests/install_products_test.sh BUILD_DIR — what `make install` builds: the
# target roost_install_products (cmake/install.cmake), asked of ninja
# without building anything (`ninja -t commands`: every command the target
# needs, built or not).  Fails if one of them compiles or links anything of
# tests/ or bench/ or GoogleTest, or if a file the install copies from the
# build tree, and ninja makes, is made by none of them (the install would
# copy a file the target did not build).  Exit 77 (skipped) in a tree not
# generated for Ninja.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$build/build.ninja" ]; then
  echo "not a Ninja tree: skipped"
  exit 77
fi
cmds=$(ninja -C "$build" -t commands roost_install_products)
echo "roost_install_products: $(wc -l <<<"$cmds") commands"

# Build outputs are named relative to the build tree, sources by absolute
# path.
bad=$(grep -E -e "(^|[ =])(tests|bench)/" -e "gtest" <<<"$cmds" || true)
bad=$bad$(grep -F -e "$src/tests/" -e "$src/bench/" <<<"$cmds" || true)
if [ -n "$bad" ]; then
  echo "FAIL: roost_install_products builds tests, benchmarks or GoogleTest, such as:" >&2
  head -c 2000 <<<"$bad" >&2
  exit 1
fi

# Every built file the install copies: a word of one of the commands (the
# linker's -o, ar's archive, the symlinks' names).
words=$(tr -s ' \t' '\n\n' <<<"$cmds" | sort -u)
checked=0
while read -r f; do
  case $f in
    "$build"/*) rel=${f#"$build"/} ;;
    *) continue ;;
  esac
  # Only what ninja makes (not the files CMake writes when it configures or
  # installs, such as the package and .pc files).
  query=$(ninja -C "$build" -t query "$rel" 2>/dev/null) || continue
  grep -q '^  input:' <<<"$query" || continue
  checked=$((checked + 1))
  grep -qxF -- "$rel" <<<"$words" ||
    { echo "FAIL: the install copies $rel, which roost_install_products does not build" >&2; exit 1; }
done < <(grep -oE '"/[^"$]*"' "$build/cmake_install.cmake" | tr -d '"' | sort -u)
echo "built files the install copies, each built by the target: $checked"
[ "$checked" -gt 0 ] || { echo "FAIL: no built file found in $build/cmake_install.cmake" >&2; exit 1; }
echo "install products: ok"
