#!/usr/bin/env bash
# scripts/build_gpu_bins.sh OUT_DIR: build the CUDA tests and the GPU benchmark (needs nvcc, no
# GPU) in build-gpu/ without OpenBLAS (so the programs need only the CUDA runtime and cuBLAS on
# the GPU host) and copy them to OUT_DIR, ready for bench/gpu_check.sh OUT_DIR on a GPU host.
set -euo pipefail
OUT=${1:?usage: scripts/build_gpu_bins.sh OUT_DIR}
cd "$(dirname "$0")/.."
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLRT_USE_OPENBLAS=OFF -DLRT_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=${LRT_CUDA_ARCH:-90} >/dev/null
cmake --build build-gpu -j"$(nproc)" --target lrt_cuda_tests lrt-bench-gpu
mkdir -p "$OUT"
cp build-gpu/bin/lrt_cuda_tests build-gpu/bin/lrt-bench-gpu "$OUT/"
echo "built: $(ls "$OUT")"
