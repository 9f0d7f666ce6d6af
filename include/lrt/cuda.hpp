// lrt/cuda.hpp: everything lrt offers on an NVIDIA GPU, for translation units compiled by nvcc.
//
//   #include <lrt/cuda.hpp>                   // in a .cu file; link -lcublas
//   using G = lrt::cuda::Device;
//   lrt::Tensor<float, 2, G> a({2, 3}), b({2, 3});
//   a = lrt::uniform<float>(a.shape(), /*seed=*/1);   // the same numbers as on the CPU
//   b = a * 2.f + lrt::exp(a);                        // one fused kernel
//   auto c = lrt::matmul(a, b.t());                   // cuBLAS
//   auto h = lrt::to<lrt::cpu::Device>(c);            // back to the host
//
//   lrt::Model<lrt::variants::Lrt, float, G> m(cfg, /*seed=*/0);     // the same model on the GPU
//   auto r = lrt::schedule_loss<lrt::Interleaved<2>>(m, ids, targets);  // ids, targets on G
//
// It also brings the whole CPU side except fmt formatting (the CPU backend with Eigen, autodiff,
// the models, schedules, decoder, optimizers, the Trainer, data and I/O), so host and device
// tensors work side by side and a test can run the same body on both. fmt stays in
// <lrt/tensor.hpp> (and so <lrt/lrt.hpp>), which nvcc cannot take (fmt 9 under nvcc 13 is a hard error); define
// EIGEN_NO_CUDA (the lrt::cuda target does) so that Eigen stays a host-only library here.
#pragma once

// LRT_CUDA_EMULATOR: the CPU emulator of the tests (tests/emu/fake/cuda_runtime.h, included
// first) stands in for nvcc, so that a host compiler takes the CUDA test programs too.
#if !defined(__CUDACC__) && !defined(LRT_CUDA_EMULATOR)
#error \
    "<lrt/cuda.hpp> is the CUDA backend and needs nvcc: compile this file as CUDA (a .cu file, or LANGUAGE CUDA in CMake), or include <lrt/lrt.hpp> for the CPU backend."
#else

#include "core.hpp"

#include "backend/cpu/device.hpp"
#include "backend/cpu/reduce.hpp"

#include "backend/cuda/check.cuh"
#include "backend/cuda/device.cuh"
#include "backend/cuda/executor.cuh"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/nn.cuh"
#include "backend/cuda/primitives.cuh"
#include "backend/cuda/sample.cuh"

#include "autodiff.hpp"
#include "io.hpp"
#include "data.hpp"
#include "optim.hpp"
#include "optim/cuda.cuh"
#include "model.hpp"
#include "decode.hpp"
#include "eval.hpp"
#include "train.hpp"

#endif
