// lrt/backend/cpu/attention.hpp: fused causal attention on the CPU, forward and backward, float
// and double, with sliding windows, GQA and subset queries (LRT-SPEC §2.2 masking rule, §4.2
// subset-query attention). The reference that other backends' kernels are checked against.
//
// Mask: a query at original position p attends key j iff j <= p and p - j <= window.
// Memory is O(T) per head: the forward saves only the output and the per-query log-sum-exp, and
// the backward recomputes the scores tile by tile. A tile is up to 64 consecutive queries of one
// head scored against the key range [max(0, p_first - window), p_last] that any of them may see,
// so scratch per tile is at most (64, Tk). Each tile's softmax covers its whole key range at once
// (no online rescaling as in flash attention's key blocks): simpler, and within that bound.
// Keys outside a tile's range are never read; keys inside the range but masked for a row get a
// probability of exactly 0, so (finite) masked keys contribute exactly 0 forward and backward.
// Results do not depend on the thread count: tiles are fixed, every output element is written
// by one task, and dk/dv sum their query heads and tiles in a fixed order.
// Not here: dropout, additive biases, arbitrary masks, decoding with a KV cache, autodiff wiring.
#pragma once

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../../tensor/linalg.hpp"
#include "../nn_backend.hpp"
#include "../nn_checks.hpp"
#include "gemm.hpp"
#include "reduce.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu {
namespace detail {

/// Queries per tile (rows of one score block). Fixed, so results never depend on the thread count.
inline constexpr index_t attention_tile = 64;

/// First key a query at position p may see: max(0, p - window) (no overflow for huge windows).
inline index_t first_key(index_t p, index_t window) { return p - std::min(p, window); }

/// Sizes of one validated attention call.
struct AttentionDims {
  index_t B, Tq, Tk, H, Hkv, Dh;
  /// Query heads per KV head.
  index_t group() const { return H / Hkv; }
  /// Query tiles per head.
  index_t tiles() const { return (Tq + attention_tile - 1) / attention_tile; }
};

/// Queries [i0, i1) of one head and the key range [k0, k1) that any of them may see.
struct QueryTile {
  index_t i0, i1, k0, k1;
  index_t rows() const { return i1 - i0; }
  index_t cols() const { return k1 - k0; }
};

/// Tile t of the queries at positions pos (strictly increasing, so the range is
/// [first_key(pos[i0]), pos[i1 - 1]]).
inline QueryTile query_tile(const std::vector<index_t>& pos, index_t t, index_t window) {
  const index_t i0 = t * attention_tile;
  const index_t i1 = std::min<index_t>(i0 + attention_tile, static_cast<index_t>(pos.size()));
  return {i0, i1, first_key(pos[i0], window), pos[i1 - 1] + 1};
}

/// Copies qpos into pos, checks the positions and returns the sizes (the shapes are checked
/// already: lrt::detail::check_attention_forward / _backward).
// q: (B, Tq, H, Dh)  k, v: (B, Tk, Hkv, Dh)  qpos: (Tq)
template <class T>
AttentionDims attention_positions(const char* op, const TensorView<const T, 4>& q, const TensorView<const T, 4>& k,
                                  const TensorView<const index_t, 1>& qpos, std::vector<index_t>& pos) {
  const Shape<4>& qs = q.shape();
  const Shape<4>& ks = k.shape();
  const AttentionDims d{qs[0], qs[1], ks[1], qs[2], ks[2], qs[3]};
  pos.resize(static_cast<std::size_t>(d.Tq));
  for (index_t i = 0; i < d.Tq; ++i) pos[static_cast<std::size_t>(i)] = qpos(i);
  lrt::detail::check_query_positions(op, pos, ks);
  return d;
}

/// Runs f(item) for every item in [0, n) on the pool. Item i goes to chunk i mod P (P chunks,
/// one per thread), so cheap early and costly late causal tiles spread evenly over the threads.
/// Even a single item runs inside a pool task (P >= 2 whenever the pool has 2+ threads), where
/// lrt::gemm stays on its thread: GEMM's own row split can round differently, and results must
/// not depend on the thread count.
template <class F>
void for_each_item(index_t n, F&& f) {
  if (n <= 0) return;
  const index_t chunks = std::min<index_t>(std::max<index_t>(n, 2), num_threads());
  parallel_for(chunks, 1, [&](index_t c0, index_t c1) {
    for (index_t c = c0; c < c1; ++c)
      for (index_t i = c; i < n; i += chunks) f(i);
  });
}

/// x[j] = exp(x[j] - shift) for j < n, through Eigen's vectorised exp (SIMD polynomial, within
/// a few ulp of libm's; libm's scalar expf was 4-5% of a tiny training step).
template <class T>
inline void vexp_shifted(T* x, index_t n, T shift) {
  if (n <= 0) return;
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> a(x, n);
  a = (a - shift).exp();
}

/// One forward softmax row in place: row[j] = exp(s_j - m) on the allowed keys [lo, hi) (m their
/// maximum), exact zeros elsewhere. Writes m to *max and returns the sum of the row.
// row: (cols)
template <class T>
T masked_exp_row(T* row, index_t cols, index_t lo, index_t hi, T* max) {
  const T m = *std::max_element(row + lo, row + hi);
  std::fill(row, row + lo, T(0));
  vexp_shifted(row + lo, hi - lo, m);
  std::fill(row + hi, row + cols, T(0));
  *max = m;
  return pairwise_sum(row + lo, hi - lo, index_t{1});
}

/// One row of P recomputed from the saved log-sum-exp, in place: exp(s_j - lse) on [lo, hi),
/// exact zeros elsewhere.
// row: (cols)
template <class T>
void probability_row(T* row, index_t cols, index_t lo, index_t hi, T lse) {
  std::fill(row, row + lo, T(0));
  vexp_shifted(row + lo, hi - lo, lse);
  std::fill(row + hi, row + cols, T(0));
}

/// One row of the softmax backward, in place: dP -> dS = P * (dP - delta) on [lo, hi), exact
/// zeros elsewhere; delta = rowsum(dO * O) = sum_j P_j dP_j.
// dp, p: (cols)
template <class T>
void softmax_grad_row(T* dp, const T* p, index_t cols, index_t lo, index_t hi, T delta) {
  std::fill(dp, dp + lo, T(0));
  for (index_t j = lo; j < hi; ++j) dp[j] = p[j] * (dp[j] - delta);
  std::fill(dp + hi, dp + cols, T(0));
}

}  // namespace detail

/// Causal (optionally windowed, GQA, subset-query) attention forward: out = softmax(scale Q K^T,
/// masked) V, plus the log-sum-exp of each query's scaled scores for the backward.
// q: (B, Tq, H, Dh)  k, v: (B, Tk, Hkv, Dh)  qpos: (Tq) original positions, strictly increasing,
// each < Tk  -> out: (B, Tq, H, Dh)  lse: (B, H, Tq). Query head h reads KV head h / (H / Hkv).
// window >= 0 (>= Tk - 1 is plain causal); scale is usually 1/sqrt(Dh). Any strided views;
// out and lse must not overlap the inputs.
template <class T>
void attention_forward(TensorView<const T, 4> q, TensorView<const T, 4> k, TensorView<const T, 4> v,
                       TensorView<const index_t, 1> qpos, index_t window, T scale, TensorView<T, 4> out,
                       TensorView<T, 3> lse) {
  static_assert(std::is_floating_point_v<T>, "attention kernels take float or double");
  const char* op = "attention";
  // Reused by this calling thread: no allocation per call after the first. (A local reference,
  // so that pool tasks capture the caller's vector, not their own thread's.)
  thread_local std::vector<index_t> pos_storage;
  std::vector<index_t>& pos = pos_storage;
  lrt::detail::check_attention_forward(q.shape(), k.shape(), v.shape(), qpos.shape(), window, out.shape(), lse.shape());
  const detail::AttentionDims d = detail::attention_positions(op, q, k, qpos, pos);

  const index_t tiles = d.tiles();
  detail::for_each_item(d.B * d.H * tiles, [&](index_t item) {
    const index_t t = item % tiles, h = (item / tiles) % d.H, b = item / (tiles * d.H);
    const index_t g = h / d.group();
    const detail::QueryTile tile = detail::query_tile(pos, t, window);
    const index_t n = tile.rows(), m = tile.cols();
    const auto qt = q.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);    // (n, Dh)
    const auto kr = k.select(0, b).select(1, g).slice(0, tile.k0, tile.k1);    // (m, Dh)
    const auto vr = v.select(0, b).select(1, g).slice(0, tile.k0, tile.k1);    // (m, Dh)
    const auto ot = out.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);  // (n, Dh)

    Tensor<T, 2> p(Shape<2>{n, m}, uninitialized);  // scores, then unnormalised probabilities
    lrt::gemm(p, qt, kr.t(), scale);                // S = scale Q K^T
    T inv_sum[detail::attention_tile];
    for (index_t r = 0; r < n; ++r) {
      const index_t i = tile.i0 + r;
      const index_t lo = detail::first_key(pos[i], window) - tile.k0, hi = pos[i] + 1 - tile.k0;
      T max;
      const T sum = detail::masked_exp_row(p.data() + r * m, m, lo, hi, &max);
      lse(b, h, i) = max + std::log(sum);
      inv_sum[r] = T(1) / sum;
    }
    lrt::gemm(ot, p, vr);  // O = exp(S - max) V, then each row divided by its sum
    for (index_t r = 0; r < n; ++r)
      for (index_t e = 0; e < d.Dh; ++e) ot(r, e) *= inv_sum[r];
  });
}

/// Backward of attention_forward: dq, dk, dv from dout, recomputing the probabilities tile by
/// tile from lse. dq, dk and dv are overwritten (not accumulated); keys no query attends (e.g.
/// those after the last query position) get exact zeros.
// q, out, dout: (B, Tq, H, Dh)  k, v: (B, Tk, Hkv, Dh)  qpos: (Tq)  lse: (B, H, Tq)
// -> dq: (B, Tq, H, Dh)  dk, dv: (B, Tk, Hkv, Dh)  (any strided views; outputs must not overlap
// the inputs). out and lse are attention_forward's, computed with the same arguments.
template <class T>
void attention_backward(TensorView<const T, 4> q, TensorView<const T, 4> k, TensorView<const T, 4> v,
                        TensorView<const index_t, 1> qpos, index_t window, T scale, TensorView<const T, 4> out,
                        TensorView<const T, 3> lse, TensorView<const T, 4> dout, TensorView<T, 4> dq,
                        TensorView<T, 4> dk, TensorView<T, 4> dv) {
  static_assert(std::is_floating_point_v<T>, "attention kernels take float or double");
  const char* op = "attention_backward";
  // Reused by this calling thread: no allocation per call after the first. (A local reference,
  // so that pool tasks capture the caller's vector, not their own thread's.)
  thread_local std::vector<index_t> pos_storage;
  std::vector<index_t>& pos = pos_storage;
  lrt::detail::check_attention_backward(q.shape(), k.shape(), v.shape(), qpos.shape(), window, out.shape(), lse.shape(),
                                        dout.shape(), dq.shape(), dk.shape(), dv.shape());
  const detail::AttentionDims d = detail::attention_positions(op, q, k, qpos, pos);

  // One task per (b, KV head): it owns that head's dk, dv rows and the dq rows of its query
  // heads, so nothing is shared between tasks and the sums run in a fixed order.
  const index_t tiles = d.tiles();
  detail::for_each_item(d.B * d.Hkv, [&](index_t item) {
    const index_t b = item / d.Hkv, g = item % d.Hkv;
    const auto kb = k.select(0, b).select(1, g);    // (Tk, Dh)
    const auto vb = v.select(0, b).select(1, g);    // (Tk, Dh)
    const auto dkb = dk.select(0, b).select(1, g);  // (Tk, Dh)
    const auto dvb = dv.select(0, b).select(1, g);  // (Tk, Dh)
    dkb.fill(T(0));
    dvb.fill(T(0));
    Tensor<T, 1> p_buf(Shape<1>{detail::attention_tile * d.Tk}, uninitialized);
    Tensor<T, 1> dp_buf(Shape<1>{detail::attention_tile * d.Tk}, uninitialized);

    for (index_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
      for (index_t t = 0; t < tiles; ++t) {
        const detail::QueryTile tile = detail::query_tile(pos, t, window);
        const index_t n = tile.rows(), m = tile.cols();
        const auto qt = q.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);     // (n, Dh)
        const auto ot = out.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);   // (n, Dh)
        const auto dt = dout.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);  // (n, Dh)
        const auto dqt = dq.select(0, b).select(1, h).slice(0, tile.i0, tile.i1);   // (n, Dh)
        const auto kr = kb.slice(0, tile.k0, tile.k1);                              // (m, Dh)
        const auto vr = vb.slice(0, tile.k0, tile.k1);                              // (m, Dh)
        const auto dkr = dkb.slice(0, tile.k0, tile.k1);                            // (m, Dh)
        const auto dvr = dvb.slice(0, tile.k0, tile.k1);                            // (m, Dh)
        const TensorView<T, 2> p(p_buf.data(), Shape<2>{n, m});                     // (n, m)
        const TensorView<T, 2> dp(dp_buf.data(), Shape<2>{n, m});                   // (n, m)

        lrt::gemm(p, qt, kr.t(), scale);  // S = scale Q K^T, exactly as in the forward
        for (index_t r = 0; r < n; ++r) {
          const index_t i = tile.i0 + r;
          const index_t lo = detail::first_key(pos[i], window) - tile.k0;
          detail::probability_row(p.data() + r * m, m, lo, pos[i] + 1 - tile.k0, lse(b, h, i));
        }
        lrt::gemm(dvr, p.t(), dt, T(1), T(1));  // dV += P^T dO
        lrt::gemm(dp, dt, vr.t());              // dP = dO V^T
        for (index_t r = 0; r < n; ++r) {
          const index_t i = tile.i0 + r;
          T delta = 0;  // rowsum(dO * O)
          for (index_t e = 0; e < d.Dh; ++e) delta += dt(r, e) * ot(r, e);
          const index_t lo = detail::first_key(pos[i], window) - tile.k0;
          detail::softmax_grad_row(dp.data() + r * m, p.data() + r * m, m, lo, pos[i] + 1 - tile.k0, delta);
        }
        lrt::gemm(dqt, dp, kr, scale);            // dQ = scale dS K
        lrt::gemm(dkr, dp.t(), qt, scale, T(1));  // dK += scale dS^T Q
      }
    }
  });
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
