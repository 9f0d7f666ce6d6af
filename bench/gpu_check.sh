#!/usr/bin/env bash
# bench/gpu_check.sh: on a GPU host, run lrt's CUDA tests and the GPU benchmark, print one table.
# The binaries can be built anywhere nvcc is (no GPU needed) and carried over; the GPU host needs
# only the NVIDIA driver and the CUDA 13 runtime + cuBLAS (no Eigen, fmt, doctest or network):
#   scripts/build_gpu_bins.sh gpu/          # on the build machine: gpu/ holds the 3 programs
#   bench/gpu_check.sh gpu/ [bench options] # on the GPU host, from the repository root
# BIN_DIR defaults to build/bin. Bench options go to lrt-bench-gpu (e.g. --batch 8 --steps 4
# --precision bf16,fp32; matmuls default to bf16), after "--profile 12" (the 12 slowest operations
# of one step per training row and of one decode step; "--profile 0" turns it off).
# Budget: under 8 minutes on one H200: each stage has its own timeout (seconds), overridable with
# LRT_GPU_CHECK_TIMEOUTS="tensor model bench" (default "90 150 220").
set -uo pipefail
BIN=${1:-build/bin}
[ $# -gt 0 ] && shift
for p in lrt_cuda_tests lrt-bench-gpu; do
  if [ ! -x "$BIN/$p" ]; then
    echo "gpu_check: $BIN/$p not found: build it with scripts/build_gpu_bins.sh $BIN" >&2
    exit 2
  fi
done
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
read -r T_TENSOR T_MODEL T_BENCH <<<"${LRT_GPU_CHECK_TIMEOUTS:-90 150 220}"
status=0
declare -a rows
run_tests() {  # name, timeout, program, its arguments
  local name=$1 limit=$2 prog=$3 out rc summary
  shift 3
  local t0=$SECONDS
  out=$(LRT_REQUIRE_GPU=1 timeout "$limit" "$prog" "$@" 2>&1)
  rc=$?
  echo "$out" | tail -n 40
  summary=$(echo "$out" | grep -E '^\[doctest\] (test cases|assertions)' | sed 's/\[doctest\] //' | tr -s ' ' | paste -sd ';' -)
  [ $rc -ne 0 ] && status=1
  rows+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$summary")")
}
echo "== CUDA tests =="
# One program holds both files' cases (tests/cuda/cuda_tests.cu); each run takes one file's.
run_tests "tensor layer" "$T_TENSOR" "$BIN/lrt_cuda_tests" '--source-file=*/cuda/test_cuda.cu'
run_tests "model layer" "$T_MODEL" "$BIN/lrt_cuda_tests" '--source-file=*/cuda/test_cuda_model.cu,*/cuda/optim_cases.hpp' \
  --duration=true
echo "== benchmark =="
t0=$SECONDS
bench_out=$(mktemp)
timeout "$T_BENCH" "$BIN/lrt-bench-gpu" --profile 12 "$@" 2>&1 | tee "$bench_out"
rc=${PIPESTATUS[0]}
[ $rc -ne 0 ] && status=1
rows+=("$(printf '%-22s rc=%-3s %4ss' "benchmark" "$rc" "$((SECONDS - t0))")")
echo
echo "== summary =="
for r in "${rows[@]}"; do echo "$r"; done
# The benchmark's headline rows again (R_ref, training MFU, decode), without the profiles.
grep -E '^(device:|R_ref|variant|baseline|lrt|  profile of one step|  by category)' "$bench_out"
rm -f "$bench_out"
exit $status
