// lrt/backend/cuda/nn_common.cuh: what the transformer kernels of backend/cuda/ share: block and
// grid sizes, device maths (float and double overloads), the fixed-order warp and block
// reductions, attention's sizes (AttnDims), and the copy of an index vector to the host.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "../../tensor/tensor.hpp"
#include "check.cuh"
#include "device.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Most threads per row-kernel block (a power of two, a multiple of 32).
inline constexpr int nn_row_threads = 256;
/// Most blocks of a row kernel's grid (rows beyond it are handled grid-stride).
inline constexpr index_t nn_max_blocks = index_t{1} << 20;
/// Warps per attention block (also the one-warp-per-row RoPE + RMSNorm kernels').
inline constexpr int attn_warps = 4;

inline constexpr unsigned nn_full_mask = 0xffffffffu;

/// The views the host functions of the kernels take.
template <class T, int R>
using NnView = TensorView<T, R, cuda::Device>;

// ---- device maths (float and double overloads) ----
__device__ inline float nn_exp(float x) { return ::expf(x); }
__device__ inline double nn_exp(double x) { return ::exp(x); }
__device__ inline float nn_log(float x) { return ::logf(x); }
__device__ inline double nn_log(double x) { return ::log(x); }
__device__ inline float nn_sqrt(float x) { return ::sqrtf(x); }
__device__ inline double nn_sqrt(double x) { return ::sqrt(x); }
__device__ inline float nn_tanh(float x) { return ::tanhf(x); }
__device__ inline double nn_tanh(double x) { return ::tanh(x); }

template <class T>
__device__ inline T nn_neg_inf();
template <>
__device__ inline float nn_neg_inf<float>() {
  return -__int_as_float(0x7f800000);
}
template <>
__device__ inline double nn_neg_inf<double>() {
  return -__longlong_as_double(0x7ff0000000000000LL);
}

/// std::max(a, b): b only if a < b.
template <class T>
__device__ inline T nn_max(T a, T b) {
  return a < b ? b : a;
}

struct NnSum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct NnMax {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return nn_max(a, b);
  }
};

/// Butterfly reduction over the warp; every lane must take part.
template <class T, class Op>
__device__ inline T nn_warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(nn_full_mask, v, o));
  return v;
}

/// N independent warp sums at once (their shuffles interleave). Every lane gets every sum
/// (the butterfly's partners add the same two values, so all lanes agree bit for bit).
template <int N, class T>
__device__ inline void nn_warp_sum_n(T (&v)[N]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int u = 0; u < N; ++u) v[u] += __shfl_xor_sync(nn_full_mask, v[u], o);
  }
}

/// Reduces the block's values in a fixed order; every thread gets the result. blockDim.x must
/// be a multiple of 32 and at most 32 * 32; sh must hold 33 values. Starts and ends with the
/// block in step (call it from all threads; sh may be reused right after).
template <class T, class Op>
__device__ inline T nn_block_reduce(T v, T identity, Op op, T* sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = nn_warp_reduce(v, op);
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    T x = lane < nw ? sh[lane] : identity;
    x = nn_warp_reduce(x, op);
    if (lane == 0) sh[32] = x;
  }
  __syncthreads();
  const T r = sh[32];
  __syncthreads();
  return r;
}

/// Threads of a block folding rows of n values: a power of two in [32, nn_row_threads].
inline int nn_block_threads(index_t n) {
  int t = 32;
  while (t < nn_row_threads && t < n) t *= 2;
  return t;
}

/// Blocks for one-block-per-item kernels (grid-stride beyond nn_max_blocks).
inline unsigned nn_blocks(index_t items) {
  return static_cast<unsigned>(std::max<index_t>(1, std::min(items, nn_max_blocks)));
}

/// Blocks for a one-warp-per-item kernel (attention, RoPE + RMSNorm) over `items` warps.
inline unsigned attn_blocks(index_t items) { return nn_blocks((items + attn_warps - 1) / attn_warps); }

/// Sizes of one validated attention call (a kernel argument).
struct AttnDims {
  index_t B, Tq, Tk, H, Hkv, Dh, group, window;
};

/// First key a query at position p may see: max(0, p - window), without overflow.
__device__ inline index_t attn_first_key(index_t p, index_t window) { return p - (p < window ? p : window); }

/// Copies a device index vector (any positive stride) to host memory and waits for it.
inline void nn_copy_indices_to_host(const TensorView<const index_t, 1, cuda::Device>& v, std::vector<index_t>& out,
                                    const char* op, const char* name) {
  const index_t n = v.shape()[0], s = v.strides()[0];
  out.resize(static_cast<std::size_t>(n));
  if (n == 0) return;
  const cudaStream_t st = cuda::stream();
  if (s == 1 || n == 1) {
    check_cuda(cudaMemcpyAsync(out.data(), v.data(), static_cast<std::size_t>(n) * sizeof(index_t),
                               cudaMemcpyDeviceToHost, st),
               std::string("cudaMemcpyAsync (") + op + ": " + name + " to the host)");
  } else {
    check(s > 1, op, name, " ", v.shape(), " has stride ", s, ": needs a positive stride");
    check_cuda(cudaMemcpy2DAsync(out.data(), sizeof(index_t), v.data(), static_cast<std::size_t>(s) * sizeof(index_t),
                                 sizeof(index_t), static_cast<std::size_t>(n), cudaMemcpyDeviceToHost, st),
               std::string("cudaMemcpy2DAsync (") + op + ": " + name + " to the host)");
  }
  cuda::synchronize();  // also raises a pending device-side check
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
