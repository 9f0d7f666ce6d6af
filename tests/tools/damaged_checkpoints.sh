#!/usr/bin/env bash
# tools.damaged_checkpoints: one loader for every entry point (lrt::read_checkpoint,
# include/lrt/model/checkpoint_file.hpp). Each damaged copy of a checkpoint (tests/tools/
# damage_checkpoint.cpp) is fed to every program that opens checkpoints: lrt-eval, lrt-generate,
# lrt-quantize, lrt-train --resume, lrt-embedded-generate and lrt-c-generate; each must exit
# non-zero (no crash: a status below 128) and name the same cause. Then: --resume with another
# --variant is one line naming the checkpoint's variant; a BPE checkpoint decodes to the same greedy
# text in lrt-generate, lrt-embedded-generate and lrt-c-generate, and with 0 allocations per token
# in the embedded build (lrt_embedded_alloc_check, when the build has it). A checkpoint of a variant
# the build has no pair for is refused by every program, naming it; kv, residual and lrt-src2
# checkpoints decode in the C API to lrt-generate's text.
#   tests/tools/damaged_checkpoints.sh BIN_DIR DAMAGE_PROGRAM WORK_DIR
set -u -o pipefail
bin=$1 damage=$2 work=$3
export LRT_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
awk 'BEGIN { srand(5); n = split("a quick brown fox jumps over the lazy dog near the river bank", w, " ");
             for (i = 0; i < 6000; i++) printf "%s%s", w[int(rand() * n) + 1], (i % 10 == 9) ? ".\n" : " " }' \
  > corpus.txt
small=(--data corpus.txt --sequence-len 32 --batch-rows 4 --n-layer 2 --n-embd 32 --n-head 2 --eval-every 0
       --eval-tokens 128)
"$bin/lrt-train" "${small[@]}" --variant lrt --steps 2 --out run > train.out 2>&1 || fail "training: $(tail -3 train.out)"
good=run/model.safetensors
[ -f "$good" ] || fail "no $good"

# CASE REGEX (extended): the cause every program must name.
cases=(
  "nan|'transformer\.h\.0\.attn\.c_q\.weight' holds a non-finite value"
  "seqlen|sequence_len must be <= 1048576, got 1000000000000"
  "contradict|variant 'lrt' \(both/shared/final\) contradicts lrt_config's structure none/shared/final"
  "mem_offset|mem_offset \(the memory offset k\) must be <= sequence_len \(32\)"
  "truncated|data_offsets \[[0-9]+, [0-9]+\] exceed the data section"
  "dtype|'lm_head\.weight' is stored as I64"
  "missing|no tensor 'lm_head\.weight'"
  "shape|'transformer\.wte\.weight' has shape \(32, 320\)"
  "extra|holds 1 tensor a lrt model of this config does not have, first 'extra\.weight'"
  "badname|variant 'xyz' is neither a named variant \(.*\) nor a spelling injection/projection/source; its lrt_config structure is lrt \(both/shared/final\)"
  "badjson|\[safetensors\] '[^']+': invalid JSON header: "
)
n_checked=0
for entry in "${cases[@]}"; do
  name=${entry%%|*} regex=${entry#*|}
  bad=bad_$name.safetensors
  "$damage" "$good" "$bad" "$name" || fail "$damage $name"
  # The one-level run layout for --resume: the damaged model beside the run's optimizer state.
  mkdir -p "resume_$name" && cp "$bad" "resume_$name/model.safetensors" && cp run/optim.safetensors "resume_$name/"
  for prog in eval generate quantize resume embedded c; do
    case $prog in
    eval) cmd=("$bin/lrt-eval" --checkpoint "$bad" --data corpus.txt) ;;
    generate) cmd=("$bin/lrt-generate" --checkpoint "$bad" --prompt "the quick" -n 8) ;;
    quantize) cmd=("$bin/lrt-quantize" --checkpoint "$bad" --out "q_$name.safetensors") ;;
    resume) cmd=("$bin/lrt-train" "${small[@]}" --steps 4 --resume "resume_$name" --out "resume_$name") ;;
    embedded) cmd=("$bin/lrt-embedded-generate" "$bad" "the quick" 8) ;;
    c) cmd=("$bin/lrt-c-generate" "$bad" "the quick" 8) ;;
    esac
    "${cmd[@]}" > "$name.$prog.out" 2> "$name.$prog.err"
    rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] || fail "$name, $prog: exit status $rc (expected a refusal): ${cmd[*]}"
    grep -Eq "$regex" "$name.$prog.err" ||
      fail "$name, $prog: stderr does not name the cause '$regex': $(cat "$name.$prog.err")"
    [ -e "q_$name.safetensors" ] && fail "$name: lrt-quantize wrote q_$name.safetensors from a damaged file"
    n_checked=$((n_checked + 1))
  done
  echo "$name: refused by all 6 ($(grep -Eo "$regex" "$name.eval.err" | head -1))"
done
echo "$n_checked refusals checked"

# A valid checkpoint of a variant this build has no pair for (both/shared/block0): every program
# refuses it, naming the variant (the C API and lrt-server: the runtime's table, which lists the
# variants it has).
"$damage" "$good" unbuilt.safetensors unbuilt || fail "$damage unbuilt"
for prog in eval generate embedded c server; do
  case $prog in
  eval) cmd=("$bin/lrt-eval" --checkpoint unbuilt.safetensors --data corpus.txt) ;;
  generate) cmd=("$bin/lrt-generate" --checkpoint unbuilt.safetensors --prompt "the quick" -n 8) ;;
  embedded) cmd=("$bin/lrt-embedded-generate" unbuilt.safetensors "the quick" 8) ;;
  c) cmd=("$bin/lrt-c-generate" unbuilt.safetensors "the quick" 8) ;;
  server) [ -x "$bin/lrt-server" ] || continue
    cmd=(timeout 60 "$bin/lrt-server" -m unbuilt.safetensors --port 0) ;;
  esac
  "${cmd[@]}" > "unbuilt.$prog.out" 2> "unbuilt.$prog.err"
  rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] || fail "unbuilt, $prog: exit status $rc (expected a refusal): ${cmd[*]}"
  grep -q "both/shared/block0" "unbuilt.$prog.err" ||
    fail "unbuilt, $prog: stderr does not name the variant both/shared/block0: $(cat "unbuilt.$prog.err")"
  echo "unbuilt, $prog: $(head -1 "unbuilt.$prog.err" | cut -c1-240)"
done
for prog in c server; do
  [ -e "unbuilt.$prog.err" ] || continue
  grep -q "this program decodes .*kv" "unbuilt.$prog.err" ||
    fail "unbuilt, $prog: the refusal does not list the build's variants: $(cat "unbuilt.$prog.err")"
done

# The runtime's table holds every variant of the build's pairs: lrt-c-generate (the C API) decodes
# kv, residual and lrt-src2 checkpoints to lrt-generate's greedy text (lrt-server: tools.server).
for v in kv residual lrt-src2; do
  if ! "$bin/lrt-train" --list-variants | grep -q -- "--variant $v "; then
    echo "skip - $v: this build has no $v pair"
    continue
  fi
  "$bin/lrt-train" --data corpus.txt --sequence-len 32 --batch-rows 4 --n-layer 3 --n-embd 32 --n-head 2 \
    --eval-every 0 --eval-tokens 128 --variant "$v" --steps 2 --out "run_$v" > "train_$v.out" 2>&1 ||
    fail "training $v: $(tail -3 "train_$v.out")"
  "$bin/lrt-generate" -m "run_$v" -p "the quick" -n 30 --temp 0 > "$v.generate" 2> "$v.generate.err" ||
    fail "lrt-generate $v: $(cat "$v.generate.err")"
  "$bin/lrt-c-generate" "run_$v" "the quick" 30 > "$v.c" 2> "$v.c.err" || fail "lrt-c-generate $v: $(cat "$v.c.err")"
  cmp -s "$v.generate" "$v.c" || fail "$v: lrt-c-generate printed '$(cat "$v.c")', lrt-generate '$(cat "$v.generate")'"
  [ "$(wc -c < "$v.c")" -ge 30 ] || fail "$v: lrt-c-generate printed $(wc -c < "$v.c") bytes"
  echo "$v: lrt-c-generate prints lrt-generate's greedy text ($(wc -c < "$v.c") bytes)"
done

# Another --variant on --resume: one line that names the checkpoint's variant and what to change.
"$bin/lrt-train" "${small[@]}" --steps 4 --variant baseline --resume run --out run > wrong.out 2> wrong.err
rc=$?
[ "$rc" = 2 ] || fail "--variant baseline --resume of an lrt run: exit status $rc, expected 2: $(cat wrong.err)"
line=$(grep '^lrt-train: ' wrong.err)
[ "$(wc -l < wrong.err)" = 1 ] && [ -n "$line" ] || fail "expected one error line: $(cat wrong.err)"
echo "$line" | grep -Eq "holds variant lrt .*drop --variant to continue it, or give --variant lrt" ||
  fail "the refusal does not say which variant the checkpoint holds and what to change: $line"
[ ${#line} -lt 300 ] || fail "the refusal is ${#line} characters long: $line"
echo "wrong variant: $line"

# A BPE checkpoint: the same greedy text from lrt-generate, the embedded program and the C API.
"$bin/lrt-train" "${small[@]}" --variant lrt --steps 3 --vocab-size 300 --out bpe > bpe.out 2>&1 ||
  fail "BPE training: $(tail -3 bpe.out)"
"$bin/lrt-generate" -m bpe -p "the quick" -n 30 --temp 0 > bpe.generate 2> bpe.generate.err || fail "lrt-generate: $(cat bpe.generate.err)"
"$bin/lrt-embedded-generate" bpe "the quick" 30 > bpe.embedded 2> bpe.embedded.err || fail "embedded: $(cat bpe.embedded.err)"
"$bin/lrt-c-generate" bpe "the quick" 30 > bpe.c 2> bpe.c.err || fail "C API: $(cat bpe.c.err)"
cmp -s bpe.generate bpe.embedded || fail "BPE: lrt-embedded-generate printed '$(cat bpe.embedded)', lrt-generate '$(cat bpe.generate)'"
cmp -s bpe.generate bpe.c || fail "BPE: lrt-c-generate printed '$(cat bpe.c)', lrt-generate '$(cat bpe.generate)'"
# 30 BPE tokens of this corpus are words: more text than 30 bytes would be.
[ "$(wc -c < bpe.generate)" -gt 45 ] || fail "BPE: 30 tokens printed only $(wc -c < bpe.generate) bytes: $(cat bpe.generate)"
echo "BPE greedy text, the same in all three: $(head -c 120 bpe.generate)"
# The embedded build with its allocations counted: encoding the BPE prompt may allocate, the
# steps after it must not.
if [ -x "$bin/lrt_embedded_alloc_check" ]; then
  "$bin/lrt_embedded_alloc_check" bpe "the quick" 30 --stats > bpe.alloc 2> bpe.alloc.err ||
    fail "lrt_embedded_alloc_check on the BPE checkpoint: $(cat bpe.alloc.err)"
  grep -q '^allocations_after_load 0$' bpe.alloc.err || fail "BPE: $(cat bpe.alloc.err)"
  cmp -s bpe.generate bpe.alloc || fail "BPE: the allocation-counting build printed '$(cat bpe.alloc)'"
  echo "BPE: 0 allocations after the prompt in the embedded build"
fi
echo "PASS"
