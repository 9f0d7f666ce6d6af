// lrt/backend/cuda/softmax.cuh: row-wise softmax on the GPU, forward and backward (see
// cpu::softmax_forward): one block per row, fixed-order block reductions.
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
    softmax_forward_kernel(index_t N, index_t C, const T* x, index_t xs0, index_t xs1, T* y, index_t ys0, index_t ys1) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* xr = x + i * xs0;
    T* yr = y + i * ys0;
    T m = nn_neg_inf<T>();
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) m = nn_max(m, xr[j * xs1]);
    m = nn_block_reduce(m, nn_neg_inf<T>(), NnMax{}, sh);
    T s = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) {
      const T e = nn_exp(xr[j * xs1] - m);
      yr[j * ys1] = e;
      s += e;
    }
    s = nn_block_reduce(s, T(0), NnSum{}, sh);
    const T inv = T(1) / s;
    // Each thread rescales the very elements it wrote (so y may alias x).
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) yr[j * ys1] *= inv;
  }
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    softmax_backward_kernel(index_t N, index_t C, const T* y, index_t ys0, index_t ys1, const T* gy, index_t gs0,
                            index_t gs1, T* gx, index_t xs0, index_t xs1) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* yr = y + i * ys0;
    const T* gr = gy + i * gs0;
    T* xr = gx + i * xs0;
    T dot = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) dot += gr[j * gs1] * yr[j * ys1];
    dot = nn_block_reduce(dot, T(0), NnSum{}, sh);
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) xr[j * xs1] = yr[j * ys1] * (gr[j * gs1] - dot);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

/// Row-wise softmax. x, y: (N, C).
template <class T>
void softmax_forward(NnView<const T, 2> x, NnView<T, 2> y) {
  const index_t N = x.shape()[0], C = x.shape()[1];
  lrt::detail::check_softmax_forward(x.shape(), y.shape());
  if (N == 0) return;
  launch(softmax_forward_kernel<T>, nn_blocks(N), nn_block_threads(C), 0, "softmax_forward kernel launch", N, C,
         x.data(), x.strides()[0], x.strides()[1], y.data(), y.strides()[0], y.strides()[1]);
}

/// gx = y * (gy - sum(gy * y)) per row (gx overwritten).
template <class T>
void softmax_backward(NnView<const T, 2> y, NnView<const T, 2> gy, NnView<T, 2> gx) {
  const index_t N = y.shape()[0], C = y.shape()[1];
  lrt::detail::check_softmax_backward(y.shape(), gy.shape(), gx.shape());
  if (N == 0) return;
  launch(softmax_backward_kernel<T>, nn_blocks(N), nn_block_threads(C), 0, "softmax_backward kernel launch", N, C,
         y.data(), y.strides()[0], y.strides()[1], gy.data(), gy.strides()[0], gy.strides()[1], gx.data(),
         gx.strides()[0], gx.strides()[1]);
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
