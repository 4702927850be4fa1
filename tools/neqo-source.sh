#!/usr/bin/env bash
# neqo's source and the NSS it needs, for the neqo host.
#
#   tools/neqo-source.sh OUT_DIR
#
# neqo is not on crates.io. Debian's firefox-esr source package vendors it
# (third_party/rust/neqo-*, version 0.13.4) with NSS 3.112.5 (security/nss)
# and NSPR (nsprpub). This script fetches that package's orig tarball with
# apt (from a private sources list with deb-src entries: the system's lists
# binary packages only), checks its SHA-256, and extracts those paths into
# OUT_DIR/source; then it builds NSS (static, no tests) into
# OUT_DIR/nss-build/dist, with gyp-next from PyPI in a venv and Debian's
# ninja. Nothing here is committed: OUT_DIR is git-ignored. Each step is
# redone only when its stamp does not name this version.
#
# Without apt (or when the package is gone), point NEQO_SRC at a Firefox
# source tree, or any folder with the same layout, that holds neqo 0.13.4:
# NEQO_SRC/third_party/rust/neqo-*, NEQO_SRC/security/nss, NEQO_SRC/nsprpub.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)

package=firefox-esr
version=140.12.0esr-1~deb12u1
orig=firefox-esr_140.12.0esr.orig.tar.xz
orig_sha256=5c72347381233dcc97cbd02c0324116258769d8b9b0f869fd0c6f1d59519ce2a
source_dir="$out/source"
nss_dir="$out/nss-build"

fail() {
  echo "error: $*" >&2
  echo "  set NEQO_SRC to a folder with third_party/rust/neqo-* (neqo 0.13.4), security/nss and nsprpub (a Firefox ESR 140 source tree) to build without apt" >&2
  exit 1
}

fetch_with_apt() {
  command -v apt-get >/dev/null || fail "apt-get is not available to fetch Debian's $package source"
  local dl="$out/download"
  mkdir -p "$dl/parts" "$dl/lists/partial" "$dl/archives/partial"
  # The system's entries, as source entries.
  local system=/etc/apt/sources.list.d/debian.sources
  [ -f "$system" ] || fail "$system is missing: cannot derive a deb-src entry"
  sed 's/^Types: deb$/Types: deb-src/' "$system" > "$dl/parts/debian-src.sources"
  local apt=(apt-get -qq
    -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$dl/parts"
    -o "Dir::State::Lists=$dl/lists" -o "Dir::Cache::archives=$dl/archives"
    -o "Debug::NoLocking=1")
  if [ ! -f "$dl/$orig" ]; then
    "${apt[@]}" update >&2 || fail "apt-get update of the deb-src entries failed"
    (cd "$dl" && "${apt[@]}" source --download-only "$package=$version" >&2) ||
      fail "apt-get source $package=$version failed (is the version still served?)"
  fi
  echo "$orig_sha256  $dl/$orig" | sha256sum --check --quiet ||
    fail "$orig does not have the expected SHA-256 ($orig_sha256)"
  rm -rf "$source_dir" && mkdir -p "$source_dir"
  echo "extracting neqo, NSS and NSPR from $orig" >&2
  tar -xJf "$dl/$orig" -C "$source_dir" --strip-components=1 --wildcards \
    '*/third_party/rust/neqo-*' '*/security/nss/*' '*/nsprpub/*'
}

copy_neqo_src() {
  [ -d "$NEQO_SRC/third_party/rust/neqo-transport" ] || fail "NEQO_SRC=$NEQO_SRC has no third_party/rust/neqo-transport"
  rm -rf "$source_dir" && mkdir -p "$source_dir/third_party/rust" "$source_dir/security"
  cp -r "$NEQO_SRC"/third_party/rust/neqo-* "$source_dir/third_party/rust/"
  cp -r "$NEQO_SRC/security/nss" "$source_dir/security/nss"
  cp -r "$NEQO_SRC/nsprpub" "$source_dir/nsprpub"
}

if [ "$(cat "$source_dir/.corequic-stamp" 2>/dev/null)" != "$version" ]; then
  if [ -n "${NEQO_SRC:-}" ]; then copy_neqo_src; else fetch_with_apt; fi
  grep -q '^version = "0.13.4"' "$source_dir/third_party/rust/neqo-transport/Cargo.toml" ||
    fail "the source's neqo-transport is not version 0.13.4"
  echo "$version" > "$source_dir/.corequic-stamp"
fi

# NSS, static, in a folder with real copies of nss/ and nspr/ (its build
# follows ../nspr and fails through symlinks).
if [ "$(cat "$nss_dir/.corequic-stamp" 2>/dev/null)" != "$version" ]; then
  command -v ninja >/dev/null || fail "NSS needs ninja (apt-get install ninja-build)"
  command -v python3 >/dev/null || fail "NSS needs python3 (for gyp-next)"
  venv="$out/venv"
  if [ ! -x "$venv/bin/gyp" ]; then
    python3 -m venv "$venv" >&2 || fail "python3 -m venv failed (apt-get install python3-venv)"
    "$venv/bin/pip" install -q gyp-next >&2 || fail "pip install gyp-next failed"
  fi
  rm -rf "$nss_dir" && mkdir -p "$nss_dir"
  cp -r "$source_dir/security/nss" "$nss_dir/nss"
  cp -r "$source_dir/nsprpub" "$nss_dir/nspr"
  echo "building NSS (static, no tests)" >&2
  (cd "$nss_dir/nss" && PATH="$venv/bin:$PATH" ./build.sh -o -Ddisable_tests=1 --static >&2) ||
    fail "the NSS build failed"
  echo "$version" > "$nss_dir/.corequic-stamp"
fi

# The neqo endpoint's NSS database: a self-signed certificate for localhost
# (nickname `key`, as neqo's own tools name it), made with the certutil just
# built; the endpoint binary embeds these files.
db_dir="$out/db"
if [ "$(cat "$db_dir/.corequic-stamp" 2>/dev/null)" != "$version" ]; then
  certutil() {
    LD_LIBRARY_PATH="$nss_dir/dist/Release/lib" "$nss_dir/dist/Release/bin/certutil" "$@"
  }
  rm -rf "$db_dir" && mkdir -p "$db_dir"
  certutil -N -d "sql:$db_dir" --empty-password >&2 || fail "certutil could not create the NSS database"
  head -c 2048 /dev/urandom > "$db_dir/noise"
  certutil -S -d "sql:$db_dir" -n key -s "CN=localhost" -x -t "CT,," -k ec -q nistp256 \
    -8 localhost -v 240 -z "$db_dir/noise" >&2 || fail "certutil could not make the certificate"
  rm -f "$db_dir/noise"
  echo "$version" > "$db_dir/.corequic-stamp"
fi
echo "neqo 0.13.4 in $source_dir/third_party/rust, NSS in $nss_dir (NSS_DIR=$nss_dir/nss NSS_PREBUILT=1 NSS_TARGET=Release), endpoint certificate in $db_dir" >&2
