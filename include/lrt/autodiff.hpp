// lrt/autodiff.hpp: reverse-mode autodiff (CPU): Graph, Var, Param, NoGrad, backward,
// value_and_grad and the differentiable ops of the GPT and LRT models.
#pragma once

#include "autodiff/graph.hpp"
#include "autodiff/nn.hpp"
#include "autodiff/ops.hpp"
