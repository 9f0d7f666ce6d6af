// lrt/autodiff/nn.hpp: the transformer's fused differentiable ops: RMSNorm, RoPE, RoPE + RMSNorm, softmax,
// embedding lookup, softcapped cross-entropy, causal attention (GQA, sliding window, queries at
// arbitrary original positions). The kernels are NnBackend<D>'s (backend/nn_backend.hpp): the CPU
// ones in backend/cpu/{nn,attention}.hpp, the CUDA ones in backend/cuda/nn.cuh. Inputs that a
// kernel would index with (token ids, targets) are validated here on the host for devices the
// host cannot read.
// Shapes: B batch, T time, H heads, Hkv KV heads, Dh head dim, C channels, V vocab, N rows.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>

#include "../backend/nn_backend.hpp"
#include "../backend/rope_table.hpp"
#include "ops.hpp"

namespace lrt {
inline namespace v0 {

/// RoPE tables for the given absolute positions: cos, sin of pos * 10000^(-2j/Dh), j < Dh/2,
/// computed in fp32 (as the release does), optionally rounded to bf16 (one rope_row per
/// position).   -> cos, sin: (P, Dh/2)
template <class T>
std::pair<Tensor<T, 2>, Tensor<T, 2>> rope_tables(TensorView<const index_t, 1> positions, index_t Dh,
                                                  bool bf16_tables = true) {
  check(Dh > 0 && Dh % 2 == 0, "rope", "head dim must be even and positive, got ", Dh);
  const index_t P = positions.shape()[0], half = Dh / 2;
  Tensor<T, 2> cs(Shape<2>{P, half}, uninitialized), sn(Shape<2>{P, half}, uninitialized);
  for (index_t p = 0; p < P; ++p) {
    check(positions(p) >= 0, "rope", "negative position ", positions(p));
    rope_row<T>(positions(p), Dh, bf16_tables, cs.data() + p * half, sn.data() + p * half);
  }
  return {std::move(cs), std::move(sn)};
}

namespace ad {

namespace detail {
/// (..., C) -> (N, C); a view of const or mutable elements, as t is.
template <class Tn>
auto as_rows(Tn& t) {
  constexpr int R = std::remove_cvref_t<Tn>::rank;
  const index_t C = R > 0 ? t.shape()[R - 1] : 1;
  return t.view().template reshape<2>(Shape<2>{t.numel() / std::max<index_t>(C, 1), C});
}
}  // namespace detail

/// RMSNorm without weights over the last axis: x / sqrt(mean(x^2) + eps), eps = fp32 epsilon.
template <class T, int R, Device D>
Var<T, R, D> rmsnorm(const Var<T, R, D>& x, double eps = lrt::rmsnorm_eps) {
  Tensor<T, R, D> y(x.shape(), uninitialized);
  const index_t C = x.shape()[R - 1], N = x.shape().numel() / std::max<index_t>(C, 1);
  Tensor<T, 1, D> rinv(Shape<1>{N}, uninitialized);
  NnBackend<D>::template rmsnorm_forward<T>(detail::as_rows(x.value()), detail::as_rows(y), rinv.view(), eps);
  return record<T, R, D>(
      "rmsnorm", std::move(y),
      [x, rinv = std::move(rinv)](const Tensor<T, R, D>& gy, const Tensor<T, R, D>& y) {
        if (!x.requires_grad()) return;
        Tensor<T, R, D> gx(gy.shape(), uninitialized);
        NnBackend<D>::template rmsnorm_backward<T>(detail::as_rows(y), rinv.view(), detail::as_rows(gy),
                                                   detail::as_rows(gx));
        accumulate(x, std::move(gx));
      },
      x);
}

/// Cos/sin tables for RoPE at given positions (shared by every layer that uses them), on D.
template <class T, class D = cpu::Device>
struct RopeTable {
  std::shared_ptr<const Tensor<T, 2, D>> cos, sin;  // (P, Dh/2)
  /// Tables for positions (P) and head dim Dh; bf16_tables rounds them like the release.
  template <class I, class Dp>
  static RopeTable make(TensorView<I, 1, Dp> positions, index_t Dh, bool bf16_tables = true) {
    static_assert(std::is_same_v<std::remove_const_t<I>, index_t>, "RoPE positions are index_t");
    if constexpr (!Dp::host_accessible) {
      const Tensor<index_t, 1> host = to<cpu::Device>(positions);
      return make(host.view(), Dh, bf16_tables);
    } else {
      auto [c, s] = lrt::rope_tables<T>(positions, Dh, bf16_tables);
      if constexpr (std::is_same_v<D, cpu::Device>) {
        return {std::make_shared<const Tensor<T, 2, D>>(std::move(c)),
                std::make_shared<const Tensor<T, 2, D>>(std::move(s))};
      } else {
        return {std::make_shared<const Tensor<T, 2, D>>(to<D>(c)), std::make_shared<const Tensor<T, 2, D>>(to<D>(s))};
      }
    }
  }
  /// Tables for the positions of an IndexList (from its host copy: no wait for the device).
  static RopeTable make(const IndexList<D>& positions, index_t Dh, bool bf16_tables = true) {
    const auto& h = positions.host();
    return make(TensorView<const index_t, 1, cpu::Device>(h.data(), Shape<1>{static_cast<index_t>(h.size())}), Dh,
                bf16_tables);
  }
  /// Tables for positions 0..T-1.
  static RopeTable make(index_t T_, index_t Dh, bool bf16_tables = true) {
    const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{T_}, index_t{0});
    return make(pos.view(), Dh, bf16_tables);
  }
};

/// RoPE (half-split pairing, rotation by -theta) on x (B, T, H, Dh), row t of the tables for
/// time index t of x (pass tables made from the tokens' original positions).
template <class T, Device D>
Var<T, 4, D> rope(const Var<T, 4, D>& x, const RopeTable<T, D>& table) {
  Tensor<T, 4, D> y(x.shape(), uninitialized);
  NnBackend<D>::template rope_apply<T>(x.value().view(), table.cos->view(), table.sin->view(), y.view(), false);
  return record<T, 4, D>(
      "rope", std::move(y),
      [x, table](const Tensor<T, 4, D>& gy, const Tensor<T, 4, D>&) {
        if (!x.requires_grad()) return;
        Tensor<T, 4, D> gx(gy.shape(), uninitialized);
        NnBackend<D>::template rope_apply<T>(gy.view(), table.cos->view(), table.sin->view(), gx.view(), true);
        accumulate(x, std::move(gx));
      },
      x);
}

/// rmsnorm(rope(x, table)) over each head vector in one fused kernel each way (the model's RoPE
/// + QK-norm): on the CPU equal to the two ops bit for bit, with one pass over x and no
/// intermediate tensor.   x: (B, T, H, Dh)
template <class T, Device D>
Var<T, 4, D> rope_rmsnorm(const Var<T, 4, D>& x, const RopeTable<T, D>& table, double eps = lrt::rmsnorm_eps) {
  const Shape<4> s = x.shape();
  check(s[3] > 0 && s[3] % 2 == 0, "rope_rmsnorm", "head dim must be even and positive, got x ", s);
  Tensor<T, 4, D> y(s, uninitialized);
  Tensor<T, 1, D> rinv(Shape<1>{s[0] * s[1] * s[2]}, uninitialized);
  NnBackend<D>::template rope_rmsnorm_forward<T>(x.value().view(), table.cos->view(), table.sin->view(), y.view(),
                                                 rinv.view(), eps);
  return record<T, 4, D>(
      "rope_rmsnorm", std::move(y),
      [x, table, rinv = std::move(rinv)](const Tensor<T, 4, D>& gy, const Tensor<T, 4, D>& y) {
        if (!x.requires_grad()) return;
        Tensor<T, 4, D> gx(gy.shape(), uninitialized);
        NnBackend<D>::template rope_rmsnorm_backward<T>(y.view(), rinv.view(), gy.view(), table.cos->view(),
                                                        table.sin->view(), gx.view());
        accumulate(x, std::move(gx));
      },
      x);
}

/// Softmax over the last axis.
template <class T, int R, Device D>
Var<T, R, D> softmax(const Var<T, R, D>& x) {
  Tensor<T, R, D> y(x.shape(), uninitialized);
  NnBackend<D>::template softmax_forward<T>(detail::as_rows(x.value()), detail::as_rows(y));
  return record<T, R, D>(
      "softmax", std::move(y),
      [x](const Tensor<T, R, D>& gy, const Tensor<T, R, D>& y) {
        if (!x.requires_grad()) return;
        Tensor<T, R, D> gx(gy.shape(), uninitialized);
        NnBackend<D>::template softmax_backward<T>(detail::as_rows(y), detail::as_rows(gy), detail::as_rows(gx));
        accumulate(x, std::move(gx));
      },
      x);
}

/// table[ids]: ids (B, T) -> (B, T, C); the backward scatter-adds into the table's gradient.
template <class T, Device D>
Var<T, 3, D> embedding(const Tensor<index_t, 2, D>& ids, const Var<T, 2, D>& table) {
  const index_t B = ids.shape()[0], Tt = ids.shape()[1], C = table.shape()[1];
  Tensor<T, 3, D> y(Shape<3>{B, Tt, C}, uninitialized);
  Tensor<index_t, 1, D> flat(ids.view().template reshape<1>(Shape<1>{B * Tt}));
  if constexpr (!D::host_accessible) {  // the CPU kernel checks ids itself
    const Tensor<index_t, 1> h = to<cpu::Device>(flat);
    const index_t V = table.shape()[0];
    for (index_t i = 0; i < B * Tt; ++i)
      check(h(i) >= 0 && h(i) < V, "embedding", "id ", h(i), " at position ", i, " out of range for table ",
            table.shape());
  }
  NnBackend<D>::template embedding_forward<T>(flat.view(), table.value().view(), detail::as_rows(y));
  return record<T, 3, D>(
      "embedding", std::move(y),
      [table, flat = std::move(flat)](const Tensor<T, 3, D>& gy, const Tensor<T, 3, D>&) {
        if (auto* g = grad_slot(table))
          NnBackend<D>::template embedding_backward<T>(flat.view(), detail::as_rows(gy), g->view());
      },
      table);
}

/// Token ids (B, T) shared by several embedding lookups (the model's token embedding and its
/// value embeddings). On the CPU it only refers to ids. On other devices the ids are checked
/// against `rows` once here and, when gradients are on, sorted for the backward once, instead of
/// at every lookup and every backward (on CUDA both on the device, without waiting: an id out of
/// range is raised at the next wait for the device). It refers to `ids`, which must outlive it;
/// the lookups' backward keeps what it needs.
template <Device D>
class TokenIds {
 public:
  struct Prepared {
    Tensor<index_t, 1, D> flat;
    typename NnBackend<D>::EmbeddingPlan plan;
  };
  /// checked: the caller knows every id is in [0, rows) (the decoder checks its tokens on the
  /// host), so nothing is copied back (the ids are then not sorted for a backward either).
  TokenIds(const Tensor<index_t, 2, D>& ids, index_t rows, bool checked = false) : ids_(&ids) {
    if constexpr (!D::host_accessible) {
      Tensor<index_t, 1, D> flat(ids.view().template reshape<1>(Shape<1>{ids.numel()}));
      auto plan = checked ? NnBackend<D>::embedding_plan_checked(flat.numel(), rows)
                          : NnBackend<D>::embedding_plan(flat.view(), rows, grad_enabled());
      prep_ = std::make_shared<const Prepared>(Prepared{std::move(flat), std::move(plan)});
    }
  }
  const Tensor<index_t, 2, D>& ids() const noexcept { return *ids_; }
  const std::shared_ptr<const Prepared>& prepared() const noexcept { return prep_; }

 private:
  const Tensor<index_t, 2, D>* ids_;
  std::shared_ptr<const Prepared> prep_;
};

/// table[ids] for prepared ids (see TokenIds): the same values and gradients as embedding(ids,
/// table), without waiting for the device.
template <class T, Device D>
Var<T, 3, D> embedding(const TokenIds<D>& tok, const Var<T, 2, D>& table) {
  if constexpr (D::host_accessible) {
    return embedding(tok.ids(), table);
  } else {
    const auto& prep = tok.prepared();
    const index_t B = tok.ids().shape()[0], Tt = tok.ids().shape()[1], C = table.shape()[1];
    check(prep->plan.bound <= table.shape()[0], "embedding", "ids were checked against ", prep->plan.bound,
          " rows, table ", table.shape(), " has fewer");
    Tensor<T, 3, D> y(Shape<3>{B, Tt, C}, uninitialized);
    NnBackend<D>::template embedding_forward<T>(prep->flat.view(), table.value().view(), detail::as_rows(y));
    return record<T, 3, D>(
        "embedding", std::move(y),
        [table, prep](const Tensor<T, 3, D>& gy, const Tensor<T, 3, D>&) {
          if (auto* g = grad_slot(table)) {
            if (prep->plan.layout.numel() > 0 || prep->plan.n == 0)
              NnBackend<D>::template embedding_backward<T>(prep->plan, prep->flat.view(), detail::as_rows(gy),
                                                           g->view());
            else  // prepared without gradients: sort now
              NnBackend<D>::template embedding_backward<T>(prep->flat.view(), detail::as_rows(gy), g->view());
          }
        },
        table);
  }
}

/// Result of cross_entropy: the differentiable mean and the per-token losses (nats, 0 where
/// ignored), e.g. for bits-per-byte.
template <class T, class D>
struct CrossEntropy {
  Var<T, 0, D> loss;          // mean over non-ignored targets (0 if there are none)
  Tensor<T, 1, D> per_token;  // (N)
  index_t count = 0;          // non-ignored targets
};

/// Fused softcap (cap * tanh(z / cap); cap <= 0 disables it) + log-softmax + cross-entropy over
/// the first `vocab` columns of logits (N, Vp) (vocab < 0: all), targets (N), ignore_index -1.
template <class T, Device D>
CrossEntropy<T, D> cross_entropy(const Var<T, 2, D>& logits, const Tensor<index_t, 1, D>& targets, T cap = T(15),
                                 index_t vocab = -1, index_t ignore_index = -1) {
  const index_t N = logits.shape()[0], V = vocab < 0 ? logits.shape()[1] : vocab;
  check(targets.shape()[0] == N, "cross_entropy", "logits ", logits.shape(), " vs targets ", targets.shape());
  Tensor<T, 1, D> per(Shape<1>{N}, uninitialized), lse(Shape<1>{N}, uninitialized);
  index_t count = 0;
  {
    const auto& th = lrt::host_readable(targets);
    for (index_t i = 0; i < N; ++i) {
      const index_t t = th(i);
      if constexpr (!D::host_accessible)  // the CPU kernel checks targets itself
        check(t == ignore_index || (t >= 0 && t < V), "cross_entropy", "target ", t, " at row ", i,
              " out of range for vocab ", V);
      count += t != ignore_index;
    }
  }
  NnBackend<D>::template softcap_xent_forward<T>(logits.value().view(), targets.view(), V, cap, ignore_index,
                                                 per.view(), lse.view());
  const T inv = count > 0 ? T(1) / static_cast<T>(count) : T(0);
  auto loss = record<T, 0, D>(
      "cross_entropy", detail::scaled_total(per, inv),
      [logits, tg = Tensor<index_t, 1, D>(targets), lse = std::move(lse), V, cap, ignore_index, inv](
          const Tensor<T, 0, D>& gy, const Tensor<T, 0, D>&) {
        auto* g = grad_slot(logits);
        if (!g) return;
        const index_t n = tg.shape()[0];
        Tensor<T, 1, D> rowg(Shape<1>{n}, uninitialized);  // gy * inv per row, read where gy lives
        if constexpr (D::host_accessible)
          rowg.fill(*gy.data() * inv);
        else
          rowg = gy.view().template reshape<1>(Shape<1>{1}) * inv;
        Tensor<T, 2, D> dl(logits.shape(), uninitialized);
        NnBackend<D>::template softcap_xent_backward<T>(logits.value().view(), tg.view(), V, cap, ignore_index,
                                                        lse.view(), rowg.view(), dl.view());
        *g += dl;
      },
      logits);
  return {loss, std::move(per), count};
}

namespace detail {
template <class T, Device D>
Var<T, 4, D> attention_impl(const Var<T, 4, D>& q, const Var<T, 4, D>& k, const Var<T, 4, D>& v,
                            const Tensor<index_t, 1, D>& qpos, index_t window, bool qpos_checked) {
  const index_t B = q.shape()[0], Tq = q.shape()[1], H = q.shape()[2], Dh = q.shape()[3];
  const T scale = T(1) / std::sqrt(static_cast<T>(Dh));
  Tensor<T, 4, D> out(q.shape(), uninitialized);
  Tensor<T, 3, D> lse(Shape<3>{B, H, Tq}, uninitialized);
  NnBackend<D>::template attention_forward<T>(q.value().view(), k.value().view(), v.value().view(), qpos.view(), window,
                                              scale, out.view(), lse.view(), qpos_checked);
  return record<T, 4, D>(
      "attention", std::move(out),
      [q, k, v, qp = Tensor<index_t, 1, D>(qpos), window, scale, lse = std::move(lse), qpos_checked](
          const Tensor<T, 4, D>& gy, const Tensor<T, 4, D>& y) {
        Tensor<T, 4, D> dq(q.shape(), uninitialized), dk(k.shape(), uninitialized), dv(v.shape(), uninitialized);
        NnBackend<D>::template attention_backward<T>(q.value().view(), k.value().view(), v.value().view(), qp.view(),
                                                     window, scale, y.view(), lse.view(), gy.view(), dq.view(),
                                                     dk.view(), dv.view(), qpos_checked);
        accumulate(q, std::move(dq));
        accumulate(k, std::move(dk));
        accumulate(v, std::move(dv));
      },
      q, k, v);
}
}  // namespace detail

/// Causal attention with GQA and a sliding window, queries at original positions qpos.
/// q (B, Tq, H, Dh), k, v (B, Tk, Hkv, Dh), qpos (Tq) increasing -> (B, Tq, H, Dh).
/// A query at p attends key j iff j <= p and p - j <= window. Memory O(T) per head: the forward
/// saves the output and the log-sum-exp; the backward recomputes the scores. On a GPU the
/// positions are copied back and checked at each call (forward and backward); pass an IndexList
/// (below) to check them once on the host instead.
template <class T, Device D>
Var<T, 4, D> attention(const Var<T, 4, D>& q, const Var<T, 4, D>& k, const Var<T, 4, D>& v,
                       const Tensor<index_t, 1, D>& qpos, index_t window) {
  return detail::attention_impl(q, k, v, qpos, window, false);
}

/// The same with positions from an IndexList: checked here against k's length from the list's
/// host copy, so the device kernels never wait for a copy back.
template <class T, Device D>
Var<T, 4, D> attention(const Var<T, 4, D>& q, const Var<T, 4, D>& k, const Var<T, 4, D>& v, const IndexList<D>& qpos,
                       index_t window) {
  lrt::detail::check_query_positions("attention", qpos.host(), k.shape());
  return detail::attention_impl(q, k, v, qpos.tensor(), window, true);
}

}  // namespace ad
}  // namespace v0
}  // namespace lrt
