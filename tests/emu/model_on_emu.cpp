// tests/emu/model_on_emu.cpp: tests/cuda/test_cuda_model.cu (the model layer on
// lrt::cuda::Device against the CPU: fused ops, autodiff, whole models, schedules, decoder,
// optimizers), compiled by the host compiler and run on the CPU emulator of tests/emu/fake.
// The fake <cuda_runtime.h> comes first: it defines LRT_CUDA_EMULATOR, which <lrt/cuda.hpp>
// accepts in place of nvcc. The emulator reports one device, so main() runs doctest.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#if !defined(LRT_CUDA_EMULATOR)
#error "tests/emu/fake must come first on the include path (the real CUDA headers were found)"
#endif

#include "../cuda/test_cuda_model.cu"
