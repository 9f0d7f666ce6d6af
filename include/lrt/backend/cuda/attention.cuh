// lrt/backend/cuda/attention.cuh: causal attention (window, GQA, subset queries) on the GPU,
// forward and backward (see cpu::attention_forward), and the choice between this file's
// one-warp-per-query kernels and the cuBLAS path of attention_gemm.cuh.
// - One warp per (b, h, query); lane l owns head dims l, l + 32, ... (Dh <= 256). The forward
//   walks the query's keys 4 at a time with an online softmax (running max and rescaled
//   accumulator) and saves lse. The backward computes dq (and delta = rowsum(dO * O)) with one
//   warp per (b, h, query), and dk, dv with one warp per (b, KV head, key) that walks the query
//   heads of its group and the (contiguous, found by binary search) queries that see the key.
//   Every output element is written by exactly one warp: deterministic, no atomics, exact zeros
//   for keys no query sees.
// - qpos is copied to the host and validated as on the CPU, unless the caller has done so.
#pragma once

#include <type_traits>
#include <vector>

#include "../../tensor/tensor.hpp"
#include "../nn_checks.hpp"
#include "attention_gemm.cuh"
#include "launch.cuh"
#include "nn_common.cuh"

namespace lrt {
inline namespace v0 {
namespace cuda::detail {

/// Keys (forward, dq) or queries (dk/dv) one warp handles per step.
inline constexpr int attn_step = 4;
/// Largest head dim of the attention kernels (32 lanes x 8 dims).
inline constexpr index_t attn_max_dh = 256;

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
__device__ inline T attn_partial_dot(const T (&a)[DPL], const T* row, index_t s, int lane, index_t Dh) {
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
__device__ inline void attn_axpy(T (&acc)[DPL], T w, const T* row, index_t s, int lane, index_t Dh) {
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
    attention_forward_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks, const T* v,
                             Strides<4> vs, const index_t* qpos, index_t qps, T scale, T* out, Strides<4> os, T* lse,
                             Strides<3> ls) {
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
    attention_dq_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks, const T* v, Strides<4> vs,
                        const index_t* qpos, index_t qps, T scale, const T* out, Strides<4> os, const T* lse,
                        Strides<3> ls, const T* dout, Strides<4> dos, T* dq, Strides<4> dqs, T* delta) {
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
        sd[attn_step + u] = ok ? attn_partial_dot(dov, vb + (j + u) * vs[1], vs[3], lane, g.Dh) : T(0);
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
    attention_dkdv_kernel(AttnDims g, const T* q, Strides<4> qs, const T* k, Strides<4> ks, const T* v, Strides<4> vs,
                          const index_t* qpos, index_t qps, T scale, const T* lse, Strides<3> ls, const T* dout,
                          Strides<4> dos, const T* delta, T* dk, Strides<4> dks, T* dv, Strides<4> dvs) {
  const int lane = threadIdx.x & 31;
  const index_t items = g.B * g.Hkv * g.Tk, wstep = index_t{gridDim.x} * attn_warps;
  for (index_t w = index_t{blockIdx.x} * attn_warps + (threadIdx.x >> 5); w < items; w += wstep) {
    const index_t j = w % g.Tk, kh = (w / g.Tk) % g.Hkv, b = w / (g.Tk * g.Hkv);
    // i0: first query with qpos >= j; i1: first query with qpos - j > window (both monotone).
    index_t lo = 0, hi = g.Tq;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (qpos[mid * qps] < j)
        lo = mid + 1;
      else
        hi = mid;
    }
    const index_t i0 = lo;
    hi = g.Tq;
    while (lo < hi) {
      const index_t mid = lo + (hi - lo) / 2;
      if (qpos[mid * qps] - j <= g.window)
        lo = mid + 1;
      else
        hi = mid;
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
          sd[attn_step + u] = ok ? attn_partial_dot(vv, db + (i + u) * dos[1], dos[3], lane, g.Dh) : T(0);
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
// Host side

/// The CUDA kernels' own checks, after the shared ones (lrt::detail::check_attention_forward /
/// _backward): the head dim limit, and the positions, which are copied to the host and checked
/// there (a wait for the GPU) unless the caller has checked them already (qpos_checked:
/// ad::attention with an IndexList, the decoder). Returns the sizes.
template <class T>
AttnDims check_attention_args(const char* op, const NnView<const T, 4>& q, const NnView<const T, 4>& k,
                              const NnView<const index_t, 1>& qpos, index_t window, bool qpos_checked) {
  const Shape<4>& qs = q.shape();
  const Shape<4>& ks = k.shape();
  check(qs[3] <= attn_max_dh, op, "head dim ", qs[3], " of q ", qs, " is larger than the CUDA kernels' limit of ",
        attn_max_dh);
  const AttnDims d{qs[0], qs[1], ks[1], qs[2], ks[2], qs[3], qs[2] / ks[2], window};
  if (!qpos_checked) {
    std::vector<index_t> pos;
    nn_copy_indices_to_host(qpos, pos, op, "qpos");
    lrt::detail::check_query_positions(op, pos, ks);
  }
  return d;
}

/// Causal (windowed, GQA, subset-query) attention forward; see cpu::attention_forward.
/// q: (B, Tq, H, Dh)  k, v: (B, Tk, Hkv, Dh)  qpos: (Tq)  -> out: (B, Tq, H, Dh), lse: (B, H, Tq)
template <class T>
void attention_forward(NnView<const T, 4> q, NnView<const T, 4> k, NnView<const T, 4> v, NnView<const index_t, 1> qpos,
                       index_t window, T scale, NnView<T, 4> out, NnView<T, 3> lse, bool qpos_checked) {
  const char* op = "attention";
  lrt::detail::check_attention_forward(q.shape(), k.shape(), v.shape(), qpos.shape(), window, out.shape(), lse.shape());
  const AttnDims d = check_attention_args<T>(op, q, k, qpos, window, qpos_checked);
  const index_t items = d.B * d.H * d.Tq;
  if (items == 0) return;
  if (attention_uses_gemm<T>(d, {&q.strides(), &k.strides(), &v.strides(), &out.strides()}, 1)) {
    attention_forward_gemm<T>(d, q.data(), q.strides(), k.data(), k.strides(), v.data(), v.strides(), qpos.data(),
                              qpos.strides()[0], scale, out.data(), out.strides(), lse.data(), lse.strides());
    return;
  }
  with_dims_per_lane(d.Dh, [&](auto dpl) {
    constexpr int DPL = decltype(dpl)::value;
    launch(attention_forward_kernel<T, DPL>, attn_blocks(items), attn_warps * 32, 0, "attention_forward kernel launch",
           d, q.data(), q.strides(), k.data(), k.strides(), v.data(), v.strides(), qpos.data(), qpos.strides()[0],
           scale, out.data(), out.strides(), lse.data(), lse.strides());
  });
}

/// Backward of attention_forward: dq, dk, dv overwritten (exact zeros for keys no query sees).
template <class T>
void attention_backward(NnView<const T, 4> q, NnView<const T, 4> k, NnView<const T, 4> v, NnView<const index_t, 1> qpos,
                        index_t window, T scale, NnView<const T, 4> out, NnView<const T, 3> lse,
                        NnView<const T, 4> dout, NnView<T, 4> dq, NnView<T, 4> dk, NnView<T, 4> dv, bool qpos_checked) {
  const char* op = "attention_backward";
  lrt::detail::check_attention_backward(q.shape(), k.shape(), v.shape(), qpos.shape(), window, out.shape(), lse.shape(),
                                        dout.shape(), dq.shape(), dk.shape(), dv.shape());
  const AttnDims d = check_attention_args<T>(op, q, k, qpos, window, qpos_checked);

  const index_t qitems = d.B * d.H * d.Tq, kitems = d.B * d.Hkv * d.Tk;
  if (qitems > 0 && attention_uses_gemm<T>(d,
                                           {&q.strides(), &k.strides(), &v.strides(), &out.strides(), &dout.strides(),
                                            &dq.strides(), &dk.strides(), &dv.strides()},
                                           2)) {
    attention_backward_gemm<T>(d, q.data(), q.strides(), k.data(), k.strides(), v.data(), v.strides(), qpos.data(),
                               qpos.strides()[0], scale, out.data(), out.strides(), lse.data(), lse.strides(),
                               dout.data(), dout.strides(), dq.data(), dq.strides(), dk.data(), dk.strides(), dv.data(),
                               dv.strides());
    return;
  }
  Tensor<T, 1, cuda::Device> delta(Shape<1>{qitems}, uninitialized);  // rowsum(dO * O)
  with_dims_per_lane(d.Dh, [&](auto dpl) {
    constexpr int DPL = decltype(dpl)::value;
    if (qitems > 0) {
      launch(attention_dq_kernel<T, DPL>, attn_blocks(qitems), attn_warps * 32, 0,
             "attention_backward (dq) kernel launch", d, q.data(), q.strides(), k.data(), k.strides(), v.data(),
             v.strides(), qpos.data(), qpos.strides()[0], scale, out.data(), out.strides(), lse.data(), lse.strides(),
             dout.data(), dout.strides(), dq.data(), dq.strides(), delta.data());
    }
    if (kitems > 0) {
      launch(attention_dkdv_kernel<T, DPL>, attn_blocks(kitems), attn_warps * 32, 0,
             "attention_backward (dk, dv) kernel launch", d, q.data(), q.strides(), k.data(), k.strides(), v.data(),
             v.strides(), qpos.data(), qpos.strides()[0], scale, lse.data(), lse.strides(), dout.data(), dout.strides(),
             delta.data(), dk.data(), dk.strides(), dv.data(), dv.strides());
    }
  });
  // delta goes back to the caching allocator: later work on the one stream runs after these.
}

}  // namespace cuda::detail
}  // namespace v0
}  // namespace lrt
