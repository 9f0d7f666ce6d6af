// The lean decoder (decode/lean.hpp) against the Decoder of the same model: decode steps and exact
// prefill bit for bit (fp32 and fp64, every variant kind: baseline, residual, KV, both, shared and
// layerwise projections, final and block sources, k = 1 and 2, the BOS cut, windows that slide,
// a capacity); the whole-prompt modes (zero, interleaved:S, fixed-point, approximate) within
// rounding of their Decoder counterparts; the fixed-point prefill's bound and exactness; errors.
#include <lrt/decode.hpp>

#include "test_util.hpp"

namespace test_lean {

using lrt::index_t;
namespace vs = lrt::variants;
using Mode = lrt::PrefillMode;
using lrt::Injection;
using lrt::Projection;

namespace {
template <class M>
void randomize(M& m, std::uint64_t seed, double a = 0.5) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  m.for_each_param([&](auto& p) { lrt_test::fill_random(p.value(), rng, -a, a); });
}
lrt::ModelConfig cfg(index_t k = 1, bool bos = false) {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 16, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 12, c.vocab_size = 300;
  c.window_pattern = "SL";  // layer 0 window 6: the decode runs far past it, and past the context
  c.mem_offset = k, c.reset_at_bos = bos;
  return c;
}
std::vector<index_t> tokens(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<index_t> v(n);
  for (auto& x : v) x = static_cast<index_t>(rng() % 250u);
  return v;
}
template <class T>
std::vector<T> as_vector(const lrt::Tensor<T, 2>& lg) {
  return std::vector<T>(lg.data(), lg.data() + lg.shape().numel());
}
template <class T>
std::vector<T> as_vector(std::span<const T> s) {
  return std::vector<T>(s.begin(), s.end());
}
template <class T>
double max_diff(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(double(a[i]) - double(b[i])));
  return w;
}
/// Bit for bit (memcmp: -0 and +0 differ, NaN payloads count).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// The logits after the prompt and after every continuation token, from the Decoder (batch 1).
template <class V, class T>
std::vector<std::vector<T>> run_decoder(const lrt::Model<V, T>& m, const std::vector<index_t>& prompt,
                                        const std::vector<index_t>& cont, Mode mode, index_t capacity = 0) {
  lrt::Decoder<V, T> dec(m, 1, capacity);
  std::vector<std::vector<T>> out{as_vector(dec.prefill(std::span<const index_t>(prompt), mode))};
  for (index_t t : cont) out.push_back(as_vector(dec.step(std::span<const index_t>(&t, 1))));
  return out;
}
template <class V, class T>
std::vector<std::vector<T>> run_lean(const lrt::Model<V, T>& m, const std::vector<index_t>& prompt,
                                     const std::vector<index_t>& cont, Mode mode, index_t capacity = 0,
                                     lrt::PrefillStats* stats = nullptr) {
  auto dec = lrt::make_lean_decoder(m, {capacity, -1});
  std::vector<std::vector<T>> out{as_vector(dec.prefill(prompt, mode))};
  if (stats) *stats = dec.prefill_stats();
  CHECK(dec.position() == static_cast<index_t>(prompt.size()));
  for (index_t t : cont) out.push_back(as_vector(dec.step(t)));
  return out;
}
template <class T>
double worst(const std::vector<std::vector<T>>& a, const std::vector<std::vector<T>>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, max_diff(a[i], b[i]));
  return w;
}

/// Steps and exact prefill bit for bit; the other modes within tol of the Decoder's.
template <class V, class T>
void check_variant(const char* name, const lrt::ModelConfig& c, double tol) {
  CAPTURE(name);
  CAPTURE(c.mem_offset);
  CAPTURE(c.reset_at_bos);
  CAPTURE(sizeof(T));
  lrt::Model<V, T> m(c, 5);
  randomize(m, 23);
  std::vector<index_t> prompt = tokens(7, 1), cont = tokens(40, 2);  // 47 positions: windows 7 and 13 slide
  prompt[3] = c.bos(), cont[5] = c.bos();
  const auto ref = run_decoder(m, prompt, cont, Mode::exact());
  const auto lean = run_lean(m, prompt, cont, Mode::exact());
  REQUIRE(ref.size() == lean.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(ref[i], lean[i]));
  }
  CHECK(worst(ref, lean) == 0);
  // With a capacity (a cache of exactly the positions needed): the same bits.
  const auto capped = run_lean(m, prompt, std::vector<index_t>(cont.begin(), cont.begin() + 10), Mode::exact(), 17);
  for (std::size_t i = 0; i < capped.size(); ++i) CHECK(same_bits(ref[i], capped[i]));
  // The whole-prompt modes: as the Decoder's within rounding.
  for (const Mode mode : {Mode::zero(), Mode::interleaved(2), Mode::interleaved(7)}) {
    CAPTURE(mode.name());
    CHECK(worst(run_decoder(m, prompt, cont, mode), run_lean(m, prompt, cont, mode)) < tol);
  }
  // fixed-point: the exact recurrence, within rounding of token-by-token prefill (relative to the
  // largest logit: products of 7 rows round unlike 7 single-row products, and the 40 steps after
  // the prompt carry that on), in <= ceil(P / k) passes.
  lrt::PrefillStats st;
  double scale = 0;
  for (const auto& r : ref)
    for (T z : r) scale = std::max(scale, std::abs(double(z)));
  CHECK(worst(run_lean(m, prompt, cont, Mode::fixed_point(), 0, &st), ref) < tol * scale);
  const index_t P = static_cast<index_t>(prompt.size());
  CHECK(st.passes >= 1);
  CHECK(st.passes <= (P + c.mem_offset - 1) / c.mem_offset);
  CHECK(st.converged);
}
}  // namespace

TEST_CASE("lean decoder: steps and exact prefill equal the Decoder's bit for bit, every variant kind") {
  using Both0 = lrt::Variant<Injection::Both, Projection::Shared, lrt::BlockSource<0>>;
  using KvLayer1 = lrt::Variant<Injection::KV, Projection::Layerwise, lrt::BlockSource<1>>;
  using Res1 = lrt::Variant<Injection::Residual, Projection::Shared, lrt::BlockSource<1>>;
  for (const index_t k : {1, 2})
    for (const bool bos : {false, true}) {
      const lrt::ModelConfig c = cfg(k, bos);
      check_variant<vs::Baseline, float>("baseline", c, 1e-5);
      check_variant<vs::Lrt, float>("lrt", c, 1e-5);
      check_variant<vs::LrtRelease, float>("lrt-release", c, 1e-5);
      check_variant<vs::ResidualOnly, float>("residual", c, 1e-5);
      check_variant<vs::KVOnly, float>("kv", c, 1e-5);
      check_variant<Both0, float>("both/block0", c, 1e-5);
      check_variant<KvLayer1, float>("kv/layerwise/block1", c, 1e-5);
      check_variant<Res1, float>("residual/block1", c, 1e-5);
    }
  lrt::ModelConfig c = cfg(2, true);
  check_variant<vs::Lrt, double>("lrt fp64", c, 1e-12);
  check_variant<vs::Baseline, double>("baseline fp64", c, 1e-12);
  c.ve_layout = lrt::VELayout::Alternating, c.n_kv_head = 2, c.ve_gate_channels = 8;
  check_variant<vs::ResidualOnly, float>("residual, alternating VE, gate channels 8", c, 1e-5);
  check_variant<vs::Baseline, float>("baseline, alternating VE, gate channels 8", c, 1e-5);
}

TEST_CASE("lean decoder: fixed-point prefill is the exact recurrence; interleaved:S < P and approximate are not") {
  lrt::ModelConfig c = cfg(1, false);
  lrt::Model<vs::Lrt, double> m(c, 7);
  randomize(m, 31, 0.6);
  const std::vector<index_t> prompt = tokens(11, 3), cont = tokens(5, 4);
  const auto exact = run_decoder(m, prompt, cont, Mode::exact());
  lrt::PrefillStats fp, ap;
  CHECK(worst(run_lean(m, prompt, cont, Mode::fixed_point(), 0, &fp), exact) < 1e-12);
  CHECK(fp.passes <= 11);
  // A tolerance larger than any state stops after the first refinement (pass 0 + 1): approximate.
  const auto approx = run_lean(m, prompt, cont, Mode::approximate(1e6), 0, &ap);
  CHECK(ap.passes == 2);
  CHECK(fp.passes > ap.passes);
  CHECK(worst(approx, exact) > 1e-6);
  CHECK(worst(run_lean(m, prompt, cont, Mode::interleaved(2)), exact) > 1e-6);
  // Passes recompute only past the frontier: fewer positions than passes * P.
  CHECK(fp.positions < fp.passes * 11);
}

TEST_CASE("lean decoder: errors name the operation; modes parse and print") {
  lrt::Model<vs::Lrt> m(cfg(), 1);
  auto dec = lrt::make_lean_decoder(m, {4, -1});
  CHECK_THROWS_WITH_AS(dec.step(300), doctest::Contains("token id 300 outside the vocabulary"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.prefill(std::vector<index_t>{}), doctest::Contains("the prompt is empty"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.prefill(std::vector<index_t>(5, 1)), doctest::Contains("more than the capacity 4"),
                       lrt::Error);
  dec.prefill(std::vector<index_t>(4, 1));
  CHECK_THROWS_WITH_AS(dec.step(1), doctest::Contains("context full: position 4"), lrt::Error);
  auto small = lrt::make_lean_decoder(m, {0, 3});
  CHECK_THROWS_WITH_AS(small.prefill(std::vector<index_t>(5, 1), Mode::fixed_point()),
                       doctest::Contains("needs max_prompt >= 5"), lrt::Error);
  small.prefill(std::vector<index_t>(5, 1));  // exact prefill takes any length
  auto w = lrt::lean_weights(m);
  w.layers[1].c_fc.rows = 8;
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w); }(), doctest::Contains("weight h.1.c_fc has shape"),
                       lrt::Error);
  auto w2 = lrt::lean_weights(m);
  w2.proj_k = {};
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w2); }(), doctest::Contains("weight proj_k is missing"),
                       lrt::Error);
  for (const char* s : {"exact", "zero", "interleaved:3", "fixed-point", "approximate:0.001"})
    CHECK(Mode::parse(s).name() == s);
  for (const char* s : {"approximate:0", "approximate:-1", "approximate:", "approximate:nan", "fixed", "interleaved:0"})
    CHECK_THROWS_AS(Mode::parse(s), lrt::Error);
  lrt::Decoder<vs::Lrt> full(m);
  CHECK_THROWS_WITH_AS(full.prefill(std::vector<index_t>(3, 1), Mode::fixed_point()),
                       doctest::Contains("runs on the lean decoder"), lrt::Error);
}

}  // namespace test_lean
