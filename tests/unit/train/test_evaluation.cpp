// Evaluation of LRT models (train/eval.hpp), in double precision on tiny models with random
// weights: sequential bpb == the merged bpb of Interleaved<S >= T>'s parallel passes, zero memory ==
// pass 0; memory_statistics (gamma as stored, the recurrent gate's mean and sd by hand).
#include <lrt/train/eval.hpp>

#include <cmath>

#include "../model/lrt_fixtures.hpp"

namespace test_evaluation {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

TEST_CASE("lrt eval: sequential bpb == parallel merged bpb of Interleaved<S >= T>; zero memory == pass 0") {
  lrt::ModelConfig c = cfg();
  c.vocab_size = 257;
  lrt::Model<vs::Lrt, double> m(c, 1);
  randomize(m, 12);
  struct B {
    Tensor<index_t, 2> inputs, targets;
  };
  std::vector<B> batches;
  for (unsigned s = 0; s < 2; ++s) {
    Tensor<index_t, 2> in(Shape<2>{2, 8}), tg(Shape<2>{2, 8});
    std::mt19937 rng(s);
    for (index_t i = 0; i < 16; ++i) in.data()[i] = rng() % 257, tg.data()[i] = rng() % 257;
    tg(1, 2) = 256;  // BOS target: zero bytes
    batches.push_back({in, tg});
  }
  const auto seq = lrt::evaluate_sequential(m, batches);
  const auto par = lrt::evaluate_parallel<lrt::Interleaved<8>>(m, batches);
  index_t scored = 0;
  for (const auto& b : batches)
    for (index_t i = 0; i < 16; ++i) scored += b.targets.data()[i] < 256;
  CHECK(scored < 32);
  CHECK(seq.tokens == scored);
  CHECK(par.merged.tokens == scored);
  CHECK(seq.bpb() == doctest::Approx(par.merged.bpb()).epsilon(1e-10));
  const auto std0 = lrt::evaluate_parallel<lrt::Standard>(m, batches);
  CHECK(std0.merged.bpb() == doctest::Approx(par.passes[0].bpb()).epsilon(1e-12));  // pass 0 = zero memory
  CHECK(std::abs(std0.merged.bpb() - seq.bpb()) > 1e-6);
  CHECK(par.passes.size() == 9);
}

TEST_CASE("memory statistics: gamma as stored, the recurrent gate's mean and sd by hand, none for the baseline") {
  lrt::ModelConfig c = cfg();
  const Tensor<index_t, 2> ids = ids_of(2, 8, 3);
  {
    lrt::Model<vs::Baseline, double> m(c, 1);
    CHECK(lrt::memory_statistics(m, ids).empty());
  }
  {
    lrt::Model<vs::ResidualOnly, double> m(c, 1);
    randomize(m, 5);
    const auto st = lrt::memory_statistics(m, ids);
    REQUIRE(st.size() == 3);
    for (index_t l = 0; l < 3; ++l) {
      CHECK(st[static_cast<std::size_t>(l)].gamma == m.gamma()->value()(l));
      CHECK(std::isnan(st[static_cast<std::size_t>(l)].gate_mean));
    }
  }
  {  // At init the gates are 0, so g_rec = 2 sigmoid(0) = 1 everywhere.
    lrt::Model<vs::KVOnly, double> m(c, 1);
    const auto st = lrt::memory_statistics(m, ids);
    REQUIRE(st.size() == 3);
    for (const auto& x : st) {
      CHECK(x.gate_mean == 1.0);
      CHECK(x.gate_sd == 0.0);
      CHECK(std::isnan(x.gamma));
    }
  }
  {  // Layer 0 of KVOnly by hand: u = N(alpha x0 + beta x0), x0 = N(wte[id]); g_rec = 2 s(G[Hkv + h] u).
    lrt::Model<vs::KVOnly, double> m(c, 1);
    randomize(m, 7);
    const auto st = lrt::memory_statistics(m, ids);
    const index_t d = c.n_embd, Hkv = c.n_kv_head;
    const auto norm = [&](std::vector<double> x) {
      double ms = 0;
      for (double v : x) ms += v * v;
      const double r = 1.0 / std::sqrt(ms / static_cast<double>(d) + lrt::rmsnorm_eps);
      for (double& v : x) v *= r;
      return x;
    };
    const auto& G = m.blocks()[0].triple_gate->value();
    const double ab = m.resid_lambdas().value()(0) + m.x0_lambdas().value()(0);
    std::vector<double> g;
    for (index_t i = 0; i < ids.numel(); ++i) {
      std::vector<double> e(static_cast<std::size_t>(d));
      for (index_t j = 0; j < d; ++j) e[static_cast<std::size_t>(j)] = m.wte().value()(ids.data()[i], j);
      auto x = norm(e);
      for (double& v : x) v *= ab;
      const auto u = norm(x);
      for (index_t h = 0; h < Hkv; ++h) {
        double z = 0;
        for (index_t j = 0; j < d; ++j) z += G(Hkv + h, j) * u[static_cast<std::size_t>(j)];
        g.push_back(2.0 / (1.0 + std::exp(-z)));
      }
    }
    double mean = 0, var = 0;
    for (double v : g) mean += v / static_cast<double>(g.size());
    for (double v : g) var += (v - mean) * (v - mean) / static_cast<double>(g.size());
    CHECK(st[0].gate_mean == doctest::Approx(mean).epsilon(1e-9));
    CHECK(st[0].gate_sd == doctest::Approx(std::sqrt(var)).epsilon(1e-7));
    CHECK(std::sqrt(var) > 1e-3);  // random gates: a spread to measure
  }
}

}  // namespace test_evaluation
