#!/bin/sh
# bindings/rust/msrv_path_dependency.sh — what ctest's rust.msrv_path_dependency
# runs: the crate as a user's path dependency, built with the oldest
# toolchain the crate supports (Debian 12's rustc 1.63 and its cargo).
#
# A path (or git) dependency does not use this crate's Cargo.lock: the
# user's own lock file resolves `cc` (pinned to 1.0.83 here) and whatever
# `libc` is newest.  So the test makes a user's crate in WORK_DIR that
# depends on this one by path and declares rust-version 1.63, resolves it
# as a current cargo does (newest versions), vendors the sources, then
# builds and runs it with /usr/bin/cargo and /usr/bin/rustc (Debian's,
# which tools/test_deps.sh installs) offline.  It prints the versions it
# resolved.
# Must never: write outside WORK_DIR and cargo's own home.
#
#   sh bindings/rust/msrv_path_dependency.sh WORK_DIR
set -eu
if [ "$#" -ne 1 ]; then
  echo "usage: $0 WORK_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
work=$1
old_rustc=/usr/bin/rustc
old_cargo=/usr/bin/cargo
if ! "$old_rustc" --version 2>/dev/null | grep -q '^rustc 1\.63\.'; then
  echo "rust.msrv_path_dependency: $old_rustc is not rustc 1.63 (Debian 12's rustc package;" \
       "tools/test_deps.sh installs it)" >&2
  exit 1
fi
# The resolving cargo: the newest at hand (rustup's, if there is one).
cargo=cargo
[ -x "${HOME:-}/.cargo/bin/cargo" ] && cargo=$HOME/.cargo/bin/cargo

rm -rf "$work"
mkdir -p "$work/src" "$work/.cargo"
cat >"$work/Cargo.toml" <<EOF
[package]
name = "roost-user"
version = "0.1.0"
edition = "2021"
rust-version = "1.63"

[dependencies]
roost = { path = "$here" }
EOF
cat >"$work/src/main.rs" <<'EOF'
#[global_allocator]
static A: roost::Roost = roost::Roost;

fn main() {
    let v: Vec<u64> = (0..1000).collect();
    let s: Vec<String> = v.iter().map(|n| n.to_string()).collect();
    println!("{} {}", v.iter().sum::<u64>(), s.concat().len());
}
EOF
cd "$work"
"$cargo" generate-lockfile --quiet
"$cargo" vendor --quiet vendor >/dev/null
cat >.cargo/config.toml <<'EOF'
[source.crates-io]
replace-with = "vendored-sources"
[source.vendored-sources]
directory = "vendor"
EOF
for crate in cc libc; do
  printf '%s %s\n' "$crate" "$(sed -n "/^name = \"$crate\"/{n;s/^version = //p}" Cargo.lock)"
done
"$old_rustc" --version
"$old_cargo" --version
RUSTC=$old_rustc "$old_cargo" build --offline --release --quiet
out=$(./target/release/roost-user)
[ "$out" = "499500 2890" ] || { echo "unexpected output: $out" >&2; exit 1; }
echo "rust.msrv_path_dependency: built and ran with rustc 1.63"
