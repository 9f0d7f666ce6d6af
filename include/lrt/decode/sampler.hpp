// lrt/decode/sampler.hpp: the sampler of spec §6 (temperature, top-k, top-p) with counter-based
// draws: sample_counter(row, t) names the Philox draw of a row's token at position t, so that every
// backend samples the same tokens. Works on any logits on the host; the decoder (decode/decoder.hpp)
// produces them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../tensor/random.hpp"

namespace lrt {
inline namespace v0 {

struct SamplerOptions {
  double temperature = 1.0;  // 0: greedy (argmax, ties to the lowest id)
  index_t top_k = 0;         // > 0: keep the k largest logits (ties at the k-th kept)
  double top_p = 1.0;        // < 1: keep the shortest most-probable prefix with mass >= p
  std::uint64_t seed = 0;
};

/// The sampler's counter for row `row` at position `t`: row * 2^40 + t, unique per (row, position)
/// for any length a decoder reaches (positions < 2^40, rows < 2^24); row 0's is t.
inline std::uint64_t sample_counter(index_t row, index_t t) {
  check(row >= 0 && row < (index_t{1} << 24) && t >= 0 && t < (index_t{1} << 40), "sample", "counter for row ", row,
        " at position ", t, " outside rows [0, 2^24) x positions [0, 2^40)");
  return (static_cast<std::uint64_t>(row) << 40) | static_cast<std::uint64_t>(t);
}

/// Picks the next token from logits (V) per spec §6. `counter` selects the uniform draw of lrt's
/// Philox stream (key = seed): pass sample_counter(row, t) so that every backend draws the same
/// number and no two (row, position) pairs share one.
template <class T>
index_t sample_token(std::span<const T> logits, const SamplerOptions& o, std::uint64_t counter) {
  const index_t V = static_cast<index_t>(logits.size());
  check(V > 0, "sample", "empty logits");
  check(o.temperature >= 0, "sample", "temperature must be >= 0, got ", o.temperature);
  check(o.top_p > 0 && o.top_p <= 1, "sample", "top_p must be in (0, 1], got ", o.top_p);
  check(o.top_k >= 0, "sample", "top_k must be >= 0, got ", o.top_k);
  if (o.temperature == 0) return static_cast<index_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Scratch reused by this thread (no allocation per token after the first).
  thread_local std::vector<double> prob;
  thread_local std::vector<index_t> order;
  prob.assign(logits.begin(), logits.end());
  if (o.top_k > 0 && o.top_k < V) {
    thread_local std::vector<double> tmp;
    tmp.assign(prob.begin(), prob.end());
    std::nth_element(tmp.begin(), tmp.begin() + (o.top_k - 1), tmp.end(), std::greater<double>());
    const double kth = tmp[static_cast<std::size_t>(o.top_k - 1)];
    for (double& x : prob)
      if (x < kth) x = -std::numeric_limits<double>::infinity();
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (double& x : prob) mx = std::max(mx, x /= o.temperature);
  double sum = 0;
  for (double& x : prob) sum += (x = std::exp(x - mx));
  for (double& x : prob) x /= sum;
  if (o.top_p < 1) {
    order.resize(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), index_t{0});
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return prob[a] > prob[b]; });
    double cum = 0;
    std::size_t keep = 0;
    while (keep < order.size() && (keep == 0 || cum < o.top_p)) cum += prob[static_cast<std::size_t>(order[keep++])];
    for (std::size_t i = keep; i < order.size(); ++i) prob[static_cast<std::size_t>(order[i])] = 0;
    for (double& x : prob) x /= cum;
  }
  // One draw u in [0, 1), then the first id (ascending) whose cumulative mass exceeds u.
  const double u = lrt::unit_float(Philox::generate(o.seed, counter).v[0]);
  double cum = 0;
  index_t last = 0;
  for (index_t i = 0; i < V; ++i) {
    if (prob[static_cast<std::size_t>(i)] <= 0) continue;
    last = i;
    cum += prob[static_cast<std::size_t>(i)];
    if (u < cum) return i;
  }
  return last;  // rounding left u above the total: the last kept id
}

}  // namespace v0
}  // namespace lrt
