// lrt/autodiff.hpp: reverse-mode autodiff: Graph, Var, Param, NoGrad, backward, value_and_grad
// and the differentiable ops of the GPT and LRT models. autodiff/ itself is device-neutral
// (written against backend/nn_backend.hpp); this umbrella adds the CPU backend. Host translation units
// also get <lrt/tensor.hpp> (fmt formatting); CUDA ones (nvcc rejects fmt 9) get <lrt/cpu.hpp>.
#pragma once

#if defined(__CUDACC__) || defined(LRT_CUDA_EMULATOR)  // the emulator: as under nvcc
#include "cpu.hpp"
#else
#include "tensor.hpp"
#endif

#include "autodiff/graph.hpp"
#include "autodiff/nn.hpp"
#include "autodiff/ops.hpp"
