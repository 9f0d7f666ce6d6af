// lrt/model/training_schedules/exact.hpp: Exact (spec §4.5), the ground truth: token by token, position t
// reads the exact state of t - k and attends to the K/V of positions <= t computed at their own
// steps; gradients flow through the whole chain (backprop through time). O(T) passes: for tests.
#pragma once

#include "common.hpp"

namespace lrt {
inline namespace v0 {

struct Exact {
  static constexpr const char* name = "exact";
  static std::string spec() { return name; }
  static constexpr double pass_factor = 1;  // each position is computed once
  static constexpr bool takes_kv_refresh = false, takes_loss_weights = false, takes_zero_interior = false;
  static void check_options(const ScheduleOptions&) {}

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    using M = Model<V, T, D>;
    const ModelConfig& c = m.config();
    const index_t Tt = ids.shape()[1], k = c.mem_offset, B = ids.shape()[0], L = c.n_layer;
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
          const auto& ids_h = lrt::host_readable(ids);
          Tensor<T, 3> mask(Shape<3>{B, 1, 1});
          for (index_t b = 0; b < B; ++b)
            mask(b, 0, 0) = reads_state(c, t, ids_h(b, t), [&](index_t j) { return ids_h(b, j); }) ? T(1) : T(0);
          mem = mem * ad::constant(lrt::on_device<D>(std::move(mask)));
        }
      }
      const Tensor<index_t, 2, D> ids_t = sched_detail::columns(ids, P), tg_t = sched_detail::columns(tg, P);
      auto p = m.forward(ids_t, rope_t, attend, t >= k ? &mem : nullptr);
      states.push_back(p.source);
      losses.emplace_back();
      r.passes.push_back(sched_detail::score(m, p.h, tg_t, P, losses.back(), o.keep_logits));
      counts.push_back(static_cast<double>(r.passes.back().count));
    }
    // CE(all) = sum_t count_t CE_t / sum_t count_t (0 if nothing is scored).
    double total = 0;
    for (double x : counts) total += x;
    r.loss = total > 0 ? sched_detail::weighted_mean(losses, counts) : losses[0] * T(0);
    return r;
  }
};

}  // namespace v0
}  // namespace lrt
