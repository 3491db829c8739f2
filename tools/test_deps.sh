#!/usr/bin/env bash
# tools/test_deps.sh — what `make test` needs on a Debian machine, installed
# when missing: the first step of `make test` and of .ci/run.
#
# Owns: the list of Debian packages the test trees need (compilers, CMake,
# GoogleTest, clang and its libFuzzer runtime for tests/fuzz/, valgrind,
# Debian's Rust toolchain, the AArch64 cross compiler, qemu-user and
# GoogleTest's sources for make test-aarch64, google-pprof, headless
# Chromium, ...), and fetching the Rust crate's dependencies
# (outside rust.cargo_test's time limit).
# Must never: install anything that is already there, or ask for a password:
# as root it installs with apt-get; as anyone else it stops at once with one
# line naming the missing packages and the command that installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ make libgtest-dev valgrind python3 git binutils pkg-config
          clang libclang-rt-14-dev
          google-perftools  # google-pprof, which reads the heap profiles in tests/profile/
          libsqlite3-dev  # bench_sqlite, whose smoke test runs in make test
          chromium-headless-shell  # a real browser for timeline.page (roost-run --timeline's page)
          rustc cargo   # Debian's Rust 1.63, the crate's oldest (rust.msrv_path_dependency)
          g++-aarch64-linux-gnu qemu-user-static googletest)  # make test-aarch64

if ! command -v dpkg >/dev/null 2>&1; then
  echo "tools/test_deps.sh: no dpkg here (not Debian): make sure these (or your system's" \
       "equivalents) are installed: ${packages[*]} cargo" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "make test: missing ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "tools/test_deps.sh: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The Rust crate's dependencies, fetched here rather than inside the test's
# limit, with rustup's cargo where there is one (Debian's clones the
# crates.io git index, a large download).
PATH="${HOME:-}/.cargo/bin:$PATH" cargo fetch --locked --quiet \
  --manifest-path bindings/rust/Cargo.toml
