// Helpers of the LRT tests on tiny double-precision models with random weights (spec §5), shared by
// model/test_lrt_invariants.cpp, model/test_kv_refresh.cpp, model/test_lrt_checkpoints.cpp,
// decode/test_past_context.cpp and train/test_evaluation.cpp: random weights, the small config,
// random ids, the soft-capped logits of a schedule (merged over its passes) and of the Decoder,
// and the loss and gradients of a schedule.
#pragma once

#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "../test_util.hpp"

namespace lrt_fixtures {

using namespace lrt_test;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;

using lrt_test::randomize;
inline lrt::ModelConfig cfg(index_t T = 8) {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = T, c.vocab_size = 11;
  c.window_pattern = "SL";  // layer 0 window T/2: rows of T tokens cross it
  return c;
}
inline Tensor<index_t, 2> ids_of(index_t B, index_t T, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor<index_t, 2> ids(Shape<2>{B, T});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t) ids(b, t) = static_cast<index_t>(rng() % 11);
  return ids;
}
/// Soft-capped logits (B, T, V) of a schedule, assembled from its passes: the last pass that
/// computed each position.
template <class Sched, class M>
Tensor<double, 3> merged_logits(const M& m, const Tensor<index_t, 2>& ids, const lrt::ScheduleOptions& o0 = {},
                                int pass_from = 0) {
  lrt::ScheduleOptions o = o0;
  o.keep_logits = true;
  ad::Graph g;
  ad::NoGrad ng;
  const auto r = lrt::schedule_loss<Sched>(m, ids, ids, o);
  const index_t B = ids.shape()[0], T = ids.shape()[1], V = m.config().vocab_size;
  Tensor<double, 3> out(Shape<3>{B, T, V});
  for (std::size_t p = static_cast<std::size_t>(pass_from); p < r.passes.size(); ++p) {
    const auto& pr = r.passes[p];
    for (index_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < pr.positions.size(); ++i)
        for (index_t v = 0; v < V; ++v) out(b, pr.positions[i], v) = pr.logits(b, static_cast<index_t>(i), v);
  }
  return out;
}
inline double max_diff(const Tensor<double, 3>& a, const Tensor<double, 3>& b) {
  double w = 0;
  for (index_t i = 0; i < a.numel(); ++i) w = std::max(w, std::abs(a.data()[i] - b.data()[i]));
  return w;
}
template <class M>
Tensor<double, 3> decode_logits(const M& m, const Tensor<index_t, 2>& ids) {
  const index_t B = ids.shape()[0], T = ids.shape()[1], V = m.config().vocab_size;
  lrt::Decoder dec(m, B);
  Tensor<double, 3> out(Shape<3>{B, T, V});
  for (index_t t = 0; t < T; ++t) {
    std::vector<index_t> tok;
    for (index_t b = 0; b < B; ++b) tok.push_back(ids(b, t));
    const auto& lg = dec.step(tok);
    for (index_t b = 0; b < B; ++b)
      for (index_t v = 0; v < V; ++v) out(b, t, v) = lg(b, v);
  }
  return out;
}

/// Loss and every parameter gradient of schedule Sched with options o.
template <class Sched, class M>
std::pair<double, std::vector<double>> loss_and_grads(const M& m, const Tensor<index_t, 2>& in,
                                                      const Tensor<index_t, 2>& tg, const lrt::ScheduleOptions& o) {
  m.zero_grad();
  double loss = 0;
  {
    ad::Graph g;
    const auto r = lrt::schedule_loss<Sched>(m, in, tg, o);
    loss = r.loss.value()();
    ad::backward(r.loss);
  }
  std::vector<double> grads;
  m.for_each_param([&](auto& p) { grads.insert(grads.end(), p.grad().data(), p.grad().data() + p.grad().numel()); });
  m.zero_grad();
  return {loss, grads};
}
inline double max_abs(const std::vector<double>& a, const std::vector<double>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]));
  return w;
}
inline double max_abs(const std::vector<double>& a) { return max_abs(a, std::vector<double>(a.size(), 0.0)); }

}  // namespace lrt_fixtures
