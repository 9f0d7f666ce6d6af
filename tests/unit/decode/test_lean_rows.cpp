// The lean decoder's rows (decode/lean.hpp, Options::rows): requests that join and leave at
// different steps, decoded together, each row's logits bit for bit those of the same request
// decoded alone, for baseline and LRT variants, fp32, int8 and bf16 weights, greedy and seeded
// sampling and every prefill mode; the batched BLAS products (batch_invariant = false) as the case
// that differs; the row-wise product (backend/cpu/rowwise.hpp) against its documented order; errors.
#include <cstring>
#include <deque>
#include <optional>

#include <lrt/decode.hpp>

#include "../test_util.hpp"

namespace test_lean_rows {

using lrt::index_t;
namespace vs = lrt::variants;
using Mode = lrt::PrefillMode;

namespace {
using lrt_test::randomize;
/// 32 channels and head dim 16: the products have whole 16-lane steps and tails; layer 0's window
/// (6) slides during the decode.
lrt::ModelConfig cfg() {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 32, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 12, c.vocab_size = 300;
  c.window_pattern = "SL", c.mem_offset = 2, c.reset_at_bos = true;
  return c;
}

/// One request: its prompt, prefill mode, sampler, how many tokens it generates and when it arrives.
struct Request {
  std::vector<index_t> prompt;
  Mode mode;
  lrt::SamplerOptions sampler;
  index_t new_tokens = 0, arrives = 0;
};
/// What a request produced: the logits after its prompt and after each token, and its tokens.
struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<index_t> tokens;
};

std::vector<Request> requests(index_t n, index_t bos, unsigned seed) {
  std::mt19937 rng(seed);
  const Mode modes[] = {Mode::exact(), Mode::zero(), Mode::interleaved(2), Mode::fixed_point(), Mode::exact()};
  std::vector<Request> out;
  for (index_t i = 0; i < n; ++i) {
    Request r;
    r.prompt.resize(1 + rng() % 9);
    for (auto& t : r.prompt) t = static_cast<index_t>(rng() % 280);
    if (i % 4 == 1) r.prompt[r.prompt.size() / 2] = bos;  // the BOS cut inside a prompt
    r.mode = modes[i % 5];
    if (i % 2)
      r.sampler = {0.9, 20, 0.95, static_cast<std::uint64_t>(100 + i)};  // seeded sampling
    else
      r.sampler.temperature = 0;                          // greedy
    r.new_tokens = 3 + static_cast<index_t>(rng() % 22);  // up to 24: past the window and the context
    r.arrives = static_cast<index_t>(rng() % 14);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

/// Each request alone on a one-row decoder.
template <class V>
Trace alone(const lrt::LeanWeights<float>& w, const Request& r) {
  lrt::LeanDecoder<V, float> dec(w, {0, -1});
  Trace t;
  t.logits.push_back(copy(dec.prefill(r.prompt, r.mode)));
  for (index_t i = 0; i < r.new_tokens; ++i) {
    const index_t tok = lrt::sample_token<float>(dec.logits(), r.sampler, lrt::sample_counter(0, dec.position()));
    t.tokens.push_back(tok);
    t.logits.push_back(copy(dec.step(tok)));
  }
  return t;
}

/// The requests on one decoder of `rows` rows: each joins at its arrival step (or once a row is
/// free), all rows that are decoding step together, and a row leaves when its request is done.
/// Returns the traces and the most rows that stepped together.
template <class V>
std::vector<Trace> together(const lrt::LeanWeights<float>& w, const std::vector<Request>& reqs, index_t rows,
                            bool invariant, index_t& widest) {
  typename lrt::LeanDecoder<V, float>::Options o{0, -1};
  o.rows = rows, o.batch_invariant = invariant;
  lrt::LeanDecoder<V, float> dec(w, o);
  std::vector<Trace> out(reqs.size());
  std::vector<index_t> row_of(reqs.size(), -1), done(reqs.size(), 0);
  std::deque<std::size_t> waiting;
  std::size_t finished = 0;
  widest = 0;
  for (index_t step = 0; finished < reqs.size(); ++step) {
    REQUIRE(step < 1000);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].arrives == step) waiting.push_back(i);
    while (!waiting.empty() && dec.active_rows() < rows) {  // joins: prefill the prompt into a free row
      const std::size_t i = waiting.front();
      waiting.pop_front();
      row_of[i] = dec.join(reqs[i].prompt, reqs[i].mode);
      out[i].logits.push_back(copy(dec.logits(row_of[i])));
    }
    std::vector<index_t> step_rows, step_tokens;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (row_of[i] < 0) continue;
      const index_t r = row_of[i];
      const index_t tok =
          lrt::sample_token<float>(dec.logits(r), reqs[i].sampler, lrt::sample_counter(0, dec.position(r)));
      out[i].tokens.push_back(tok);
      step_rows.push_back(r), step_tokens.push_back(tok);
    }
    if (step % 3 == 1)
      std::reverse(step_rows.begin(), step_rows.end()), std::reverse(step_tokens.begin(), step_tokens.end());
    widest = std::max(widest, static_cast<index_t>(step_rows.size()));
    if (!step_rows.empty()) dec.step(step_rows, step_tokens);
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (row_of[i] < 0) continue;
      out[i].logits.push_back(copy(dec.logits(row_of[i])));
      if (++done[i] == reqs[i].new_tokens) dec.leave(row_of[i]), row_of[i] = -1, ++finished;
    }
  }
  CHECK(dec.active_rows() == 0);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// 24 requests over 16 rows, against each alone: returns the number of logits vectors compared.
template <class V>
std::size_t check_rows(const char* name, lrt::WeightFormat f) {
  CAPTURE(name);
  const std::string format(to_string(f));
  CAPTURE(format);
  lrt::Model<V, float> m(cfg(), 5);
  randomize(m, 31);
  std::optional<lrt::PackedWeights> pw;
  if (f != lrt::WeightFormat::F32) pw = lrt::pack_weights(m, f, 8);
  const lrt::LeanWeights<float> w = lrt::lean_weights(m, pw ? &*pw : nullptr);
  const auto reqs = requests(24, m.config().bos(), 7);
  index_t widest = 0;
  const auto got = together<V>(w, reqs, 16, true, widest);
  CHECK(widest == 16);  // every row stepped together at some point
  std::size_t compared = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    CAPTURE(i);
    const Trace ref = alone<V>(w, reqs[i]);
    CHECK(got[i].tokens == ref.tokens);
    REQUIRE(got[i].logits.size() == ref.logits.size());
    for (std::size_t j = 0; j < ref.logits.size(); ++j) {
      CAPTURE(j);
      CHECK(same_bits(got[i].logits[j], ref.logits[j]));
      ++compared;
    }
  }
  return compared;
}
}  // namespace

TEST_CASE("lean decoder rows: requests joining and leaving get the bits they get alone, every weight format") {
  using KvLayer1 = lrt::Variant<lrt::Injection::KV, lrt::Projection::Layerwise, lrt::BlockSource<1>>;
  for (const auto f : {lrt::WeightFormat::F32, lrt::WeightFormat::Int8, lrt::WeightFormat::BF16}) {
    CHECK(check_rows<vs::Baseline>("baseline", f) > 300);
    CHECK(check_rows<vs::Lrt>("lrt", f) > 300);
    CHECK(check_rows<KvLayer1>("kv/layerwise/block1", f) > 300);
  }
}

TEST_CASE("lean decoder rows: the batched BLAS products are the case that depends on the batch") {
  // The same schedule with batch_invariant = false: the fp32 products of a step with several rows
  // go to lrt::gemm (Eigen or OpenBLAS), which rounds unlike the single-row product, so some
  // request's logits differ from its logits alone (within rounding).
  lrt::Model<vs::Lrt, float> m(cfg(), 5);
  randomize(m, 31);
  const lrt::LeanWeights<float> w = lrt::lean_weights(m);
  const auto reqs = requests(24, m.config().bos(), 7);
  index_t widest = 0;
  const auto got = together<vs::Lrt>(w, reqs, 16, false, widest);
  std::size_t differ = 0;
  double worst = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const Trace ref = alone<vs::Lrt>(w, reqs[i]);
    // Sampled tokens may part ways once the logits differ: compare up to the first that does.
    for (std::size_t j = 0; j < std::min(ref.logits.size(), got[i].logits.size()); ++j) {
      if (j > 0 && got[i].tokens[j - 1] != ref.tokens[j - 1]) break;
      differ += !same_bits(got[i].logits[j], ref.logits[j]);
      for (std::size_t v = 0; v < ref.logits[j].size(); ++v)
        worst = std::max(worst, std::abs(double(got[i].logits[j][v]) - double(ref.logits[j][v])));
    }
  }
  MESSAGE("batched BLAS products: ", differ, " logits vectors differ from the request alone, by up to ", worst);
  CHECK(differ > 0);
  CHECK(worst < 1e-4);
}

TEST_CASE("row-wise product: every row is the single-row product, in dot_lanes' documented order") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const index_t K : {1, 7, 16, 17, 33, 100, 256, 512})  // 16 x 300 x 512: split over the pool
    for (const index_t N : {1, 2, 3, 5, 9, 64, 300})
      for (const index_t R : {1, 2, 3, 5, 16, 17}) {
        CAPTURE(K);
        CAPTURE(N);
        CAPTURE(R);
        const index_t ldx = K + 3;  // rows of x apart by more than K
        std::vector<float> x(static_cast<std::size_t>(R * ldx)), w(static_cast<std::size_t>(N * K)),
            y(static_cast<std::size_t>(R * N), -7.0f), one(static_cast<std::size_t>(N));
        for (auto& v : x) v = u(rng);
        for (auto& v : w) v = u(rng);
        lrt::cpu::rowwise_product<float>(R, N, K, x.data(), ldx, w.data(), K, y.data(), N);
        bool rows_alone = true, as_gemm = true, as_documented = true;
        for (index_t r = 0; r < R; ++r) {
          const float* xr = x.data() + r * ldx;
          lrt::cpu::rowwise_product<float>(1, N, K, xr, ldx, w.data(), K, one.data(), N);
          rows_alone = rows_alone && std::memcmp(one.data(), y.data() + r * N, one.size() * sizeof(float)) == 0;
          lrt::Tensor<float, 2> g(lrt::Shape<2>{1, N});
          lrt::gemm(g, lrt::TensorView<const float, 2>(xr, lrt::Shape<2>{1, K}),
                    lrt::TensorView<const float, 2>(w.data(), lrt::Shape<2>{N, K}).t());
          as_gemm = as_gemm && std::memcmp(g.data(), y.data() + r * N, one.size() * sizeof(float)) == 0;
          for (index_t n = 0; n < N; ++n) {  // the order of the header, written out in scalars
            const float* wn = w.data() + n * K;
            float want = 0;
            if (N == 1) {
              for (index_t k = 0; k < K; ++k) want += xr[k] * wn[k];
            } else {
              float lane[16] = {};
              index_t k = 0;
              for (; k + 16 <= K; k += 16)
                for (int l = 0; l < 16; ++l)
                  lane[l] = lrt::cpu::detail::rowwise_fused() ? std::fma(xr[k + l], wn[k + l], lane[l])
                                                              : lane[l] + xr[k + l] * wn[k + l];
              for (int h = 8; h > 0; h /= 2)
                for (int l = 0; l < h; ++l) lane[l] += lane[l + h];
              want = lane[0];
              for (; k < K; ++k)
                want = lrt::cpu::detail::rowwise_fused() ? std::fma(xr[k], wn[k], want) : want + xr[k] * wn[k];
            }
            as_documented =
                as_documented && std::memcmp(&want, &y[static_cast<std::size_t>(r * N + n)], sizeof want) == 0;
          }
        }
        CHECK(rows_alone);
        CHECK(as_gemm);
        CHECK(as_documented);
      }
}

TEST_CASE("lean decoder rows: errors name the row and what is wrong; nothing changes on an error") {
  lrt::Model<vs::Lrt, float> m(cfg(), 1);
  lrt::LeanDecoder<vs::Lrt, float>::Options o{8, -1};
  o.rows = 2;
  lrt::LeanDecoder<vs::Lrt, float> dec(lrt::lean_weights(m), o);
  CHECK(dec.rows() == 2);
  CHECK(dec.active_rows() == 0);
  const std::vector<index_t> p{1, 2, 3};
  const index_t a = dec.join(p), b = dec.join(p, Mode::zero());
  CHECK(a == 0);
  CHECK(b == 1);
  CHECK_THROWS_WITH_AS(dec.join(p), doctest::Contains("every row is in use (2 rows"), lrt::Error);
  const std::vector<index_t> rows{0, 1}, toks{5, 6};
  CHECK_THROWS_WITH_AS(dec.step(std::vector<index_t>{0, 0}, toks), doctest::Contains("row 0 is given twice"),
                       lrt::Error);
  CHECK_THROWS_WITH_AS(dec.step(std::vector<index_t>{0, 2}, toks), doctest::Contains("row 2 outside [0, 2)"),
                       lrt::Error);
  CHECK_THROWS_WITH_AS(dec.step(rows, std::vector<index_t>{5, 300}), doctest::Contains("token id 300"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.step(rows, std::vector<index_t>{5}), doctest::Contains("got 1 tokens for 2 rows"),
                       lrt::Error);
  CHECK(dec.position(0) == 3);  // none of those steps changed anything
  CHECK(dec.position(1) == 3);
  dec.leave(1);
  CHECK_THROWS_WITH_AS(dec.step(rows, toks), doctest::Contains("row 1 is not in use"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.leave(1), doctest::Contains("row 1 is not in use"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.leave(-1), doctest::Contains("row -1 outside [0, 2)"), lrt::Error);
  CHECK(dec.position(0) == 3);
  for (int i = 0; i < 5; ++i) dec.step(std::vector<index_t>{0}, std::vector<index_t>{7});
  CHECK_THROWS_WITH_AS(dec.step(std::vector<index_t>{0}, std::vector<index_t>{7}),
                       doctest::Contains("context full: position 8 of row 0"), lrt::Error);
  CHECK_THROWS_WITH_AS(dec.join(std::vector<index_t>(9, 1)), doctest::Contains("more than the capacity 8"), lrt::Error);
  CHECK(dec.active_rows() == 1);
  o.rows = 0;
  CHECK_THROWS_WITH_AS((lrt::LeanDecoder<vs::Lrt, float>(lrt::lean_weights(m), o)),
                       doctest::Contains("rows must be >= 1, got 0"), lrt::Error);
}

}  // namespace test_lean_rows
