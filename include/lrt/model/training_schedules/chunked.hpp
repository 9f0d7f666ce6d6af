// lrt/model/training_schedules/chunked.hpp: Chunked<C> (spec §4.4), the interleaved machinery with C
// contiguous chunks instead of strided subsets. Takes zero_interior_memory (positions whose
// source p - k lies inside their own chunk read zero memory instead of the stale state).
#pragma once

#include "interleaved.hpp"  // subset_passes

namespace lrt {
inline namespace v0 {

template <int C = 2>
struct Chunked {
  static_assert(C >= 1, "Chunked<C>: C is the number of contiguous chunks and must be >= 1");
  static constexpr int chunks = C;
  static constexpr const char* name = "chunked";
  static std::string spec() { return "chunked:" + std::to_string(C); }
  static constexpr double pass_factor = 2;
  static constexpr bool takes_kv_refresh = false, takes_loss_weights = false, takes_zero_interior = true;
  static void check_options(const ScheduleOptions&) {}

  template <class V, class T, Device D>
  static ScheduleResult<T, D> run(const Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                  const Tensor<index_t, 2, D>& tg, const ScheduleOptions& o) {
    const index_t Tt = ids.shape()[1];
    const index_t n = std::min<index_t>(C, Tt);
    std::vector<std::vector<index_t>> sub(static_cast<std::size_t>(n));
    for (index_t p = 0; p < Tt; ++p) sub[static_cast<std::size_t>(p * n / Tt)].push_back(p);
    return sched_detail::subset_passes<Model<V, T, D>, T, D>(m, ids, tg, sub, o.zero_interior_memory, false,
                                                             {o.keep_logits, nullptr});
  }
};

}  // namespace v0
}  // namespace lrt
