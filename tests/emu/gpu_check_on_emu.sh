#!/usr/bin/env bash
# tests/emu/gpu_check_on_emu.sh BIN_DIR: runs bench/gpu_check.sh end to end on the CPU emulator
# (CTest tools.gpu_check_emu): the emulator builds of the CUDA test program (lrt_cuda_emu_tests)
# and of lrt-bench-gpu stand in for the nvcc ones under their names, the benchmark at toy sizes.
# Checks the exit status and that the summary has every row.
set -uo pipefail
BIN=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ln -s "$BIN/lrt_cuda_emu_tests" "$dir/lrt_cuda_tests"  # both files' cases, as lrt_cuda_tests has them
ln -s "$BIN/lrt_bench_gpu_on_emu" "$dir/lrt-bench-gpu"
out=$(cd "$SRC" && bash bench/gpu_check.sh "$dir" --preset tiny --seq 12 --batch 1 --steps 1 --decode-tokens 5 \
  --decode-batch 2 --ref-n 32 --copy-mib 1 --quick --profile 4 2>&1)
rc=$?
echo "$out" | tail -n 30
[ $rc -eq 0 ] || { echo "gpu_check_on_emu: gpu_check.sh exited $rc"; exit 1; }
summary=${out##*== summary ==}
for want in 'tensor layer +rc=0 .*test cases: [0-9]+ \| [0-9]+ passed \| 0 failed' \
            'model layer +rc=0 .*test cases: [0-9]+ \| [0-9]+ passed \| 0 failed' \
            'benchmark +rc=0' '^R_ref cuBLAS bf16' '^baseline/standard \[bf16\]' '  by category: gemm' \
            '^baseline +1 +yes' '^baseline +2 +yes'; do
  if ! grep -qE "$want" <<<"$summary"; then
    echo "gpu_check_on_emu: the summary lacks /$want/"
    exit 1
  fi
done
echo "gpu_check_on_emu: ok"
