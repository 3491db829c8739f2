#!/usr/bin/env bash
# tools/install-aarch64-deps.sh — what `make test-aarch64` needs beyond the
# x86-64 trees, from Debian's packages, installed when missing:
#   g++-aarch64-linux-gnu  the cross compiler (with binutils-aarch64-linux-gnu
#                          and the target's libc and libstdc++ in
#                          /usr/aarch64-linux-gnu)
#   qemu-user-static       qemu-aarch64-static, which runs the tests
#   googletest             GoogleTest's sources (/usr/src/googletest), built
#                          for the target in the cross tree
# Root runs apt-get itself, anyone else through sudo.  Exits non-zero, saying
# what is missing, when it cannot install.
set -euo pipefail

need=(g++-aarch64-linux-gnu qemu-user-static googletest)
missing=()
for p in "${need[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

echo "install-aarch64-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
