#!/usr/bin/env bash
# bench/embedded_footprint.sh: the embedded build's footprint (issue "Small embedded deployments"):
# the size of lrt-embedded-generate (as built, and stripped) and the libraries it needs, and per
# preset (tiny, small, medium; an LRT trained for one step, then quantized to int8 and bf16) the
# memory of a 64-token greedy run: the checkpoint mapped, the decoder's arena, weights copied for
# alignment, and the peak resident set, with the peak's overhead over file + arena (the program,
# libc's and libstdc++'s pages, the stack).
#   bench/embedded_footprint.sh [BIN_DIR] [WORK_DIR] [--binary-only]   (defaults: build/bin, a
#   temporary folder; --binary-only: the first line alone, which tools.doc_figures reads)
# Prints one JSON object per line. Runs in about a minute (the medium step is most of it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${1:-$root/build/bin}"
work="${2:-$(mktemp -d)}"
binary_only=0
[ "${3:-}" = --binary-only ] && binary_only=1
programs=(lrt-embedded-generate)
[ $binary_only = 1 ] || programs+=(lrt-train lrt-quantize)
for t in "${programs[@]}"; do
  [ -x "$bin/$t" ] || { echo "embedded_footprint: no $bin/$t (build the default preset first)" >&2; exit 2; }
done
mkdir -p "$work"
emb="$bin/lrt-embedded-generate"
strip -o "$work/stripped" "$emb"
needed=$(readelf -d "$emb" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd, -)
printf '{"name":"embedded_binary","binary_bytes":%d,"stripped_bytes":%d,"needed":"%s"}\n' \
  "$(stat -c %s "$emb")" "$(stat -c %s "$work/stripped")" "$needed"
[ $binary_only = 1 ] && exit 0
cat "$root/README.md" "$root"/docs/*.md > "$work/corpus.txt"
export LRT_NUM_THREADS=1
for preset in tiny small medium; do
  d="$work/$preset"
  "$bin/lrt-train" --variant lrt --preset "$preset" --data "$work/corpus.txt" --steps 1 --eval-tokens 256 \
    --out "$d" > "$d.train" 2>&1 || { echo "lrt-train --preset $preset failed: $(tail -3 "$d.train")" >&2; exit 1; }
  "$bin/lrt-quantize" -m "$d" -o "$d.int8.safetensors" > /dev/null
  "$bin/lrt-quantize" -m "$d" -o "$d.bf16.safetensors" --format bf16 > /dev/null
  for w in f32 int8 bf16; do
    f="$d/model.safetensors"
    [ "$w" = f32 ] || f="$d.$w.safetensors"
    "$emb" "$f" "The q" 64 --stats > /dev/null 2> "$d.$w.stats"
    get() { sed -n "s/^$1 //p" "$d.$w.stats"; }
    mapped=$(get mapped_bytes) arena=$(get arena_bytes) spill=$(get spill_bytes) peak=$(get peak_rss_kib)
    printf '{"name":"embedded_memory","preset":"%s","variant":"lrt","weights":"%s","file_bytes":%d,"arena_bytes":%d,"spill_bytes":%d,"peak_rss_kib":%d,"overhead_kib":%d}\n' \
      "$preset" "$w" "$mapped" "$arena" "$spill" "$peak" $((peak - (mapped + arena + spill) / 1024))
  done
done
