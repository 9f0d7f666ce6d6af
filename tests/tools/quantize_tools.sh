#!/usr/bin/env bash
# tools.quantize: lrt-quantize's int8 and bf16 checkpoints, read by lrt-eval, lrt-generate and the
# C API.
#   tests/tools/quantize_tools.sh SOURCE_DIR BIN_DIR WORK_DIR
# 1. A small LRT model trained for 60 steps on the repository's text, quantized to int8 (groups of
#    64) and bf16: the files are smaller by the expected factor and name their format.
# 2. lrt-eval scores them (the float values they stand for): bits per byte within 0.01 of the f32
#    checkpoint's, and the int8 score differs from it (the weights did change).
# 3. lrt-generate decodes them on the lean decoder's packed products; the C API program gives the
#    same greedy text from the int8 file.
# 4. Refusals: a bad format or group, --out onto the checkpoint, re-quantizing a quantized file.
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
cat "$src/README.md" "$src"/docs/*.md > corpus.txt
export LRT_NUM_THREADS=1
"$bin/lrt-train" --data corpus.txt --sequence-len 64 --batch-rows 8 --n-layer 2 --n-embd 128 --n-head 2 \
  --steps 60 --eval-tokens 4096 --out run > train.out 2>&1 || fail "lrt-train exited with $?: $(tail -5 train.out)"
pass "trained"

"$bin/lrt-quantize" --checkpoint run --out q8.safetensors > q8.out 2>&1 || fail "lrt-quantize int8: $(cat q8.out)"
grep -Eq "^wrote q8.safetensors: [0-9]+ matrices as int8 in groups of 64, [0-9]+ tensors as they were" q8.out ||
  fail "lrt-quantize's report: $(cat q8.out)"
"$bin/lrt-quantize" -m run/model.safetensors -o bf16.safetensors --format bf16 > bf.out 2>&1 ||
  fail "lrt-quantize bf16: $(cat bf.out)"
f32=$(stat -c %s run/model.safetensors) q8=$(stat -c %s q8.safetensors) bf=$(stat -c %s bf16.safetensors)
# 15 matrices (2 layers x 6, lm_head, the two memory projections) packed: 468,480 of the model's
# 591,366 values; the embedding tables (wte, value embeddings) stay f32. So int8 + scales take
# about 0.42 of the f32 file, bf16 about 0.60.
grep -q " 15 matrices as int8" q8.out || fail "lrt-quantize packed: $(cat q8.out)"
[ $((q8 * 100)) -lt $((f32 * 44)) ] || fail "int8 file $q8 bytes, f32 $f32"
[ $((bf * 100)) -lt $((f32 * 62)) ] || fail "bf16 file $bf bytes, f32 $f32"
pass "int8 file $q8 bytes, bf16 $bf, f32 $f32"

score() {  # score FILE: lrt-eval's val_bpb (the sequential one: the exact recurrence)
  "$bin/lrt-eval" --checkpoint "$1" --data corpus.txt --eval-tokens 4096 --json > "$1.eval" 2>&1 ||
    fail "lrt-eval $1 exited with $?: $(cat "$1.eval")"
  grep -o '"val_bpb":[0-9.e+-]*' "$1.eval" | cut -d: -f2
}
b32=$(score run/model.safetensors) b8=$(score q8.safetensors) b16=$(score bf16.safetensors)
grep -q '"weights":"int8"' q8.safetensors.eval || fail "lrt-eval's JSON names no int8 weights: $(cat q8.safetensors.eval)"
grep -q '"weights":"f32"' run/model.safetensors.eval || fail "lrt-eval's JSON: $(cat run/model.safetensors.eval)"
awk -v a="$b32" -v b="$b8" -v c="$b16" 'BEGIN {
  d8 = b - a; d16 = c - a; if (d8 < 0) d8 = -d8; if (d16 < 0) d16 = -d16
  exit !(d8 <= 0.01 && d16 <= 0.01 && b != a) }' ||
  fail "bits per byte: f32 $b32, int8 $b8, bf16 $b16 (want within 0.01, int8 != f32)"
pass "bits per byte: f32 $b32, int8 $b8, bf16 $b16"

for f in q8 bf16; do
  "$bin/lrt-generate" -m $f.safetensors -p "The q" -n 40 --temp 0 > $f.gen 2>&1 || fail "lrt-generate $f: $(cat $f.gen)"
  grep -q "^The q" $f.gen || fail "lrt-generate $f: $(cat $f.gen)"
done
if [ -x "$bin/lrt-c-generate" ]; then
  "$bin/lrt-c-generate" q8.safetensors "The q" 40 > q8.cgen 2>&1 || fail "lrt-c-generate: $(cat q8.cgen)"
  cmp -s q8.gen q8.cgen || fail "the C API's greedy text differs from lrt-generate's: $(cat q8.cgen) / $(cat q8.gen)"
fi
if [ -x "$bin/lrt-embedded-generate" ]; then  # the embedded build maps the files and reads them packed
  for f in q8 bf16; do
    "$bin/lrt-embedded-generate" $f.safetensors "The q" 40 > $f.egen 2>&1 || fail "lrt-embedded-generate $f: $(cat $f.egen)"
    cmp -s $f.gen $f.egen || fail "lrt-embedded-generate's greedy text on $f differs from lrt-generate's: $(cat $f.egen) / $(cat $f.gen)"
  done
fi
pass "lrt-generate, the C API and the embedded build decode the int8 file"

refuse() {  # refuse RC "pattern" args...
  local rc=$1 pat=$2
  shift 2
  "$bin/lrt-quantize" "$@" > r.out 2>&1
  local got=$?
  [ $got -eq "$rc" ] || fail "lrt-quantize $*: exit $got, not $rc: $(cat r.out)"
  grep -q -- "$pat" r.out || fail "lrt-quantize $*: no '$pat' in: $(cat r.out)"
}
refuse 2 "--format must be int8 or bf16, got 'int4'" -m run -o x.safetensors --format int4
refuse 2 "--group must be in" -m run -o x.safetensors --group 0
refuse 2 "is the checkpoint itself" -m run/model.safetensors -o run/model.safetensors
refuse 2 "no such file or folder: 'nothing'" -m nothing -o x.safetensors
refuse 1 "already holds int8 weights: quantize the f32 checkpoint they came from" -m q8.safetensors -o x.safetensors
[ ! -e x.safetensors ] || fail "a refused run left x.safetensors"
pass "bad input is refused"
