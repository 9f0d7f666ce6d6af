// lrt/model/training_schedules/standard.hpp: Standard (spec §4.1), one pass over all positions with zero
// memory: the baseline's training, and the smallest example of a schedule type (common.hpp's
// TrainingSchedule). A model without memory runs this pass whatever its schedule.
#pragma once

#include "common.hpp"

namespace lrt {
inline namespace v0 {

struct Standard {
  static constexpr const char* name = "standard";
  static std::string spec() { return name; }
  static constexpr double pass_factor = 1;
  static constexpr bool takes_kv_refresh = false, takes_loss_weights = false, takes_zero_interior = false;
  static void check_options(const ScheduleOptions&) {}

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    const ModelConfig& c = m.config();
    const index_t Tt = ids.shape()[1];
    std::vector<index_t> all(static_cast<std::size_t>(Tt));
    std::iota(all.begin(), all.end(), index_t{0});
    const auto qpos = IndexList<D>::range(0, Tt);
    const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
    ScheduleResult<T, D> r;
    auto p = m.forward(ids, rope, m.standard_attend(qpos), nullptr);
    r.passes.push_back(sched_detail::score(m, p.h, tg, all, r.loss, o.keep_logits));
    return r;
  }
};

}  // namespace v0
}  // namespace lrt
