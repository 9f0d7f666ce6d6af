// lrt/model/schedule.hpp: the training schedules of spec §4 as compile-time tags, and the
// differentiable loss each computes for a batch: Standard, Interleaved<S>, MultiRefine<K>,
// Chunked<C> and Exact (token by token with backprop through time, the ground truth).
// Every schedule reuses Model::forward; what differs is which positions a pass computes, which
// memory it reads and what its layers attend to (an attend hook).
// Shapes: B batch, T time, d width, Hkv KV heads, Dh head dim, P a position subset.
#pragma once

#include <numeric>
#include <optional>
#include <vector>

#include "gpt.hpp"

namespace lrt {
inline namespace v0 {

// ---------------------------------------------------------------- schedule tags

struct Standard {
  static constexpr const char* name = "standard";
};
template <int S = 2>
struct Interleaved {
  static_assert(S >= 1, "Interleaved<S>: S is the number of position subsets and must be >= 1");
  static constexpr int subsets = S;
  static constexpr const char* name = "interleaved";
};
template <int K = 1>
struct MultiRefine {
  static_assert(K >= 0, "MultiRefine<K>: K is the number of refinement passes and must be >= 0");
  static constexpr int refinements = K;
  static constexpr const char* name = "multirefine";
};
template <int C = 2>
struct Chunked {
  static_assert(C >= 1, "Chunked<C>: C is the number of contiguous chunks and must be >= 1");
  static constexpr int chunks = C;
  static constexpr const char* name = "chunked";
};
struct Exact {
  static constexpr const char* name = "exact";
};

/// The schedule's name as lrt-train spells it: standard, interleaved:S, multirefine:K, chunked:C, exact.
template <class Sched>
std::string schedule_spec() {
  if constexpr (requires { Sched::subsets; }) return "interleaved:" + std::to_string(Sched::subsets);
  else if constexpr (requires { Sched::refinements; }) return "multirefine:" + std::to_string(Sched::refinements);
  else if constexpr (requires { Sched::chunks; }) return "chunked:" + std::to_string(Sched::chunks);
  else return Sched::name;
}

/// Single-token forwards per token of schedule Sched on variant V (spec §10's pass factor):
/// Standard and Exact 1, Interleaved and Chunked 2, MultiRefine K+1; the baseline always 1.
template <class Sched, class V>
constexpr double pass_factor() {
  if constexpr (!V::recurrent) return 1.0;
  else if constexpr (requires { Sched::refinements; }) return Sched::refinements + 1.0;
  else if constexpr (requires { Sched::subsets; } || requires { Sched::chunks; }) return 2.0;
  else return 1.0;
}

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

/// Throws lrt::Error when options o do not apply to schedule Sched on variant V: kv_refresh
/// outside Interleaved<S> or without KV injection; loss weights or detach outside MultiRefine<K>;
/// a MultiRefine<K> weight list whose length is not K + 1.
template <class Sched, class V>
void check_schedule_options(const ScheduleOptions& o) {
  constexpr bool interleaved = requires { Sched::subsets; };
  constexpr bool multirefine = requires { Sched::refinements; };
  if (o.kv_refresh) {
    check(V::kv, "schedule", "kv_refresh patches the buffered recurrent K/V and needs KV injection (variant kv or "
          "both); this variant's injection is '", to_string(V::injection), "'");
    check(interleaved, "schedule", "kv_refresh is an option of Interleaved<S> (spec 4.2), not of schedule '",
          schedule_spec<Sched>(), "'");
  }
  if constexpr (multirefine) {
    check(o.loss_weights.empty() || o.loss_weights.size() == static_cast<std::size_t>(Sched::refinements + 1),
          "schedule", "MultiRefine<", Sched::refinements, "> needs ", Sched::refinements + 1, " loss weights, got ",
          o.loss_weights.size());
  } else {
    check(o.loss_weights.empty() && !o.detach, "schedule",
          "loss weights and detach are options of MultiRefine<K> (spec 4.3), not of schedule '", schedule_spec<Sched>(),
          "'");
  }
}

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

inline thread_local bool keep_logits = false;  // set by schedule_loss for its duration
/// Set by interleaved_prefill for its duration: subset_passes copies its final K/V buffers and
/// source states there.
template <class T, class D>
inline thread_local PrefillState<T, D>* prefill_out = nullptr;

template <class M, class T, class D>
PassResult<T, D> score(const M& m, const typename M::Var3& h, const Tensor<index_t, 2, D>& targets,
                       std::vector<index_t> positions, ad::Var<T, 0, D>& loss) {
  const index_t B = targets.shape()[0], n = targets.shape()[1];
  const auto z = m.head(h);
  Tensor<index_t, 1, D> tg(targets.view().template reshape<1>(Shape<1>{B * n}));
  auto ce = ad::cross_entropy(ad::reshape(z, Shape<2>{B * n, m.config().padded_vocab()}), tg, T(15),
                              m.config().vocab_size);
  loss = ce.loss;
  PassResult<T, D> r{std::move(positions), std::move(ce.per_token), std::move(tg), ce.count, {}};
  if (keep_logits) {
    const index_t V = m.config().vocab_size;
    r.logits = Tensor<T, 3, D>(lrt::tanh(z.value().slice(2, 0, V) / T(15)) * T(15));
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
    const ad::Var<T, 3, D> mem = shift_memory(Sbuf, U, c.mem_offset, ids, c.reset_at_bos, index_t{256});
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
                                   bool kv_refresh = false) {
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
  r.passes.push_back(score(m, p0.h, tg, all, losses[0]));
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
    ad::Var<T, 3, D> M_ = shift_memory(Sbuf, P, k, ids, c.reset_at_bos, index_t{256});
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
    r.passes.push_back(score(m, pp.h, tg_p, P, losses.back()));
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
  if (PrefillState<T, D>* out = prefill_out<T, D>) {  // interleaved_prefill: keep the final buffers
    for (std::size_t l = 0; l < Kb.size(); ++l) out->k.emplace_back(Kb[l].value()), out->v.emplace_back(Vb[l].value());
    out->source = Sbuf.value();
  }
  r.loss = weighted_mean(losses, std::vector<double>(losses.size(), 1.0));
  return r;
}

}  // namespace sched_detail

namespace sched_detail {
template <class Sched, class V, class T, Device D>
ScheduleResult<T, D> run_passes(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
  using M = Model<V, T, D>;
  const ModelConfig& c = m.config();
  const index_t Tt = ids.shape()[1], k = c.mem_offset;
  check(tg.shape() == ids.shape(), "schedule", "inputs ", ids.shape(), " vs targets ", tg.shape());
  check(Tt >= 1 && Tt <= c.sequence_len, "schedule", "sequence length ", Tt, " outside [1, sequence_len = ",
        c.sequence_len, "]");
  check_schedule_options<Sched, V>(o);
  std::vector<index_t> all(static_cast<std::size_t>(Tt));
  std::iota(all.begin(), all.end(), index_t{0});
  const auto qpos = IndexList<D>::range(0, Tt);
  const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
  struct KeepLogits {
    bool prev;
    explicit KeepLogits(bool on) : prev(std::exchange(sched_detail::keep_logits, on)) {}
    ~KeepLogits() { sched_detail::keep_logits = prev; }
  } keep(o.keep_logits);
  if constexpr (std::is_same_v<Sched, Standard> || !V::recurrent) {
    ScheduleResult<T, D> r;
    auto p = m.forward(ids, rope, m.standard_attend(qpos), nullptr);
    r.passes.push_back(sched_detail::score(m, p.h, tg, all, r.loss));
    return r;
  } else if constexpr (requires { Sched::subsets; }) {
    const index_t S = std::min<index_t>(Sched::subsets, Tt);  // [O] no empty subsets (spec §4.2)
    std::vector<std::vector<index_t>> subsets(static_cast<std::size_t>(S));
    for (index_t p = 0; p < Tt; ++p) subsets[static_cast<std::size_t>(p % S)].push_back(p);
    return sched_detail::subset_passes<M, T, D>(m, ids, tg, subsets, false, o.kv_refresh);
  } else if constexpr (requires { Sched::chunks; }) {
    const index_t C = std::min<index_t>(Sched::chunks, Tt);
    std::vector<std::vector<index_t>> subsets(static_cast<std::size_t>(C));
    for (index_t p = 0; p < Tt; ++p) subsets[static_cast<std::size_t>(p * C / Tt)].push_back(p);
    return sched_detail::subset_passes<M, T, D>(m, ids, tg, subsets, o.zero_interior_memory);
  } else if constexpr (requires { Sched::refinements; }) {
    const int K = Sched::refinements;
    std::vector<double> w = o.loss_weights.empty() ? std::vector<double>(static_cast<std::size_t>(K + 1), 1.0)
                                                   : o.loss_weights;
    check(static_cast<int>(w.size()) == K + 1, "schedule", "MultiRefine<", K, "> needs ", K + 1,
          " loss weights, got ", w.size());
    ScheduleResult<T, D> r;
    std::vector<ad::Var<T, 0, D>> losses(static_cast<std::size_t>(K + 1));
    typename M::Var3 prev;
    for (int pass = 0; pass <= K; ++pass) {
      typename M::Var3 mem;
      if (pass > 0) mem = sched_detail::shift_memory(o.detach ? sched_detail::detached(prev) : prev, all, k, ids,
                                                     c.reset_at_bos, index_t{256});
      auto p = m.forward(ids, rope, m.standard_attend(qpos), pass > 0 ? &mem : nullptr);
      r.passes.push_back(sched_detail::score(m, p.h, tg, all, losses[static_cast<std::size_t>(pass)]));
      prev = p.source;
    }
    r.loss = sched_detail::weighted_mean(losses, w);
    return r;
  } else {
    static_assert(std::is_same_v<Sched, Exact>, "unknown schedule tag");
    // Token by token (spec §4.5): position t reads the exact state of t - k and attends to the
    // K/V of positions <= t computed at their own steps; gradients flow through the whole chain.
    const index_t B = ids.shape()[0], L = c.n_layer;
    std::vector<ad::Var<T, 4, D>> Kc(static_cast<std::size_t>(L)), Vc(static_cast<std::size_t>(L));
    std::vector<typename M::Var3> states;
    std::vector<ad::Var<T, 0, D>> losses;
    std::vector<double> counts;
    ScheduleResult<T, D> r;
    for (index_t t = 0; t < Tt; ++t) {
      const std::vector<index_t> P{t};
      const IndexList<D> qt(P);
      const auto rope_t = ad::RopeTable<T, D>::make(qt, c.head_dim(), c.rope_bf16_tables);
      const typename M::Attend attend = [&](index_t l, const ad::Var<T, 4, D>& q, const ad::Var<T, 4, D>& kk,
                                            const ad::Var<T, 4, D>& vv) {
        auto& kc = Kc[static_cast<std::size_t>(l)];
        auto& vc = Vc[static_cast<std::size_t>(l)];
        kc = t == 0 ? kk : ad::concat(kc, kk, 1);
        vc = t == 0 ? vv : ad::concat(vc, vv, 1);
        return ad::attention(q, kc, vc, qt, c.window(l));
      };
      typename M::Var3 mem;
      if (t >= k) {
        mem = states[static_cast<std::size_t>(t - k)];
        if (c.reset_at_bos) {
          const auto& ids_h = ad::detail::host_readable(ids);
          Tensor<T, 3> mask(Shape<3>{B, 1, 1});
          for (index_t b = 0; b < B; ++b) mask(b, 0, 0) = sched_detail::bos_cut(ids_h, b, t, k, 256) ? T(0) : T(1);
          mem = mem * ad::constant(sched_detail::on_device<D>(std::move(mask)));
        }
      }
      const Tensor<index_t, 2, D> ids_t = sched_detail::columns(ids, P), tg_t = sched_detail::columns(tg, P);
      auto p = m.forward(ids_t, rope_t, attend, t >= k ? &mem : nullptr);
      states.push_back(p.source);
      losses.emplace_back();
      r.passes.push_back(sched_detail::score(m, p.h, tg_t, P, losses.back()));
      counts.push_back(static_cast<double>(r.passes.back().count));
    }
    // CE(all) = sum_t count_t CE_t / sum_t count_t (0 if nothing is scored).
    double total = 0;
    for (double x : counts) total += x;
    r.loss = total > 0 ? sched_detail::weighted_mean(losses, counts) : losses[0] * T(0);
    return r;
  }
}

}  // namespace sched_detail

/// The loss of schedule Sched (a tag above) on inputs/targets (B, T), with its passes and its
/// compute in token-forwards.
template <class Sched, class V, class T, Device D>
ScheduleResult<T, D> schedule_loss(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                   const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o = {}) {
  ScheduleResult<T, D> r = sched_detail::run_passes<Sched>(m, ids, tg, o);
  r.token_forwards = pass_factor<Sched, V>() * static_cast<double>(ids.numel());
  return r;
}

/// Interleaved prefill (spec §6): pass 0 and S refinement passes of §4.2 over a prompt ids (B, P),
/// without gradients, sharing subset_passes with the Interleaved<S> schedule. Returns what a
/// KV-cache decoder continues from: the final per-layer K/V buffers, the source states and the
/// logits after the last prompt token (from the last pass that computed it). S is clamped to P; S >= P
/// makes every position exact (spec §5c); S = 0 runs pass 0 alone (the zero-memory forward), as
/// does any S for a model without memory.
template <class V, class T, Device D>
PrefillState<T, D> interleaved_prefill(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids, index_t S) {
  const index_t P = ids.shape()[1];
  check(ids.shape()[0] >= 1 && P >= 1, "prefill", "empty prompt ", ids.shape());
  check(S >= 0, "prefill", "the number of refinement passes must be >= 0, got ", S);
  std::vector<std::vector<index_t>> subsets;
  if constexpr (V::recurrent) {  // a model without memory has nothing to refine
    const index_t n = std::min(S, P);
    subsets.resize(static_cast<std::size_t>(n));
    for (index_t p = 0; n > 0 && p < P; ++p) subsets[static_cast<std::size_t>(p % n)].push_back(p);
  }
  PrefillState<T, D> st;
  ad::Graph graph;
  ad::NoGrad no_grad;
  struct Scope {  // keep the logits of every pass and collect the buffers, restored on exit
    bool keep;
    PrefillState<T, D>* out;
    explicit Scope(PrefillState<T, D>* s)
        : keep(std::exchange(sched_detail::keep_logits, true)), out(std::exchange(sched_detail::prefill_out<T, D>, s)) {}
    ~Scope() { sched_detail::keep_logits = keep, sched_detail::prefill_out<T, D> = out; }
  } scope(&st);
  const ScheduleResult<T, D> r = sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, ids, subsets, false);
  for (auto it = r.passes.rbegin(); it != r.passes.rend(); ++it)
    for (std::size_t i = 0; i < it->positions.size(); ++i)
      if (it->positions[i] == P - 1) {
        st.logits = Tensor<T, 2, D>(it->logits.view().select(1, static_cast<index_t>(i)));
        return st;
      }
  throw Error("prefill", "no pass computed the last prompt position");  // unreachable: pass 0 covers all
}

}  // namespace v0
}  // namespace lrt
