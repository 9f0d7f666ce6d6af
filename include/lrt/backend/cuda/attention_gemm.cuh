// lrt/backend/cuda/attention_gemm.cuh: causal attention (GQA, window, subset queries) as cuBLAS
// GEMMs around a masked-softmax kernel, for the GPU's tensor cores. Per batch row b, with the
// scores of all heads in one (H, Tq, Tk) buffer:
//   S_h = scale * Q_h K_g^T            strided-batched over the KV heads g, once per group member
//   P_h = softmax over keys j0..p      (0 elsewhere; lse saved), in place in S
//   O_h = P_h V_g
// Backward (P recomputed from the saved lse):
//   dP_h = dO_h V_g^T, dS_h = P_h * (dP_h - rowsum(dO_h * O_h)),
//   dQ_h = scale * dS_h K_g, dK_g = scale * sum_h dS_h^T Q_h, dV_g = sum_h P_h^T dO_h.
// The GEMMs go through GemmBackend<cuda::Device>, so they run in the float GEMM precision of the
// process (gemm.cuh): with bf16 or tf32 matmuls the attention's products use the tensor cores too.
// Memory: one (H, Tq, Tk) buffer forward, two backward (per batch row, reused across rows).
//
// Which kernel runs (lrt::cuda::set_attention_kernel): `warp` is attention.cuh's one-warp-per-query
// kernel (exact FP32, O(T) memory); `gemm` this file; `automatic` (default) takes `gemm` for
// float when matmuls run in bf16 or tf32, there are at least 16 queries (not for decoding) and the
// buffers fit in 1 GiB, else `warp`. Both need the
// head dim contiguous (stride 1), which lrt's tensors have; otherwise `warp` runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <type_traits>

#include "../../tensor/tensor.hpp"
#include "executor.cuh"
#include "gemm.cuh"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda {

/// The implementation of attention on the GPU (see the top of attention_gemm.cuh).
enum class AttentionKernel { automatic, warp, gemm };

namespace detail {
inline std::atomic<AttentionKernel>& attention_kernel_slot() {
  static std::atomic<AttentionKernel> k{AttentionKernel::automatic};
  return k;
}
}  // namespace detail

/// Chooses the attention implementation for the whole process.
inline void set_attention_kernel(AttentionKernel k) { detail::attention_kernel_slot().store(k); }
inline AttentionKernel attention_kernel() { return detail::attention_kernel_slot().load(); }

/// Sets the attention implementation for its lifetime, then restores the previous one.
using AttentionKernelScope = detail::SettingScope<AttentionKernel, &detail::attention_kernel_slot>;

namespace detail {

/// Largest score buffer (bytes, per batch row) the automatic choice accepts.
inline constexpr std::size_t attn_gemm_max_bytes = std::size_t{1} << 30;

/// Rows r = h * Tq + i of S (one batch row): the masked softmax of query i (position p = qpos[i])
/// over keys j0 = max(0, p - window) .. p, 0 elsewhere. from_lse: P = exp(S - lse) with the
/// forward's lse (the backward's recomputation); else lse[h, i] = max + log(sum) is written.
template <class T>
__global__ void __launch_bounds__(nn_row_threads)
    attn_gemm_softmax_kernel(index_t rows, index_t Tq, index_t Tk, T* S, const index_t* qpos, index_t qps,
                             index_t window, T* lse, index_t lh, index_t li, bool from_lse) {
  __shared__ T sh[33];
  for (index_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const index_t h = r / Tq, i = r % Tq;
    const index_t p = qpos[i * qps], j0 = attn_first_key(p, window);
    T* sr = S + r * Tk;
    T m, inv = T(1);
    if (from_lse) {
      m = lse[h * lh + i * li];
    } else {
      m = nn_neg_inf<T>();
      for (index_t j = j0 + threadIdx.x; j <= p; j += blockDim.x) m = nn_max(m, sr[j]);
      m = nn_block_reduce(m, nn_neg_inf<T>(), NnMax{}, sh);
      T s = 0;
      for (index_t j = j0 + threadIdx.x; j <= p; j += blockDim.x) {
        const T e = nn_exp(sr[j] - m);
        sr[j] = e;
        s += e;
      }
      s = nn_block_reduce(s, T(0), NnSum{}, sh);  // ends with a barrier: every e is written
      inv = T(1) / s;
      if (threadIdx.x == 0) lse[h * lh + i * li] = m + nn_log(s);
    }
    for (index_t j = threadIdx.x; j < Tk; j += blockDim.x) {
      const bool seen = j >= j0 && j <= p;
      sr[j] = !seen ? T(0) : from_lse ? nn_exp(sr[j] - m) : sr[j] * inv;
    }
    __syncthreads();  // the next row reuses sh
  }
}

/// delta[r] = sum_d dO[b, i, h, d] * O[b, i, h, d] for rows r = h * Tq + i of batch row b.
template <class T>
__global__ void __launch_bounds__(attn_warps * 32)
    attn_gemm_delta_kernel(index_t rows, index_t Tq, index_t Dh, const T* o, Strides<4> os, const T* dout,
                           Strides<4> ds, T* delta) {
  const int lane = threadIdx.x & 31;
  const index_t wstep = index_t{gridDim.x} * attn_warps;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < rows; w += wstep) {
    const index_t h = w / Tq, i = w % Tq;
    const T* orow = o + i * os[1] + h * os[2];
    const T* drow = dout + i * ds[1] + h * ds[2];
    T acc = 0;
    for (index_t d = lane; d < Dh; d += 32) acc += orow[d * os[3]] * drow[d * ds[3]];
    acc = nn_warp_reduce(acc, NnSum{});
    if (lane == 0) delta[w] = acc;
  }
}

/// dP[x] = P[x] * (dP[x] - delta[x / Tk]) over n = rows * Tk elements (dS, in place).
template <class T>
__global__ void __launch_bounds__(assign_threads)
    attn_gemm_dsoftmax_kernel(index_t n, index_t Tk, const T* P, T* dP, const T* delta) {
  const index_t step = index_t{blockDim.x} * gridDim.x;
  for (index_t x = index_t{blockIdx.x} * blockDim.x + threadIdx.x; x < n; x += step)
    dP[x] = P[x] * (dP[x] - delta[x / Tk]);
}

/// Whether attention with these views runs as GEMMs (see the top of this file).
template <class T>
bool attention_uses_gemm(const AttnDims& d, std::initializer_list<const Strides<4>*> strides, int buffers) {
  const AttentionKernel k = attention_kernel();
  if (k == AttentionKernel::warp) return false;
  for (const Strides<4>* s : strides)
    if ((*s)[3] != 1) return false;
  const std::size_t bytes = static_cast<std::size_t>(d.H) * static_cast<std::size_t>(d.Tq) *
                            static_cast<std::size_t>(d.Tk) * sizeof(T) * static_cast<std::size_t>(buffers);
  if (k == AttentionKernel::gemm) return true;
  return std::is_same_v<T, float> && matmul_precision() != MatmulPrecision::fp32 && d.Tq >= 16 &&
         bytes <= attn_gemm_max_bytes;
}

/// S[h] = scale * Q[b, :, h, :] K[b, :, h / G, :]^T for every head h of batch row b.
template <class T>
void attn_gemm_scores(const AttnDims& d, index_t b, const T* q, const Strides<4>& qs, const T* k, const Strides<4>& ks,
                      T scale, T* S) {
  const index_t G = d.group, TT = d.Tq * d.Tk;
  for (index_t j = 0; j < G; ++j)  // heads g * G + j, batched over the KV heads g
    GemmBackend<cuda::Device>::run<T>(d.Hkv, d.Tq, d.Tk, d.Dh, scale,
                                      MatRef<T>{q + b * qs[0] + j * qs[2], qs[1], false}, G * qs[2],
                                      MatRef<T>{k + b * ks[0], ks[1], true}, ks[2], T(0), S + j * TT, d.Tk, G * TT);
}

/// The masked softmax of one batch row's scores (in place); see attn_gemm_softmax_kernel.
template <class T>
void attn_gemm_softmax(const AttnDims& d, T* S, const index_t* qpos, index_t qps, T* lse_b, const Strides<3>& ls,
                       bool from_lse) {
  const index_t rows = d.H * d.Tq;
  launch(attn_gemm_softmax_kernel<T>, nn_blocks(rows), nn_block_threads(d.Tk), 0,
         "attention (gemm) softmax kernel launch", rows, d.Tq, d.Tk, S, qpos, qps, d.window, lse_b, ls[1], ls[2],
         from_lse);
}

/// Forward: out (B, Tq, H, Dh) and lse (B, H, Tq).
template <class T>
void attention_forward_gemm(const AttnDims& d, const T* q, const Strides<4>& qs, const T* k, const Strides<4>& ks,
                            const T* v, const Strides<4>& vs, const index_t* qpos, index_t qps, T scale, T* out,
                            const Strides<4>& os, T* lse, const Strides<3>& ls) {
  const index_t G = d.group, TT = d.Tq * d.Tk;
  Tensor<T, 1, cuda::Device> S(Shape<1>{d.H * TT}, uninitialized);
  for (index_t b = 0; b < d.B; ++b) {
    attn_gemm_scores(d, b, q, qs, k, ks, scale, S.data());
    attn_gemm_softmax(d, S.data(), qpos, qps, lse + b * ls[0], ls, false);
    for (index_t j = 0; j < G; ++j)  // O[b, :, h, :] = P_h V[b, :, g, :]
      GemmBackend<cuda::Device>::run<T>(d.Hkv, d.Tq, d.Dh, d.Tk, T(1), MatRef<T>{S.data() + j * TT, d.Tk, false},
                                        G * TT, MatRef<T>{v + b * vs[0], vs[1], false}, vs[2], T(0),
                                        out + b * os[0] + j * os[2], os[1], G * os[2]);
  }
  // S goes back to the caching allocator: later work on the one stream runs after these.
}

/// Backward: dq, dk, dv overwritten.
template <class T>
void attention_backward_gemm(const AttnDims& d, const T* q, const Strides<4>& qs, const T* k, const Strides<4>& ks,
                             const T* v, const Strides<4>& vs, const index_t* qpos, index_t qps, T scale, const T* out,
                             const Strides<4>& os, const T* lse, const Strides<3>& ls, const T* dout,
                             const Strides<4>& dos, T* dq, const Strides<4>& dqs, T* dk, const Strides<4>& dks, T* dv,
                             const Strides<4>& dvs) {
  const index_t G = d.group, TT = d.Tq * d.Tk, rows = d.H * d.Tq;
  Tensor<T, 1, cuda::Device> P(Shape<1>{d.H * TT}, uninitialized), dP(Shape<1>{d.H * TT}, uninitialized);
  Tensor<T, 1, cuda::Device> delta(Shape<1>{rows}, uninitialized);
  using GB = GemmBackend<cuda::Device>;
  for (index_t b = 0; b < d.B; ++b) {
    attn_gemm_scores(d, b, q, qs, k, ks, scale, P.data());
    attn_gemm_softmax(d, P.data(), qpos, qps, const_cast<T*>(lse + b * ls[0]), ls, true);  // reads lse only
    launch(attn_gemm_delta_kernel<T>, attn_blocks(rows), attn_warps * 32, 0, "attention (gemm) delta kernel launch",
           rows, d.Tq, d.Dh, out + b * os[0], os, dout + b * dos[0], dos, delta.data());
    for (index_t j = 0; j < G; ++j)  // dP_h = dO_h V_g^T
      GB::run<T>(d.Hkv, d.Tq, d.Tk, d.Dh, T(1), MatRef<T>{dout + b * dos[0] + j * dos[2], dos[1], false}, G * dos[2],
                 MatRef<T>{v + b * vs[0], vs[1], true}, vs[2], T(0), dP.data() + j * TT, d.Tk, G * TT);
    const index_t n = d.H * TT;
    launch(attn_gemm_dsoftmax_kernel<T>, grid_for(n, assign_threads), assign_threads, 0,
           "attention (gemm) dsoftmax kernel launch", n, d.Tk, P.data(), dP.data(), delta.data());
    for (index_t j = 0; j < G; ++j) {
      // dQ_h = scale * dS_h K_g
      GB::run<T>(d.Hkv, d.Tq, d.Dh, d.Tk, scale, MatRef<T>{dP.data() + j * TT, d.Tk, false}, G * TT,
                 MatRef<T>{k + b * ks[0], ks[1], false}, ks[2], T(0), dq + b * dqs[0] + j * dqs[2], dqs[1], G * dqs[2]);
      // dK_g (+)= scale * dS_h^T Q_h, dV_g (+)= P_h^T dO_h over the group's heads
      const T beta = j == 0 ? T(0) : T(1);
      GB::run<T>(d.Hkv, d.Tk, d.Dh, d.Tq, scale, MatRef<T>{dP.data() + j * TT, d.Tk, true}, G * TT,
                 MatRef<T>{q + b * qs[0] + j * qs[2], qs[1], false}, G * qs[2], beta, dk + b * dks[0], dks[1], dks[2]);
      GB::run<T>(d.Hkv, d.Tk, d.Dh, d.Tq, T(1), MatRef<T>{P.data() + j * TT, d.Tk, true}, G * TT,
                 MatRef<T>{dout + b * dos[0] + j * dos[2], dos[1], false}, G * dos[2], beta, dv + b * dvs[0], dvs[1],
                 dvs[2]);
    }
  }
}

}  // namespace detail
}  // namespace cuda
}  // namespace v0
}  // namespace lrt
