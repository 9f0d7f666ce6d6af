// lrt/autodiff.hpp: reverse-mode autodiff on any device: Graph, Var, Param, NoGrad, backward,
// value_and_grad and the differentiable ops of the GPT and LRT models. Host translation units
// also get <lrt/lrt.hpp> (fmt formatting); CUDA ones (nvcc rejects fmt 9) get <lrt/cpu.hpp>.
#pragma once

#if defined(__CUDACC__) || defined(LRT_CUDA_EMULATOR)  // the emulator: as under nvcc
#include "cpu.hpp"
#else
#include "lrt.hpp"
#endif

#include "autodiff/graph.hpp"
#include "autodiff/nn.hpp"
#include "autodiff/ops.hpp"
