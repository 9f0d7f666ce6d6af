// lrt/model/schedule_options.hpp: the runtime options of the training schedules and the name of
// a variant's natural schedule, apart from the schedules themselves (model/training_schedule.hpp)
// so that code without the model (the checkpoint loader, the lean decoder's programs) reads them.
#pragma once

#include <string>
#include <vector>

namespace lrt {
inline namespace v0 {

/// Runtime options of the schedules (spec §4).
struct ScheduleOptions {
  std::vector<double> loss_weights;   // MultiRefine: one per pass (empty: all 1)
  bool detach = false;                // MultiRefine: no gradient through the previous pass's states
  bool zero_interior_memory = false;  // Chunked: interior positions read zero memory instead of stale
  bool keep_logits = false;           // keep each pass's soft-capped logits (tests, evaluation)
  // Interleaved<S>, KV/Both variants only: between passes, patch the buffered K/V rows no pass has
  // recomputed yet with the latest memory (spec §4.2's kv_refresh, the release's
  // interleaved_kv_refresh). Refused (lrt::Error) for other schedules and for variants without
  // KV injection, where it would have nothing to patch.
  bool kv_refresh = false;
};

/// The spelling (schedule_spec) of the natural schedule of a variant with (recurrent) or without
/// memory: Interleaved<2> or Standard (model/training_schedule.hpp's default_schedule; a unit test
/// ties the two).
inline std::string natural_schedule_spec(bool recurrent) { return recurrent ? "interleaved:2" : "standard"; }

}  // namespace v0
}  // namespace lrt
