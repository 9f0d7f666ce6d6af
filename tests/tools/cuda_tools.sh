#!/usr/bin/env bash
# tools.cuda_emu: the tools' --device cuda path on the CUDA emulator, as a user types it.
# lrt-train-emu, lrt-eval-emu and lrt-generate-emu are the three programs linked with the CUDA
# sessions compiled against tests/emu/fake (tests/CMakeLists.txt); lrt-train, lrt-eval and
# lrt-generate are the CPU programs of the same build. Checks:
#  - a tiny model trained with --device cuda gives the CPU run's losses (within rounding as it grows), fp32,
#    and bf16 matmuls stay close to them;
#  - checkpoints cross devices: the GPU run's checkpoint evaluates on the CPU (the same bits per
#    byte as lrt-eval --device cuda) and resumes on the CPU, a CPU checkpoint resumes on the GPU,
#    and both end where an uninterrupted CPU run ends;
#  - lrt-generate --device cuda, greedy, prints what the CPU prints;
#  - the refusals: --precision bf16 on the CPU, --device tpu, a pair without a CUDA session, and
#    --device cuda in a program without CUDA sessions or without a GPU.
#   tests/tools/cuda_tools.sh SOURCE_DIR BIN_DIR WORK_DIR
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
export LRT_NUM_THREADS=1
data="$src/tests/data/tokenizer/lrt_train.txt"  # fixed text (45 KB)
# A model the emulator trains in seconds: tiny's layers at 16 positions, 4 rows a step. The scalar
# lambdas stay fixed (--scalar-lr 0): their gradients at the start are about 1e-10 (every c_proj
# starts at zero), rounding noise that differs between the devices, and AdamW turns noise of
# either sign into a full learning-rate step, so with them the runs part after one step (0.017
# in the loss at step 1, measured) while both are correct.
small=(--preset tiny --sequence-len 16 --batch-rows 4 --eval-tokens 48 --scalar-lr 0 --data "$data")

# expect RC REGEX CMD...: runs CMD, checks its exit status and that stdout+stderr match REGEX.
expect() {
  local rc=$1 re=$2
  shift 2
  local out got=0
  out=$("$@" 2>&1) || got=$?
  [ "$got" -eq "$rc" ] || {
    printf '%s\n' "$out" | tail -n 20
    fail "exit $got, not $rc: $*"
  }
  printf "%s\n" "$out" | grep -Ezq -- "$re" || {
    printf '%s\n' "$out" | tail -n 20
    fail "output does not match /$re/: $*"
  }
  if [ "$rc" -eq 0 ]; then printf '%s\n' "$out" | grep -v '^\s*$' | tail -n 2 | sed 's/^/  | /'
  else printf '%s\n' "$out" | grep -m1 '^error' | sed 's/^/  | /'; fi
}
t0=$SECONDS
stage() { echo "== [$((SECONDS - t0)) s] $*"; }
# losses A B TOL TOL2: the train_loss columns of two log.csv files, row by row: the first two steps
# differ by at most TOL, every step by at most TOL2. (Rounding differences between the devices grow
# about tenfold a step at tiny's learning rates on 4 rows, so only the first steps are close.)
losses() {
  paste -d, <(tail -n +2 "$1" | cut -d, -f1,3) <(tail -n +2 "$2" | cut -d, -f1,3) |
    awk -F, -v tol="$3" -v tol2="$4" '
    { n++; d = $2 - $4; if (d < 0) d = -d; t = $1 < 2 ? tol : tol2
      if ($1 != $3 || d > t) { bad = 1; print "step " $1 ": " $2 " vs " $4 } }
    END { if (n == 0 || bad) exit 1; print "  | " n " steps agree (first two within " tol ", all within " tol2 ")" }' ||
    fail "losses of $1 and $2 differ"
}
value() { sed -n "s/^$1: //p"; }

for variant in baseline lrt; do
  stage "$variant: 4 steps on the CPU, and with --device cuda (fp32, bf16)"
  expect 0 "device cpu" "$bin/lrt-train" --variant $variant "${small[@]}" --steps 4 --eval-every 2 --out cpu_$variant
  expect 0 "device cuda: lrt CUDA emulator \(CPU\).*fp32 matmuls.*val_bpb: " \
    "$bin/lrt-train-emu" --device cuda --variant $variant "${small[@]}" --steps 4 --eval-every 2 --out gpu_$variant
  losses cpu_$variant/log.csv gpu_$variant/log.csv 5e-4 2e-2
  expect 0 "bf16 matmuls" "$bin/lrt-train-emu" --device cuda --precision bf16 --variant $variant "${small[@]}" \
    --steps 4 --eval-every 2 --out bf16_$variant
  losses cpu_$variant/log.csv bf16_$variant/log.csv 5e-2 1e-1

  stage "$variant: the GPU checkpoint on the CPU, and the CPU checkpoint on the GPU"
  c=$("$bin/lrt-eval" --checkpoint gpu_$variant --data "$data" --eval-tokens 256 | value val_bpb) || fail "lrt-eval"
  g=$("$bin/lrt-eval-emu" --device cuda --checkpoint gpu_$variant --data "$data" --eval-tokens 256 | value val_bpb) ||
    fail "lrt-eval-emu"
  awk -v a="$c" -v b="$g" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d < 1e-4) }' ||
    fail "val_bpb of the GPU checkpoint: $c on the CPU, $g on the GPU"
  echo "  | val_bpb $c (cpu) and $g (cuda)"
  expect 0 '"device":"cuda","precision":"fp32"' "$bin/lrt-eval-emu" --device cuda --checkpoint gpu_$variant \
    --data "$data" --eval-tokens 64 --json
  # The runs above from their step-2 checkpoints, on the other device: both end as the CPU run ends.
  cp -r cpu_$variant half_cpu_$variant && cp -r gpu_$variant half_gpu_$variant || fail "cp"
  for d in half_cpu_$variant half_gpu_$variant; do
    printf 'checkpoints/step-000002\n' > $d/latest
  done
  expect 0 "resumed from .*step 2 of 4" "$bin/lrt-train" --resume half_gpu_$variant --data "$data" --out half_gpu_$variant
  expect 0 "device cuda.*resumed from .*step 2 of 4" "$bin/lrt-train-emu" --device cuda --resume half_cpu_$variant --data "$data" \
    --out half_cpu_$variant
  losses cpu_$variant/log.csv half_gpu_$variant/log.csv 5e-4 2e-2
  losses cpu_$variant/log.csv half_cpu_$variant/log.csv 5e-4 2e-2

  stage "$variant: greedy samples on both devices"
  a=$("$bin/lrt-generate" -m gpu_$variant -p "The " -n 12 --temp 0) || fail "lrt-generate"
  b=$("$bin/lrt-generate-emu" --device cuda -m gpu_$variant -p "The " -n 12 --temp 0) || fail "lrt-generate-emu"
  [ "$a" = "$b" ] || fail "greedy samples differ: '$a' (cpu) vs '$b' (cuda)"
  echo "  | $(printf '%s' "$a" | head -c 60 | tr '\n' ' ')"
  s1=$("$bin/lrt-generate-emu" --device cuda -m gpu_$variant -p "The " -n 8 --seed 3 --top-k 20 --top-p 0.9) ||
    fail "lrt-generate-emu (sampled)"
  s2=$("$bin/lrt-generate-emu" --device cuda -m gpu_$variant -p "The " -n 8 --seed 3 --top-k 20 --top-p 0.9)
  [ "$s1" = "$s2" ] || fail "two sampled runs with one seed differ"
done

stage "refusals"
# bf16 on the CPU needs its instructions: hidden here by LRT_CPU_MASK (or absent), a refusal naming them.
expect 2 "--precision bf16 on the CPU needs AVX512-BF16 \(vdpbf16ps\) or AMX: " env LRT_CPU_MASK=avx512_bf16 \
  "$bin/lrt-train" --precision bf16 "${small[@]}" --out x
expect 2 "--precision tf32 is a GPU option" "$bin/lrt-eval-emu" --precision tf32 --checkpoint gpu_lrt --data "$data"
expect 2 "--device must be cpu or cuda, got 'tpu'" "$bin/lrt-generate-emu" --device tpu -m gpu_lrt
expect 2 "--precision must be fp32, tf32 or bf16, got 'fp16'" "$bin/lrt-train-emu" --device cuda --precision fp16 \
  "${small[@]}" --out x
# A pair with a CPU build but no CUDA session (when this build has one).
cpu_only=$("$bin/lrt-train-emu" --list-variants | awk '/^--device cuda/ { c[$4 " " $6] = 1; next }
  /^--variant/ { p[n++] = $2 " " $4 } END { for (i = 0; i < n; i++) if (!(p[i] in c)) { print p[i]; exit } }')
if [ -n "$cpu_only" ]; then
  read -r v s <<<"$cpu_only"
  expect 2 "no CUDA session of variant $v with schedule '$s'.*--variant lrt --schedule interleaved:2" \
    "$bin/lrt-train-emu" --device cuda --variant "$v" --schedule "$s" "${small[@]}" --steps 1 --out x
fi
expect 0 "^--variant baseline --schedule standard.*--device cuda --variant baseline --schedule standard" \
  "$bin/lrt-train-emu" --list-variants
# The CPU programs: without CUDA sessions (no nvcc) a usage error; with them (nvcc found) but no
# GPU on this machine, an error naming the missing device.
out=$("$bin/lrt-train" --device cuda "${small[@]}" --steps 1 --out x 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then
  printf '%s\n' "$out" | grep -Eq "this build has no CUDA|no GPU is visible" || fail "lrt-train --device cuda: $out"
else  # a machine with a GPU
  printf '%s\n' "$out" | grep -q "device cuda: " || fail "lrt-train --device cuda: $out"
fi
echo "  | $(printf '%s\n' "$out" | head -n 1)"
echo "tools.cuda_emu: all passed in $((SECONDS - t0)) s"
