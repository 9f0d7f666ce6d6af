// lrt/model/schedule.hpp: the training schedules of spec §4 and the differentiable loss each
// computes for a batch: Standard, Interleaved<S>, MultiRefine<K>, Chunked<C> and Exact (token by
// token with backprop through time, the ground truth), one type each in model/schedules/, which
// carries its own facts (spelling, pass factor, options, passes: the TrainingSchedule concept of
// schedules/common.hpp). Here: what every schedule is asked through (schedule_spec, pass_factor,
// check_schedule_options, schedule_loss), the natural schedule of a variant and the interleaved
// prefill of a prompt. Adding a schedule: one new type in one file of schedules/ plus its include
// below (and, for the tools, one line in examples/registry/).
// Not here: the learning-rate schedules of training (optim/schedule.hpp).
#pragma once

#include "schedules/common.hpp"
#include "schedules/standard.hpp"
#include "schedules/interleaved.hpp"
#include "schedules/multirefine.hpp"
#include "schedules/chunked.hpp"
#include "schedules/exact.hpp"

namespace lrt {
inline namespace v0 {

/// The schedule's name as lrt-train spells it: standard, interleaved:S, multirefine:K, chunked:C, exact.
template <TrainingSchedule Sched>
std::string schedule_spec() {
  return Sched::spec();
}

/// Single-token forwards per token of schedule Sched on variant V (spec §10's pass factor):
/// Standard and Exact 1, Interleaved and Chunked 2, MultiRefine K+1; the baseline always 1.
template <TrainingSchedule Sched, class V>
constexpr double pass_factor() {
  return V::recurrent ? static_cast<double>(Sched::pass_factor) : 1.0;
}

/// The natural schedule of a variant: Standard for the baseline, Interleaved<2> for LRT.
template <class V>
using default_schedule = std::conditional_t<V::recurrent, Interleaved<2>, Standard>;
/// The spelling of the natural schedule of a variant with (recurrent) or without memory.
inline std::string natural_schedule_spec(bool recurrent) {
  return recurrent ? schedule_spec<default_schedule<variants::Lrt>>() : schedule_spec<default_schedule<variants::Baseline>>();
}

/// Throws lrt::Error when options o do not apply to schedule Sched on variant V: kv_refresh
/// outside a schedule that takes it (Interleaved<S>) or without KV injection; loss weights or
/// detach outside one that takes them (MultiRefine<K>); zero_interior_memory outside Chunked<C>;
/// then the schedule's own checks (a MultiRefine<K> weight list whose length is not K + 1).
template <TrainingSchedule Sched, class V>
void check_schedule_options(const ScheduleOptions& o) {
  if (o.kv_refresh) {
    check(V::kv, "schedule", "kv_refresh patches the buffered recurrent K/V and needs KV injection (variant kv or "
          "both); this variant's injection is '", to_string(V::injection), "'");
    check(Sched::takes_kv_refresh, "schedule", "kv_refresh is an option of Interleaved<S> (spec 4.2), not of schedule '",
          schedule_spec<Sched>(), "'");
  }
  if constexpr (!Sched::takes_loss_weights) {
    check(o.loss_weights.empty() && !o.detach, "schedule",
          "loss weights and detach are options of MultiRefine<K> (spec 4.3), not of schedule '", schedule_spec<Sched>(),
          "'");
  }
  check(!o.zero_interior_memory || Sched::takes_zero_interior, "schedule",
        "zero_interior_memory is an option of Chunked<C> (spec 4.4), not of schedule '", schedule_spec<Sched>(), "'");
  Sched::check_options(o);
}

/// The loss of schedule Sched (a type of schedules/) on inputs/targets (B, T), with its passes and
/// its compute in token-forwards. A model without memory runs the Standard pass whatever Sched.
/// T <= sequence_len while gradients are recorded; longer inputs are scored without gradients
/// (under ad::NoGrad), e.g. Exact over a whole long text as the reference for decoding past T.
template <TrainingSchedule Sched, class V, class T, Device D>
ScheduleResult<T, D> schedule_loss(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                   const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o = {}) {
  const ModelConfig& c = m.config();
  const index_t Tt = ids.shape()[1];
  check(tg.shape() == ids.shape(), "schedule", "inputs ", ids.shape(), " vs targets ", tg.shape());
  check(Tt >= 1, "schedule", "empty sequence ", ids.shape());
  check(Tt <= c.sequence_len || !ad::grad_enabled(), "schedule", "sequence length ", Tt,
        " exceeds sequence_len = ", c.sequence_len, " (longer inputs are allowed only without gradients, "
        "under ad::NoGrad: the windows and RoPE carry on, as in decoding)");
  check_schedule_options<Sched, V>(o);
  ScheduleResult<T, D> r;
  if constexpr (V::recurrent) r = Sched::run(m, ids, tg, o);
  else r = Standard::run(m, ids, tg, o);
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
  // Every pass keeps its logits; the final buffers are collected into st.
  const ScheduleResult<T, D> r =
      sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, ids, subsets, false, false, {true, &st});
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
