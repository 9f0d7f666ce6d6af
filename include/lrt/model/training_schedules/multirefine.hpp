// lrt/model/training_schedules/multirefine.hpp: MultiRefine<K> (spec §4.3), the release's use_multi_refine:
// a zero-memory pass, then K full passes each reading the previous pass's source states; the
// loss is the weighted mean of the K + 1 passes. Takes loss_weights (K + 1) and detach.
#pragma once

#include "common.hpp"

namespace lrt {
inline namespace v0 {

template <int K = 1>
struct MultiRefine {
  static_assert(K >= 0, "MultiRefine<K>: K is the number of refinement passes and must be >= 0");
  static constexpr int refinements = K;
  static constexpr const char* name = "multirefine";
  static std::string spec() { return "multirefine:" + std::to_string(K); }
  static constexpr double pass_factor = K + 1.0;
  static constexpr bool takes_kv_refresh = false, takes_loss_weights = true, takes_zero_interior = false;
  static void check_options(const ScheduleOptions& o) {
    check(o.loss_weights.empty() || o.loss_weights.size() == static_cast<std::size_t>(K + 1), "schedule",
          "MultiRefine<", K, "> needs ", K + 1, " loss weights, got ", o.loss_weights.size());
  }

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    using M = Model<V, T, D>;
    const ModelConfig& c = m.config();
    const index_t Tt = ids.shape()[1];
    std::vector<index_t> all(static_cast<std::size_t>(Tt));
    std::iota(all.begin(), all.end(), index_t{0});
    const auto qpos = IndexList<D>::range(0, Tt);
    const auto rope = ad::RopeTable<T, D>::make(qpos, c.head_dim(), c.rope_bf16_tables);
    const std::vector<double> w =
        o.loss_weights.empty() ? std::vector<double>(static_cast<std::size_t>(K + 1), 1.0) : o.loss_weights;
    check_options(o);
    ScheduleResult<T, D> r;
    std::vector<ad::Var<T, 0, D>> losses(static_cast<std::size_t>(K + 1));
    typename M::Var3 prev;
    for (int pass = 0; pass <= K; ++pass) {
      typename M::Var3 mem;
      if (pass > 0) mem = sched_detail::shift_memory(o.detach ? sched_detail::detached(prev) : prev, all, ids, c);
      auto p = m.forward(ids, rope, m.standard_attend(qpos), pass > 0 ? &mem : nullptr);
      r.passes.push_back(sched_detail::score(m, p.h, tg, all, losses[static_cast<std::size_t>(pass)], o.keep_logits));
      prev = p.source;
    }
    r.loss = sched_detail::weighted_mean(losses, w);
    return r;
  }
};

}  // namespace v0
}  // namespace lrt
