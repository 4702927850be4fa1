#!/usr/bin/env bash
# Build-time patching of an exactly pinned crates.io release.
#
#   tools/patch-crate.sh CRATE VERSION PATCH_DIR OUT_DIR
#
# Takes the pristine source of CRATE VERSION from the cargo registry (fetching
# it from crates.io if it is not cached; cargo verifies its checksum), unpacks
# it into OUT_DIR/CRATE, and applies PATCH_DIR/*.patch in name order. The
# workspace's [patch.crates-io] points at the result. Nothing here is
# committed: OUT_DIR is git-ignored. A patch that does not apply fails the
# build loudly. The result is reused while the pin, the archive and the
# patches are unchanged (`xtask patch check` also catches hand edits).
set -euo pipefail

if [ $# -ne 4 ]; then
  echo "usage: $0 CRATE VERSION PATCH_DIR OUT_DIR" >&2
  exit 2
fi
crate=$1 version=$2 patch_dir=$3 out_dir=$4
dest="$out_dir/$crate"
cargo_home=${CARGO_HOME:-$HOME/.cargo}

shopt -s nullglob
patches=("$patch_dir"/*.patch)

find_archive() {
  # The registry cache does not exist on a fresh machine: not an error.
  [ -d "$cargo_home/registry/cache" ] || return 0
  find "$cargo_home/registry/cache" -name "$crate-$version.crate" 2>/dev/null | head -n 1
}
archive=$(find_archive)
if [ -z "$archive" ]; then
  # Fetch through cargo (checksum-verified) from a throwaway manifest that
  # is not part of our workspace.
  fetch_dir=$(mktemp -d)
  trap 'rm -rf "$fetch_dir"' EXIT
  mkdir -p "$fetch_dir/src"
  cat > "$fetch_dir/Cargo.toml" <<TOML
[package]
name = "corequic-fetch"
version = "0.0.0"
edition = "2021"

[dependencies]
$crate = "=$version"

[workspace]
TOML
  : > "$fetch_dir/src/lib.rs"
  cargo fetch --manifest-path "$fetch_dir/Cargo.toml" >&2
  archive=$(find_archive)
fi
if [ -z "$archive" ]; then
  echo "error: $crate $version is not in the cargo registry and could not be fetched" >&2
  exit 1
fi

stamp_value=$( { echo "$crate $version"; sha256sum < "$archive"; cat "${patches[@]}" /dev/null; } | sha256sum | cut -d' ' -f1)
if [ -f "$dest/.corequic-patched" ] && [ "$(cat "$dest/.corequic-patched")" = "$stamp_value" ]; then
  exit 0
fi

mkdir -p "$out_dir"
rm -rf "$dest" "$out_dir/$crate-$version"
tar -xzf "$archive" -C "$out_dir"
mv "$out_dir/$crate-$version" "$dest"
for p in "${patches[@]}"; do
  if ! patch -d "$dest" -p1 --forward --batch --quiet < "$p"; then
    echo "error: $p does not apply to $crate $version" >&2
    rm -rf "$dest"
    exit 1
  fi
done
echo "$stamp_value" > "$dest/.corequic-patched"
echo "patched $crate $version with ${#patches[@]} patch(es) in $dest" >&2
