#!/bin/sh
# bindings/rust/package_test.sh — what ctest's rust.package runs: the crate
# as `cargo package` makes it, built and tested away from the repository.
#
# Steps: `cargo package` of this crate (rustup's cargo where there is one;
# --allow-dirty: the working tree as it is, committed or not); the `.crate`
# unpacked in a fresh folder under $TMPDIR (outside the repository, so a
# build that reached for a file outside the crate would fail); there,
# `cargo test --locked` with that cargo, then `cargo test` with Debian's
# rustc 1.63 and cargo (the crate's rust-version) offline, from the
# `.crate`'s own Cargo.lock vendored by the first cargo (Debian's cargo
# cannot read rustup's registry cache).  The dependencies come from cargo's
# cache, which tools/test_deps.sh fills.  Each step says what it does; a
# failing one names itself and keeps the folder for a look.
# Must never: write outside its fresh folder and cargo's own home.
#
#   sh bindings/rust/package_test.sh
set -eu
if [ "$#" -ne 0 ]; then
  echo "usage: $0" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
old_rustc=/usr/bin/rustc
old_rustdoc=/usr/bin/rustdoc
old_cargo=/usr/bin/cargo
cargo=cargo
[ -x "${HOME:-}/.cargo/bin/cargo" ] && cargo=$HOME/.cargo/bin/cargo
if ! command -v "$cargo" >/dev/null 2>&1; then
  echo "rust.package: cargo not found (neither on PATH nor in ~/.cargo/bin)." >&2
  exit 1
fi
if ! "$old_rustc" --version 2>/dev/null | grep -q '^rustc 1\.63\.' ||
   [ ! -x "$old_rustdoc" ] || [ ! -x "$old_cargo" ]; then
  echo "rust.package: $old_rustc is not rustc 1.63, or $old_rustdoc or $old_cargo is missing" \
       "(Debian 12's rustc and cargo packages; tools/test_deps.sh installs them)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/roost-package.XXXXXX")
case $work/ in
  "$repo"/*) echo "rust.package: $work is inside the repository; set TMPDIR elsewhere" >&2
             rm -rf "$work"; exit 1 ;;
esac
step="start"
finish() {
  st=$?
  if [ "$st" -eq 0 ]; then
    rm -rf "$work"
  else
    echo "rust.package: FAILED at: $step (exit $st); its files are kept in $work" >&2
  fi
}
trap finish EXIT
say() {
  step="$*"
  echo "rust.package: $step"
}

say "cargo package ($("$cargo" --version))"
CARGO_TARGET_DIR=$work/package-target "$cargo" package --quiet --locked --no-verify \
  --allow-dirty --manifest-path "$here/Cargo.toml"
crate=$(ls "$work"/package-target/package/roost-*.crate)

say "unpacking $(basename "$crate") in $work/unpacked"
mkdir "$work/unpacked"
tar -xzf "$crate" -C "$work/unpacked"
dir=$(ls -d "$work"/unpacked/roost-*)
links=$(find "$dir" -type l)
[ -z "$links" ] || { echo "symbolic links in the .crate: $links" >&2; exit 1; }
for f in roost/CMakeLists.txt roost/include/roost.h roost/src/config.h Cargo.lock; do
  [ -f "$dir/$f" ] || { echo "$f is not in the .crate" >&2; exit 1; }
done
cd "$dir"

say "cargo test --locked from the .crate ($("$cargo" --version))"
CARGO_TARGET_DIR=$work/target "$cargo" test --quiet --locked

say "vendoring the .crate's Cargo.lock for Debian's cargo"
"$cargo" vendor --quiet --locked "$work/vendor" >/dev/null
# In the folder above the crate: the crate stays as unpacked.
mkdir "$work/unpacked/.cargo"
cat >"$work/unpacked/.cargo/config.toml" <<EOF
[source.crates-io]
replace-with = "vendored-sources"
[source.vendored-sources]
directory = "$work/vendor"
EOF

say "cargo test --offline --locked from the .crate" \
    "($("$old_rustc" --version), $("$old_cargo" --version))"
RUSTC=$old_rustc RUSTDOC=$old_rustdoc CARGO_TARGET_DIR=$work/target-1.63 \
  "$old_cargo" test --quiet --offline --locked

step="done"
echo "rust.package: the .crate built and passed its tests with both toolchains"
