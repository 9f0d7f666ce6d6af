#!/usr/bin/env bash
# tools.train_flags: lrt-train's model and schedule flags reach the model, the checkpoint, the
# logs and --resume.
#   tests/tools/train_flags.sh SOURCE_DIR BIN_DIR WORK_DIR
# 1. A run with every flag changed: the model line and lrt-eval show the shape; the checkpoint's
#    model_config / lrt_config / train_options metadata and summary.json hold each value; the
#    LR multipliers in log.csv follow warm-up, warm-down and floor; log.csv has the sequential
#    bits per byte every --seq-eval-every steps; memory.csv has gamma and gate rows per layer.
# 2. Resuming its step-4 checkpoint without the flags ends byte-identical to the run (every
#    setting came back from the checkpoint).
# 3. Refusals (exit 2, naming the flag): a bad --ve-layout, --ve-layout on a K/V variant, an LRT
#    flag on the baseline, warm-up + warm-down > 1, a model flag on --resume that differs from
#    the checkpoint, --lr-scale on --resume.
# 4. --tune-split: the run says what it holds out and records it; lrt-eval --split tune scores it
#    (and refuses a checkpoint that trained on it); a resume keeps holding it out, and one of a run
#    that trained on it cannot start holding it out.
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
cat "$src/README.md" "$src"/docs/*.md > corpus.txt
export LRT_NUM_THREADS=1
train=$bin/lrt-train
common="--data corpus.txt --sequence-len 32 --batch-rows 4 --eval-every 4 --eval-tokens 512"
flags="--n-layer 2 --n-embd 32 --n-head 2 --n-kv-head 1 --window-pattern SL --gate-channels 16 --mem-offset 2
       --reset-at-bos --weight-decay 0.05 --batch-lr-rule release --warmup-frac 0.25 --warmdown-frac 0.5
       --final-lr-frac 0.2 --lr-scale 2 --gamma-lr 0.05 --seq-eval-every 4"
# shellcheck disable=SC2086
"$train" $common $flags --steps 8 --out a > a.out 2>&1 || fail "the run exited with $?: $(tail -5 a.out)"
grep -q '^model: lrt with interleaved:2: L=2 d=32 H=2 T=32 ' a.out || fail "model line: $(grep '^model:' a.out)"
grep -q '^config: n_layer 2 n_embd 32 n_head 2 n_kv_head 1 sequence_len 32 vocab 257 window_pattern SL ve_layout every gate_channels 16 mem_offset 2 reset_at_bos true$' a.out ||
  fail "config line: $(grep '^config:' a.out)"
s=a/summary.json
[ -f $s ] || fail "no summary.json"
for kv in '"n_layer":2' '"n_embd":32' '"n_kv_head":1' '"window_pattern":"SL"' '"ve_gate_channels":16' \
          '"mem_offset":2' '"reset_at_bos":true' '"release_batch_scaling":true' '"warmup_frac":0.25' \
          '"final_lr_frac":0.2' '"matrix_lr":0.0399999' '"gamma_lr":0.1' '"steps":8'; do
  grep -q "$kv" $s || fail "summary.json lacks $kv: $(cat $s)"
done
grep -q '"muon_weight_decay":0.0500000' $s || fail "summary.json: weight decay"
# The checkpoint's metadata (safetensors: an 8-byte header length, then the JSON header).
meta() { head -c $((8 + $(od -An -tu8 -N8 "$1" | tr -d ' '))) "$1" | tail -c +9; }
meta a/model.safetensors | grep -q 'mem_offset\\":2' || fail "model.safetensors: no mem_offset 2"
meta a/model.safetensors | grep -q 'window_pattern\\":\\"SL' || fail "model.safetensors: no window_pattern SL"
meta a/optim.safetensors | grep -q 'warmup_frac\\":0.25' || fail "optim.safetensors: no warmup_frac"
# LR multipliers (N = 8: warm-up U = 2 steps, warm-down W = 4 from step 5, floor 0.2).
lr=$(awk -F, 'NR > 1 { printf "%s ", $6 }' a/log.csv)
[ "$lr" = "0.5 1 1 1 1 0.8 0.6 0.4 " ] || fail "LR multipliers in log.csv: $lr"
seq=$(awk -F, 'NR > 1 && $8 != "" { printf "%s ", $1 }' a/log.csv)
[ "$seq" = "3 7 " ] || fail "sequential evaluations at steps '$seq', not '3 7 '"
[ "$(grep -c '^[37],[01],' a/memory.csv)" = 4 ] || fail "memory.csv: $(cat a/memory.csv)"
grep -q '^memory by layer: gamma .*; recurrent gate (mean+-sd) ' a.out || fail "no memory line"
"$bin/lrt-eval" --checkpoint a --data corpus.txt --eval-tokens 512 > e.out 2>&1 || fail "lrt-eval: $(tail -3 e.out)"
grep -q 'lrt with interleaved:2, L=2 d=32 T=32' e.out || fail "lrt-eval: $(head -1 e.out)"
pass "every flag reaches the model, the checkpoint, summary.json and the logs"

"$train" --data corpus.txt --eval-tokens 512 --seq-eval-every 4 --resume a/checkpoints/step-000004 --out b > b.out 2>&1 ||
  fail "resume exited with $?: $(tail -3 b.out)"
cmp -s a/model.safetensors b/model.safetensors || fail "the resumed run's model differs"
cmp -s a/optim.safetensors b/optim.safetensors || fail "the resumed run's optimizer state differs"
pass "a resume without the flags ends byte-identical"

# --precision bf16 on the CPU (bf16 products, fp32 accumulation), where the CPU has them: named on
# the device line, in summary.json and the checkpoint; a resume takes it again and ends
# byte-identical; the products differ from fp32's.
if LRT_CPU_MASK= "$train" $common --precision bf16 --steps 8 --out h > h.out 2>&1; then
  grep -q '^lrt-train: device cpu, 1 thread .*, bf16 (avx512_bf16) matmuls' h.out || fail "bf16 device line: $(grep device h.out)"
  grep -q '"precision":"bf16"' h/summary.json && grep -q '"cpu_matmul":"bf16 (avx512_bf16)"' h/summary.json ||
    fail "summary.json: $(cat h/summary.json)"
  meta h/model.safetensors | grep -q 'cpu_matmul":"bf16 (avx512_bf16)' || fail "model.safetensors: no cpu_matmul"
  "$train" --data corpus.txt --eval-tokens 512 --resume h/checkpoints/step-000004 --out i > i.out 2>&1 ||
    fail "bf16 resume exited with $?: $(tail -3 i.out)"
  grep -q -- '^--precision bf16: the matrix products the run resumed was trained with' i.out || fail "resume: $(head -3 i.out)"
  cmp -s h/model.safetensors i/model.safetensors || fail "the resumed bf16 run's model differs"
  cmp -s h/optim.safetensors i/optim.safetensors || fail "the resumed bf16 run's optimizer state differs"
  "$train" $common --steps 8 --out f > f.out 2>&1 || fail "fp32 run: $(tail -3 f.out)"
  cmp -s f/model.safetensors h/model.safetensors && fail "bf16 and fp32 runs ended with the same model"
  pass "--precision bf16: recorded, resumed byte-identical, not fp32's products"
elif grep -q -- "--precision bf16 on the CPU needs AVX512-BF16" h.out; then
  echo "skip: --precision bf16: $(head -1 h.out)"
else
  fail "--precision bf16: $(tail -3 h.out)"
fi

# Resumed at the horizon (N = the checkpoint's step): nothing to train, but the summary has the
# checkpoint's scores, the same as the run that wrote it.
"$train" --data corpus.txt --eval-tokens 512 --resume a --steps 8 --out c > c.out 2>&1 ||
  fail "a resume at the horizon exited with $?: $(tail -3 c.out)"
for k in val_bpb_parallel val_bpb_sequential; do
  want=$(grep -o "\"$k\":[0-9.e+-]*" a/summary.json) got=$(grep -o "\"$k\":[0-9.e+-]*" c/summary.json)
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "resumed at the horizon: $k '$got', the run had '$want'"
done
cmp -s a/model.safetensors c/model.safetensors || fail "resumed at the horizon: the model changed"
pass "a resume at the horizon only evaluates"

refuse() {  # refuse "pattern" args...: exit 2 and the pattern in the error
  local pat=$1
  shift
  "$train" "$@" > r.out 2>&1
  local rc=$?
  [ $rc = 2 ] || fail "$* exited with $rc, not 2: $(head -2 r.out)"
  grep -q -- "$pat" r.out || fail "$*: no '$pat' in: $(head -2 r.out)"
}
refuse "--ve-layout must be every, alternating or none, got 'x'" $common --steps 1 --out r --ve-layout x
if "$train" --list-variants | grep -q -- '--variant kv '; then
  refuse "--ve-layout none: variant kv carries value embeddings on every layer" $common --steps 1 --out r --variant kv \
    --ve-layout none
fi
refuse "--mem-offset is an LRT option: variant baseline has no memory" $common --steps 1 --out r --variant baseline --mem-offset 2
refuse "exceed the run" $common --steps 1 --out r --warmup-frac 0.6
refuse "on --resume the run is the checkpoint's: drop this flag (to change it, start a new run in another --out): --n-embd 64 (the checkpoint has 32); see --help$" --data corpus.txt --resume a --out r --n-embd 64
# What contradicts the checkpoint is refused in one line naming each flag (issue 62: a resume that
# silently changed the batch and ignored --preset).
refuse "drop these flags (to change them, start a new run in another --out): --preset small (the checkpoint's model is 2 layers of width 32, 2 heads, sequence length 32); --batch-rows 8 (the checkpoint has 4); --seed 5 (the checkpoint has 0); see --help$" \
  --data corpus.txt --resume a --out r --preset small --batch-rows 8 --seed 5
refuse "--sequence-len 64 (the checkpoint has 32); --n-layer 3 (the checkpoint has 2); see --help$" --data corpus.txt --resume a --out r --sequence-len 64 --n-layer 3
refuse "--lr-scale on --resume" --data corpus.txt --resume a --out r --lr-scale 2
refuse "the horizon N = 4 (--steps) is below the checkpoint's step 8" --data corpus.txt --resume a --out r --steps 4
pass "bad flags are refused with exit 2"

# 4. The tuning slice.
"$train" --data corpus.txt --sequence-len 32 --batch-rows 4 --eval-every 2 --eval-tokens 512 --steps 4 --tune-split \
  --out t > t.out 2>&1 || fail "--tune-split exited with $?: $(tail -3 t.out)"
grep -q '^tuning slice: 1 docs, [0-9]* bytes of the training split held out (lrt-eval --split tune)$' t.out ||
  fail "no tuning-slice line: $(grep -i tun t.out)"
meta t/model.safetensors | grep -q '"held_out":"tune"' || fail "model.safetensors does not record held_out tune"
"$bin/lrt-eval" --checkpoint t --data corpus.txt --split tune --eval-tokens 256 > te.out 2>&1 ||
  fail "lrt-eval --split tune exited with $?: $(tail -3 te.out)"
grep -q '; tuning slice: 1 docs, [0-9]* rows available' te.out || fail "lrt-eval --split tune: $(head -1 te.out)"
"$bin/lrt-eval" --checkpoint a --data corpus.txt --split tune > r.out 2>&1
[ $? = 2 ] && grep -q "was trained on the tuning slice" r.out || fail "lrt-eval --split tune on a: $(head -2 r.out)"
"$train" --data corpus.txt --eval-tokens 512 --resume t/checkpoints/step-000002 --out t2 > t2.out 2>&1 ||
  fail "resuming the tuning run exited with $?: $(tail -3 t2.out)"
grep -q '^tuning slice: ' t2.out || fail "the resumed run does not hold out the tuning slice"
cmp -s t/model.safetensors t2/model.safetensors || fail "the resumed tuning run's model differs"
refuse "--tune-split on --resume 'a': that run trains on the tuning slice already" --data corpus.txt --resume a --out r \
  --tune-split
# --split train: the bytes the checkpoint trained on, without the tuning slice when it held that out.
held=$(sed -n 's/^tuning slice: 1 docs, \([0-9]*\) bytes .*/\1/p' t.out)
for c in a t; do
  "$bin/lrt-eval" --checkpoint $c --data corpus.txt --split train --eval-bytes 4096 > tr$c.out 2>&1 ||
    fail "lrt-eval --split train on $c exited with $?: $(tail -3 tr$c.out)"
done
na=$(sed -n 's/.*; training split: the first 4096 of \([0-9]*\) bytes$/\1/p' tra.out)
nt=$(sed -n 's/.*; training split: the first 4096 of \([0-9]*\) bytes$/\1/p' trt.out)
[ -n "$na" ] && [ -n "$nt" ] && [ "$((na - nt))" = "$held" ] ||
  fail "lrt-eval --split train: a's split ($na bytes) less t's ($nt) is not the tuning slice ($held): $(head -1 trt.out)"
grep -q '^targets scored: 4096 (4096 bytes)' tra.out || fail "lrt-eval --split train: $(grep targets tra.out)"
pass "--tune-split holds out a tuning slice that lrt-eval --split tune scores; --split train scores the rest"

# 5. --core: CORE into log.csv's core columns every --core-every steps and at the end, in both
#    modes, the values lrt-eval --core gives the same checkpoint; the refusals.
bundle=$src/tests/data/core/bundle
# shellcheck disable=SC2086
"$train" $common --steps 5 --core "$bundle" --core-every 3 --core-max-per-task 4 --core-mode both --out core \
  > core.out 2>&1 || fail "--core: the run exited with $?: $(tail -5 core.out)"
got=$(awk -F, 'NR > 1 && $9 != "" && $10 != "" { printf "%s ", $1 }' core/log.csv)
[ "$got" = "2 4 " ] || fail "--core: CORE in log.csv at steps '$got', not '2 4 ': $(cat core/log.csv)"
head -1 core/log.csv | grep -q ',val_bpb_sequential,core,core_sequential$' || fail "--core: log.csv header: $(head -1 core/log.csv)"
grep -Eq '^step 5/5 .*\| CORE -?[0-9.]+ \(sequential -?[0-9.]+\)' core.out || fail "--core: no CORE on the last step's line: $(tail -3 core.out)"
"$bin/lrt-eval" --checkpoint core --core "$bundle" --max-per-task 4 --mode both > core-eval.out 2>&1 ||
  fail "--core: lrt-eval: $(tail -3 core-eval.out)"
par=$(sed -n 's/^core_metric_parallel: //p' core-eval.out) seq=$(sed -n 's/^core_metric_sequential: //p' core-eval.out)
awk -F, -v p="$par" -v s="$seq" 'END { d1 = $9 - p; d2 = $10 - s; exit !(d1 * d1 < 1e-10 && d2 * d2 < 1e-10) }' core/log.csv ||
  fail "--core: the last log row ($(tail -1 core/log.csv)) is not lrt-eval's CORE ($par, $seq)"
refuse_core() {  # refuse_core "pattern" args...
  local pat=$1
  shift
  # shellcheck disable=SC2086
  "$train" $common --steps 2 --out refused "$@" > refused.out 2>&1
  [ $? = 2 ] && grep -q -- "$pat" refused.out || fail "not refused with '$pat': $* -> $(head -3 refused.out)"
}
refuse_core "--core-every goes with --core DIR" --core-every 3
refuse_core "--core-mode must be parallel, sequential or both, got 'exact'" --core "$bundle" --core-mode exact
refuse_core "variant baseline has no memory, so its one CORE mode is parallel" --variant baseline --core "$bundle" --core-mode both
refuse_core "--core: no such file or folder" --core /nonexistent/bundle
# shellcheck disable=SC2086
"$train" $common --steps 2 --out refused --core "$bundle" --core-max-per-task 2 > refused.out 2>&1
[ $? = 1 ] && grep -q "asks for 3 few-shot examples, but its data .* gives 2 items" refused.out && ! grep -q '^step ' refused.out ||
  fail "--core-max-per-task too small for a task's few-shot count: not refused before training: $(tail -3 refused.out)"
pass "--core scores CORE into log.csv (both modes, lrt-eval's values) every --core-every steps and at the end"
