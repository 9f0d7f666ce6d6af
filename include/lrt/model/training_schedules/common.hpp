// lrt/model/training_schedules/common.hpp: what every training schedule of spec §4 shares: its options
// (ScheduleOptions), what its passes hand back (PassResult, ScheduleResult, PrefillState), the
// contract a schedule type meets (the TrainingSchedule concept), and the pass machinery the
// schedules are built from (shift_memory, score; the interleaved passes, subset_passes with
// kv_refresh, are in interleaved.hpp; the memory rule and the pass loop in pass_plan.hpp).
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
#include "../schedule_options.hpp"
#include "pass_plan.hpp"

namespace lrt {
inline namespace v0 {

/// One pass of a schedule: the positions it scored and their per-token losses.
template <class T, class D>
struct PassResult {
  std::vector<index_t> positions;  // original positions computed by this pass (ascending)
  Tensor<T, 1, D> per_token;       // (B * |P|) nats, row-major over (b, i); 0 where ignored
  Tensor<index_t, 1, D> targets;   // (B * |P|)
  index_t count = 0;
  Tensor<T, 3, D> logits;  // (B, |P|, V) soft-capped, only with keep_logits
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
///   Sched::run(m, ids, tg, o)     its passes on a recurrent model (schedule_loss calls it; a
///                                 template on the model, so the concept cannot state it: a
///                                 schedule without it fails where schedule_loss calls it)
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
  bool keep_logits = false;               // each PassResult keeps its soft-capped logits
  PrefillState<T, D>* prefill = nullptr;  // subset_passes copies its final K/V buffers and source states here
};

namespace sched_detail {

/// Columns P of a (B, T) id tensor -> (B, |P|).
template <class D>
Tensor<index_t, 2, D> columns(const Tensor<index_t, 2, D>& x, const std::vector<index_t>& P) {
  const index_t B = x.shape()[0];
  const auto& xh = lrt::host_readable(x);
  Tensor<index_t, 2> y(Shape<2>{B, static_cast<index_t>(P.size())});
  for (index_t b = 0; b < B; ++b)
    for (std::size_t i = 0; i < P.size(); ++i) y(b, static_cast<index_t>(i)) = xh(b, P[i]);
  return lrt::on_device<D>(std::move(y));
}

/// m~ at positions P from source states S (B, T, d): row p reads S[p - k] where the memory rule
/// says it reads a state (memory_source, pass_plan.hpp), else 0 (spec §3.1). Differentiable in S.
/// As one gather of the rows that read something (flat (b, p - k) -> flat (b, i)), so it runs on
/// any device.
template <class T, Device D>
ad::Var<T, 3, D> shift_memory(const ad::Var<T, 3, D>& S, const std::vector<index_t>& P,
                              const Tensor<index_t, 2, D>& ids, const ModelConfig& c) {
  const index_t B = S.shape()[0], Ts = S.shape()[1], d = S.shape()[2], n = static_cast<index_t>(P.size());
  const auto& ids_h = lrt::host_readable(ids);
  std::vector<index_t> src, dst;  // flat source rows of S (B*Ts, d) -> flat rows of y (B*n, d)
  for (index_t b = 0; b < B; ++b)
    for (index_t i = 0; i < n; ++i) {
      const index_t from = memory_source(c, P[static_cast<std::size_t>(i)], [&](index_t j) { return ids_h(b, j); });
      if (from >= 0) {
        src.push_back(b * Ts + from);
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
  auto ce =
      ad::cross_entropy(ad::reshape(z, Shape<2>{B * n, m.config().padded_vocab()}), tg, cap, m.config().vocab_size);
  loss = ce.loss;
  PassResult<T, D> r{std::move(positions), std::move(ce.per_token), std::move(tg), ce.count, {}};
  if (keep_logits) {
    const index_t V = m.config().vocab_size;
    r.logits = Tensor<T, 3, D>(capped_logits<T>(z.value().slice(2, 0, V), m.config()));
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

}  // namespace sched_detail

}  // namespace v0
}  // namespace lrt
