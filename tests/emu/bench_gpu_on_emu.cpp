// tests/emu/bench_gpu_on_emu.cpp: bench/gpu.cu (lrt-bench-gpu) compiled by the host compiler and
// run on the CPU emulator of tests/emu/fake at toy sizes (CTest tools.bench_gpu_emu), so that the
// program carried to a GPU host has run every stage once: R_ref GEMMs (bf16 storage and fp32),
// the copy bandwidth, training rows with the optimizer step in two precisions, the per-operation
// profiles, decode eager and from CUDA graphs. Its figures mean nothing here.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#if !defined(LRT_CUDA_EMULATOR)
#error "tests/emu/fake must come first on the include path (the real CUDA headers were found)"
#endif

#include "../../bench/gpu.cu"
