// lrt/optim/lr_schedule.hpp: the learning-rate, momentum and weight-decay schedules of LRT-SPEC §8,
// for step it in 0..N-1 (the training schedules of spec §4 are model/training_schedule.hpp).
//   lr_multiplier      1 for it <= N - W, then (N - it) / W, W = round(warmdown_frac N); with the
//                      nanochat options also a linear warm-up (it + 1) / U over the first
//                      U = round(warmup_frac N) steps and a floor: f + (1 - f) (N - it) / W
//   muon_momentum      0.85 + 0.10 min(it / 300, 1)
//   muon_weight_decay  base (1 - it / N), base = release_muon_weight_decay(L) = 0.2 (12 / L)^2,
//                      or cpu_muon_weight_decay = 0.1 for the CPU presets
// Arithmetic in double, rounded to float once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace optim {

/// Python's round(): nearest integer, ties to even (as the release computes W).
inline std::int64_t round_half_even(double x) {
  const double f = std::floor(x), d = x - f;
  auto i = static_cast<std::int64_t>(f);
  if (d > 0.5 || (d == 0.5 && (i % 2) != 0)) ++i;
  return i;
}

/// Number of warm-down steps W = round(warmdown_frac N).
inline std::int64_t warmdown_steps(std::int64_t N, double warmdown_frac = 0.5) {
  check(N >= 1, "lr_multiplier", "the horizon N must be >= 1, got ", N);
  check(warmdown_frac >= 0 && warmdown_frac <= 1, "lr_multiplier", "warmdown_frac must be in [0, 1], got ",
        warmdown_frac);
  return round_half_even(warmdown_frac * double(N));
}

/// LR multiplier at step it: 1 while it <= N - W, then (N - it) / W (no warm-up, final 0).
/// W == 0 (no warm-down) gives 1 throughout; past N it stays at 0.
inline float lr_multiplier(std::int64_t it, std::int64_t N, double warmdown_frac = 0.5) {
  check(it >= 0, "lr_multiplier", "step must be >= 0, got ", it);
  const std::int64_t W = warmdown_steps(N, warmdown_frac);
  if (W == 0 || it <= N - W) return 1.f;
  return static_cast<float>(std::max<double>(0.0, double(N - it) / double(W)));
}

/// The release's (nanochat's) full rule: (it + 1) / U for it < U = round(warmup_frac N), then 1
/// while it <= N - W, then r + (1 - r) f with r = (N - it) / W and f = final_frac (the LR at the
/// end as a fraction of the peak). warmup 0 and final 0 give lr_multiplier(it, N, warmdown_frac).
inline float lr_multiplier(std::int64_t it, std::int64_t N, double warmdown_frac, double warmup_frac,
                           double final_frac) {
  check(it >= 0, "lr_multiplier", "step must be >= 0, got ", it);
  check(warmup_frac >= 0 && warmup_frac <= 1, "lr_multiplier", "warmup_frac must be in [0, 1], got ", warmup_frac);
  check(warmup_frac + warmdown_frac <= 1, "lr_multiplier", "warmup_frac + warmdown_frac must be <= 1, got ",
        warmup_frac, " + ", warmdown_frac);
  check(final_frac >= 0 && final_frac <= 1, "lr_multiplier", "final_frac must be in [0, 1], got ", final_frac);
  const std::int64_t U = round_half_even(warmup_frac * double(N));
  if (it < U) return static_cast<float>(double(it + 1) / double(U));
  const std::int64_t W = warmdown_steps(N, warmdown_frac);
  if (W == 0 || it <= N - W) return 1.f;
  const double r = std::max<double>(0.0, double(N - it) / double(W));
  return static_cast<float>(r + (1.0 - r) * final_frac);
}

/// Muon momentum at step it: 0.85 rising linearly to 0.95 over the first 300 steps.
inline float muon_momentum(std::int64_t it) {
  check(it >= 0, "muon_momentum", "step must be >= 0, got ", it);
  return static_cast<float>(0.85 + 0.10 * std::min(double(it) / 300.0, 1.0));
}

/// Muon weight decay at step it: base (1 - it / N) (clamped at 0 past N).
inline float muon_weight_decay(std::int64_t it, std::int64_t N, float base) {
  check(it >= 0 && N >= 1, "muon_weight_decay", "need step >= 0 and N >= 1, got step ", it, ", N ", N);
  return static_cast<float>(double(base) * std::max(0.0, 1.0 - double(it) / double(N)));
}

/// The release's base Muon weight decay for L layers: 0.2 (12 / L)^2.
inline float release_muon_weight_decay(int n_layer) {
  check(n_layer >= 1, "muon_weight_decay", "layer count must be >= 1, got ", n_layer);
  const double r = 12.0 / double(n_layer);
  return static_cast<float>(0.2 * r * r);
}

/// The base Muon weight decay of the CPU presets.
inline constexpr float cpu_muon_weight_decay = 0.1f;

}  // namespace optim
}  // namespace v0
}  // namespace lrt
