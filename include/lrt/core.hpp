// lrt/core.hpp: the device-neutral tensor layer (no Eigen, no fmt, no CUDA headers).
// Include <lrt/lrt.hpp> for the CPU backend, or <lrt/cuda.hpp> (nvcc) for the CUDA backend.
#pragma once

#include "core/config.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/thread_pool.hpp"
#include "tensor/assign.hpp"
#include "tensor/expr.hpp"
#include "tensor/expr_base.hpp"
#include "tensor/functors.hpp"
#include "tensor/gather.hpp"
#include "tensor/tensor.hpp"
#include "tensor/view.hpp"
#include "tensor/linalg.hpp"
#include "tensor/random.hpp"
#include "tensor/reduce.hpp"
