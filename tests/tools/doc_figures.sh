#!/usr/bin/env bash
# tools.doc_figures: figures the docs quote that this build can measure, measured again and held
# to the docs within a tolerance, so that a figure that drifts fails here rather than misleads.
#   tests/tools/doc_figures.sh SOURCE_DIR BIN_DIR WORK_DIR
# - docs/embedded.md, "Footprint": `lrt-embedded-generate` is N bytes (M stripped) and needs only
#   libstdc++, libm and libc: the default build's binary, as bench/embedded_footprint.sh measures
#   it (its first line), within 10% (the compiler and the code move it); the libraries exactly.
# A failure says the figure to write.
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot use $work"

# within NAME DOC MEASURED PERCENT: |measured - doc| <= percent of doc.
within() {
  local name=$1 doc=$2 got=$3 pct=$4
  local diff=$((got > doc ? got - doc : doc - got))
  [ $((diff * 100)) -le $((doc * pct)) ] ||
    fail "$name: the docs say $doc, this build measures $got ($((100 * (got - doc) / doc))%, more than $pct%): write $got"
  echo "ok: $name: the docs say $doc, this build measures $got"
}

doc="$src/docs/embedded.md"
line=$(grep -Eo '`lrt-embedded-generate` is [0-9,]+ bytes \([0-9,]+ stripped\) and needs only [a-z+, ]+' "$doc") ||
  fail "$doc has no line '\`lrt-embedded-generate\` is N bytes (M stripped) and needs only ...'"
doc_bytes=$(sed -E 's/.* is ([0-9,]+) bytes.*/\1/' <<<"$line" | tr -d ,)
doc_stripped=$(sed -E 's/.*\(([0-9,]+) stripped\).*/\1/' <<<"$line" | tr -d ,)
# The measurement is the benchmark's own (its first line).
json=$(bash "$src/bench/embedded_footprint.sh" "$bin" "$work" --binary-only) || fail "bench/embedded_footprint.sh: $json"
field() { sed -E "s/.*\"$1\":\"?([^\",}]*).*/\1/" <<<"$json"; }
within "docs/embedded.md: lrt-embedded-generate bytes" "$doc_bytes" "$(field binary_bytes)" 10
within "docs/embedded.md: lrt-embedded-generate bytes stripped" "$doc_stripped" "$(field stripped_bytes)" 10
needed=$(tr ',' '\n' <<<"$(sed -E 's/.*"needed":"([^"]*)".*/\1/' <<<"$json")" | sed 's/\.so.*//' | sort | paste -sd' ' -)
[ "$needed" = "libc libm libstdc++" ] ||
  fail "docs/embedded.md says lrt-embedded-generate needs only libstdc++, libm and libc; it needs: $needed"
echo "ok: docs/embedded.md: lrt-embedded-generate needs $needed"
