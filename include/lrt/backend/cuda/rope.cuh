// lrt/backend/cuda/rope.cuh: RoPE on the GPU (one thread per rotation pair, grid-stride) and
// RoPE + RMSNorm of each head vector in one kernel (one warp per head vector), forward and
// backward (see cpu::rope_apply, cpu::rope_rmsnorm_forward).
#pragma once

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "executor.cuh"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

// RoPE

template <class T>
__global__ void __launch_bounds__(assign_threads)
    rope_kernel(index_t B, index_t Tt, index_t H, index_t half, const T* x, Strides<4> xs, const T* cs, Strides<2> css,
                const T* sn, Strides<2> sns, T* y, Strides<4> ys, T sg) {
  const index_t n = B * Tt * H * half, step = index_t{blockDim.x} * gridDim.x;
  for (index_t idx = index_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += step) {
    const index_t j = idx % half;
    index_t r = idx / half;
    const index_t h = r % H;
    r /= H;
    const index_t t = r % Tt, b = r / Tt;
    const T* xr = x + b * xs[0] + t * xs[1] + h * xs[2];
    T* yr = y + b * ys[0] + t * ys[1] + h * ys[2];
    const T a = xr[j * xs[3]], c = xr[(j + half) * xs[3]];
    const T co = cs[t * css[0] + j * css[1]], si = sg * sn[t * sns[0] + j * sns[1]];
    yr[j * ys[3]] = a * co + c * si;
    yr[(j + half) * ys[3]] = -a * si + c * co;
  }
}

// ---------------------------------------------------------------------------------------------
// RoPE + RMSNorm of each head vector (QK-norm): one warp per (b, t, h) row of Dh values, lanes
// over the Dh/2 rotation pairs; the rotation is recomputed for the second sweep instead of
// re-reading y.

template <class T>
__global__ void __launch_bounds__(attn_warps * 32)
    rope_rmsnorm_forward_kernel(index_t B, index_t Tt, index_t H, index_t half, const T* x, Strides<4> xs, const T* cs,
                                Strides<2> css, const T* sn, Strides<2> sns, T* y, Strides<4> ys, T* rinv, T eps) {
  const index_t rows = B * Tt * H, wstep = index_t{gridDim.x} * attn_warps;
  const int lane = threadIdx.x & 31;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < rows; w += wstep) {
    const index_t h = w % H, t = (w / H) % Tt, b = w / (H * Tt);
    const T* xr = x + b * xs[0] + t * xs[1] + h * xs[2];
    T* yr = y + b * ys[0] + t * ys[1] + h * ys[2];
    auto rotated = [&](index_t j, T& y0, T& y1) {
      const T a = xr[j * xs[3]], c = xr[(j + half) * xs[3]];
      const T co = cs[t * css[0] + j * css[1]], si = sn[t * sns[0] + j * sns[1]];
      y0 = a * co + c * si;
      y1 = -a * si + c * co;
    };
    T ss = 0;
    for (index_t j = lane; j < half; j += 32) {
      T y0, y1;
      rotated(j, y0, y1);
      ss += y0 * y0 + y1 * y1;
    }
    ss = nn_warp_reduce(ss, NnSum{});
    const T r = T(1) / nn_sqrt(ss / T(2 * half) + eps);
    for (index_t j = lane; j < half; j += 32) {
      T y0, y1;
      rotated(j, y0, y1);
      yr[j * ys[3]] = y0 * r;
      yr[(j + half) * ys[3]] = y1 * r;
    }
    if (lane == 0) rinv[w] = r;
  }
}

template <class T>
__global__ void __launch_bounds__(attn_warps * 32)
    rope_rmsnorm_backward_kernel(index_t B, index_t Tt, index_t H, index_t half, const T* y, Strides<4> ys,
                                 const T* rinv, const T* gy, Strides<4> gs, const T* cs, Strides<2> css, const T* sn,
                                 Strides<2> sns, T* gx, Strides<4> xs) {
  const index_t rows = B * Tt * H, wstep = index_t{gridDim.x} * attn_warps;
  const int lane = threadIdx.x & 31;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < rows; w += wstep) {
    const index_t h = w % H, t = (w / H) % Tt, b = w / (H * Tt);
    const T* yr = y + b * ys[0] + t * ys[1] + h * ys[2];
    const T* gr = gy + b * gs[0] + t * gs[1] + h * gs[2];
    T* xr = gx + b * xs[0] + t * xs[1] + h * xs[2];
    T dot = 0;
    for (index_t j = lane; j < 2 * half; j += 32) dot += gr[j * gs[3]] * yr[j * ys[3]];
    dot = nn_warp_reduce(dot, NnSum{});
    const T m = dot / T(2 * half), r = rinv[w];
    for (index_t j = lane; j < half; j += 32) {
      const T g0 = r * (gr[j * gs[3]] - yr[j * ys[3]] * m);
      const T g1 = r * (gr[(j + half) * gs[3]] - yr[(j + half) * ys[3]] * m);
      const T co = cs[t * css[0] + j * css[1]], si = sn[t * sns[0] + j * sns[1]];
      xr[j * xs[3]] = g0 * co - g1 * si;  // the rotation's transpose
      xr[(j + half) * xs[3]] = g0 * si + g1 * co;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

/// Half-split rotation (see cpu::rope_apply); inverse rotates back. x, y: (B, T, H, Dh).
template <class T>
void rope_apply(NnView<const T, 4> x, NnView<const T, 2> cos, NnView<const T, 2> sin, NnView<T, 4> y, bool inverse) {
  const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3];
  const index_t half = Dh / 2;
  lrt::detail::check_rope(x.shape(), cos.shape(), sin.shape(), y.shape());
  const index_t n = B * Tt * H * half;
  if (n == 0) return;
  constexpr int threads = assign_threads;
  launch(rope_kernel<T>, grid_for(n, threads), threads, 0, "rope_apply kernel launch", B, Tt, H, half, x.data(),
         x.strides(), cos.data(), cos.strides(), sin.data(), sin.strides(), y.data(), y.strides(),
         inverse ? T(-1) : T(1));
}

/// y = rmsnorm(rope(x)) per head vector, rinv (B*T*H) its scales (see cpu::rope_rmsnorm_forward).
template <class T>
void rope_rmsnorm_forward(NnView<const T, 4> x, NnView<const T, 2> cos, NnView<const T, 2> sin, NnView<T, 4> y,
                          NnView<T, 1> rinv, double eps) {
  const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3], half = Dh / 2;
  lrt::detail::check_rope_rmsnorm_forward(x.shape(), cos.shape(), sin.shape(), y.shape(), rinv.shape());
  // The kernel indexes rinv by row (it takes no stride).
  check(rinv.strides()[0] == 1 || rinv.shape()[0] <= 1, "rope_rmsnorm", "rinv must be contiguous");
  const index_t rows = B * Tt * H;
  if (rows == 0 || half == 0) return;
  launch(rope_rmsnorm_forward_kernel<T>, attn_blocks(rows), attn_warps * 32, 0, "rope_rmsnorm_forward kernel launch", B,
         Tt, H, half, x.data(), x.strides(), cos.data(), cos.strides(), sin.data(), sin.strides(), y.data(),
         y.strides(), rinv.data(), static_cast<T>(eps));
}

/// The backward of rope_rmsnorm_forward (gx overwritten).
template <class T>
void rope_rmsnorm_backward(NnView<const T, 4> y, NnView<const T, 1> rinv, NnView<const T, 4> gy, NnView<const T, 2> cos,
                           NnView<const T, 2> sin, NnView<T, 4> gx) {
  const index_t B = y.shape()[0], Tt = y.shape()[1], H = y.shape()[2], Dh = y.shape()[3], half = Dh / 2;
  lrt::detail::check_rope_rmsnorm_backward(y.shape(), rinv.shape(), gy.shape(), cos.shape(), sin.shape(), gx.shape());
  check(rinv.strides()[0] == 1 || rinv.shape()[0] <= 1, "rope_rmsnorm_backward", "rinv must be contiguous");
  const index_t rows = B * Tt * H;
  if (rows == 0 || half == 0) return;
  launch(rope_rmsnorm_backward_kernel<T>, attn_blocks(rows), attn_warps * 32, 0, "rope_rmsnorm_backward kernel launch",
         B, Tt, H, half, y.data(), y.strides(), rinv.data(), gy.data(), gy.strides(), cos.data(), cos.strides(),
         sin.data(), sin.strides(), gx.data(), gx.strides());
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
