// lrt/model/training_schedule.hpp: the training schedules of spec §4 and the differentiable loss
// each computes for a batch: Standard, Interleaved<S>, MultiRefine<K>, Chunked<C> and Exact (token
// by token with backprop through time, the ground truth), one type each in
// model/training_schedules/, which carries its own facts (spelling, pass factor, options, passes:
// the TrainingSchedule concept of training_schedules/common.hpp). Here: what every schedule is
// asked through (schedule_spec, pass_factor, check_schedule_options, schedule_loss) and the
// natural schedule of a variant. The interleaved prefill of a prompt lives with Interleaved<S>
// (training_schedules/interleaved.hpp). Adding a schedule: one new type in one file of
// training_schedules/ plus its include below (and, for the tools, one line in examples/tools/registry/).
// Not here: the learning-rate schedules of training (optim/lr_schedule.hpp).
#pragma once

#include "training_schedules/common.hpp"
#include "training_schedules/standard.hpp"
#include "training_schedules/interleaved.hpp"
#include "training_schedules/multirefine.hpp"
#include "training_schedules/chunked.hpp"
#include "training_schedules/exact.hpp"

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
/// Throws lrt::Error when options o do not apply to schedule Sched on variant V: kv_refresh
/// outside a schedule that takes it (Interleaved<S>) or without KV injection; loss weights or
/// detach outside one that takes them (MultiRefine<K>); zero_interior_memory outside Chunked<C>;
/// then the schedule's own checks (a MultiRefine<K> weight list whose length is not K + 1).
template <TrainingSchedule Sched, class V>
void check_schedule_options(const ScheduleOptions& o) {
  if (o.kv_refresh) {
    check(V::kv, "schedule",
          "kv_refresh patches the buffered recurrent K/V and needs KV injection (variant kv or "
          "both); this variant's injection is '",
          to_string(V::injection), "'");
    check(Sched::takes_kv_refresh, "schedule",
          "kv_refresh is an option of Interleaved<S> (spec 4.2), not of schedule '", schedule_spec<Sched>(), "'");
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

/// The loss of schedule Sched (a type of training_schedules/) on inputs/targets (B, T), with its passes and
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
        " exceeds sequence_len = ", c.sequence_len,
        " (longer inputs are allowed only without gradients, "
        "under ad::NoGrad: the windows and RoPE carry on, as in decoding)");
  check_schedule_options<Sched, V>(o);
  ScheduleResult<T, D> r;
  if constexpr (V::recurrent)
    r = Sched::run(m, ids, tg, o);
  else
    r = Standard::run(m, ids, tg, o);
  r.token_forwards = pass_factor<Sched, V>() * static_cast<double>(ids.numel());
  return r;
}

}  // namespace v0
}  // namespace lrt
