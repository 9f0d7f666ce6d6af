// tests/emu/cuda_on_emu.cpp: tests/cuda/test_cuda.cu (the tensor layer on lrt::cuda::Device:
// every conformance body, the stream, cuBLAS handle, error messages and caching allocator),
// compiled by the host compiler and run on the CPU emulator of tests/emu/fake. See
// model_on_emu.cpp.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#if !defined(LRT_CUDA_EMULATOR)
#error "tests/emu/fake must come first on the include path (the real CUDA headers were found)"
#endif

#include "../cuda/test_cuda.cu"
