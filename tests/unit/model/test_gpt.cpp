// The GPT baseline: parameter names, shapes and counts against the spec's formulas, gradients of
// the whole model against finite differences (double), KV-cache decoding against the full
// forward, the sampler's rules.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/decode.hpp>

#include <map>
#include <set>

#include "../test_util.hpp"

namespace test_gpt {

using namespace lrt_test;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;

namespace {
/// Every parameter drawn from U(-a, a) (the init has zero matrices, which would hide bugs).
using lrt_test::randomize;
lrt::ModelConfig small_config() {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 8, c.vocab_size = 11;
  c.window_pattern = "SL";
  return c;
}
Tensor<index_t, 2> random_ids(index_t B, index_t T, index_t V, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor<index_t, 2> ids(Shape<2>{B, T});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t) ids(b, t) = static_cast<index_t>(rng() % static_cast<unsigned>(V));
  return ids;
}
}  // namespace

TEST_CASE("gpt: parameter names, shapes and counts follow the spec") {
  // Baseline total = 2 Vp d + L (10 d^2 + 2 d D) + n_ve (Vp D + Hkv c) + 2 L (spec §3.3), with c = d.
  const auto formula = [](const lrt::ModelConfig& c) {
    const index_t Vp = c.padded_vocab(), d = c.n_embd, D = c.kv_dim(), L = c.n_layer;
    return 2 * Vp * d + L * (10 * d * d + 2 * d * D) + c.num_ve_layers() * (Vp * D + c.n_kv_head * c.gate_channels()) +
           2 * L;
  };
  CHECK(formula(lrt::preset("tiny")) == 1'034'248);  // the spec's table
  CHECK(formula(lrt::preset("small")) == 5'380'108);
  CHECK(formula(lrt::preset("medium")) == 26'837'008);
  for (const char* name : {"tiny", "small"}) {
    CAPTURE(name);
    lrt::GPT<float> m(lrt::preset(name));
    CHECK(m.num_params() == formula(m.config()));
  }
  lrt::GPT<float> tiny(lrt::preset("tiny"));
  // F = 6 N_mm + sum_l 12 H Dh min(w_l, T): 5.47e6 for tiny (spec §10).
  CHECK(tiny.flops_per_token() == doctest::Approx(5.47e6).epsilon(0.005));

  lrt::ModelConfig alt = small_config();
  alt.ve_layout = lrt::VELayout::Alternating;  // VE on layers l % 2 == (L-1) % 2: 0 and 2 of 3
  lrt::GPT<float> m(alt);
  std::set<std::string> names;
  std::map<std::string, std::vector<index_t>> shapes;
  m.for_each_param([&](auto& p) {
    CHECK(names.insert(p.name()).second);
    std::vector<index_t> s;
    for (int i = 0; i < std::remove_cvref_t<decltype(p.shape())>::rank; ++i) s.push_back(p.shape()[i]);
    shapes[p.name()] = s;
  });
  CHECK(names.size() == 1 + 3 * 6 + 2 + 1 + 2 + 2);  // wte, 6 per block, 2 gates, lm_head, 2 lambdas, 2 VE
  CHECK(shapes["transformer.wte.weight"] == std::vector<index_t>{64, 8});
  CHECK(shapes["lm_head.weight"] == std::vector<index_t>{64, 8});
  CHECK(shapes["transformer.h.1.attn.c_q.weight"] == std::vector<index_t>{8, 8});
  CHECK(shapes["transformer.h.1.attn.c_k.weight"] == std::vector<index_t>{4, 8});
  CHECK(shapes["transformer.h.2.mlp.c_fc.weight"] == std::vector<index_t>{32, 8});
  CHECK(shapes["transformer.h.2.mlp.c_proj.weight"] == std::vector<index_t>{8, 32});
  CHECK(shapes["transformer.h.0.attn.ve_gate.weight"] == std::vector<index_t>{1, 8});
  CHECK(shapes["value_embeds.2.weight"] == std::vector<index_t>{64, 4});
  CHECK(shapes.count("value_embeds.1.weight") == 0);
  CHECK(shapes["resid_lambdas"] == std::vector<index_t>{3});
  // Init: zero output projections and gates, lambdas 1 and 0.1, wte ~ N(0, 1), lm_head ~ N(0, 1e-3^2).
  CHECK(lrt::max(lrt::abs(m.blocks()[0].c_proj->value())) == 0.f);
  CHECK(lrt::max(lrt::abs(m.blocks()[1].mlp_proj->value())) == 0.f);
  CHECK(m.resid_lambdas().value()(2) == 1.f);
  CHECK(m.x0_lambdas().value()(0) == doctest::Approx(0.1));
  const double bound = std::sqrt(3.0 / 8);
  CHECK(lrt::max(lrt::abs(m.blocks()[0].c_q->value())) <= bound);
  CHECK(lrt::max(lrt::abs(m.lm_head().value())) < 0.01f);

  lrt::ModelConfig bad = small_config();
  bad.n_kv_head = 3;
  CHECK_THROWS_WITH_AS(lrt::GPT<float>{bad}, doctest::Contains("multiple of n_kv_head"), lrt::Error);
  bad = small_config();
  bad.window_pattern = "SXL";
  CHECK_THROWS_WITH_AS(lrt::GPT<float>{bad}, doctest::Contains("window_pattern"), lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::preset("huge"), doctest::Contains("unknown preset 'huge'"), lrt::Error);
  // preset_names(): what preset() takes (each a valid config) and what its error lists.
  const std::vector<std::string_view> presets = lrt::preset_names();
  CHECK(presets == std::vector<std::string_view>{"tiny", "small", "medium", "d12", "d20", "d24"});
  for (const std::string_view n : presets) CHECK(lrt::preset(n).status().ok());
  CHECK(lrt::preset("d12").n_embd == 768);
  CHECK_THROWS_WITH_AS(lrt::preset("huge"), doctest::Contains("(known: tiny, small, medium, d12, d20, d24)"),
                       lrt::Error);
}

TEST_CASE("gpt: gradients of the whole model match finite differences (double)") {
  for (auto layout : {lrt::VELayout::Every, lrt::VELayout::Alternating}) {
    lrt::ModelConfig c = small_config();
    c.ve_layout = layout;
    c.ve_gate_channels = layout == lrt::VELayout::Alternating ? 5 : 0;  // c < d slices u
    lrt::GPT<double> m(c, 1);
    randomize(m, 7);
    const Tensor<index_t, 2> in = random_ids(2, 8, 11, 3);
    Tensor<index_t, 2> tg = random_ids(2, 8, 11, 4);
    tg(0, 3) = -1;  // ignored
    const auto loss = [&] { return m.loss(in, tg).loss; };
    m.for_each_param([&](auto& p) {
      CAPTURE(p.name());
      const index_t n = p.shape().numel();
      const auto r = ad::grad_check(loss, p, 1e-6, std::max<index_t>(1, n / 40), 1e-4);  // floor: FD noise ~1e-10
      CAPTURE(r.max_abs_error);
      CHECK(r.max_rel_error < 1e-5);
    });
  }
}

TEST_CASE("gpt: KV-cache decoding reproduces the full forward at every position") {
  lrt::ModelConfig c = small_config();
  c.sequence_len = 12;  // windows 6 (S) and 12 (L): a 12-token row crosses the short window
  lrt::GPT<double> m(c, 2);
  randomize(m, 11);
  const index_t B = 2, T = 12;
  const Tensor<index_t, 2> ids = random_ids(B, T, c.vocab_size, 5);
  Tensor<double, 3> full;
  {
    ad::Graph g;
    ad::NoGrad ng;
    const Tensor<index_t, 1> qpos = lrt::iota(Shape<1>{T}, index_t{0});
    const auto rope = ad::RopeTable<double>::make(qpos.view(), c.head_dim(), c.rope_bf16_tables);
    full = m.head(m.hidden(ids, rope, m.standard_attend(qpos))).value();
  }
  lrt::Decoder dec(m, B, T);  // at most T positions
  double worst = 0;
  for (index_t t = 0; t < T; ++t) {
    const std::vector<index_t> tok{ids(0, t), ids(1, t)};
    const auto& lg = dec.step(tok);
    for (index_t b = 0; b < B; ++b)
      for (index_t v = 0; v < c.vocab_size; ++v)
        worst = std::max(worst, std::abs(lg(b, v) - 15 * std::tanh(full(b, t, v) / 15)));
  }
  CHECK(worst < 1e-12);
  CHECK(dec.position() == T);
  const std::vector<index_t> one{0, 0};
  CHECK_THROWS_WITH_AS(dec.step(one), doctest::Contains("context full"), lrt::Error);
  dec.reset();
  const std::vector<index_t> bad{0, 99};
  CHECK_THROWS_WITH_AS(dec.step(bad), doctest::Contains("outside the vocabulary"), lrt::Error);
}

TEST_CASE("sampler: greedy, top-k, top-p, temperature, determinism") {
  const std::vector<float> lg{1.f, 3.f, 3.f, -2.f, 0.5f};
  lrt::SamplerOptions o;
  o.temperature = 0;
  CHECK(lrt::sample_token<float>(lg, o, 0) == 1);  // ties -> lowest id
  o.temperature = 1;
  o.top_k = 2;  // keeps 3, 3 (ids 1, 2) only
  std::vector<int> hist(5);
  for (std::uint64_t i = 0; i < 2000; ++i) hist[static_cast<std::size_t>(lrt::sample_token<float>(lg, o, i))]++;
  CHECK(hist[0] == 0);
  CHECK(hist[3] == 0);
  CHECK(hist[4] == 0);
  CHECK(std::abs(hist[1] - 1000) < 120);
  o.top_k = 0;
  o.top_p = 0.01;  // only the most probable token survives (the first of the tie in sorted order)
  for (std::uint64_t i = 0; i < 50; ++i) CHECK(lrt::sample_token<float>(lg, o, i) == 1);
  // Full distribution at temperature 2 against softmax(lg / 2).
  o.top_p = 1, o.temperature = 2;
  std::fill(hist.begin(), hist.end(), 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i)
    hist[static_cast<std::size_t>(lrt::sample_token<float>(lg, o, static_cast<std::uint64_t>(i)))]++;
  double z = 0;
  for (float x : lg) z += std::exp(x / 2.0);
  for (std::size_t i = 0; i < 5; ++i) {
    const double expect = std::exp(lg[i] / 2.0) / z;
    CHECK(std::abs(hist[i] / double(n) - expect) < 0.015);
  }
  // Same seed and counter -> same token; another seed changes the sequence.
  o.seed = 5;
  std::vector<index_t> a, b, c2;
  for (std::uint64_t i = 0; i < 40; ++i) {
    a.push_back(lrt::sample_token<float>(lg, o, i));
    b.push_back(lrt::sample_token<float>(lg, o, i));
  }
  o.seed = 6;
  for (std::uint64_t i = 0; i < 40; ++i) c2.push_back(lrt::sample_token<float>(lg, o, i));
  CHECK(a == b);
  CHECK(a != c2);
  o.top_p = 0;
  CHECK_THROWS_WITH_AS(lrt::sample_token<float>(lg, o, 0), doctest::Contains("top_p"), lrt::Error);
}

}  // namespace test_gpt
