// lrt/train/options.hpp: the training options of spec §8 (batch, horizon, learning rates and
// their schedule), apart from the model: light (the standard library, lrt's JSON and the schedule
// functions), so that lrt/runtime/training.hpp takes them as they are. optimizer_groups.hpp turns
// them into a model's optimizers.
#pragma once

#include <cstdint>

#include "../core/config.hpp"
#include "../io/json.hpp"
#include "../optim/lr_schedule.hpp"

namespace lrt {
inline namespace v0 {

struct TrainOptions {
  index_t batch_rows = 32;  // rows (of T tokens) per optimizer step: B_tok = batch_rows * T
  index_t micro_rows = 0;   // rows per forward/backward (0: batch_rows); must divide batch_rows
  std::int64_t steps = 0;   // horizon N of the schedules (set before training)
  std::uint64_t seed = 0;   // data order (the model's init seed is separate)
  // Learning rates before scaling (spec §8); dls = (d/768)^-0.5 scales the embedding and head.
  float matrix_lr = 0.02f, embedding_lr = 0.3f, unembedding_lr = 0.004f, scalar_lr = 0.5f, resid_lr = 0.005f;
  float gamma_lr = -1;                 // the memory gains gamma_l alone; < 0: scalar_lr (the release: gamma shares it)
  bool release_batch_scaling = false;  // bls = sqrt(B_tok / 2^19) (release) or 1 (CPU presets)
  float muon_weight_decay = optim::cpu_muon_weight_decay;  // base of wd = base (1 - it/N)
  double warmdown_frac = 0.5;
  double warmup_frac = 0;    // linear warm-up over round(warmup_frac N) steps (release: 0)
  double final_lr_frac = 0;  // the LR multiplier at the end of the warm-down (release: 0)

  /// The learning rate of the memory gains before scaling: gamma_lr, or scalar_lr when unset.
  float memory_gain_lr() const { return gamma_lr < 0 ? scalar_lr : gamma_lr; }

  /// The LR multiplier at step it of the horizon `steps` (spec §8, optim::lr_multiplier).
  float lr_multiplier(std::int64_t it) const {
    return optim::lr_multiplier(it, steps, warmdown_frac, warmup_frac, final_lr_frac);
  }

  json::Value to_json() const {
    json::Value j = json::Value::object();
    j["batch_rows"] = batch_rows, j["micro_rows"] = micro_rows, j["steps"] = steps;
    j["seed"] = static_cast<std::int64_t>(seed);
    j["matrix_lr"] = matrix_lr, j["embedding_lr"] = embedding_lr, j["unembedding_lr"] = unembedding_lr;
    j["scalar_lr"] = scalar_lr, j["resid_lr"] = resid_lr, j["release_batch_scaling"] = release_batch_scaling;
    j["gamma_lr"] = gamma_lr;
    j["muon_weight_decay"] = muon_weight_decay, j["warmdown_frac"] = warmdown_frac;
    j["warmup_frac"] = warmup_frac, j["final_lr_frac"] = final_lr_frac;
    return j;
  }
};

}  // namespace v0
}  // namespace lrt
