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
// It also brings the CPU backend's memory, executor and reductions (no Eigen, no fmt), so
// host tensors work beside device ones; CPU GEMM (Eigen) and fmt formatting stay in
// <lrt/lrt.hpp>, which nvcc cannot take (fmt 9 under nvcc 13 is a hard error).
#pragma once

#if !defined(__CUDACC__)
#error "<lrt/cuda.hpp> is the CUDA backend and needs nvcc: compile this file as CUDA (a .cu file, or LANGUAGE CUDA in CMake), or include <lrt/lrt.hpp> for the CPU backend."
#else

#include "core.hpp"

#include "backend/cpu/device.hpp"
#include "backend/cpu/reduce.hpp"

#include "backend/cuda/check.cuh"
#include "backend/cuda/device.cuh"
#include "backend/cuda/executor.cuh"
#include "backend/cuda/gemm.cuh"
#include "backend/cuda/reduce.cuh"

#endif
