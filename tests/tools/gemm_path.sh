#!/usr/bin/env bash
# tools.gemm_path: the CPU GEMM path (backend/cpu/gemm.hpp) as lrt-train shows it and keeps it.
#   tests/tools/gemm_path.sh SOURCE_DIR BIN_DIR WORK_DIR
# 1. The device line names the path and why (never a timing, unless LRT_GEMM=measure), LRT_GEMM=eigen
#    forces Eigen ("forced (LRT_GEMM)"), and summary.json records it (cpu_gemm).
# 2. A run trained on one path and resumed without LRT_GEMM takes that path again ("the GEMM path
#    of the run resumed") and continues bit for bit: a 4-step run resumed from its step-2
#    checkpoint ends with the weights of the uninterrupted run. (On another path the weights
#    differ in their last bits: a machine whose own choice is not Eigen would fail here without
#    the checkpoint's path.)
# 3. LRT_GEMM=bogus is refused with the reason, exit 1, before any step.
set -u -o pipefail
src=$1 bin=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "cannot use $work"
cat "$src"/docs/*.md > data.txt
export LRT_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset LRT_GEMM
train=("$bin/lrt-train" --preset tiny --variant baseline --data data.txt --batch-rows 4 --steps 4 --eval-every 2
  --eval-tokens 2048)

# 1. The path and why.
"${train[@]}" --out auto > auto.log 2>&1 || { tail auto.log; fail "lrt-train (default path) failed"; }
grep -Eq "^lrt-train: device cpu, .*GEMM via (lrt AVX-512|lrt AVX2|OpenBLAS|Eigen).* \(.+\)" auto.log ||
  fail "no GEMM path with its reason on the device line: $(grep -m1 device auto.log)"
grep -q '"cpu_gemm"' auto/summary.json || fail "summary.json has no cpu_gemm"
# Never a timing by default: two processes on one machine must take the same path (mpirun's
# ranks against one process, lrt-server against lrt-generate are compared bit for bit).
grep -q "GEMM via .*measured" auto.log && fail "the default path was chosen by a timing: $(grep -m1 device auto.log)"
LRT_GEMM=eigen "${train[@]}" --out eigen > eigen.log 2>&1 || { tail eigen.log; fail "LRT_GEMM=eigen lrt-train failed"; }
grep -Eq "GEMM via Eigen \([^)]+\) \(forced \(LRT_GEMM\)\)" eigen.log ||
  fail "LRT_GEMM=eigen: $(grep -m1 device eigen.log)"
pass "device line: $(grep -m1 -o 'GEMM via .*' auto.log); LRT_GEMM=eigen: $(grep -m1 -o 'GEMM via .*' eigen.log)"

# 2. A resume takes the run's path and continues bit for bit.
step2=eigen/checkpoints/step-000002
[ -d "$step2" ] || fail "no $step2 (checkpoints: $(ls eigen/checkpoints 2>&1))"
"${train[@]}" --resume "$step2" --out resumed > resumed.log 2>&1 || { tail resumed.log; fail "the resume failed"; }
grep -q "GEMM via Eigen .*the GEMM path of the run resumed" resumed.log ||
  fail "the resume did not take the run's path: $(grep -m1 device resumed.log)"
# The weights after step 4, bit for bit: the tensor data of model.safetensors past its header
# (8 bytes of length, then the JSON header, whose metadata names the path and differs).
data_of() { local n; n=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((n + 9)) "$1"; }
a=eigen/checkpoints/step-000004/model.safetensors b=resumed/checkpoints/step-000004/model.safetensors
[ -f "$a" ] && [ -f "$b" ] || fail "no step-4 checkpoint: $(ls eigen/checkpoints resumed/checkpoints 2>&1)"
cmp -s <(data_of "$a") <(data_of "$b") || fail "the resumed run's weights after step 4 differ from the uninterrupted run's"
pass "resumed from step 2 on the run's path (Eigen): the weights after step 4 bit for bit"

# 3. A bad LRT_GEMM.
rc=0
LRT_GEMM=bogus "${train[@]}" --out bogus > bogus.log 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "LRT_GEMM=bogus: exit $rc, not 1: $(tail -3 bogus.log)"
grep -q "LRT_GEMM='bogus': expected lrt, openblas, eigen, auto or measure" bogus.log || fail "LRT_GEMM=bogus: $(tail -3 bogus.log)"
pass "LRT_GEMM=bogus: $(grep -m1 -o "LRT_GEMM='bogus'.*" bogus.log)"
