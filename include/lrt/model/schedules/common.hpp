// lrt/model/schedules/common.hpp: what every training schedule of spec §4 shares: its options
// (ScheduleOptions), what its passes hand back (PassResult, ScheduleResult, PrefillState), the
// contract a schedule type meets (the TrainingSchedule concept), and the pass machinery the
// schedules are built from (shift_memory, score, subset_passes with kv_refresh).
// A schedule is one type in one file of this folder (standard, interleaved, multirefine, chunked,
// exact) that carries its own facts: spelling, pass factor, the options it takes and its passes.
// Shapes: B batch, T time, d width, Hkv KV heads, Dh head dim, P a position subset.
#pragma once

#include <concepts>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../gpt.hpp"

namespace lrt {
inline namespace v0 {

/// Runtime options of the schedules (spec §4).
struct ScheduleOptions {
  std::vector<double> loss_weights;  // MultiRefine: one per pass (empty: all 1)
  bool detach = false;               // MultiRefine: no gradient through the previous pass's states
  bool zero_interior_memory = false; // Chunked: interior positions read zero memory instead of stale
  bool keep_logits = false;          // keep each pass's soft-capped logits (tests, evaluation)
  // Interleaved<S>, KV/Both variants only: between passes, patch the buffered K/V rows no pass has
  // recomputed yet with the latest memory (spec §4.2's kv_refresh, the release's
  // interleaved_kv_refresh). Refused (lrt::Error) for other schedules and for variants without
  // KV injection, where it would have nothing to patch.
  bool kv_refresh = false;
};

/// One pass of a schedule: the positions it scored and their per-token losses.
template <class T, class D>
struct PassResult {
  std::vector<index_t> positions;  // original positions computed by this pass (ascending)
  Tensor<T, 1, D> per_token;       // (B * |P|) nats, row-major over (b, i); 0 where ignored
  Tensor<index_t, 1, D> targets;   // (B * |P|)
  index_t count = 0;
  Tensor<T, 3, D> logits;          // (B, |P|, V) soft-capped, only with keep_logits
};

template <class T, class D>
struct ScheduleResult {
  ad::Var<T, 0, D> loss;
  std::vector<PassResult<T, D>> passes;
  double token_forwards = 0;  // compute of this batch in single-token forwards
};

/// What interleaved_prefill hands a KV-cache decoder (spec §6): the final buffers of the passes.
template <class T, class D>
struct PrefillState {
  std::vector<Tensor<T, 4, D>> k, v;  // per layer (B, P, Hkv, Dh): K post-RoPE/QK-norm, V mixed (the cache's)
  Tensor<T, 3, D> source;             // (B, P, d) source states Sbuf (the memory ring takes the last k)
  Tensor<T, 2, D> logits;             // (B, V) soft-capped logits after the last prompt token
};
/// The contract of a training schedule type Sched (see standard.hpp for the smallest one):
///   Sched::spec()                 its spelling in tools and checkpoints ("interleaved:2")
///   Sched::pass_factor            single-token forwards per token on a recurrent variant (spec §10)
///   Sched::takes_kv_refresh, Sched::takes_loss_weights, Sched::takes_zero_interior
///                                 which ScheduleOptions apply to it (the rest are refused)
///   Sched::check_options(o)       its own checks of those options (throws lrt::Error)
///   Sched::run(m, ids, tg, o)     its passes on a recurrent model (schedule_loss calls it)
template <class Sched>
concept TrainingSchedule = requires(const ScheduleOptions& o) {
  { Sched::spec() } -> std::convertible_to<std::string>;
  { Sched::pass_factor } -> std::convertible_to<double>;
  { Sched::takes_kv_refresh } -> std::convertible_to<bool>;
  { Sched::takes_loss_weights } -> std::convertible_to<bool>;
  { Sched::takes_zero_interior } -> std::convertible_to<bool>;
  Sched::check_options(o);
};

/// What a schedule's passes hand back besides the losses (explicit, never a side channel).
template <class T, class D>
struct PassOutputs {
  bool keep_logits = false;                 // each PassResult keeps its soft-capped logits
  PrefillState<T, D>* prefill = nullptr;    // subset_passes copies its final K/V buffers and source states here
};

namespace sched_detail {

/// x on device D from a host tensor (moved when D is the host).
template <class D, class T, int R>
Tensor<T, R, D> on_device(Tensor<T, R>&& h) {
  if constexpr (std::is_same_v<D, cpu::Device>) {
    return std::move(h);
  } else {
    return to<D>(h);
  }
}

/// Columns P of a (B, T) id tensor -> (B, |P|).
template <class D>
Tensor<index_t, 2, D> columns(const Tensor<index_t, 2, D>& x, const std::vector<index_t>& P) {
  const index_t B = x.shape()[0];
  const auto& xh = ad::detail::host_readable(x);
  Tensor<index_t, 2> y(Shape<2>{B, static_cast<index_t>(P.size())});
  for (index_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < P.size(); ++i) y(b, static_cast<index_t>(i)) = xh(b, P[i]);
  return on_device<D>(std::move(y));
}

/// Whether row b's memory at position p is cut by a BOS in tokens p-k+1..p (ResetAtBOS).
/// ids: host-readable (B, T).
inline bool bos_cut(const Tensor<index_t, 2>& ids, index_t b, index_t p, index_t k, index_t bos) {
  for (index_t j = std::max<index_t>(0, p - k + 1); j <= p; ++j)
    if (ids(b, j) == bos) return true;
  return false;
}

/// m~ at positions P from source states S (B, T, d): row p reads S[p - k] when p >= k and the
/// ResetAtBOS rule allows, else 0 (spec §3.1). Differentiable in S. As one gather of the rows
/// that read something (flat (b, p - k) -> flat (b, i)), so it runs on any device.
template <class T, Device D>
ad::Var<T, 3, D> shift_memory(const ad::Var<T, 3, D>& S, const std::vector<index_t>& P, index_t k,
                              const Tensor<index_t, 2, D>& ids, bool reset_at_bos, index_t bos) {
  const index_t B = S.shape()[0], Ts = S.shape()[1], d = S.shape()[2], n = static_cast<index_t>(P.size());
  const auto& ids_h = ad::detail::host_readable(ids);
  std::vector<index_t> src, dst;  // flat source rows of S (B*Ts, d) -> flat rows of y (B*n, d)
  for (index_t b = 0; b < B; ++b)
    for (index_t i = 0; i < n; ++i) {
      const index_t p = P[static_cast<std::size_t>(i)];
      if (p >= k && !(reset_at_bos && bos_cut(ids_h, b, p, k, bos))) {
        src.push_back(b * Ts + p - k);
        dst.push_back(b * n + i);
      }
    }
  Tensor<T, 3, D> y(Shape<3>{B, n, d});  // zeros
  if (src.empty()) return ad::constant(std::move(y));
  const IndexList<D> si(src), di(dst);
  {
    auto yf = y.view().template reshape<2>(Shape<2>{B * n, d});
    const auto sf = S.value().view().template reshape<2>(Shape<2>{B * Ts, d});
    yf.gather(0, di) = sf.gather(0, si);
  }
  return ad::record<T, 3, D>(
      "shift_memory", std::move(y),
      [S, si, di, B, Ts, n, d](const Tensor<T, 3, D>& gy, const Tensor<T, 3, D>&) {
        auto* g = ad::grad_slot(S);
        if (!g) return;
        auto gf = g->view().template reshape<2>(Shape<2>{B * Ts, d});
        const auto gyf = gy.view().template reshape<2>(Shape<2>{B * n, d});
        gf.gather(0, si) = gf.gather(0, si) + gyf.gather(0, di);
      },
      S);
}

/// A graph-local copy of v without gradient (detach).
template <class T, int R, Device D>
ad::Var<T, R, D> detached(const ad::Var<T, R, D>& v) {
  return ad::constant(Tensor<T, R, D>(v.value()));
}


/// Loss of one pass: the soft-capped cross-entropy of the head of h against targets (B, |P|).
template <class M, class T, class D>
PassResult<T, D> score(const M& m, const typename M::Var3& h, const Tensor<index_t, 2, D>& targets,
                       std::vector<index_t> positions, ad::Var<T, 0, D>& loss, bool keep_logits) {
  const index_t B = targets.shape()[0], n = targets.shape()[1];
  const auto z = m.head(h);
  Tensor<index_t, 1, D> tg(targets.view().template reshape<1>(Shape<1>{B * n}));
  const T cap = static_cast<T>(m.config().logit_softcap);
  auto ce = ad::cross_entropy(ad::reshape(z, Shape<2>{B * n, m.config().padded_vocab()}), tg, cap,
                              m.config().vocab_size);
  loss = ce.loss;
  PassResult<T, D> r{std::move(positions), std::move(ce.per_token), std::move(tg), ce.count, {}};
  if (keep_logits) {
    const index_t V = m.config().vocab_size;
    r.logits = Tensor<T, 3, D>(lrt::tanh(z.value().slice(2, 0, V) / cap) * cap);
  }
  return r;
}

template <class T, Device D>
ad::Var<T, 0, D> weighted_mean(const std::vector<ad::Var<T, 0, D>>& losses, const std::vector<double>& w) {
  double total = 0;
  for (double x : w) total += x;
  check(total > 0, "schedule", "the loss weights must have a positive sum");
  ad::Var<T, 0, D> acc = losses[0] * static_cast<T>(w[0] / total);
  for (std::size_t i = 1; i < losses.size(); ++i) acc = acc + losses[i] * static_cast<T>(w[i] / total);
  return acc;
}

/// spec §4.2's kv_refresh for a KV/Both model M: pass 0 hands each layer's g_rec and pre-RoPE key
/// kpre = g_loc k_loc to capture() (Model::Observe); refresh() then patches the buffer rows U not
/// visited yet from the latest source states Sbuf:
///   Mnew = shift_k(Sbuf); Kfb = P_k Mnew, Vfb = P_v Mnew (per layer if Layerwise)
///   rows U: Vbuf += g_rec (Vfb - Vfb_old); kpre += g_rec (Kfb - Kfb_old); Kbuf = N_h(RoPE(kpre))
///   Kfb_old, Vfb_old = Kfb, Vfb (Kfb_old = Vfb_old = 0 before the first refresh).
/// Only rows U are computed: the state (g_rec, kpre, Kfb_old, Vfb_old) is kept for the rows of the
/// previous refresh, a superset of U (visited only grows), and narrowed by a gather. Everything
/// stays in the graph (gradients flow through the patch like through the rest of the schedule).
template <class M, class T, Device D>
struct KvRefresh {
  using Var4 = ad::Var<T, 4, D>;
  const M& m;
  const Tensor<index_t, 2, D>& ids;
  std::vector<Var4> g_rec, kpre, kfb_old, vfb_old;  // per layer, rows `rows`; fb_old empty before the first
  std::vector<index_t> rows;                          // positions the state covers (ascending)

  KvRefresh(const M& model, const Tensor<index_t, 2, D>& x) : m(model), ids(x) {
    const auto L = static_cast<std::size_t>(model.config().n_layer);
    g_rec.resize(L), kpre.resize(L), kfb_old.resize(L), vfb_old.resize(L);
    rows.resize(static_cast<std::size_t>(x.shape()[1]));
    std::iota(rows.begin(), rows.end(), index_t{0});
  }
  typename M::Observe observer() {
    return [this](index_t l, const Var4& g, const Var4& k) {
      g_rec[static_cast<std::size_t>(l)] = g, kpre[static_cast<std::size_t>(l)] = k;
    };
  }
  /// Patches rows U (ascending, a subset of `rows`) of the buffers Kb, Vb (per layer (B, T, Hkv, Dh)).
  void refresh(const ad::Var<T, 3, D>& Sbuf, const std::vector<index_t>& U, std::vector<Var4>& Kb,
               std::vector<Var4>& Vb) {
    if (U.empty()) return;
    const ModelConfig& c = m.config();
    const index_t B = ids.shape()[0], Tt = ids.shape()[1], n = static_cast<index_t>(U.size());
    const Shape<4> s4{B, n, c.n_kv_head, c.head_dim()};
    if (U.size() != rows.size()) {  // narrow the state to U
      std::vector<index_t> local;
      local.reserve(U.size());
      std::size_t j = 0;
      for (index_t p : U) {
        while (rows[j] != p) ++j;  // U is an ascending subset of rows
        local.push_back(static_cast<index_t>(j));
      }
      const IndexList<D> li(local);
      for (auto* st : {&g_rec, &kpre, &kfb_old, &vfb_old})
        for (Var4& x : *st)
          if (x) x = ad::gather(x, 1, li);
      rows = U;
    }
    const bool first = !kfb_old[0];
    const bool all = n == Tt;  // every row: no gather/scatter on the buffers
    const IndexList<D> ui(U);
    const Tensor<index_t, 1, D> up = ui.tensor();
    const auto rope_u = ad::RopeTable<T, D>::make(up.view(), c.head_dim(), c.rope_bf16_tables);
    const ad::Var<T, 3, D> mem = shift_memory(Sbuf, U, c.mem_offset, ids, c.reset_at_bos, c.bos());
    constexpr bool shared = M::variant::projection == Projection::Shared;
    Var4 kfb, vfb;  // Shared: one projection for all layers
    if constexpr (shared) {
      kfb = ad::reshape(ad::linear(mem, m.proj_k()->var()), s4);
      vfb = ad::reshape(ad::linear(mem, m.proj_v()->var()), s4);
    }
    for (std::size_t l = 0; l < Kb.size(); ++l) {
      if constexpr (M::variant::projection == Projection::Layerwise) {
        kfb = ad::reshape(ad::linear(mem, m.blocks()[l].proj_k->var()), s4);
        vfb = ad::reshape(ad::linear(mem, m.blocks()[l].proj_v->var()), s4);
      }
      const std::size_t pl = shared ? 0 : l;  // Shared: Kfb_old, Vfb_old kept once
      const Var4 dk = first ? g_rec[l] * kfb : g_rec[l] * (kfb - kfb_old[pl]);
      const Var4 dv = first ? g_rec[l] * vfb : g_rec[l] * (vfb - vfb_old[pl]);
      kpre[l] = kpre[l] + dk;
      const Var4 knew = ad::rope_rmsnorm(kpre[l], rope_u);
      if (all) {
        Vb[l] = Vb[l] + dv;
        Kb[l] = knew;
      } else {
        Vb[l] = ad::scatter(Vb[l], 1, ui, ad::gather(Vb[l], 1, ui) + dv);
        Kb[l] = ad::scatter(Kb[l], 1, ui, knew);
      }
      if (!shared || l == 0) kfb_old[pl] = kfb, vfb_old[pl] = vfb;
    }
  }
};

/// Pass 0 (zero memory, all positions, fills the K/V buffers) then one pass per subset
/// (spec §4.2; Chunked §4.4 is the same with contiguous subsets). kv_refresh (KV/Both models):
/// patch the unvisited buffer rows after pass 0 and after every subset pass but the last.
template <class M, class T, Device D>
ScheduleResult<T, D> subset_passes(const M& m, const Tensor<index_t, 2, D>& ids, const Tensor<index_t, 2, D>& tg,
                                   const std::vector<std::vector<index_t>>& subsets, bool chunk_zero_interior,
                                   bool kv_refresh, const PassOutputs<T, D>& out) {
  const ModelConfig& c = m.config();
  const index_t Tt = ids.shape()[1], L = c.n_layer, k = c.mem_offset;
  const auto qpos = IndexList<D>::range(0, Tt);
  const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
  std::vector<ad::Var<T, 4, D>> Kb(static_cast<std::size_t>(L)), Vb(static_cast<std::size_t>(L));
  const typename M::Attend attend0 = [&](index_t l, const ad::Var<T, 4, D>& q, const ad::Var<T, 4, D>& kk,
                                         const ad::Var<T, 4, D>& vv) {
    Kb[static_cast<std::size_t>(l)] = kk, Vb[static_cast<std::size_t>(l)] = vv;
    return ad::attention(q, kk, vv, qpos, c.window(l));
  };
  ScheduleResult<T, D> r;
  std::vector<ad::Var<T, 0, D>> losses(1);
  std::optional<KvRefresh<M, T, D>> refresh;  // kv_refresh: pass 0 also keeps g_rec and kpre per layer
  typename M::Observe observe;
  if constexpr (M::variant::kv) {
    if (kv_refresh) refresh.emplace(m, ids), observe = refresh->observer();
  }
  auto p0 = m.forward(ids, rope, attend0, nullptr, refresh ? &observe : nullptr);
  std::vector<index_t> all(static_cast<std::size_t>(Tt));
  std::iota(all.begin(), all.end(), index_t{0});
  r.passes.push_back(score(m, p0.h, tg, all, losses[0], out.keep_logits));
  ad::Var<T, 3, D> Sbuf = p0.source;
  std::vector<char> visited;
  const std::vector<index_t>* last_subset = nullptr;
  if constexpr (M::variant::kv) {
    if (refresh) {
      visited.assign(static_cast<std::size_t>(Tt), 0);
      for (const auto& P : subsets)
        if (!P.empty()) last_subset = &P;
      refresh->refresh(Sbuf, all, Kb, Vb);  // after pass 0: every row is stale
    }
  }
  for (const std::vector<index_t>& P : subsets) {
    if (P.empty()) continue;
    const IndexList<D> idx(P);
    const auto rope_p = ad::RopeTable<T, D>::make(idx, c.head_dim(), c.rope_bf16_tables);
    ad::Var<T, 3, D> M_ = shift_memory(Sbuf, P, k, ids, c.reset_at_bos, c.bos());
    if (chunk_zero_interior) {  // interior positions of a chunk (p - k inside it) read zero memory
      Tensor<T, 3> mask(Shape<3>{1, static_cast<index_t>(P.size()), 1});  // broadcast over b and channels
      for (std::size_t i = 0; i < P.size(); ++i) mask(0, static_cast<index_t>(i), 0) = P[i] - k >= P.front() ? T(0) : T(1);
      M_ = M_ * ad::constant(on_device<D>(std::move(mask)));
    }
    const typename M::Attend attend = [&](index_t l, const ad::Var<T, 4, D>& q, const ad::Var<T, 4, D>& kk,
                                          const ad::Var<T, 4, D>& vv) {
      auto& kb = Kb[static_cast<std::size_t>(l)];
      auto& vb = Vb[static_cast<std::size_t>(l)];
      kb = ad::scatter(kb, 1, idx, kk);  // write-back of the fresh rows P
      vb = ad::scatter(vb, 1, idx, vv);
      return ad::attention(q, kb, vb, idx, c.window(l));
    };
    const Tensor<index_t, 2, D> ids_p = columns(ids, P), tg_p = columns(tg, P);
    auto pp = m.forward(ids_p, rope_p, attend, &M_);
    Sbuf = ad::scatter(Sbuf, 1, idx, pp.source);
    losses.emplace_back();
    r.passes.push_back(score(m, pp.h, tg_p, P, losses.back(), out.keep_logits));
    if constexpr (M::variant::kv) {
      if (refresh && &P != last_subset) {  // nothing reads the buffers after the last pass
        for (index_t p : P) visited[static_cast<std::size_t>(p)] = 1;
        std::vector<index_t> U;
        for (index_t p = 0; p < Tt; ++p)
          if (!visited[static_cast<std::size_t>(p)]) U.push_back(p);
        refresh->refresh(Sbuf, U, Kb, Vb);
      }
    }
  }
  if (PrefillState<T, D>* st = out.prefill) {  // interleaved_prefill: keep the final buffers
    for (std::size_t l = 0; l < Kb.size(); ++l) st->k.emplace_back(Kb[l].value()), st->v.emplace_back(Vb[l].value());
    st->source = Sbuf.value();
  }
  r.loss = weighted_mean(losses, std::vector<double>(losses.size(), 1.0));
  return r;
}

}  // namespace sched_detail

}  // namespace v0
}  // namespace lrt
