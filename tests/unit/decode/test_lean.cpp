// The lean decoder (decode/lean.hpp) against the Decoder of the same model: decode steps and exact
// prefill bit for bit (fp32 and fp64, every variant kind: baseline, residual, KV, both, shared and
// layerwise projections, final and block sources, k = 1 and 2, the BOS cut, windows that slide,
// a capacity); the whole-prompt modes (zero, interleaved:S, fixed-point, approximate) within
// rounding of their Decoder counterparts; the fixed-point prefill's bound and exactness; errors.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>

#include <lrt/decode.hpp>
#include <lrt/model/checkpoint.hpp>

#include "../test_util.hpp"

namespace test_lean {

using lrt::index_t;
namespace vs = lrt::variants;
using Mode = lrt::PrefillMode;
using lrt::Injection;
using lrt::Projection;

namespace {
using lrt_test::randomize;
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
  const auto fixed = run_lean(m, prompt, cont, Mode::fixed_point(), 0, &st);
  REQUIRE(fixed.size() == ref.size());
  // The prefill's logits within tol; the 40 steps that read its cache and memory carry its rounding
  // on through the recurrence and may grow it (up to 1.07e-5 relative on an AVX-512 OpenBLAS
  // kernel, against 1e-6 at the prompt's end), so they get ten times that.
  CHECK(max_diff(fixed[0], ref[0]) < tol * scale);
  CHECK(worst(fixed, ref) < 10 * tol * scale);
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
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w); }(),
                       doctest::Contains("weight transformer.h.1.mlp.c_fc.weight has shape"), lrt::Error);
  auto w2 = lrt::lean_weights(m);
  w2.proj_k = {};
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w2); }(),
                       doctest::Contains("weight interleaved_key_projections.shared.W_v.weight is missing"),
                       lrt::Error);
  for (const char* s : {"exact", "zero", "interleaved:3", "fixed-point", "approximate:0.001"})
    CHECK(Mode::parse(s).name() == s);
  for (const char* s : {"approximate:0", "approximate:-1", "approximate:", "approximate:nan", "fixed", "interleaved:0"})
    CHECK_THROWS_AS(Mode::parse(s), lrt::Error);
  lrt::Decoder<vs::Lrt> full(m);
  CHECK_THROWS_WITH_AS(full.prefill(std::vector<index_t>(3, 1), Mode::fixed_point()),
                       doctest::Contains("runs on the lean decoder"), lrt::Error);
}

namespace {
/// y = W x in double from the float values W stands for (the reference of the packed products).
std::vector<double> reference_product(const std::vector<float>& w, const std::vector<float>& x, index_t rows,
                                      index_t cols) {
  std::vector<double> y(static_cast<std::size_t>(rows), 0.0);
  for (index_t o = 0; o < rows; ++o)
    for (index_t i = 0; i < cols; ++i)
      y[static_cast<std::size_t>(o)] +=
          double(w[static_cast<std::size_t>(o * cols + i)]) * x[static_cast<std::size_t>(i)];
  return y;
}

/// The model with each matrix the packing holds replaced by the float values it stands for.
template <class V>
void unpack_into(const lrt::Model<V, float>& m, const lrt::PackedWeights& pw) {
  m.for_each_param([&](auto& p) {
    const auto* pm = pw.find(p.name());
    if (!pm) return;
    auto& v = p.value();
    const std::span<float> out(v.data(), static_cast<std::size_t>(v.numel()));
    if (!pm->q.empty()) {
      lrt::dequantize_int8(pm->q, pm->scales, pm->rows, pm->cols, pw.group, out);
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = lrt::st::bf16_to_f32(pm->bf16[i]);
    }
  });
}

/// The lean decoder on packed matrices against the Decoder of the model holding their float values:
/// the same products summed in another order, so equal within float rounding (relative to the
/// largest logit). Returns how many matrices were packed.
template <class V>
std::size_t check_packed(const char* name, lrt::WeightFormat f, std::int64_t group) {
  CAPTURE(name);
  const std::string format(to_string(f));
  CAPTURE(format);
  lrt::Model<V, float> m(cfg(2, true), 5);
  randomize(m, 29);
  const lrt::PackedWeights pw = lrt::pack_weights(m, f, group);
  unpack_into(m, pw);
  std::vector<index_t> prompt = tokens(6, 8), cont = tokens(30, 9);
  prompt[2] = m.config().bos();
  const auto ref = run_decoder(m, prompt, cont, Mode::exact());
  lrt::LeanDecoder<V, float> dec(lrt::lean_weights(m, &pw), {0, -1});
  std::vector<std::vector<float>> got{as_vector(dec.prefill(prompt))};
  for (index_t t : cont) got.push_back(as_vector(dec.step(t)));
  double scale = 0;
  for (const auto& r : ref)
    for (float z : r) scale = std::max(scale, std::abs(double(z)));
  CHECK(worst(ref, got) < 2e-5 * scale);
  // The packed values are not the originals: the plain decoder of the unpacked model reads those.
  CHECK(lrt::lean_weights(m).layers[0].c_q.data != nullptr);
  CHECK(lrt::lean_weights(m, &pw).layers[0].c_q.data == nullptr);
  // Fixed-point prefill over packed matrices (products of several rows): the same recurrence.
  lrt::LeanDecoder<V, float> fp(lrt::lean_weights(m, &pw), {0, -1});
  CHECK(max_diff(as_vector(fp.prefill(prompt, Mode::fixed_point())), ref[0]) < 2e-5 * scale);
  return pw.matrices.size();
}
}  // namespace

TEST_CASE("packed products: int8 and bf16 rows against double products of the values they stand for") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::array<std::array<index_t, 3>, 4> shapes{{{13, 70, 16}, {8, 64, 64}, {5, 9, 4}, {3, 200, 7}}};
  for (const auto& [rows, cols, group] : shapes) {
    CAPTURE(rows);
    CAPTURE(cols);
    CAPTURE(group);
    std::vector<float> w(static_cast<std::size_t>(rows * cols)), x(static_cast<std::size_t>(cols));
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> s(static_cast<std::size_t>(rows * lrt::quant_groups(cols, group))), back(w.size());
    lrt::quantize_int8(w, rows, cols, group, q, s);
    lrt::dequantize_int8(q, s, rows, cols, group, back);
    const auto want = reference_product(back, x, rows, cols);
    std::vector<double> want_d(static_cast<std::size_t>(rows), 0.0);  // scale q exactly, for T = double
    for (index_t o = 0; o < rows; ++o)
      for (index_t i = 0; i < cols; ++i)
        want_d[o] += double(s[o * lrt::quant_groups(cols, group) + i / group]) * q[o * cols + i] * x[i];
    std::vector<float> y(static_cast<std::size_t>(rows));
    std::vector<double> yd(y.size()), xd(x.begin(), x.end());
    lrt::cpu::matvec_int8<float>(x.data(), q.data(), s.data(), rows, cols, group, y.data());
    lrt::cpu::matvec_int8<double>(xd.data(), q.data(), s.data(), rows, cols, group, yd.data());
    for (index_t o = 0; o < rows; ++o) {
      CHECK(std::abs(y[o] - want[o]) < 1e-5 * cols);
      CHECK(std::abs(yd[o] - want_d[o]) < 1e-12 * cols);
    }
    std::vector<std::uint16_t> h(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) h[i] = lrt::st::f32_to_bf16(w[i]), back[i] = lrt::st::bf16_to_f32(h[i]);
    const auto want_h = reference_product(back, x, rows, cols);
    lrt::cpu::matvec_bf16<float>(x.data(), h.data(), rows, cols, y.data());
    lrt::cpu::matvec_bf16<double>(xd.data(), h.data(), rows, cols, yd.data());
    for (index_t o = 0; o < rows; ++o) {
      CHECK(std::abs(y[o] - want_h[o]) < 1e-5 * cols);
      CHECK(std::abs(yd[o] - want_h[o]) < 1e-12 * cols);
    }
  }
}

TEST_CASE("lean decoder on int8 and bf16 matrices: the Decoder of the values they stand for, within rounding") {
  using KvLayer1 = lrt::Variant<Injection::KV, Projection::Layerwise, lrt::BlockSource<1>>;
  for (const auto f : {lrt::WeightFormat::Int8, lrt::WeightFormat::BF16}) {
    // 3 layers x 6 matrices + lm_head (+ the shared or layerwise memory projections).
    CHECK(check_packed<vs::Baseline>("baseline", f, 8) == 3 * 6 + 1);
    CHECK(check_packed<vs::Lrt>("lrt", f, 8) == 3 * 6 + 1 + 2);
    CHECK(check_packed<KvLayer1>("kv/layerwise/block1", f, 5) == 3 * 6 + 1 + 3 * 2);
    CHECK(check_packed<vs::ResidualOnly>("residual", f, 16) == 3 * 6 + 1);
  }
}

TEST_CASE("lean decoder on packed matrices: embedding tables and gates stay floats; formats are one each") {
  lrt::Model<vs::Lrt> m(cfg(), 1);
  const lrt::PackedWeights pw = lrt::pack_weights(m, lrt::WeightFormat::Int8, 8);
  auto w = lrt::lean_weights(m, &pw);
  w.wte.q = w.layers[0].c_q.q, w.wte.scales = w.layers[0].c_q.scales, w.wte.group = 8, w.wte.data = nullptr;
  CHECK_THROWS_WITH_AS(
      [&] { lrt::LeanDecoder<vs::Lrt> d(w); }(),
      doctest::Contains("weight transformer.wte.weight is int8: embedding tables and gates are read as floats"),
      lrt::Error);
  auto w2 = lrt::lean_weights(m, &pw);
  w2.layers[1].c_fc.data = w2.wte.data;
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w2); }(),
                       doctest::Contains("weight transformer.h.1.mlp.c_fc.weight has values in 2 formats"), lrt::Error);
  auto w3 = lrt::lean_weights(m, &pw);
  w3.layers[2].mlp_proj.scales = nullptr;
  CHECK_THROWS_WITH_AS([&] { lrt::LeanDecoder<vs::Lrt> d(w3); }(),
                       doctest::Contains("int8 weight transformer.h.2.mlp.c_proj.weight needs its scales"), lrt::Error);
  lrt::ModelConfig wide = cfg();
  wide.n_embd = 32;
  lrt::Model<vs::Lrt> big(wide, 1);
  CHECK_THROWS_WITH_AS(
      lrt::lean_weights(big, &pw),
      doctest::Contains("packed matrix 'transformer.h.0.attn.c_q.weight' is (16, 16), the model's (32, 32)"),
      lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::pack_weights(m, lrt::WeightFormat::Int8, 0), doctest::Contains("group >= 1"), lrt::Error);
}

TEST_CASE("an int8 checkpoint: load_weights gives the values it stands for; its packed matrices are pack_weights'") {
  lrt::Model<vs::Lrt> m(cfg(), 3);
  randomize(m, 41);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lrt_test_lean_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  lrt::save_model(m, path, 5);
  const lrt::st::Reader f32 = lrt::st::Reader::open(path);
  std::filesystem::remove(path);
  const lrt::st::Reader q = lrt::st::Reader::from_bytes(
      lrt::quantize_checkpoint(f32, lrt::WeightFormat::Int8, 8, lrt::packable_names(m.weight_table())).serialize(),
      "int8");
  lrt::Model<vs::Lrt> loaded(cfg(), 99);
  lrt::load_weights(loaded, q);
  const lrt::PackedWeights from_file = lrt::PackedWeights::read(q, lrt::packable_names(m.weight_table())),
                           in_memory = lrt::pack_weights(m, lrt::WeightFormat::Int8, 8);
  CHECK(from_file.matrices.size() == in_memory.matrices.size());
  for (const auto& [name, pm] : in_memory.matrices) {
    CAPTURE(name);
    REQUIRE(from_file.find(name) != nullptr);
    CHECK(from_file.find(name)->q == pm.q);
    CHECK(from_file.find(name)->scales == pm.scales);
  }
  unpack_into(m, in_memory);  // m now holds the values the int8 matrices stand for
  std::size_t same = 0, params = 0;
  m.for_each_param([&](auto& p) {
    ++params;
    loaded.for_each_param([&](auto& o) {
      if (o.name() == p.name())
        same += std::memcmp(o.value().data(), p.value().data(), sizeof(float) * p.value().numel()) == 0;
    });
  });
  CHECK(same == params);
  lrt::Model<vs::Lrt, double> wide(cfg(), 1);  // fp64 models read int8 files too
  lrt::load_weights(wide, q);
  CHECK(wide.lm_head().value().data()[3] == double(m.lm_head().value().data()[3]));
}

namespace {
/// The logits of a lean decoder over prompt and cont (exact prefill).
template <class V>
std::vector<std::vector<float>> decode_with(lrt::LeanDecoder<V, float>& dec, const std::vector<index_t>& prompt,
                                            const std::vector<index_t>& cont) {
  std::vector<std::vector<float>> out{as_vector(dec.prefill(prompt))};
  for (index_t t : cont) out.push_back(as_vector(dec.step(t)));
  return out;
}

/// A file path under the temp directory, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem)
      : path((std::filesystem::temp_directory_path() /
              ("lrt_test_lean_" + stem + "_" + std::to_string(::getpid()) + ".safetensors"))
                 .string()) {}
  ~TempFile() { std::filesystem::remove(path); }
};

/// lean_file_weights over a mapped f32 checkpoint of a V model: every view points into the mapping
/// (nothing copied), the names are Model's, and the decoder reads the same bits as over the model.
template <class V>
void check_file_weights(const char* name, lrt::ModelConfig c) {
  CAPTURE(name);
  lrt::Model<V> m(c, 7);
  randomize(m, 13);
  TempFile f(name);
  lrt::save_model(m, f.path, 1);
  const lrt::st::Reader r = lrt::st::Reader::map(f.path);
  lrt::LeanWeights<float> w;
  std::vector<std::byte> spill;
  const lrt::Status s = lrt::lean_file_weights<V>(r, m.config(), w, spill);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(spill.empty());
  CHECK(static_cast<const void*>(w.wte.data) == r.raw("transformer.wte.weight").data());
  CHECK(static_cast<const void*>(w.layers[1].c_fc.data) == r.raw("transformer.h.1.mlp.c_fc.weight").data());
  // for_each_lean_weight lists exactly Model's parameters, with their shapes.
  std::set<std::pair<std::string, std::vector<index_t>>> listed, params;
  lrt::LeanWeights<float> scratch;
  lrt::for_each_lean_weight<V>(
      m.config(), scratch,
      [&](const std::string& n, index_t rows, index_t cols, auto&, bool) {
        listed.insert({n, {rows, cols}});
      },
      [&](const std::string& n, index_t count, auto&) {
        listed.insert({n, {count}});
      });
  m.for_each_param([&](auto& p) {
    std::vector<index_t> shape;
    for (int i = 0; i < std::remove_cvref_t<decltype(p.shape())>::rank; ++i) shape.push_back(p.shape()[i]);
    params.insert({p.name(), shape});
  });
  CHECK(listed == params);
  std::vector<index_t> prompt = tokens(9, 3), cont = tokens(20, 4);
  prompt[4] = m.config().bos();
  auto over_model = lrt::make_lean_decoder(m);
  lrt::LeanDecoder<V, float> over_file(w);
  const auto a = decode_with(over_model, prompt, cont), b = decode_with(over_file, prompt, cont);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));
}
}  // namespace

TEST_CASE("lean decoder: the state in one arena (the caller's or one allocation); Status instead of throws") {
  lrt::Model<vs::Lrt> m(cfg(), 1);
  randomize(m, 5);
  using Dec = lrt::LeanDecoder<vs::Lrt>;
  const Dec::Options o{0, -1};
  const std::size_t need = Dec::required_bytes(m.config(), o);
  Dec own(lrt::lean_weights(m), o);
  CHECK(need == own.state_bytes() + 63);
  CHECK_FALSE(own.in_caller_arena());
  // An arena at an odd address: the decoder aligns inside it and reads the same bits.
  std::vector<std::byte> buf(need + 1);
  Dec::Options in = o;
  in.arena = buf.data() + 1, in.arena_bytes = need;
  std::optional<Dec> arena;
  const lrt::Status made = Dec::create(lrt::lean_weights(m), in, arena);
  REQUIRE_MESSAGE(made.ok(), made.message());
  CHECK(arena->in_caller_arena());
  const std::vector<index_t> prompt = tokens(6, 1), cont = tokens(12, 2);
  const auto a = decode_with(own, prompt, cont), b = decode_with(*arena, prompt, cont);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));
  // A small arena, bad options, bad weights: a Status, no decoder.
  in.arena_bytes = need - 64;
  lrt::Status s = Dec::create(lrt::lean_weights(m), in, arena);
  CHECK(s.code() == lrt::StatusCode::out_of_memory);
  CHECK(std::string(s.message()).find("[lean decoder] the arena holds") == 0);
  CHECK_FALSE(arena.has_value());
  Dec::Options stray = o;
  stray.arena_bytes = 10;
  CHECK(Dec::create(lrt::lean_weights(m), stray, arena).code() == lrt::StatusCode::invalid_argument);
  CHECK(Dec::required_bytes(m.config(), stray) == 0);
  auto w = lrt::lean_weights(m);
  w.layers[1].c_fc.rows = 8;
  s = Dec::validate(w, o);
  CHECK(s.code() == lrt::StatusCode::invalid_argument);
  CHECK(std::string(s.what()).find("weight transformer.h.1.mlp.c_fc.weight has shape (8, 16), expected (64, 16)") == 0);
  CHECK(std::string(s.op()) == "lean decoder");
  lrt::ModelConfig bad = m.config();
  bad.n_head = 3;
  w = lrt::lean_weights(m);
  w.config = bad;
  CHECK(std::string(Dec::validate(w, o).message()).find("[config] n_embd (16) must be a multiple of n_head (3)") == 0);
  // try_prefill / try_step: the reason, and nothing changed.
  Dec capped(lrt::lean_weights(m), {4, -1});
  CHECK(capped.try_prefill(std::vector<index_t>{}).code() == lrt::StatusCode::invalid_argument);
  REQUIRE(capped.try_prefill(std::vector<index_t>(3, 1)).ok());
  const std::vector<float> before = as_vector(capped.logits());
  s = capped.try_step(300);
  CHECK(s.code() == lrt::StatusCode::invalid_argument);
  CHECK(std::string(s.message()) == "[lean decoder] token id 300 outside the vocabulary [0, 300)");
  CHECK(capped.position() == 3);
  CHECK(same_bits(before, as_vector(capped.logits())));
  CHECK(capped.try_prefill(std::vector<index_t>{1, 2, -1}).code() == lrt::StatusCode::invalid_argument);
  CHECK(capped.position() == 3);
  REQUIRE(capped.try_step(1).ok());
  s = capped.try_step(1);
  CHECK(s.code() == lrt::StatusCode::state);
  CHECK(std::string(s.what()).find("context full: position 4") == 0);
  CHECK(capped.position() == 4);
  // A message longer than the buffer is cut, NUL-terminated.
  const std::string longer(400, 'x');
  const lrt::Status cut = lrt::Status::error(lrt::StatusCode::bad_file, "op", longer);
  CHECK(std::strlen(cut.message()) == lrt::Status::capacity - 1);
  CHECK(lrt::Status{}.ok());
  CHECK(std::string(
            lrt::Status::error(lrt::StatusCode::state, "x", 3, " of ", lrt::Shape<2>{2, 5}, ' ', -1.5).message()) ==
        "[x] 3 of (2, 5) -1.5");
  CHECK_THROWS_WITH_AS(lrt::throw_if_error(cut), doctest::Contains("[op] xxx"), lrt::Error);
}

TEST_CASE("lean decoder: weights viewed in a mapped checkpoint file, every variant kind") {
  using KvLayer1 = lrt::Variant<Injection::KV, Projection::Layerwise, lrt::BlockSource<1>>;
  using Both0 = lrt::Variant<Injection::Both, Projection::Shared, lrt::BlockSource<0>>;
  check_file_weights<vs::Baseline>("baseline", cfg());
  check_file_weights<vs::Lrt>("lrt", cfg());
  check_file_weights<vs::LrtRelease>("lrt-release", cfg());
  check_file_weights<KvLayer1>("kv-layer1", cfg(2, true));
  check_file_weights<Both0>("both0", cfg(2, true));
}

TEST_CASE("lean decoder: int8 and bf16 files viewed packed; tensors the file leaves unaligned are copied once") {
  lrt::Model<vs::Lrt> m(cfg(), 3);
  randomize(m, 17);
  TempFile f("packed");
  lrt::save_model(m, f.path, 5);
  const lrt::st::Reader f32 = lrt::st::Reader::map(f.path);
  const std::vector<index_t> prompt = tokens(7, 5), cont = tokens(15, 6);
  for (const lrt::WeightFormat fmt : {lrt::WeightFormat::Int8, lrt::WeightFormat::BF16}) {
    const std::string format(to_string(fmt));
    CAPTURE(format);
    const lrt::st::Reader q = lrt::st::Reader::from_bytes(
        lrt::quantize_checkpoint(f32, fmt, 8, lrt::packable_names(m.weight_table())).serialize(), format);
    lrt::Model<vs::Lrt> loaded(cfg(), 99);
    lrt::load_weights(loaded, q);
    const lrt::PackedWeights pw = lrt::PackedWeights::read(q, lrt::packable_names(m.weight_table()));
    lrt::LeanDecoder<vs::Lrt> ref(lrt::lean_weights(loaded, &pw));
    lrt::LeanWeights<float> w;
    std::vector<std::byte> spill;
    const lrt::Status s = lrt::lean_file_weights<vs::Lrt>(q, m.config(), w, spill);
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(w.layers[0].c_q.data == nullptr);
    CHECK((fmt == lrt::WeightFormat::Int8
               ? static_cast<const void*>(w.layers[0].c_q.q)
               : static_cast<const void*>(w.layers[0].c_q.bf16)) == q.raw("transformer.h.0.attn.c_q.weight").data());
    lrt::LeanDecoder<vs::Lrt> over_file(w);
    const auto a = decode_with(ref, prompt, cont), b = decode_with(over_file, prompt, cont);
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));
  }
  // A file whose first tensor has an odd size: every float after it is misaligned, read from a copy.
  lrt::st::Writer odd;
  const std::vector<std::int8_t> three{1, 2, 3};
  odd.add_i8("aaa_odd", three, {3});
  m.for_each_param([&](auto& p) {
    std::vector<std::int64_t> shape;
    for (int i = 0; i < std::remove_cvref_t<decltype(p.shape())>::rank; ++i) shape.push_back(p.shape()[i]);
    odd.add_f32(p.name(), std::span<const float>(p.value().data(), static_cast<std::size_t>(p.value().numel())), shape);
  });
  const lrt::st::Reader r = lrt::st::Reader::from_bytes(odd.serialize(), "odd");
  lrt::LeanWeights<float> w;
  std::vector<std::byte> spill;
  REQUIRE(lrt::lean_file_weights<vs::Lrt>(r, m.config(), w, spill).ok());
  CHECK(spill.size() > 0);
  CHECK(reinterpret_cast<std::uintptr_t>(w.wte.data) % alignof(float) == 0);
  auto over_model = lrt::make_lean_decoder(m);
  lrt::LeanDecoder<vs::Lrt> over_copy(w);
  const auto a = decode_with(over_model, prompt, cont), b = decode_with(over_copy, prompt, cont);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(same_bits(a[i], b[i]));
  // A checkpoint saved in bf16 (save_model's dtype, no "weights" metadata): its floats are converted
  // once into spill, as load_weights converts them.
  TempFile half("bf16_saved");
  lrt::save_model(m, half.path, 5, {}, lrt::st::DType::BF16);
  const lrt::st::Reader hr = lrt::st::Reader::map(half.path);
  lrt::Model<vs::Lrt> hm(cfg(), 1);
  lrt::load_weights(hm, hr);
  REQUIRE(lrt::lean_file_weights<vs::Lrt>(hr, m.config(), w, spill).ok());
  std::size_t floats = 0;
  m.for_each_param([&](auto& p) { floats += static_cast<std::size_t>(p.value().numel()); });
  CHECK(spill.size() >= floats * sizeof(float));
  auto over_loaded = lrt::make_lean_decoder(hm);
  lrt::LeanDecoder<vs::Lrt> over_converted(w);
  const auto c1 = decode_with(over_loaded, prompt, cont), c2 = decode_with(over_converted, prompt, cont);
  for (std::size_t i = 0; i < c1.size(); ++i) CHECK(same_bits(c1[i], c2[i]));
  // What a file lacks or holds wrongly: a Status naming the file and the tensor.
  lrt::st::Writer partial;
  partial.add_f32("transformer.wte.weight", std::span<const float>(m.wte().value().data(), 10), {10});
  const lrt::st::Reader pr = lrt::st::Reader::from_bytes(partial.serialize(), "partial");
  lrt::Status s = lrt::lean_file_weights<vs::Lrt>(pr, m.config(), w, spill);
  CHECK(s.code() == lrt::StatusCode::bad_file);
  CHECK(std::string(s.what()).find("'partial': tensor 'transformer.wte.weight' is F32 (10,), expected F32 (320, 16)") ==
        0);
  lrt::st::Writer none;
  s = lrt::lean_file_weights<vs::Lrt>(lrt::st::Reader::from_bytes(none.serialize(), "none"), m.config(), w, spill);
  CHECK(std::string(s.what()) == "'none': no tensor 'transformer.wte.weight'");
  lrt::st::Writer meta;
  meta.set_metadata("weights", "int4");
  s = lrt::lean_file_weights<vs::Lrt>(lrt::st::Reader::from_bytes(meta.serialize(), "meta"), m.config(), w, spill);
  CHECK(s.code() == lrt::StatusCode::bad_file);
  CHECK(std::string(s.what()).find("metadata 'weights' is 'int4'") != std::string::npos);
  lrt::MappedFile dir;
  const lrt::Status ds = dir.open(std::filesystem::temp_directory_path().string().c_str());
  CHECK(ds.code() == lrt::StatusCode::bad_file);
  CHECK(std::string(ds.message()).find("': not a regular file") != std::string::npos);
  CHECK(dir.size() == 0);
  CHECK(dir.open(nullptr).code() == lrt::StatusCode::invalid_argument);
  CHECK_THROWS_WITH_AS(lrt::st::Reader::map("/nonexistent/x.safetensors"),
                       doctest::Contains("[mmap] '/nonexistent/x.safetensors': cannot open"), lrt::Error);
}

}  // namespace test_lean
