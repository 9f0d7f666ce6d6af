// lrt/backend/cuda/nn.cuh: NnBackend<cuda::Device>, the transformer's fused kernels on the GPU
// (RMSNorm, RoPE, softmax, softcapped cross-entropy, embedding, causal attention), forward and
// backward, float and double. Semantics are those of backend/cpu/{nn,attention}.hpp; only the
// floating-point summation order differs.
//
// - Row kernels (rmsnorm, softmax, cross-entropy, embedding): one block per row, each thread
//   folds a strided subset of the row in order, then a fixed warp-shuffle + shared-memory tree
//   combines them. Block sizes depend only on the shapes, so results are deterministic.
// - RoPE: one thread per (b, t, h, j < Dh/2) pair, grid-stride.
// - Embedding backward: ids are copied to the host and counting-sorted (rows grouped by id, in
//   increasing row order); one block per distinct id adds its rows into the table's gradient in
//   row order, as the CPU does. No atomics: deterministic.
// - Attention: one warp per (b, h, query); lane l owns head dims l, l + 32, ... (Dh <= 256).
//   The forward walks the query's keys 4 at a time with an online softmax (running max and
//   rescaled accumulator) and saves lse. The backward computes dq (and delta = rowsum(dO * O))
//   with one warp per (b, h, query), and dk, dv with one warp per (b, KV head, key) that walks
//   the query heads of its group and the (contiguous, found by binary search) queries that see
//   the key. Every output element is written by exactly one warp: deterministic, no atomics,
//   exact zeros for keys no query sees. qpos is copied to the host and validated as on the CPU.
// All views may be strided (e.g. KV-cache slices). Outputs must not overlap inputs, except
// that the row kernels and RoPE may run in place (output view == input view).
// Launches (cuda::detail::launch) run on cuda::stream() and are checked; kernels run
// asynchronously.
// Not here: tensor-core tiles, half precision, Dh > 256 in attention.
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "../../tensor/tensor.hpp"
#include "../nn_backend.hpp"
#include "device.cuh"
#include "executor.cuh"
#include "launch.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Most threads per row-kernel block (a power of two, a multiple of 32).
inline constexpr int nn_row_threads = 256;
/// Most blocks of a row kernel's grid (rows beyond it are handled grid-stride).
inline constexpr index_t nn_max_blocks = index_t{1} << 20;
/// Warps per attention block.
inline constexpr int attn_warps = 4;
/// Keys (forward, dq) or queries (dk/dv) one warp handles per step.
inline constexpr int attn_step = 4;
/// Largest head dim of the attention kernels (32 lanes x 8 dims).
inline constexpr index_t attn_max_dh = 256;

inline constexpr unsigned nn_full_mask = 0xffffffffu;

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

// ---------------------------------------------------------------------------------------------
// RMSNorm

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    rmsnorm_forward_kernel(index_t N, index_t C, const T* x, index_t xs0, index_t xs1, T* y,
                           index_t ys0, index_t ys1, T* rinv, index_t rs, T eps) {
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
    rmsnorm_backward_kernel(index_t N, index_t C, const T* y, index_t ys0, index_t ys1,
                            const T* rinv, index_t rs, const T* gy, index_t gs0, index_t gs1,
                            T* gx, index_t xs0, index_t xs1) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* yr = y + i * ys0;
    const T* gr = gy + i * gs0;
    T* xr = gx + i * xs0;
    T dot = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) dot += gr[j * gs1] * yr[j * ys1];
    dot = nn_block_reduce(dot, T(0), NnSum{}, sh);
    const T m = dot / T(C), r = rinv[i * rs];
    for (index_t j = threadIdx.x; j < C; j += blockDim.x)
      xr[j * xs1] = r * (gr[j * gs1] - yr[j * ys1] * m);
  }
}

// ---------------------------------------------------------------------------------------------
// RoPE

template <class T>
__global__ void __launch_bounds__(assign_threads)
    rope_kernel(index_t B, index_t Tt, index_t H, index_t half, const T* x, Strides<4> xs,
                const T* cs, Strides<2> css, const T* sn, Strides<2> sns, T* y, Strides<4> ys,
                T sg) {
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
    rope_rmsnorm_forward_kernel(index_t B, index_t Tt, index_t H, index_t half, const T* x, Strides<4> xs,
                                const T* cs, Strides<2> css, const T* sn, Strides<2> sns, T* y,
                                Strides<4> ys, T* rinv, T eps) {
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
                                 const T* rinv, const T* gy, Strides<4> gs, const T* cs, Strides<2> css,
                                 const T* sn, Strides<2> sns, T* gx, Strides<4> xs) {
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
// Softmax

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    softmax_forward_kernel(index_t N, index_t C, const T* x, index_t xs0, index_t xs1, T* y,
                           index_t ys0, index_t ys1) {
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
    softmax_backward_kernel(index_t N, index_t C, const T* y, index_t ys0, index_t ys1,
                            const T* gy, index_t gs0, index_t gs1, T* gx, index_t xs0,
                            index_t xs1) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* yr = y + i * ys0;
    const T* gr = gy + i * gs0;
    T* xr = gx + i * xs0;
    T dot = 0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) dot += gr[j * gs1] * yr[j * ys1];
    dot = nn_block_reduce(dot, T(0), NnSum{}, sh);
    for (index_t j = threadIdx.x; j < C; j += blockDim.x)
      xr[j * xs1] = yr[j * ys1] * (gr[j * gs1] - dot);
  }
}

// ---------------------------------------------------------------------------------------------
// Softcapped cross-entropy

template <class T>
__device__ inline T nn_softcap(T l, T cap) {
  return cap > T(0) ? cap * nn_tanh(l / cap) : l;
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    xent_forward_kernel(index_t N, index_t V, const T* logits, index_t ls0, index_t ls1,
                        const index_t* targets, index_t ts, T cap, index_t ignore, T* loss,
                        index_t los, T* lse, index_t lss) {
  __shared__ T sh[33];
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* lr = logits + i * ls0;
    T m = nn_neg_inf<T>();
    for (index_t j = threadIdx.x; j < V; j += blockDim.x)
      m = nn_max(m, nn_softcap(lr[j * ls1], cap));
    m = nn_block_reduce(m, nn_neg_inf<T>(), NnMax{}, sh);
    T s = 0;
    for (index_t j = threadIdx.x; j < V; j += blockDim.x)
      s += nn_exp(nn_softcap(lr[j * ls1], cap) - m);
    s = nn_block_reduce(s, T(0), NnSum{}, sh);
    if (threadIdx.x == 0) {
      const T l = m + nn_log(s);
      lse[i * lss] = l;
      const index_t t = targets[i * ts];
      const bool skip = t == ignore || t < 0 || t >= V;  // out of range: validated by the caller
      loss[i * los] = skip ? T(0) : l - nn_softcap(lr[t * ls1], cap);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    xent_backward_kernel(index_t N, index_t V, index_t Vp, const T* logits, index_t ls0,
                         index_t ls1, const index_t* targets, index_t ts, T cap, index_t ignore,
                         const T* lse, index_t lss, const T* g, index_t gs, T* dl, index_t ds0,
                         index_t ds1) {
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const T* lr = logits + i * ls0;
    T* dr = dl + i * ds0;
    const index_t t = targets[i * ts];
    const T gi = g[i * gs], l = lse[i * lss];
    const bool zero = t == ignore || t < 0 || t >= V || gi == T(0);
    for (index_t j = threadIdx.x; j < Vp; j += blockDim.x) {
      T val = T(0);
      if (!zero && j < V) {
        const T x = lr[j * ls1];
        T zj, dz = T(1);
        if (cap > T(0)) {
          const T th = nn_tanh(x / cap);
          zj = cap * th;
          dz = T(1) - th * th;
        } else {
          zj = x;
        }
        const T p = nn_exp(zj - l) - (j == t ? T(1) : T(0));
        val = gi * p * dz;
      }
      dr[j * ds1] = val;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Embedding

template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    embedding_forward_kernel(index_t N, index_t V, index_t C, const index_t* ids, index_t is,
                             const T* table, index_t ts0, index_t ts1, T* out, index_t os0,
                             index_t os1) {
  for (index_t i = blockIdx.x; i < N; i += gridDim.x) {
    const index_t id = ids[i * is];
    const bool ok = id >= 0 && id < V;  // validated by the caller; never read out of range
    const T* tr = table + (ok ? id : 0) * ts0;
    T* orow = out + i * os0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) orow[j * os1] = ok ? tr[j * ts1] : T(0);
  }
}

/// Block u adds the rows perm[start[u] .. start[u+1]) of gout (all with id seg_id[u], in
/// increasing row order) into gtable[seg_id[u], :], one running sum per channel.
template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    embedding_backward_kernel(index_t U, index_t C, const index_t* perm, const index_t* seg_id,
                              const index_t* seg_start, const T* gout, index_t gs0, index_t gs1,
                              T* gt, index_t ts0, index_t ts1) {
  for (index_t u = blockIdx.x; u < U; u += gridDim.x) {
    const index_t id = seg_id[u], k0 = seg_start[u], k1 = seg_start[u + 1];
    T* tr = gt + id * ts0;
    for (index_t j = threadIdx.x; j < C; j += blockDim.x) {
      T acc = tr[j * ts1];
      for (index_t k = k0; k < k1; ++k) acc += gout[perm[k] * gs0 + j * gs1];
      tr[j * ts1] = acc;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Attention

/// Sizes of one validated attention call (a kernel argument).
struct AttnDims {
  index_t B, Tq, Tk, H, Hkv, Dh, group, window;
};

/// First key a query at position p may see: max(0, p - window), without overflow.
__device__ inline index_t attn_first_key(index_t p, index_t window) {
  return p - (p < window ? p : window);
}

/// Loads head vector row[d * s] for the lane's dims d = lane + 32 r (0 beyond Dh).
template <class T, int DPL>
__device__ inline void attn_load(T (&r)[DPL], const T* row, index_t s, int lane, index_t Dh) {
#pragma unroll
  for (int u = 0; u < DPL; ++u) {
    const index_t d = lane + 32 * u;
    r[u] = d < Dh ? row[d * s] : T(0);
  }
}

/// The lane's part of the dot product of a register vector with row[d * s].
template <class T, int DPL>
__device__ inline T attn_partial_dot(const T (&a)[DPL], const T* row, index_t s, int lane,
                                     index_t Dh) {
  T acc = 0;
#pragma unroll
  for (int u = 0; u < DPL; ++u) {
    const index_t d = lane + 32 * u;
    if (d < Dh) acc += a[u] * row[d * s];
  }
  return acc;
}

/// acc += w * row[d * s] on the lane's dims.
template <class T, int DPL>
__device__ inline void attn_axpy(T (&acc)[DPL], T w, const T* row, index_t s, int lane,
                                 index_t Dh) {
#pragma unroll
  for (int u = 0; u < DPL; ++u) {
    const index_t d = lane + 32 * u;
    if (d < Dh) acc[u] += w * row[d * s];
  }
}

/// Stores c * r on the lane's dims.
template <class T, int DPL>
__device__ inline void attn_store(T* row, index_t s, const T (&r)[DPL], T c, int lane, index_t Dh) {
#pragma unroll
  for (int u = 0; u < DPL; ++u) {
    const index_t d = lane + 32 * u;
    if (d < Dh) row[d * s] = c * r[u];
  }
}

/// Forward: warp w handles query i of head h of batch b, w = (b * H + h) * Tq + i.
template <class T, int DPL>
__global__ void __launch_bounds__(attn_warps * 32)
    attention_forward_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks,
                             const T* v, Strides<4> vs, const index_t* qpos, index_t qps, T scale,
                             T* out, Strides<4> os, T* lse, Strides<3> ls) {
  const int lane = threadIdx.x & 31;
  const index_t items = g.B * g.H * g.Tq, wstep = index_t{gridDim.x} * attn_warps;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < items; w += wstep) {
    const index_t i = w % g.Tq, h = (w / g.Tq) % g.H, b = w / (g.Tq * g.H);
    const index_t kh = h / g.group;
    const index_t p = qpos[i * qps], j0 = attn_first_key(p, g.window);
    const T* kb = k + b * ks[0] + kh * ks[2];
    const T* vb = v + b * vs[0] + kh * vs[2];
    T qv[DPL], acc[DPL];
    attn_load(qv, q + b * qs[0] + i * qs[1] + h * qs[2], qs[3], lane, g.Dh);
#pragma unroll
    for (int u = 0; u < DPL; ++u) acc[u] = T(0);
    T m = nn_neg_inf<T>(), l = T(0);
    for (index_t j = j0; j <= p; j += attn_step) {
      T s[attn_step];
#pragma unroll
      for (int u = 0; u < attn_step; ++u)
        s[u] = j + u <= p ? attn_partial_dot(qv, kb + (j + u) * ks[1], ks[3], lane, g.Dh) : T(0);
      nn_warp_sum_n(s);
      T mn = m;
#pragma unroll
      for (int u = 0; u < attn_step; ++u)
        if (j + u <= p) {
          s[u] *= scale;
          mn = nn_max(mn, s[u]);
        }
      const T corr = nn_exp(m - mn);  // 0 on the first step (m = -inf, mn finite)
      l *= corr;
#pragma unroll
      for (int u = 0; u < DPL; ++u) acc[u] *= corr;
#pragma unroll
      for (int u = 0; u < attn_step; ++u)
        if (j + u <= p) {
          const T e = nn_exp(s[u] - mn);
          l += e;
          attn_axpy(acc, e, vb + (j + u) * vs[1], vs[3], lane, g.Dh);
        }
      m = mn;
    }
    attn_store(out + b * os[0] + i * os[1] + h * os[2], os[3], acc, T(1) / l, lane, g.Dh);
    if (lane == 0) lse[b * ls[0] + h * ls[1] + i * ls[2]] = m + nn_log(l);
  }
}

/// Backward, dq: warp w = (b * H + h) * Tq + i. Also writes delta[w] = rowsum(dO * O).
template <class T, int DPL>
__global__ void __launch_bounds__(attn_warps * 32)
    attention_dq_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks,
                        const T* v, Strides<4> vs, const index_t* qpos, index_t qps, T scale,
                        const T* out, Strides<4> os, const T* lse, Strides<3> ls, const T* dout,
                        Strides<4> dos, T* dq, Strides<4> dqs, T* delta) {
  const int lane = threadIdx.x & 31;
  const index_t items = g.B * g.H * g.Tq, wstep = index_t{gridDim.x} * attn_warps;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < items; w += wstep) {
    const index_t i = w % g.Tq, h = (w / g.Tq) % g.H, b = w / (g.Tq * g.H);
    const index_t kh = h / g.group;
    const index_t p = qpos[i * qps], j0 = attn_first_key(p, g.window);
    const T* kb = k + b * ks[0] + kh * ks[2];
    const T* vb = v + b * vs[0] + kh * vs[2];
    T qv[DPL], dov[DPL], acc[DPL];
    attn_load(qv, q + b * qs[0] + i * qs[1] + h * qs[2], qs[3], lane, g.Dh);
    attn_load(dov, dout + b * dos[0] + i * dos[1] + h * dos[2], dos[3], lane, g.Dh);
    T dl[1] = {attn_partial_dot(dov, out + b * os[0] + i * os[1] + h * os[2], os[3], lane, g.Dh)};
    nn_warp_sum_n(dl);
    const T dlt = dl[0];
    if (lane == 0) delta[w] = dlt;
    const T L = lse[b * ls[0] + h * ls[1] + i * ls[2]];
#pragma unroll
    for (int u = 0; u < DPL; ++u) acc[u] = T(0);
    for (index_t j = j0; j <= p; j += attn_step) {
      T sd[2 * attn_step];  // scores, then dP = dO . v_j
#pragma unroll
      for (int u = 0; u < attn_step; ++u) {
        const bool ok = j + u <= p;
        sd[u] = ok ? attn_partial_dot(qv, kb + (j + u) * ks[1], ks[3], lane, g.Dh) : T(0);
        sd[attn_step + u] =
            ok ? attn_partial_dot(dov, vb + (j + u) * vs[1], vs[3], lane, g.Dh) : T(0);
      }
      nn_warp_sum_n(sd);
#pragma unroll
      for (int u = 0; u < attn_step; ++u)
        if (j + u <= p) {
          const T P = nn_exp(scale * sd[u] - L);
          const T dS = P * (sd[attn_step + u] - dlt);
          attn_axpy(acc, dS, kb + (j + u) * ks[1], ks[3], lane, g.Dh);
        }
    }
    attn_store(dq + b * dqs[0] + i * dqs[1] + h * dqs[2], dqs[3], acc, scale, lane, g.Dh);
  }
}

/// Backward, dk and dv: warp w = (b * Hkv + kh) * Tk + j sums over the query heads of group kh
/// and the queries i0 <= i < i1 that see key j (qpos is strictly increasing, so they are
/// contiguous). Writes zeros where no query sees the key.
template <class T, int DPL>
__global__ void __launch_bounds__(attn_warps * 32)
    attention_dkdv_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks,
                          const T* v, Strides<4> vs, const index_t* qpos, index_t qps, T scale,
                          const T* lse, Strides<3> ls, const T* dout, Strides<4> dos,
                          const T* delta, T* dk, Strides<4> dks, T* dv, Strides<4> dvs) {
  const int lane = threadIdx.x & 31;
  const index_t items = g.B * g.Hkv * g.Tk, wstep = index_t{gridDim.x} * attn_warps;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < items; w += wstep) {
    const index_t j = w % g.Tk, kh = (w / g.Tk) % g.Hkv, b = w / (g.Tk * g.Hkv);
    // i0: first query with qpos >= j; i1: first query with qpos - j > window (both monotone).
    index_t lo = 0, hi = g.Tq;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (qpos[mid * qps] < j) lo = mid + 1; else hi = mid;
    }
    const index_t i0 = lo;
    hi = g.Tq;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (qpos[mid * qps] - j <= g.window) lo = mid + 1; else hi = mid;
    }
    const index_t i1 = lo;
    T kv[DPL], vv[DPL], dka[DPL], dva[DPL];
    attn_load(kv, k + b * ks[0] + j * ks[1] + kh * ks[2], ks[3], lane, g.Dh);
    attn_load(vv, v + b * vs[0] + j * vs[1] + kh * vs[2], vs[3], lane, g.Dh);
#pragma unroll
    for (int u = 0; u < DPL; ++u) dka[u] = dva[u] = T(0);
    for (index_t h = kh * g.group; h < (kh + 1) * g.group; ++h) {
      const T* qb = q + b * qs[0] + h * qs[2];
      const T* db = dout + b * dos[0] + h * dos[2];
      const T* lb = lse + b * ls[0] + h * ls[1];
      const T* deltab = delta + (b * g.H + h) * g.Tq;
      for (index_t i = i0; i < i1; i += attn_step) {
        T sd[2 * attn_step];  // scores, then dP = dO_i . v_j
#pragma unroll
        for (int u = 0; u < attn_step; ++u) {
          const bool ok = i + u < i1;
          sd[u] = ok ? attn_partial_dot(kv, qb + (i + u) * qs[1], qs[3], lane, g.Dh) : T(0);
          sd[attn_step + u] =
              ok ? attn_partial_dot(vv, db + (i + u) * dos[1], dos[3], lane, g.Dh) : T(0);
        }
        nn_warp_sum_n(sd);
#pragma unroll
        for (int u = 0; u < attn_step; ++u)
          if (i + u < i1) {
            const T P = nn_exp(scale * sd[u] - lb[(i + u) * ls[2]]);
            const T dS = P * (sd[attn_step + u] - deltab[i + u]);
            attn_axpy(dva, P, db + (i + u) * dos[1], dos[3], lane, g.Dh);
            attn_axpy(dka, dS, qb + (i + u) * qs[1], qs[3], lane, g.Dh);
          }
      }
    }
    attn_store(dk + b * dks[0] + j * dks[1] + kh * dks[2], dks[3], dka, scale, lane, g.Dh);
    attn_store(dv + b * dvs[0] + j * dvs[1] + kh * dvs[2], dvs[3], dva, T(1), lane, g.Dh);
  }
}

/// Blocks for an attention kernel over `items` warps.
inline unsigned attn_blocks(index_t items) {
  return nn_blocks((items + attn_warps - 1) / attn_warps);
}

/// Calls f(std::integral_constant<int, DPL>{}) with the dims per lane for head dim Dh.
template <class F>
void with_dims_per_lane(index_t Dh, F&& f) {
  if (Dh <= 32) {
    f(std::integral_constant<int, 1>{});
  } else if (Dh <= 64) {
    f(std::integral_constant<int, 2>{});
  } else if (Dh <= 128) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

// ---------------------------------------------------------------------------------------------
// Host helpers

/// Copies a device index vector (any positive stride) to host memory and waits for it.
inline void nn_copy_indices_to_host(const TensorView<const index_t, 1, cuda::Device>& v,
                                 std::vector<index_t>& out, const char* op, const char* name) {
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
    check_cuda(cudaMemcpy2DAsync(out.data(), sizeof(index_t), v.data(),
                                 static_cast<std::size_t>(s) * sizeof(index_t), sizeof(index_t),
                                 static_cast<std::size_t>(n), cudaMemcpyDeviceToHost, st),
               std::string("cudaMemcpy2DAsync (") + op + ": " + name + " to the host)");
  }
  LRT_CUDA_CHECK(cudaStreamSynchronize(st));
}

/// Checks q, k, v, qpos and window (the CPU's checks and messages). The positions are copied to
/// the host and checked there (a wait for the GPU) unless the caller has checked them already
/// (qpos_checked: ad::attention with an IndexList, the decoder).
template <class T>
AttnDims check_attention_args(const char* op, const TensorView<const T, 4, cuda::Device>& q,
                              const TensorView<const T, 4, cuda::Device>& k,
                              const TensorView<const T, 4, cuda::Device>& v,
                              const TensorView<const index_t, 1, cuda::Device>& qpos,
                              index_t window, bool qpos_checked) {
  const Shape<4>& qs = q.shape();
  const Shape<4>& ks = k.shape();
  lrt::detail::check_attention_shapes(op, qs, ks, v.shape(), qpos.shape(), window);
  check(qs[3] <= attn_max_dh, op, "head dim ", qs[3], " of q ", qs,
        " is larger than the CUDA kernels' limit of ", attn_max_dh);
  const AttnDims d{qs[0], qs[1], ks[1], qs[2], ks[2], qs[3], qs[2] / ks[2], window};
  if (!qpos_checked) {
    std::vector<index_t> pos;
    nn_copy_indices_to_host(qpos, pos, op, "qpos");
    lrt::detail::check_query_positions(op, pos, ks);
  }
  return d;
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt

#include "attention_gemm.cuh"  // needs the kernels' helpers above

namespace lrt {
inline namespace v0 {

template <>
struct NnBackend<cuda::Device> {
  template <class T>
  using V1 = TensorView<T, 1, cuda::Device>;
  template <class T>
  using V2 = TensorView<T, 2, cuda::Device>;
  template <class T>
  using V3 = TensorView<T, 3, cuda::Device>;
  template <class T>
  using V4 = TensorView<T, 4, cuda::Device>;

 private:
  template <class T>
  static constexpr void require_real() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "lrt's CUDA transformer kernels take float or double");
  }

 public:
  /// y = x / sqrt(mean(x^2) + eps) per row; rinv[i] = the row's 1/sqrt(...).
  template <class T>
  static void rmsnorm_forward(V2<const T> x, V2<T> y, V1<T> rinv, double eps) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = x.shape()[0], C = x.shape()[1];
    check(y.shape() == x.shape() && rinv.shape()[0] == N, "rmsnorm", "shapes x ", x.shape(),
          ", y ", y.shape(), ", rinv ", rinv.shape(), " do not match");
    if (N == 0) return;
    cd::launch(cd::rmsnorm_forward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(C), 0,
               "rmsnorm_forward kernel launch", N, C, x.data(), x.strides()[0], x.strides()[1],
               y.data(), y.strides()[0], y.strides()[1], rinv.data(), rinv.strides()[0],
               static_cast<T>(eps));
  }

  /// gx = rinv * (gy - y * mean(gy * y)) per row (gx overwritten).
  template <class T>
  static void rmsnorm_backward(V2<const T> y, V1<const T> rinv, V2<const T> gy, V2<T> gx) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = y.shape()[0], C = y.shape()[1];
    check(gy.shape() == y.shape() && gx.shape() == y.shape() && rinv.shape()[0] == N,
          "rmsnorm_backward", "shapes y ", y.shape(), ", gy ", gy.shape(), ", gx ", gx.shape(),
          ", rinv ", rinv.shape(), " do not match");
    if (N == 0) return;
    cd::launch(cd::rmsnorm_backward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(C), 0,
               "rmsnorm_backward kernel launch", N, C, y.data(), y.strides()[0], y.strides()[1],
               rinv.data(), rinv.strides()[0], gy.data(), gy.strides()[0], gy.strides()[1],
               gx.data(), gx.strides()[0], gx.strides()[1]);
  }

  /// Half-split rotation (see cpu::rope_apply); inverse rotates back. x, y: (B, T, H, Dh).
  template <class T>
  static void rope_apply(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, bool inverse) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3];
    const index_t half = Dh / 2;
    check(Dh % 2 == 0 && cos.shape() == Shape<2>{Tt, half} && sin.shape() == cos.shape() &&
              y.shape() == x.shape(),
          "rope", "x ", x.shape(), " needs tables of shape ", Shape<2>{Tt, half}, ", got ",
          cos.shape(), " and ", sin.shape(), " (y ", y.shape(), ")");
    const index_t n = B * Tt * H * half;
    if (n == 0) return;
    constexpr int threads = cd::assign_threads;
    cd::launch(cd::rope_kernel<T>, cd::grid_for(n, threads), threads, 0, "rope_apply kernel launch",
               B, Tt, H, half, x.data(), x.strides(), cos.data(), cos.strides(), sin.data(),
               sin.strides(), y.data(), y.strides(), inverse ? T(-1) : T(1));
  }

  /// y = rmsnorm(rope(x)) per head vector, rinv (B*T*H) its scales (see cpu::rope_rmsnorm_forward).
  template <class T>
  static void rope_rmsnorm_forward(V4<const T> x, V2<const T> cos, V2<const T> sin, V4<T> y, V1<T> rinv,
                                   double eps) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t B = x.shape()[0], Tt = x.shape()[1], H = x.shape()[2], Dh = x.shape()[3], half = Dh / 2;
    check(Dh % 2 == 0 && cos.shape() == Shape<2>{Tt, half} && sin.shape() == cos.shape() &&
              y.shape() == x.shape() && rinv.shape()[0] == B * Tt * H,
          "rope_rmsnorm", "x ", x.shape(), " needs tables of shape ", Shape<2>{Tt, half},
          ", y of its shape and rinv (", B * Tt * H, "), got ", cos.shape(), ", ", sin.shape(), ", ",
          y.shape(), ", ", rinv.shape());
    check(rinv.strides()[0] == 1 || rinv.shape()[0] <= 1, "rope_rmsnorm", "rinv must be contiguous");
    const index_t rows = B * Tt * H;
    if (rows == 0 || half == 0) return;
    cd::launch(cd::rope_rmsnorm_forward_kernel<T>, cd::attn_blocks(rows), cd::attn_warps * 32, 0,
               "rope_rmsnorm_forward kernel launch", B, Tt, H, half, x.data(), x.strides(), cos.data(),
               cos.strides(), sin.data(), sin.strides(), y.data(), y.strides(), rinv.data(),
               static_cast<T>(eps));
  }

  /// The backward of rope_rmsnorm_forward (gx overwritten).
  template <class T>
  static void rope_rmsnorm_backward(V4<const T> y, V1<const T> rinv, V4<const T> gy, V2<const T> cos,
                                    V2<const T> sin, V4<T> gx) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t B = y.shape()[0], Tt = y.shape()[1], H = y.shape()[2], Dh = y.shape()[3], half = Dh / 2;
    check(Dh % 2 == 0 && cos.shape() == Shape<2>{Tt, half} && sin.shape() == cos.shape() &&
              gy.shape() == y.shape() && gx.shape() == y.shape() && rinv.shape()[0] == B * Tt * H,
          "rope_rmsnorm_backward", "shapes y ", y.shape(), ", gy ", gy.shape(), ", gx ", gx.shape(),
          ", rinv ", rinv.shape(), ", tables ", cos.shape(), " and ", sin.shape(), " do not match");
    check(rinv.strides()[0] == 1 || rinv.shape()[0] <= 1, "rope_rmsnorm_backward", "rinv must be contiguous");
    const index_t rows = B * Tt * H;
    if (rows == 0 || half == 0) return;
    cd::launch(cd::rope_rmsnorm_backward_kernel<T>, cd::attn_blocks(rows), cd::attn_warps * 32, 0,
               "rope_rmsnorm_backward kernel launch", B, Tt, H, half, y.data(), y.strides(), rinv.data(),
               gy.data(), gy.strides(), cos.data(), cos.strides(), sin.data(), sin.strides(), gx.data(),
               gx.strides());
  }

  /// Row-wise softmax. x, y: (N, C).
  template <class T>
  static void softmax_forward(V2<const T> x, V2<T> y) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = x.shape()[0], C = x.shape()[1];
    check(y.shape() == x.shape(), "softmax", "shapes ", x.shape(), " and ", y.shape(), " differ");
    if (N == 0) return;
    cd::launch(cd::softmax_forward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(C), 0,
               "softmax_forward kernel launch", N, C, x.data(), x.strides()[0], x.strides()[1],
               y.data(), y.strides()[0], y.strides()[1]);
  }

  /// gx = y * (gy - sum(gy * y)) per row (gx overwritten).
  template <class T>
  static void softmax_backward(V2<const T> y, V2<const T> gy, V2<T> gx) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = y.shape()[0], C = y.shape()[1];
    check(gy.shape() == y.shape() && gx.shape() == y.shape(), "softmax_backward", "shapes y ",
          y.shape(), ", gy ", gy.shape(), ", gx ", gx.shape(), " do not match");
    if (N == 0) return;
    cd::launch(cd::softmax_backward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(C), 0,
               "softmax_backward kernel launch", N, C, y.data(), y.strides()[0], y.strides()[1],
               gy.data(), gy.strides()[0], gy.strides()[1], gx.data(), gx.strides()[0],
               gx.strides()[1]);
  }

  /// Softcap + log-softmax + cross-entropy over the first V columns (see cpu::
  /// softcap_xent_forward). Targets are validated by the caller; one out of [0, V) that is not
  /// ignore_index is treated as ignored here (never read out of range).
  template <class T>
  static void softcap_xent_forward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                   index_t ignore_index, V1<T> loss, V1<T> lse) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = logits.shape()[0];
    check(V >= 1 && V <= logits.shape()[1], "cross_entropy", "vocab ", V,
          " out of range for logits ", logits.shape());
    check(targets.shape()[0] == N && loss.shape()[0] == N && lse.shape()[0] == N, "cross_entropy",
          "logits ", logits.shape(), " and targets ", targets.shape(), " disagree on rows (loss ",
          loss.shape(), ", lse ", lse.shape(), ")");
    if (N == 0) return;
    cd::launch(cd::xent_forward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(V), 0,
               "softcap_xent_forward kernel launch", N, V, logits.data(), logits.strides()[0],
               logits.strides()[1], targets.data(), targets.strides()[0], cap, ignore_index,
               loss.data(), loss.strides()[0], lse.data(), lse.strides()[0]);
  }

  /// dlogits = g * (softmax(z) - onehot(t)) * dz/dl on the first V columns, 0 elsewhere and on
  /// ignored rows (dlogits overwritten).
  template <class T>
  static void softcap_xent_backward(V2<const T> logits, V1<const index_t> targets, index_t V, T cap,
                                    index_t ignore_index, V1<const T> lse, V1<const T> g,
                                    V2<T> dlogits) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = logits.shape()[0], Vp = logits.shape()[1];
    check(dlogits.shape() == logits.shape(), "cross_entropy_backward", "dlogits ",
          dlogits.shape(), " vs logits ", logits.shape());
    check(V >= 1 && V <= Vp, "cross_entropy_backward", "vocab ", V, " out of range for logits ",
          logits.shape());
    check(targets.shape()[0] == N && lse.shape()[0] == N && g.shape()[0] == N,
          "cross_entropy_backward", "logits ", logits.shape(), ", targets ", targets.shape(),
          ", lse ", lse.shape(), " and g ", g.shape(), " disagree on rows");
    if (N == 0) return;
    cd::launch(cd::xent_backward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(Vp), 0,
               "softcap_xent_backward kernel launch", N, V, Vp, logits.data(), logits.strides()[0],
               logits.strides()[1], targets.data(), targets.strides()[0], cap, ignore_index,
               lse.data(), lse.strides()[0], g.data(), g.strides()[0], dlogits.data(),
               dlogits.strides()[0], dlogits.strides()[1]);
  }

  /// out[i, :] = table[ids[i], :] (ids validated by the caller; an id out of range gives a
  /// zero row here, never an out-of-bounds read).
  template <class T>
  static void embedding_forward(V1<const index_t> ids, V2<const T> table, V2<T> out) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = ids.shape()[0], V = table.shape()[0], C = table.shape()[1];
    check(out.shape() == Shape<2>{N, C}, "embedding", "output ", out.shape(), " for ", N,
          " ids and table ", table.shape());
    if (N == 0 || C == 0) return;
    cd::launch(cd::embedding_forward_kernel<T>, cd::nn_blocks(N), cd::nn_block_threads(C), 0,
               "embedding_forward kernel launch", N, V, C, ids.data(), ids.strides()[0],
               table.data(), table.strides()[0], table.strides()[1], out.data(), out.strides()[0],
               out.strides()[1]);
  }

  /// What embedding_backward needs from the ids, made once per id tensor (the model's token
  /// embedding and its value embeddings share it): the rows sorted by id on the device, laid out
  /// as [perm (N) | seg_id (U) | seg_start (U + 1)] for U distinct ids.
  struct EmbeddingPlan {
    Tensor<index_t, 1, cuda::Device> layout;
    index_t n = 0, unique = 0, bound = 0;  // ids checked to lie in [0, bound)
  };

  /// Copies ids to the host (a wait for the GPU), checks 0 <= id < V (as the CPU kernels do) and,
  /// when sort is set, counting-sorts the rows by id and uploads the layout (a second wait).
  static EmbeddingPlan embedding_plan(V1<const index_t> ids, index_t V, bool sort = true) {
    return embedding_plan_for(ids, V, sort, "embedding", "a table of " + std::to_string(V) + " rows");
  }
  /// The same; errors name op and describe the table as `table`.
  static EmbeddingPlan embedding_plan_for(V1<const index_t> ids, index_t V, bool sort, const char* op,
                                          const std::string& table) {
    namespace cd = cuda::detail;
    const index_t N = ids.shape()[0];
    EmbeddingPlan plan;
    plan.n = N, plan.bound = V;
    if (N == 0) return plan;
    std::vector<index_t> h;
    cd::nn_copy_indices_to_host(ids, h, op, "ids");
    for (index_t i = 0; i < N; ++i)
      check(h[i] >= 0 && h[i] < V, op, "id ", h[i], " at position ", i, " out of range for ", table);
    if (!sort) return plan;
    std::vector<index_t> start(static_cast<std::size_t>(V) + 1, 0);
    for (index_t i = 0; i < N; ++i) ++start[static_cast<std::size_t>(h[i]) + 1];
    index_t U = 0;
    for (index_t id = 0; id < V; ++id) {
      U += start[id + 1] > 0;
      start[id + 1] += start[id];
    }
    std::vector<index_t> host(static_cast<std::size_t>(N + 2 * U + 1));
    {
      std::vector<index_t> next(start.begin(), start.end() - 1);
      for (index_t i = 0; i < N; ++i) host[next[h[i]]++] = i;  // stable: rows in order
      index_t u = 0;
      for (index_t id = 0; id < V; ++id)
        if (start[id + 1] > start[id]) {
          host[N + u] = id;
          host[N + U + u] = start[id];
          ++u;
        }
      host[N + 2 * U] = N;
    }
    plan.layout = Tensor<index_t, 1, cuda::Device>(Shape<1>{N + 2 * U + 1}, uninitialized);
    DeviceTraits<cuda::Device>::copy_from_host(plan.layout.data(), host.data(),
                                               host.size() * sizeof(index_t));  // synchronises
    plan.unique = U;
    return plan;
  }

  /// A plan for n ids the caller has checked against V itself (nothing copied, nothing sorted:
  /// a backward with it sorts then).
  static EmbeddingPlan embedding_plan_checked(index_t n, index_t V) {
    EmbeddingPlan plan;
    plan.n = n, plan.bound = V;
    return plan;
  }

  /// gtable[ids[i], :] += gout[i, :] from a plan of the ids (made with sort): one block per
  /// distinct id, rows accumulated in order (deterministic, no atomics, no wait for the GPU).
  template <class T>
  static void embedding_backward(const EmbeddingPlan& plan, V1<const index_t> /*ids: in the plan*/,
                                 V2<const T> gout, V2<T> gtable) {
    require_real<T>();
    namespace cd = cuda::detail;
    const index_t N = plan.n, V = gtable.shape()[0], C = gtable.shape()[1];
    check(gout.shape() == Shape<2>{N, C}, "embedding_backward", "gradient ", gout.shape(),
          " for ", N, " ids and table ", gtable.shape());
    check(plan.bound <= V, "embedding_backward", "ids were checked against ", plan.bound,
          " rows, the table ", gtable.shape(), " has fewer");
    if (N == 0 || C == 0) return;
    check(plan.layout.numel() == N + 2 * plan.unique + 1, "embedding_backward",
          "the ids' plan was made without sorting");
    const index_t U = plan.unique;
    const index_t* perm = plan.layout.data();
    cd::launch(cd::embedding_backward_kernel<T>, cd::nn_blocks(U), cd::nn_block_threads(C), 0,
               "embedding_backward kernel launch", U, C, perm, perm + N, perm + N + U, gout.data(),
               gout.strides()[0], gout.strides()[1], gtable.data(), gtable.strides()[0],
               gtable.strides()[1]);
  }

  /// gtable[ids[i], :] += gout[i, :], repeated ids accumulated in row order (deterministic:
  /// the ids are sorted on the host, one block per distinct id, no atomics).
  template <class T>
  static void embedding_backward(V1<const index_t> ids, V2<const T> gout, V2<T> gtable) {
    require_real<T>();
    const index_t N = ids.shape()[0], C = gtable.shape()[1];
    check(gout.shape() == Shape<2>{N, C}, "embedding_backward", "gradient ", gout.shape(),
          " for ", N, " ids and table ", gtable.shape());
    if (N == 0 || C == 0) return;
    embedding_backward<T>(embedding_plan_for(ids, gtable.shape()[0], true, "embedding_backward",
                                             "table " + lrt::to_string(gtable.shape())),
                          ids, gout, gtable);
    // the plan's layout goes back to the caching allocator: later work runs after the kernel.
  }

  /// Causal (windowed, GQA, subset-query) attention forward; see cpu::attention_forward.
  /// q: (B, Tq, H, Dh)  k, v: (B, Tk, Hkv, Dh)  qpos: (Tq)  -> out: (B, Tq, H, Dh), lse: (B, H, Tq)
  template <class T>
  static void attention_forward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos,
                                index_t window, T scale, V4<T> out, V3<T> lse, bool qpos_checked = false) {
    require_real<T>();
    namespace cd = cuda::detail;
    const char* op = "attention";
    const cd::AttnDims d = cd::check_attention_args<T>(op, q, k, v, qpos, window, qpos_checked);
    check(out.shape() == q.shape(), op, "out ", out.shape(), " must have the shape of q ",
          q.shape());
    const Shape<3> lse_want{d.B, d.H, d.Tq};
    check(lse.shape() == lse_want, op, "lse ", lse.shape(), " must be (B, H, Tq) = ", lse_want);
    const index_t items = d.B * d.H * d.Tq;
    if (items == 0) return;
    if (cd::attention_uses_gemm<T>(d, {&q.strides(), &k.strides(), &v.strides(), &out.strides()}, 1)) {
      cd::attention_forward_gemm<T>(d, q.data(), q.strides(), k.data(), k.strides(), v.data(), v.strides(),
                                    qpos.data(), qpos.strides()[0], scale, out.data(), out.strides(), lse.data(),
                                    lse.strides());
      return;
    }
    cd::with_dims_per_lane(d.Dh, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      cd::launch(cd::attention_forward_kernel<T, DPL>, cd::attn_blocks(items), cd::attn_warps * 32,
                 0, "attention_forward kernel launch", d, q.data(), q.strides(), k.data(),
                 k.strides(), v.data(), v.strides(), qpos.data(), qpos.strides()[0], scale,
                 out.data(), out.strides(), lse.data(), lse.strides());
    });
  }

  /// Backward of attention_forward: dq, dk, dv overwritten (exact zeros for keys no query sees).
  template <class T>
  static void attention_backward(V4<const T> q, V4<const T> k, V4<const T> v, V1<const index_t> qpos,
                                 index_t window, T scale, V4<const T> out, V3<const T> lse,
                                 V4<const T> dout, V4<T> dq, V4<T> dk, V4<T> dv,
                                 bool qpos_checked = false) {
    require_real<T>();
    namespace cd = cuda::detail;
    const char* op = "attention_backward";
    const cd::AttnDims d = cd::check_attention_args<T>(op, q, k, v, qpos, window, qpos_checked);
    auto same = [&](const char* name, const Shape<4>& got, const char* like, const Shape<4>& want) {
      check(got == want, op, name, " ", got, " must have the shape of ", like, " ", want);
    };
    same("out", out.shape(), "q", q.shape());
    const Shape<3> lse_want{d.B, d.H, d.Tq};
    check(lse.shape() == lse_want, op, "lse ", lse.shape(), " must be (B, H, Tq) = ", lse_want);
    same("dout", dout.shape(), "q", q.shape());
    same("dq", dq.shape(), "q", q.shape());
    same("dk", dk.shape(), "k", k.shape());
    same("dv", dv.shape(), "v", v.shape());

    const index_t qitems = d.B * d.H * d.Tq, kitems = d.B * d.Hkv * d.Tk;
    if (qitems > 0 && cd::attention_uses_gemm<T>(d, {&q.strides(), &k.strides(), &v.strides(), &out.strides(),
                                                     &dout.strides(), &dq.strides(), &dk.strides(), &dv.strides()},
                                                 2)) {
      cd::attention_backward_gemm<T>(d, q.data(), q.strides(), k.data(), k.strides(), v.data(), v.strides(),
                                     qpos.data(), qpos.strides()[0], scale, out.data(), out.strides(), lse.data(),
                                     lse.strides(), dout.data(), dout.strides(), dq.data(), dq.strides(), dk.data(),
                                     dk.strides(), dv.data(), dv.strides());
      return;
    }
    Tensor<T, 1, cuda::Device> delta(Shape<1>{qitems}, uninitialized);  // rowsum(dO * O)
    cd::with_dims_per_lane(d.Dh, [&](auto dpl) {
      constexpr int DPL = decltype(dpl)::value;
      if (qitems > 0) {
        cd::launch(cd::attention_dq_kernel<T, DPL>, cd::attn_blocks(qitems), cd::attn_warps * 32, 0,
                   "attention_backward (dq) kernel launch", d, q.data(), q.strides(), k.data(),
                   k.strides(), v.data(), v.strides(), qpos.data(), qpos.strides()[0], scale,
                   out.data(), out.strides(), lse.data(), lse.strides(), dout.data(),
                   dout.strides(), dq.data(), dq.strides(), delta.data());
      }
      if (kitems > 0) {
        cd::launch(cd::attention_dkdv_kernel<T, DPL>, cd::attn_blocks(kitems), cd::attn_warps * 32,
                   0, "attention_backward (dk, dv) kernel launch", d, q.data(), q.strides(),
                   k.data(), k.strides(), v.data(), v.strides(), qpos.data(), qpos.strides()[0],
                   scale, lse.data(), lse.strides(), dout.data(), dout.strides(), delta.data(),
                   dk.data(), dk.strides(), dv.data(), dv.strides());
      }
    });
    // delta goes back to the caching allocator: later work on the one stream runs after these.
  }
};

}  // namespace v0
}  // namespace lrt
