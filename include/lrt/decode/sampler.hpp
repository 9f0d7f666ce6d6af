// lrt/decode/sampler.hpp: the sampler of spec §6 (temperature, top-k, top-p) with counter-based
// draws: sample_counter(row, t) names the Philox draw of a row's token at position t, so that every
// backend samples the same tokens. sample_token works on any logits on the host; sample_tokens
// takes a (B, Vp) logits tensor on any device (the decoder's, decode/decoder.hpp) and, on a
// device the host cannot read, samples there (DeviceSampler<D>, backend/sampler.hpp: on CUDA
// backend/cuda/sample.cuh), so that only the B chosen ids come back.
//
// The device's contract: greedy (temperature 0) is identical to sample_token (an argmax, ties to
// the lowest id). With temperature > 0 the kept set (top-k ties, the top-p prefix) and the
// probabilities are computed by the same formulas in double, but the device adds them in another
// order (and its exp may differ from the host's by an ulp), so a seeded draw gives sample_token's
// token except when the draw u falls within rounding (~1e-15 relative) of a boundary of the
// cumulative distribution, or when distinct logits round to equal probabilities (top-p then cuts
// by logit order). On the emulator of the tests (same exp, other order) none of 2240 draws differs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "../backend/sampler.hpp"
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../tensor/random.hpp"
#include "../tensor/tensor.hpp"

namespace lrt {
inline namespace v0 {

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

/// One token per row of logits (B, Vp), from the first `vocab` columns (the rest is padding):
/// row r as sample_token(row r, o, counters[r]). On a host-accessible device it is sample_token
/// per row; otherwise DeviceSampler<D> samples on the device (see the top of this file for how
/// its draws relate to sample_token's) and only the B ids come back.
template <class T, Device D>
std::vector<index_t> sample_tokens(const Tensor<T, 2, D>& logits, index_t vocab, const SamplerOptions& o,
                                   std::span<const std::uint64_t> counters) {
  const index_t B = logits.shape()[0], Vp = logits.shape()[1];
  check(static_cast<index_t>(counters.size()) == B, "sample", counters.size(), " counters for ", B, " rows of logits ",
        logits.shape());
  check(vocab > 0 && vocab <= Vp, "sample", "vocab ", vocab, " must be in [1, ", Vp, "] for logits ", logits.shape());
  check(o.temperature >= 0, "sample", "temperature must be >= 0, got ", o.temperature);
  check(o.top_p > 0 && o.top_p <= 1, "sample", "top_p must be in (0, 1], got ", o.top_p);
  check(o.top_k >= 0, "sample", "top_k must be >= 0, got ", o.top_k);
  if constexpr (D::host_accessible) {
    std::vector<index_t> out(static_cast<std::size_t>(B));
    std::vector<T> row(static_cast<std::size_t>(vocab));
    const auto v = logits.view();
    for (index_t r = 0; r < B; ++r) {
      for (index_t j = 0; j < vocab; ++j) row[static_cast<std::size_t>(j)] = v(r, j);
      out[static_cast<std::size_t>(r)] =
          sample_token<T>(std::span<const T>(row.data(), row.size()), o, counters[static_cast<std::size_t>(r)]);
    }
    return out;
  } else {
    if (B == 0) return {};
    return DeviceSampler<D>::template sample<T>(logits, vocab, o, counters);
  }
}

}  // namespace v0
}  // namespace lrt
