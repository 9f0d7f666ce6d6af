#!/usr/bin/env bash
# Encode throughput of lrt's BPE tokenizer against the tiktoken package from npm (OpenAI's tiktoken,
# WASM build), one thread each, same ranks, pattern and text, in one run; ids must be identical.
# Encodings: cl100k_base and o200k_base (tiktoken's own ranks) and a 32,768-id nanochat-pattern BPE
# that lrt trains on Brown's training split here (its training time is printed too). Texts: Brown
# (tags stripped, ~6 MB) and a ~2 MB mixed-script text (bench/tokenizer.cpp --write-texts).
#   bench/tokenizer_vs_tiktoken.sh [BUILD_DIR]      (default: build; needs node + npm, or a cached
#                                                    tiktoken in ~/.cache/lrt-bench/tiktoken)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
bin=$build/bin
[ -x "$bin/lrt-bench-tokenizer" ] || { echo "no $bin/lrt-bench-tokenizer: build target lrt-bench-tokenizer first" >&2; exit 1; }
cache=${LRT_BENCH_CACHE:-$HOME/.cache/lrt-bench}
tt=$cache/tiktoken
if [ ! -d "$tt/node_modules/tiktoken" ]; then
  mkdir -p "$tt" && npm install --prefix "$tt" --no-audit --no-fund tiktoken@1.0.22 >/dev/null
fi
export NODE_PATH=$tt/node_modules
work=$cache/tokenizer && mkdir -p "$work"
brown=${LRT_DATA_DIR:-$HOME/.cache/lrt-data}/brown
"$bin/lrt-bench-tokenizer" --write-texts "$work" --brown "$brown"
pat() { node -e "const p=JSON.parse(require('fs').readFileSync('$root/tests/data/tokenizer/patterns.json','utf8'));process.stdout.write(p['$1'])"; }
for e in cl100k_base o200k_base; do
  [ -f "$work/$e.tiktoken" ] || node "$root/bench/tiktoken_bench.mjs" --export $e "$work/$e.tiktoken" >/dev/null
done
t0=$(date +%s.%N)
"$bin/lrt-tokenizer" train --data "$brown" --vocab-size 32768 --out "$work/brown32k.lrt" --threads 1 | tail -n 2
echo "lrt-tokenizer train (32,768 ids, nanochat pattern, Brown training split, 1 thread): $(echo "$(date +%s.%N) - $t0" | bc) s wall"
"$bin/lrt-tokenizer" ranks --tokenizer "$work/brown32k.lrt" --out "$work/brown32k.tiktoken" >/dev/null
printf '%-12s %-10s %10s %10s %8s  %s\n' encoding text lrt_MB/s tiktoken ratio ids
for spec in "cl100k_base:cl100k" "o200k_base:o200k" "brown32k:nanochat"; do
  ranks=$work/${spec%%:*}.tiktoken name=${spec##*:}
  for text in brown mixed; do
    l=$(LRT_NUM_THREADS=1 "$bin/lrt-bench-tokenizer" --ranks "$ranks" --pattern "$name" --text "$work/$text.txt")
    t=$(node "$root/bench/tiktoken_bench.mjs" "$ranks" "$(pat $name)" "$work/$text.txt")
    get() { printf '%s' "$1" | sed -E "s/.*\"$2\":\"?([^,\"}]*).*/\1/"; }
    same=identical; [ "$(get "$l" hash)/$(get "$l" ids)" = "$(get "$t" hash)/$(get "$t" ids)" ] || same="DIFFERENT ($(get "$l" ids) vs $(get "$t" ids))"
    printf '%-12s %-10s %10.2f %10.2f %7.1fx  %s\n' "${spec%%:*}" "$text" "$(get "$l" mb_per_s)" "$(get "$t" mb_per_s)" \
      "$(echo "$(get "$l" mb_per_s) / $(get "$t" mb_per_s)" | bc -l)" "$same"
  done
done
l=$("$bin/lrt-bench-tokenizer" --tokenizer "$work/brown32k.lrt" --text "$work/brown.txt" --threads 2)
echo "lrt, brown32k on Brown, lines as documents on 2 threads: $(printf '%s' "$l" | sed -E 's/.*"mb_per_s":([0-9.]+).*/\1/') MB/s"
