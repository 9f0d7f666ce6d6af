// lrt/cpu.hpp: the tensor layer with the CPU backend (Eigen / OpenBLAS GEMM, thread pool,
// fused kernels), without fmt formatting. <lrt/lrt.hpp> adds formatting; CUDA translation units
// (nvcc cannot take fmt 9 in C++20 mode) get this through <lrt/cuda.hpp>.
#pragma once

#include "core.hpp"

#include "backend/cpu/attention.hpp"
#include "backend/cpu/device.hpp"
#include "backend/cpu/gemm.hpp"
#include "backend/cpu/nn.hpp"
#include "backend/cpu/nn_backend.hpp"
#include "backend/cpu/reduce.hpp"
#include "tensor/linalg.hpp"
#include "tensor/random.hpp"
#include "tensor/reduce.hpp"
