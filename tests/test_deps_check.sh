#!/usr/bin/env bash
# tests/test_deps_check.sh — tools/test_deps.sh as a user who is not root
# meets it on a machine that lacks packages: it installs nothing and stops
# at once, exit 1, with one line on stderr naming what is missing and the
# command that installs it.  dpkg and id are stand-ins on PATH (dpkg knows
# only the packages named in FAKE_INSTALLED; id says uid 1000), and apt-get
# one that fails the test if it is ever called.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
cat >"$fake/dpkg" <<'SH'
#!/bin/sh
[ "$1" = -s ] || exit 2
for p in $FAKE_INSTALLED; do [ "$p" = "$2" ] && exit 0; done
exit 1
SH
printf '#!/bin/sh\necho 1000\n' >"$fake/id"
printf '#!/bin/sh\necho "apt-get was called" >&2\nexit 99\n' >"$fake/apt-get"
cp "$fake/apt-get" "$fake/sudo"
chmod +x "$fake"/*

installed="cmake ninja-build g++ make valgrind python3 git binutils pkg-config rustc cargo
           google-perftools libsqlite3-dev chromium-headless-shell g++-aarch64-linux-gnu
           qemu-user-static googletest"
set +e
err=$(FAKE_INSTALLED=$installed PATH="$fake:$PATH" bash "$src/tools/test_deps.sh" 2>&1 >/dev/null)
rc=$?
set -e
want="make test: missing libgtest-dev clang libclang-rt-14-dev; install them with: sudo apt-get install libgtest-dev clang libclang-rt-14-dev"
if [ "$rc" -ne 1 ] || [ "$err" != "$want" ]; then
  printf 'FAIL: exit %s, stderr:\n%s\nwanted exit 1 and:\n%s\n' "$rc" "$err" "$want" >&2
  exit 1
fi
echo "test_deps: ok"
