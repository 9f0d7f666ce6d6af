// The KV-cache decoder's prefill modes and ragged batches (spec §6), in double precision on tiny
// models with random weights: interleaved:S with S >= P == exact prefill (logits after the prompt
// and every later step), S < P differs; zero prefill == the zero-memory Standard forward; rows of
// different prompt lengths decoded together == each row decoded alone; interleaved_prefill shares
// the Interleaved<S> schedule's passes; argument errors.
#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>

#include "../test_util.hpp"

namespace test_decoder {

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;
using Mode = lrt::PrefillMode;

namespace {
using lrt_test::randomize;
lrt::ModelConfig cfg(index_t T = 12, index_t vocab = 11) {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = T, c.vocab_size = vocab;
  c.window_pattern = "SL";  // layer 0 window T/2: long rows cross it
  return c;
}
std::vector<index_t> tokens(std::size_t n, unsigned seed, index_t vocab = 11) {
  std::mt19937 rng(seed);
  std::vector<index_t> v(n);
  for (auto& x : v) x = static_cast<index_t>(rng() % static_cast<unsigned>(std::min<index_t>(vocab, 11)));
  return v;
}
/// Row b of a (B, V) logits tensor.
std::vector<double> row_of(const Tensor<double, 2>& lg, index_t b) {
  return std::vector<double>(lg.data() + b * lg.shape()[1], lg.data() + (b + 1) * lg.shape()[1]);
}
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]));
  return w;
}

/// Per row: the logits after its prompt, then after each continuation token (teacher forcing),
/// concatenated. prompts[b] and cont[b] are row b's; every row gets the same number of continuation
/// tokens.
template <class M>
std::vector<std::vector<double>> run(const M& m, const std::vector<std::vector<index_t>>& prompts,
                                     const std::vector<std::vector<index_t>>& cont, Mode mode) {
  const index_t B = static_cast<index_t>(prompts.size());
  lrt::Decoder dec(m, B);
  std::vector<std::vector<double>> out(prompts.size());
  const auto keep = [&](const Tensor<double, 2>& lg) {
    for (index_t b = 0; b < B; ++b) {
      const auto r = row_of(lg, b);
      out[static_cast<std::size_t>(b)].insert(out[static_cast<std::size_t>(b)].end(), r.begin(), r.end());
    }
  };
  keep(dec.prefill(std::span<const std::vector<index_t>>(prompts), mode));
  for (index_t b = 0; b < B; ++b)
    CHECK(dec.position(b) == static_cast<index_t>(prompts[static_cast<std::size_t>(b)].size()));
  for (std::size_t j = 0; j < cont[0].size(); ++j) {
    std::vector<index_t> tok;
    for (const auto& c : cont) tok.push_back(c[j]);
    keep(dec.step(tok));
  }
  return out;
}
/// The same, every row decoded by its own single-row decoder.
template <class M>
std::vector<std::vector<double>> run_alone(const M& m, const std::vector<std::vector<index_t>>& prompts,
                                           const std::vector<std::vector<index_t>>& cont, Mode mode) {
  std::vector<std::vector<double>> out;
  for (std::size_t b = 0; b < prompts.size(); ++b) out.push_back(run(m, {prompts[b]}, {cont[b]}, mode)[0]);
  return out;
}
double worst(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  REQUIRE(a.size() == b.size());
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, max_diff(a[i], b[i]));
  return w;
}

/// interleaved:S, S >= P, == exact; S < P differs (the test can fail); per row as well.
template <class V>
void check_interleaved_prefill(const char* name, lrt::ModelConfig c, bool bos = false) {
  CAPTURE(name);
  CAPTURE(c.mem_offset);
  lrt::Model<V, double> m(c, 3);
  randomize(m, 17);
  const std::size_t P = 7;
  std::vector<std::vector<index_t>> prompts{tokens(P, 1), tokens(P, 2)}, cont{tokens(4, 3), tokens(4, 4)};
  if (bos) prompts[0][3] = 256, prompts[1][5] = 256, cont[0][1] = 256;  // ResetAtBOS cuts the memory there
  const auto exact = run(m, prompts, cont, Mode::exact());
  CHECK(worst(run(m, prompts, cont, Mode::interleaved(P)), exact) < 1e-12);
  CHECK(worst(run(m, prompts, cont, Mode::interleaved(64)), exact) < 1e-12);  // clamped to P
  CHECK(worst(run(m, prompts, cont, Mode::parse("interleaved:7")), exact) < 1e-12);
  const auto approx = run(m, prompts, cont, Mode::interleaved(2));
  CHECK(worst(approx, exact) > 1e-6);
  // The logits right after the prompt already differ (position P - 1 read a stale memory).
  const auto nv = static_cast<std::ptrdiff_t>(c.vocab_size);
  CHECK(max_diff(std::vector<double>(approx[0].begin(), approx[0].begin() + nv),
                 std::vector<double>(exact[0].begin(), exact[0].begin() + nv)) > 1e-6);
  // Ragged: rows of lengths 7 and 4 with S = 7 are exact too.
  std::vector<std::vector<index_t>> ragged = prompts;
  ragged[1].resize(4);
  CHECK(worst(run(m, ragged, cont, Mode::interleaved(P)), run_alone(m, ragged, cont, Mode::exact())) < 1e-12);
}
}  // namespace

TEST_CASE("decoder prefill: interleaved:S with S >= P equals exact prefill, prompt and continuation; S < P differs") {
  check_interleaved_prefill<vs::Lrt>("lrt", cfg());
  check_interleaved_prefill<vs::LrtRelease>("lrt-release", cfg());
  check_interleaved_prefill<vs::ResidualOnly>("residual", cfg());
  check_interleaved_prefill<vs::KVOnly>("kv", cfg());
  check_interleaved_prefill<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>>(
      "source block 1", cfg());
  lrt::ModelConfig k2 = cfg();
  k2.mem_offset = 2;
  check_interleaved_prefill<vs::Lrt>("offset 2", k2);
  lrt::ModelConfig k3 = cfg();
  k3.mem_offset = 3;
  check_interleaved_prefill<vs::LrtRelease>("offset 3", k3);
  lrt::ModelConfig bos = cfg(12, 257);
  bos.reset_at_bos = true;
  bos.mem_offset = 2;
  check_interleaved_prefill<vs::Lrt>("reset at BOS", bos, true);
}

TEST_CASE("decoder prefill: zero memory throughout is the Standard (zero-memory) forward") {
  const lrt::ModelConfig c = cfg();
  lrt::Model<vs::Lrt, double> m(c, 5);
  randomize(m, 21);
  const std::size_t P = 5, N = 6;
  const std::vector<std::vector<index_t>> prompts{tokens(P, 7), tokens(P, 8)}, cont{tokens(N, 9), tokens(N, 10)};
  // The Standard schedule's logits over prompt + continuation; the decoder's logit j is position P - 1 + j.
  Tensor<index_t, 2> ids(Shape<2>{2, static_cast<index_t>(P + N)});
  for (index_t b = 0; b < 2; ++b)
    for (std::size_t t = 0; t < P + N; ++t)
      ids(b, static_cast<index_t>(t)) =
          t < P ? prompts[static_cast<std::size_t>(b)][t] : cont[static_cast<std::size_t>(b)][t - P];
  lrt::ScheduleOptions o;
  o.keep_logits = true;
  std::vector<std::vector<double>> want(2);
  {
    ad::Graph g;
    ad::NoGrad ng;
    const auto r = lrt::schedule_loss<lrt::Standard>(m, ids, ids, o);
    const auto& lg = r.passes[0].logits;  // (B, T, V)
    for (index_t b = 0; b < 2; ++b)
      for (std::size_t t = P - 1; t + 1 < P + N; ++t)
        for (index_t v = 0; v < c.vocab_size; ++v)
          want[static_cast<std::size_t>(b)].push_back(lg(b, static_cast<index_t>(t), v));
  }
  std::vector<std::vector<index_t>> cont_fed = cont;  // the last continuation token is not fed
  for (auto& x : cont_fed) x.pop_back();
  const auto zero = run(m, prompts, cont_fed, Mode::zero());
  CHECK(worst(zero, want) < 1e-12);
  CHECK(worst(run(m, prompts, cont_fed, Mode::parse("zero")), want) < 1e-12);
  CHECK(worst(run(m, prompts, cont_fed, Mode::exact()), want) > 1e-6);  // the memory matters otherwise
  // Ragged rows in zero mode: each as if alone.
  std::vector<std::vector<index_t>> ragged = prompts;
  ragged[0].resize(2);
  CHECK(worst(run(m, ragged, cont_fed, Mode::zero()), run_alone(m, ragged, cont_fed, Mode::zero())) < 1e-12);
  // The mode stays in force until reset() or the next prefill.
  lrt::Decoder dec(m, 1);
  dec.prefill(prompts[0], Mode::zero());
  CHECK(dec.prefill_mode() == Mode::zero());
  dec.reset();
  CHECK(dec.prefill_mode() == Mode::exact());
  CHECK(dec.position() == 0);
  // Baseline: no memory, so every mode is the Standard forward.
  lrt::GPT<double> base(c, 6);
  randomize(base, 22);
  const auto b_exact = run(base, prompts, cont_fed, Mode::exact());
  CHECK(worst(run(base, prompts, cont_fed, Mode::zero()), b_exact) < 1e-12);
  CHECK(worst(run(base, prompts, cont_fed, Mode::interleaved(2)), b_exact) < 1e-12);
}

namespace {
template <class V>
void check_ragged(const char* name, lrt::ModelConfig c, bool bos = false) {
  CAPTURE(name);
  lrt::Model<V, double> m(c, 9);
  randomize(m, 23);
  std::vector<std::vector<index_t>> prompts{tokens(2, 11), tokens(6, 12), tokens(3, 13), tokens(6, 14)};
  std::vector<std::vector<index_t>> cont{tokens(5, 15), tokens(5, 16), tokens(5, 17), tokens(5, 18)};
  if (bos) prompts[1][2] = 256, cont[2][1] = 256, cont[0][3] = 256;
  for (const Mode mode : {Mode::exact(), Mode::zero(), Mode::interleaved(2), Mode::interleaved(6)}) {
    CAPTURE(mode.name());
    const auto together = run(m, prompts, cont, mode);
    CHECK(worst(together, run_alone(m, prompts, cont, mode)) < 1e-12);
  }
  // Positions per row; lockstep again once equal-length rows run alone.
  lrt::Decoder dec(m, 4);
  dec.prefill(std::span<const std::vector<index_t>>(prompts));
  CHECK(!dec.lockstep());
  CHECK(dec.position() == 6);
  CHECK(dec.position(0) == 2);
  CHECK(dec.position(2) == 3);
  const std::vector<index_t> step{1, 2, 3, 4};
  dec.step(step);
  CHECK(dec.position(0) == 3);
  CHECK(dec.position(3) == 7);
  // Equal lengths: the lockstep path, same results as each row alone.
  const std::vector<std::vector<index_t>> same{prompts[1], prompts[3]};
  lrt::Decoder dec2(m, 2);
  dec2.prefill(std::span<const std::vector<index_t>>(same));
  CHECK(dec2.lockstep());
  CHECK(worst(run(m, same, {cont[0], cont[1]}, Mode::exact()), run_alone(m, same, {cont[0], cont[1]}, Mode::exact())) <
        1e-12);
}
}  // namespace

TEST_CASE("decoder: rows of different prompt lengths decode together as each row alone") {
  check_ragged<vs::Lrt>("lrt", cfg());
  lrt::ModelConfig k2 = cfg();
  k2.mem_offset = 2;
  check_ragged<vs::LrtRelease>("lrt-release, offset 2", k2);
  check_ragged<vs::ResidualOnly>("residual", cfg());
  check_ragged<vs::Baseline>("baseline", cfg());
  lrt::ModelConfig bos = cfg(12, 257);
  bos.reset_at_bos = true;
  bos.mem_offset = 2;
  check_ragged<vs::Lrt>("reset at BOS", bos, true);
}

TEST_CASE("interleaved_prefill runs the Interleaved<S> schedule's passes") {
  const lrt::ModelConfig c = cfg();
  lrt::Model<vs::Lrt, double> m(c, 4);
  randomize(m, 25);
  const index_t B = 2, P = 9;
  Tensor<index_t, 2> ids(Shape<2>{B, P});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < P; ++t)
      ids(b, t) = tokens(static_cast<std::size_t>(P), static_cast<unsigned>(30 + b))[static_cast<std::size_t>(t)];
  const lrt::PrefillState<double, lrt::cpu::Device> st = lrt::interleaved_prefill(m, ids, 3);
  REQUIRE(st.k.size() == 3);
  CHECK(st.k[0].shape() == Shape<4>{B, P, c.n_kv_head, c.head_dim()});
  CHECK(st.v[2].shape() == Shape<4>{B, P, c.n_kv_head, c.head_dim()});
  CHECK(st.source.shape() == Shape<3>{B, P, c.n_embd});
  CHECK(st.logits.shape() == Shape<2>{B, c.vocab_size});
  // The same logits as the last pass of Interleaved<3> that computed position P - 1 (same code).
  lrt::ScheduleOptions o;
  o.keep_logits = true;
  ad::Graph g;
  ad::NoGrad ng;
  const auto r = lrt::schedule_loss<lrt::Interleaved<3>>(m, ids, ids, o);
  const auto& last = r.passes[1 + static_cast<std::size_t>((P - 1) % 3)];  // subset (P - 1) mod 3
  REQUIRE(last.positions.back() == P - 1);
  double w = 0;
  for (index_t b = 0; b < B; ++b)
    for (index_t v = 0; v < c.vocab_size; ++v)
      w = std::max(w, std::abs(st.logits(b, v) - last.logits(b, static_cast<index_t>(last.positions.size()) - 1, v)));
  CHECK(w == 0.0);
  // S = 0: pass 0 alone, the zero-memory forward.
  const auto z = lrt::interleaved_prefill(m, ids, 0);
  double wz = 0;
  for (index_t b = 0; b < B; ++b)
    for (index_t v = 0; v < c.vocab_size; ++v)
      wz = std::max(wz, std::abs(z.logits(b, v) - r.passes[0].logits(b, P - 1, v)));
  CHECK(wz == 0.0);
  CHECK_THROWS_WITH_AS(lrt::interleaved_prefill(m, ids, -1), doctest::Contains("refinement passes"), lrt::Error);
}

TEST_CASE("decoder prefill: modes parse and print; bad prompts and modes are refused") {
  CHECK(Mode::parse("exact") == Mode::exact());
  CHECK(Mode::parse("zero").kind == Mode::Kind::Zero);
  CHECK(Mode::parse("interleaved:3") == Mode::interleaved(3));
  CHECK(Mode::parse("interleaved:12").name() == "interleaved:12");
  CHECK(Mode::exact().name() == "exact");
  CHECK(Mode::zero().name() == "zero");
  for (const char* bad : {"", "Exact", "interleaved", "interleaved:", "interleaved:0", "interleaved:-2",
                          "interleaved:2x", "interleaved:x"})
    CHECK_THROWS_WITH_AS(
        Mode::parse(bad),
        doctest::Contains("expected exact, zero, interleaved:S (S >= 1), fixed-point or approximate:TOL"), lrt::Error);
  CHECK_THROWS_AS(Mode::interleaved(0), lrt::Error);

  const lrt::ModelConfig c = cfg(8);
  lrt::Model<vs::Lrt, double> m(c, 1);
  lrt::Decoder dec(m, 2, 8);  // at most 8 positions per row
  const std::vector<index_t> five(5, 1), three(3, 2);
  CHECK_THROWS_WITH_AS(dec.prefill(five), doctest::Contains("expected B * P"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.prefill(std::vector<index_t>{}), doctest::Contains("expected B * P"), lrt::Error);
  const std::vector<std::vector<index_t>> one_row{five};
  CHECK_THROWS_WITH_AS(dec.prefill(std::span<const std::vector<index_t>>(one_row)),
                       doctest::Contains("1 prompts for 2 rows"), lrt::Error);
  const std::vector<std::vector<index_t>> empty_row{five, {}};
  CHECK_THROWS_WITH_AS(dec.prefill(std::span<const std::vector<index_t>>(empty_row)),
                       doctest::Contains("the prompt of row 1 is empty"), lrt::Error);
  const std::vector<std::vector<index_t>> too_long{five, std::vector<index_t>(9, 0)};
  CHECK_THROWS_WITH_AS(dec.prefill(std::span<const std::vector<index_t>>(too_long), Mode::interleaved(2)),
                       doctest::Contains("more than the capacity 8"), lrt::Error);
  const std::vector<std::vector<index_t>> bad_id{five, {1, 11}};
  CHECK_THROWS_WITH_AS(dec.prefill(std::span<const std::vector<index_t>>(bad_id)),
                       doctest::Contains("outside the vocabulary"), lrt::Error);
  Mode bad_mode;
  bad_mode.kind = Mode::Kind::Interleaved;  // passes 0
  const std::vector<std::vector<index_t>> ok{five, three};
  CHECK_THROWS_WITH_AS(dec.prefill(std::span<const std::vector<index_t>>(ok), bad_mode), doctest::Contains("S >= 1"),
                       lrt::Error);
  // A full row stops the batch: row 0 (5 + 3 = 8 tokens) fills first.
  dec.prefill(std::span<const std::vector<index_t>>(ok));
  const std::vector<index_t> tok{1, 1};
  for (int i = 0; i < 3; ++i) dec.step(tok);
  CHECK(dec.position(0) == 8);
  CHECK(dec.position(1) == 6);
  CHECK_THROWS_WITH_AS(dec.step(tok), doctest::Contains("position 8 of row 0 is past the capacity 8"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.position(2), doctest::Contains("row 2"), lrt::Error);
}

}  // namespace test_decoder
