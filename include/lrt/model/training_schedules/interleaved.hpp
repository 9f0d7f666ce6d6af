// lrt/model/training_schedules/interleaved.hpp: Interleaved<S> (spec §4.2), the paper's interleaved
// parallel training: a zero-memory pass over all positions fills the K/V buffers, then the S
// subsets p mod S == i are refined in turn, each writing its fresh K/V and source states back.
// All of it is here: the subsets (interleaved_subsets), the passes (subset_passes, which
// Chunked<C> shares with contiguous subsets; its loop is pass_plan.hpp's run_subset_passes, which
// the lean decoder's prefill runs too), kv_refresh for KV/Both variants (KvRefresh), the
// schedule type, and the interleaved prefill of a prompt for decoding (spec §6).
#pragma once

#include <algorithm>
#include <span>

#include "common.hpp"
#include "pass_plan.hpp"

namespace lrt {
inline namespace v0 {

namespace sched_detail {

/// The subsets p mod n == i of positions 0..Tt-1, n = min(S, Tt) (no empty subset, [O] spec §4.2);
/// none for S = 0.
inline std::vector<std::vector<index_t>> interleaved_subsets(index_t Tt, index_t S) {
  const index_t n = interleaved_subset_count(Tt, S);  // pass_plan.hpp: the rule prefill reads too
  std::vector<std::vector<index_t>> sub(static_cast<std::size_t>(n));
  std::vector<index_t> pos(static_cast<std::size_t>(std::max<index_t>(Tt, 1)));
  for (index_t i = 0; i < n; ++i)
    sub[static_cast<std::size_t>(i)].assign(pos.begin(), pos.begin() + interleaved_subset(Tt, S, i, pos.data()));
  return sub;
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
  std::vector<index_t> rows;                        // positions the state covers (ascending)

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
    const ad::Var<T, 3, D> mem = shift_memory(Sbuf, U, ids, c);
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
  // A pass's scores; for interleaved_prefill only the last position's logits, the head on it alone
  // (a pass without it scores nothing, and the loss is not formed).
  const auto pass_scores = [&](const ad::Var<T, 3, D>& h, const Tensor<index_t, 2, D>& targets,
                               const std::vector<index_t>& positions, ad::Var<T, 0, D>& loss) {
    if (out.prefill == nullptr) return score(m, h, targets, positions, loss, out.keep_logits);
    const auto at = std::find(positions.begin(), positions.end(), Tt - 1);
    if (at == positions.end()) return PassResult<T, D>{};
    const index_t i = static_cast<index_t>(at - positions.begin());
    return score(m, ad::slice(h, 1, i, i + 1), Tensor<index_t, 2, D>(targets.view().slice(1, i, i + 1)), {Tt - 1}, loss,
                 true);
  };
  std::vector<index_t> all(static_cast<std::size_t>(Tt));
  std::iota(all.begin(), all.end(), index_t{0});
  ad::Var<T, 3, D> Sbuf;
  std::vector<char> visited;  // kv_refresh: the positions a subset pass has computed (none before pass 0 ends)
  const auto pass = [&](std::span<const index_t> positions, bool memory) {
    if (!memory) {  // pass 0: zero memory, all positions; fills the buffers
      auto p0 = m.forward(ids, rope, attend0, nullptr, refresh ? &observe : nullptr);
      r.passes.push_back(pass_scores(p0.h, tg, all, losses[0]));
      Sbuf = p0.source;
      return;
    }
    const std::vector<index_t> P(positions.begin(), positions.end());
    const IndexList<D> idx(P);
    const auto rope_p = ad::RopeTable<T, D>::make(idx, c.head_dim(), c.rope_bf16_tables);
    ad::Var<T, 3, D> M_ = shift_memory(Sbuf, P, ids, c);
    if (chunk_zero_interior) {  // interior positions of a chunk (p - k inside it) read zero memory
      Tensor<T, 3> mask(Shape<3>{1, static_cast<index_t>(P.size()), 1});  // broadcast over b and channels
      for (std::size_t i = 0; i < P.size(); ++i)
        mask(0, static_cast<index_t>(i), 0) = P[i] - k >= P.front() ? T(0) : T(1);
      M_ = M_ * ad::constant(lrt::on_device<D>(std::move(mask)));
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
    r.passes.push_back(pass_scores(pp.h, tg_p, P, losses.back()));
  };
  // kv_refresh: after pass 0 every row is stale; after a subset pass, the rows no pass has visited
  // (nothing reads the buffers after the last pass).
  const auto after = [&]([[maybe_unused]] std::span<const index_t> positions, [[maybe_unused]] bool last) {
    if constexpr (M::variant::kv) {
      if (!refresh || last) return;
      if (visited.empty()) {  // after pass 0
        visited.assign(static_cast<std::size_t>(Tt), 0);
        refresh->refresh(Sbuf, all, Kb, Vb);
        return;
      }
      for (index_t p : positions) visited[static_cast<std::size_t>(p)] = 1;
      std::vector<index_t> U;
      for (index_t p = 0; p < Tt; ++p)
        if (!visited[static_cast<std::size_t>(p)]) U.push_back(p);
      refresh->refresh(Sbuf, U, Kb, Vb);
    }
  };
  run_subset_passes(
      all, static_cast<index_t>(subsets.size()),
      [&](index_t i) { return std::span<const index_t>(subsets[static_cast<std::size_t>(i)]); }, pass, after);
  if (PrefillState<T, D>* st = out.prefill) {  // interleaved_prefill: keep the final buffers
    for (std::size_t l = 0; l < Kb.size(); ++l) st->k.emplace_back(Kb[l].value()), st->v.emplace_back(Vb[l].value());
    st->source = Sbuf.value();
    return r;  // no loss: most passes scored nothing
  }
  r.loss = weighted_mean(losses, std::vector<double>(losses.size(), 1.0));
  return r;
}

}  // namespace sched_detail

template <int S = 2>
struct Interleaved {
  static_assert(S >= 1, "Interleaved<S>: S is the number of position subsets and must be >= 1");
  static constexpr int subsets = S;
  static constexpr const char* name = "interleaved";
  static std::string spec() { return "interleaved:" + std::to_string(S); }
  static constexpr double pass_factor = 2;  // pass 0 over all positions + each position once more
  static constexpr bool takes_kv_refresh = true, takes_loss_weights = false, takes_zero_interior = false;
  static void check_options(const ScheduleOptions&) {}

  /// The subsets p mod S' == i of positions 0..Tt-1, S' = min(S, Tt) (no empty subset, [O] spec §4.2).
  static std::vector<std::vector<index_t>> position_subsets(index_t Tt) {
    return sched_detail::interleaved_subsets(Tt, S);
  }

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    return sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, tg, position_subsets(ids.shape()[1]), false,
                                                             o.kv_refresh, {o.keep_logits, nullptr});
  }
};

/// Interleaved prefill (spec §6): pass 0 and S refinement passes of §4.2 over a prompt ids (B, P),
/// without gradients, sharing subset_passes with the Interleaved<S> schedule. Returns what a
/// KV-cache decoder continues from: the final per-layer K/V buffers, the source states and the
/// logits after the last prompt token (from the last pass that computed it; the head runs on that
/// position alone). S is clamped to P; S >= P
/// makes every position exact (spec §5c); S = 0 runs pass 0 alone (the zero-memory forward), as
/// does any S for a model without memory.
template <class V, class T, Device D>
PrefillState<T, D> interleaved_prefill(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids, index_t S) {
  const index_t P = ids.shape()[1];
  check(ids.shape()[0] >= 1 && P >= 1, "prefill", "empty prompt ", ids.shape());
  check(S >= 0, "prefill", "the number of refinement passes must be >= 0, got ", S);
  std::vector<std::vector<index_t>> subsets;
  if constexpr (V::recurrent) subsets = sched_detail::interleaved_subsets(P, S);  // no memory: nothing to refine
  PrefillState<T, D> st;
  ad::Graph graph;
  ad::NoGrad no_grad;
  // Every pass keeps its logits; the final buffers are collected into st.
  const ScheduleResult<T, D> r =
      sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, ids, subsets, false, false, {true, &st});
  for (auto it = r.passes.rbegin(); it != r.passes.rend(); ++it)
    for (std::size_t i = 0; i < it->positions.size(); ++i)
      if (it->positions[i] == P - 1) {
        st.logits = Tensor<T, 2, D>(it->logits.view().select(1, static_cast<index_t>(i)));
        return st;
      }
  ::lrt::throw_error("prefill", "no pass computed the last prompt position");  // unreachable: pass 0 covers all
}

}  // namespace v0
}  // namespace lrt
