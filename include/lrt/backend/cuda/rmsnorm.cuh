// lrt/backend/cuda/rmsnorm.cuh: RMSNorm on the GPU, forward and backward (see cpu::rmsnorm_forward):
// one block per row, a fixed-order block reduction of the row's squares.
#pragma once

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    rmsnorm_forward_kernel(index_t N, index_t C, const T* x, index_t xs0, index_t xs1, T* y, index_t ys0, index_t ys1,
                           T* rinv, index_t rs, T eps) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* xr = x + i * xs0;
    T* yr = y + i * ys0;
    T ss = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) {
      const T a = xr[j * xs1];
      ss += a * a;
    }
    ss = nn_block_reduce(ss, T(0), NnSum{}, sh);
    const T r = T(1) / nn_sqrt(ss / T(C) + eps);
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) yr[j * ys1] = xr[j * xs1] * r;
    if (threadIdx.x == 0) rinv[i * rs] = r;
  }
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    rmsnorm_backward_kernel(index_t N, index_t C, const T* y, index_t ys0, index_t ys1, const T* rinv, index_t rs,
                            const T* gy, index_t gs0, index_t gs1, T* gx, index_t xs0, index_t xs1) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* yr = y + i * ys0;
    const T* gr = gy + i * gs0;
    T* xr = gx + i * xs0;
    T dot = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) dot += gr[j * gs1] * yr[j * ys1];
    dot = nn_block_reduce(dot, T(0), NnSum{}, sh);
    const T m = dot / T(C), r = rinv[i * rs];
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) xr[j * xs1] = r * (gr[j * gs1] - yr[j * ys1] * m);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

/// y = x / sqrt(mean(x^2) + eps) per row; rinv[i] = the row's 1/sqrt(...).
template <class T>
void rmsnorm_forward(NnView<const T, 2> x, NnView<T, 2> y, NnView<T, 1> rinv, double eps) {
  const index_t N = x.shape()[0], C = x.shape()[1];
  lrt::detail::check_rmsnorm_forward(x.shape(), y.shape(), rinv.shape());
  if (N == 0) return;
  launch(rmsnorm_forward_kernel<T>, nn_blocks(N), nn_block_threads(C), 0, "rmsnorm_forward kernel launch", N, C,
         x.data(), x.strides()[0], x.strides()[1], y.data(), y.strides()[0], y.strides()[1], rinv.data(),
         rinv.strides()[0], static_cast<T>(eps));
}

/// gx = rinv * (gy - y * mean(gy * y)) per row (gx overwritten).
template <class T>
void rmsnorm_backward(NnView<const T, 2> y, NnView<const T, 1> rinv, NnView<const T, 2> gy, NnView<T, 2> gx) {
  const index_t N = y.shape()[0], C = y.shape()[1];
  lrt::detail::check_rmsnorm_backward(y.shape(), rinv.shape(), gy.shape(), gx.shape());
  if (N == 0) return;
  launch(rmsnorm_backward_kernel<T>, nn_blocks(N), nn_block_threads(C), 0, "rmsnorm_backward kernel launch", N, C,
         y.data(), y.strides()[0], y.strides()[1], rinv.data(), rinv.strides()[0], gy.data(), gy.strides()[0],
         gy.strides()[1], gx.data(), gx.strides()[0], gx.strides()[1]);
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
