// A test-only injection added the way a variant's addition is meant to be: a gated residual
// gamma_l sigmoid(w_l) m, wired in model/block.hpp's block function (a constexpr branch on
// V::gated_residual) and its tensor w declared by the variant's add_weights here. Nothing else
// knows of it, yet it trains (its gradient matches finite differences in double), decodes in both
// executions bit for bit (Decoder on the tape, LeanDecoder directly), equals the Exact schedule
// within 1e-12, and round-trips a checkpoint.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include <lrt/decode/lean_model.hpp>
#include <lrt/model/checkpoint.hpp>

#include "lrt_fixtures.hpp"

namespace test_gated_residual {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace vs = lrt::variants;

namespace {

/// The release's LRT with the residual injection gated per layer: x + gamma_l sigmoid(w_l) m.
struct GatedResidual : vs::LrtRelease {
  static constexpr bool gated_residual = true;
  static void add_weights(const lrt::ModelConfig& c, lrt::WeightTable& t) {
    t.push_back({.name = "gamma_gate",
                 .slot = lrt::WeightSlot::other,
                 .role = lrt::ParamRole::MemoryGain,
                 .rows = c.n_layer,
                 .init = {lrt::WeightInit::Kind::Zeros, 0}});
  }
};

template <class M>
auto& param(const M& m, const std::string& name) {
  ad::Param<double, 1>* found = nullptr;
  m.for_each_param([&](auto& p) {
    if constexpr (std::remove_cvref_t<decltype(p.shape())>::rank == 1)
      if (p.name() == name) found = &p;
  });
  REQUIRE(found != nullptr);
  return *found;
}

/// The Decoder's and the lean decoder's logits for row `ids`, step by step (exact prefill).
template <class V, class T>
void check_executions_agree(const lrt::Model<V, T>& m, const std::vector<index_t>& ids) {
  lrt::Decoder<V, T> dec(m, 1);
  auto lean = lrt::make_lean_decoder(m);
  for (index_t tok : ids) {
    const auto& a = dec.step(std::span<const index_t>(&tok, 1));
    const auto b = lean.step(tok);
    REQUIRE(static_cast<std::size_t>(a.numel()) == b.size());
    CHECK(std::memcmp(a.data(), b.data(), b.size() * sizeof(T)) == 0);
  }
}

}  // namespace

TEST_CASE("gated residual (test-only flag): exact, both executions, gradients, training, checkpoint") {
  const lrt::ModelConfig c = cfg();
  lrt::Model<GatedResidual, double> m(c, 3);
  randomize(m, 17);
  const index_t T = c.sequence_len;
  const Tensor<index_t, 2> ids = ids_of(2, T, 5);
  const auto exact = merged_logits<lrt::Exact>(m, ids);

  SUBCASE("it computes gamma_l sigmoid(w_l) m: the release's LRT with those gains gives the same logits") {
    lrt::Model<vs::LrtRelease, double> plain(c, 3);
    plain.for_each_param([&](auto& p) {
      m.for_each_param([&](auto& q) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(p)>, std::remove_cvref_t<decltype(q)>>)
          if (p.name() == q.name()) p.value().view() = q.value();
      });
    });
    const auto& w = param(m, "gamma_gate").value();
    for (index_t l = 0; l < c.n_layer; ++l) plain.gamma()->value()(l) *= 1.0 / (1.0 + std::exp(-w(l)));
    CHECK(max_diff(merged_logits<lrt::Exact>(plain, ids), exact) < 1e-12);
    // ... and the gate matters (the test can fail): w = 0 halves every gain.
    lrt::Model<GatedResidual, double> half(c, 3);
    randomize(half, 17);
    param(half, "gamma_gate").value().fill(0.0);
    CHECK(max_diff(merged_logits<lrt::Exact>(half, ids), exact) > 1e-6);
  }

  SUBCASE("decoding and Interleaved<S >= T> equal Exact; the two executions agree bit for bit") {
    CHECK(max_diff(decode_logits(m, ids), exact) < 1e-12);
    CHECK(max_diff(merged_logits<lrt::Interleaved<64>>(m, ids, {}, 1), exact) < 1e-12);
    std::vector<index_t> row(static_cast<std::size_t>(3 * T));  // past the context: windows slide
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<index_t>((7 * i + 3) % 11);
    check_executions_agree(m, row);
    lrt::Model<GatedResidual, float> mf(c, 3);
    randomize(mf, 17);
    check_executions_agree(mf, row);
  }

  SUBCASE("the gate's gradient against central differences (Interleaved<2>'s loss)") {
    const auto [loss, grads] = loss_and_grads<lrt::Interleaved<2>>(m, ids, ids, {});
    CHECK(std::isfinite(loss));
    // The gate's entries in the roster's gradient vector.
    std::size_t at = 0, gate_at = 0;
    m.for_each_param([&](auto& p) {
      if (p.name() == "gamma_gate") gate_at = at;
      at += static_cast<std::size_t>(p.shape().numel());
    });
    auto& w = param(m, "gamma_gate");
    for (index_t l = 0; l < c.n_layer; ++l) {
      CAPTURE(l);
      const double h = 1e-5, w0 = w.value()(l);
      w.value()(l) = w0 + h;
      const double up = loss_and_grads<lrt::Interleaved<2>>(m, ids, ids, {}).first;
      w.value()(l) = w0 - h;
      const double down = loss_and_grads<lrt::Interleaved<2>>(m, ids, ids, {}).first;
      w.value()(l) = w0;
      const double fd = (up - down) / (2 * h), g = grads[gate_at + static_cast<std::size_t>(l)];
      CHECK(std::abs(g) > 1e-8);  // the gate is in the graph
      CHECK(std::abs(g - fd) <= 1e-6 * std::max(1.0, std::abs(fd)));
    }
  }

  SUBCASE("it trains: gradient steps lower the loss and move the gate") {
    const auto before = param(m, "gamma_gate").value();
    double first = 0, last = 0;
    for (int step = 0; step < 5; ++step) {
      const auto [loss, grads] = loss_and_grads<lrt::Interleaved<2>>(m, ids, ids, {});
      (step == 0 ? first : last) = loss;
      std::size_t at = 0;
      m.for_each_param([&](auto& p) {
        for (index_t i = 0; i < p.shape().numel(); ++i)
          p.value().data()[i] -= 0.05 * grads[at + static_cast<std::size_t>(i)];
        at += static_cast<std::size_t>(p.shape().numel());
      });
    }
    CHECK(last < first);
    CHECK(param(m, "gamma_gate").value()(0) != before(0));
  }

  SUBCASE("a checkpoint round-trips it") {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("lrt_test_gated_residual_" + std::to_string(::getpid()) + ".safetensors"))
                                 .string();
    lrt::Model<GatedResidual, float> mf(c, 3);  // files hold fp32: a float model round-trips exactly
    randomize(mf, 17);
    lrt::save_model(mf, path, 3);
    const lrt::st::Reader r = lrt::st::Reader::open(path);
    std::filesystem::remove(path);
    CHECK(r.shape("gamma_gate") == std::vector<std::int64_t>{c.n_layer});
    lrt::Model<GatedResidual, float> back(c, 99);
    lrt::load_weights(back, r);
    CHECK(max_diff(decode_logits(back, ids), decode_logits(mf, ids)) == 0);
    lrt::Model<GatedResidual, float> fresh(c, 99);  // the test can fail: an unloaded model differs
    CHECK(max_diff(decode_logits(fresh, ids), decode_logits(mf, ids)) > 1e-6);
  }
}

}  // namespace test_gated_residual
