// lrt/model/schedules/interleaved.hpp: Interleaved<S> (spec §4.2), the paper's interleaved
// parallel training: a zero-memory pass over all positions fills the K/V buffers, then the S
// subsets p mod S == i are refined in turn, each writing its fresh K/V and source states back.
// Takes kv_refresh (KV/Both variants).
#pragma once

#include "common.hpp"

namespace lrt {
inline namespace v0 {

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
    const index_t n = std::min<index_t>(S, Tt);
    std::vector<std::vector<index_t>> sub(static_cast<std::size_t>(n));
    for (index_t p = 0; p < Tt; ++p) sub[static_cast<std::size_t>(p % n)].push_back(p);
    return sub;
  }

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    return sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, tg, position_subsets(ids.shape()[1]), false,
                                                              o.kv_refresh, {o.keep_logits, nullptr});
  }
};

}  // namespace v0
}  // namespace lrt
