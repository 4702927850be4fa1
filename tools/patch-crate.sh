#!/usr/bin/env bash
# Build-time patching of an exactly pinned upstream crate.
#
#   tools/patch-crate.sh CRATE VERSION PATCH_DIR OUT_DIR [SOURCE_DIR]
#
# Takes the pristine source of CRATE VERSION from the cargo registry (fetching
# it from crates.io if it is not cached; cargo verifies its checksum) or, for
# a stack that is not on crates.io, from SOURCE_DIR/CRATE, a vendored crate
# whose files are checked against its .cargo-checksum.json (the host's
# patches/source file names SOURCE_DIR: hosts/README.md). It copies it into
# OUT_DIR/CRATE and applies PATCH_DIR/*.patch in name order. The workspace
# points at the result. Nothing here is committed: OUT_DIR is git-ignored. A
# patch that does not apply fails the build loudly. The result is reused
# while the pin, the pristine source and the patches are unchanged (`xtask
# patch check` also catches hand edits).
set -euo pipefail

if [ $# -ne 4 ] && [ $# -ne 5 ]; then
  echo "usage: $0 CRATE VERSION PATCH_DIR OUT_DIR [SOURCE_DIR]" >&2
  exit 2
fi
crate=$1 version=$2 patch_dir=$3 out_dir=$4 source_dir=${5:-}
dest="$out_dir/$crate"
cargo_home=${CARGO_HOME:-$HOME/.cargo}

shopt -s nullglob
patches=("$patch_dir"/*.patch)

apply_series() {
  for p in "${patches[@]}"; do
    if ! patch -d "$dest" -p1 --forward --batch --quiet < "$p"; then
      echo "error: $p does not apply to $crate $version" >&2
      rm -rf "$dest"
      exit 1
    fi
  done
  echo "$1" > "$dest/.corequic-patched"
  echo "patched $crate $version with ${#patches[@]} patch(es) in $dest" >&2
}

if [ -n "$source_dir" ]; then
  pristine="$source_dir/$crate"
  if [ ! -f "$pristine/Cargo.toml" ]; then
    echo "error: $pristine is missing (the host's patches/source names where its crates come from)" >&2
    exit 1
  fi
  grep -q "^version = \"$version\"" "$pristine/Cargo.toml" || {
    echo "error: $pristine is not version $version" >&2
    exit 1
  }
  checksums="$pristine/.cargo-checksum.json"
  stamp_value=$( { echo "$crate $version"; sha256sum < "$checksums"; cat "${patches[@]}" /dev/null; } | sha256sum | cut -d' ' -f1)
  if [ -f "$dest/.corequic-patched" ] && [ "$(cat "$dest/.corequic-patched")" = "$stamp_value" ]; then
    exit 0
  fi
  # Every file of the vendored crate as its checksum file says.
  python3 - "$pristine" <<'PY' || { echo "error: $pristine does not match its .cargo-checksum.json" >&2; exit 1; }
import hashlib, json, os, sys
root = sys.argv[1]
files = json.load(open(os.path.join(root, ".cargo-checksum.json")))["files"]
bad = [f for f, want in files.items()
       if hashlib.sha256(open(os.path.join(root, f), "rb").read()).hexdigest() != want]
sys.exit(1 if bad else 0)
PY
  mkdir -p "$out_dir"
  rm -rf "$dest"
  cp -r "$pristine" "$dest"
  # The checksums are the pristine crate's, not the patched one's.
  rm -f "$dest/.cargo-checksum.json"
  apply_series "$stamp_value"
  exit 0
fi

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
apply_series "$stamp_value"
