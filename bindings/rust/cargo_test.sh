#!/bin/sh
# bindings/rust/cargo_test.sh — what ctest's rust.cargo_test runs (see
# tests/CMakeLists.txt): `cargo test --locked` of this crate, with cargo's
# target directory given by the caller (inside a CMake build tree, so that
# parallel trees never share one).
# Must never: build --offline (a fresh machine fetches the `cc` crate), or
# write outside that target directory and cargo's own home.
#
#   sh bindings/rust/cargo_test.sh TARGET_DIR
set -eu
if [ "$#" -ne 1 ]; then
  echo "usage: $0 TARGET_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
# rustup's cargo first, where there is one: Debian's (1.65) is for
# rust.msrv_path_dependency, and clones the crates.io git index.
if [ -x "${HOME:-}/.cargo/bin/cargo" ]; then
  PATH="$HOME/.cargo/bin:$PATH"
elif ! command -v cargo >/dev/null 2>&1; then
  echo "rust.cargo_test: cargo not found (neither on PATH nor in ~/.cargo/bin)." >&2
  echo "Install it (Debian: apt-get install cargo; tools/test_deps.sh does) or use rustup." >&2
  exit 1
fi
export CARGO_TARGET_DIR="$1"
cargo --version
exec cargo test --locked --manifest-path "$here/Cargo.toml"
