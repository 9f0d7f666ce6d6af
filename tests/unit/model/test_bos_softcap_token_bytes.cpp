// The configuration's BOS id and logit soft cap, and the tokenizer's bytes per token, used by the
// library instead of fixed numbers (256, 15, "ids < 256 are one byte"), in double precision on
// tiny models with random weights: the decoder cuts the memory exactly at the configured BOS id
// (against an independent fixed-point computation of spec §3.1's rule, lockstep and ragged rows);
// the decoder's logits and Model::loss use logit_softcap (against a double reference from the raw
// head outputs); bits per byte with a custom TokenBytes table (against a hand computation) and the
// byte default's refusal of other vocabularies; the config JSON (round trip, old files, types)
// and validate()'s limits.
#include <lrt/data/tokenizer.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/decode.hpp>
#include <lrt/train/eval.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include "../test_util.hpp"

namespace test_bos_softcap_token_bytes {

using namespace lrt_test;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

namespace {
using lrt_test::randomize;
lrt::ModelConfig small_cfg(index_t vocab, index_t T = 12) {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = T, c.vocab_size = vocab;
  c.window_pattern = "SL";
  return c;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  return "(no lrt::Error)";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Raw head outputs z (B, T, Vp) of rows ids (B, T) under the exact recurrence of spec §3.1 with
/// BOS id `bos` (reset iff `reset`): m~_t = s_{t-k} if t >= k and no BOS among tokens t-k+1..t,
/// else 0. Computed here by fixed-point iteration of full-row forwards (each builds m~ from the
/// previous forward's source states; T + 1 rounds make every position exact), independently of
/// the decoder and the schedules. The baseline ignores the memory (one forward).
template <class M>
Tensor<double, 3> reference_z(const M& m, const Tensor<index_t, 2>& ids, index_t bos, bool reset) {
  const lrt::ModelConfig& c = m.config();
  const index_t B = ids.shape()[0], T = ids.shape()[1], d = c.n_embd, k = c.mem_offset;
  ad::Graph g;
  ad::NoGrad ng;
  const Tensor<index_t, 1> qpos = lrt::iota(Shape<1>{T}, index_t{0});
  const auto rope = ad::RopeTable<double>::make(qpos.view(), c.head_dim(), c.rope_bf16_tables);
  const auto attend = m.standard_attend(qpos);
  Tensor<double, 3> mem(Shape<3>{B, T, d});  // zeros
  using V = typename M::variant;
  const index_t rounds = V::recurrent ? T + 1 : 0;
  for (index_t r = 0; r < rounds; ++r) {
    const auto mv = ad::constant(Tensor<double, 3>(mem));
    const auto pass = m.forward(ids, rope, attend, &mv);
    const Tensor<double, 3>& s = pass.source.value();
    Tensor<double, 3> next(Shape<3>{B, T, d});
    for (index_t b = 0; b < B; ++b)
      for (index_t t = k; t < T; ++t) {
        bool cut = false;
        for (index_t j = t - k + 1; j <= t; ++j) cut = cut || (reset && ids(b, j) == bos);
        if (cut) continue;
        for (index_t e = 0; e < d; ++e) next(b, t, e) = s(b, t - k, e);
      }
    mem = std::move(next);
  }
  const auto mv = ad::constant(Tensor<double, 3>(mem));
  const auto pass = m.forward(ids, rope, attend, V::recurrent ? &mv : nullptr);
  return Tensor<double, 3>(m.head(pass.h).value());
}
/// cap tanh(z / cap) of z (B, T, Vp), cropped to V.
Tensor<double, 3> capped(const Tensor<double, 3>& z, index_t V, double cap) {
  const index_t B = z.shape()[0], T = z.shape()[1];
  Tensor<double, 3> out(Shape<3>{B, T, V});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t)
      for (index_t v = 0; v < V; ++v) out(b, t, v) = cap * std::tanh(z(b, t, v) / cap);
  return out;
}
double max_diff(const Tensor<double, 3>& a, const Tensor<double, 3>& b) {
  REQUIRE(a.shape() == b.shape());
  double w = 0;
  for (index_t i = 0; i < a.numel(); ++i) w = std::max(w, std::abs(a.data()[i] - b.data()[i]));
  return w;
}
/// The decoder's logits (B, T, V) of rows ids (B, T) fed one step at a time (lockstep).
template <class M>
Tensor<double, 3> decode_lockstep(const M& m, const Tensor<index_t, 2>& ids) {
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
/// The same for two rows kept at different positions (the decoder's ragged path): row 1 is
/// prefilled (exactly) with `lead` tokens more than row 0, then both step together; positions a
/// row never reaches stay 0 in the result and in `reached`.
template <class M>
Tensor<double, 3> decode_ragged(const M& m, const Tensor<index_t, 2>& ids, index_t lead, Tensor<double, 3>& reached) {
  const index_t T = ids.shape()[1], V = m.config().vocab_size;
  REQUIRE(ids.shape()[0] == 2);
  lrt::Decoder dec(m, 2);
  Tensor<double, 3> out(Shape<3>{2, T, V});
  reached = Tensor<double, 3>(Shape<3>{2, T, V});
  const auto keep = [&](const Tensor<double, 2>& lg) {
    for (index_t b = 0; b < 2; ++b) {
      const index_t t = dec.position(b) - 1;
      for (index_t v = 0; v < V; ++v) out(b, t, v) = lg(b, v), reached(b, t, v) = 1;
    }
  };
  std::vector<std::vector<index_t>> prompts{{ids(0, 0)}, {}};
  for (index_t t = 0; t <= lead; ++t) prompts[1].push_back(ids(1, t));
  keep(dec.prefill(std::span<const std::vector<index_t>>(prompts)));
  for (index_t j = 1; j + lead < T; ++j) {
    CHECK_FALSE(dec.lockstep());
    const std::vector<index_t> tok{ids(0, j), ids(1, j + lead)};
    keep(dec.step(tok));
  }
  return out;
}
Tensor<double, 3> masked(const Tensor<double, 3>& a, const Tensor<double, 3>& mask) {
  Tensor<double, 3> out(a.shape());
  for (index_t i = 0; i < a.numel(); ++i) out.data()[i] = a.data()[i] * mask.data()[i];
  return out;
}
}  // namespace

TEST_CASE("config facts: the decoder cuts the memory exactly at the configured BOS id (not at 256 or the last id)") {
  for (index_t k : {index_t{1}, index_t{2}}) {
    CAPTURE(k);
    lrt::ModelConfig c = small_cfg(300);
    c.bos_id = 7;  // inside the vocabulary, not the last id
    c.reset_at_bos = true;
    c.mem_offset = k;
    REQUIRE(c.bos() == 7);
    lrt::Model<vs::Lrt, double> m(c, 1);
    randomize(m, 21);
    const index_t T = c.sequence_len;
    Tensor<index_t, 2> ids(Shape<2>{2, T});
    std::mt19937 rng(3);
    for (index_t i = 0; i < ids.numel(); ++i) {
      index_t x = static_cast<index_t>(rng() % 300);
      ids.data()[i] = x == 7 ? 8 : x;
    }
    ids(0, 4) = 7, ids(0, 2) = 256, ids(0, 9) = 299;  // the BOS and the two ids a fixed rule would cut at
    ids(1, 8) = 7, ids(1, 3) = 299, ids(1, 5) = 256;
    const Tensor<double, 3> want = capped(reference_z(m, ids, 7, true), 300, 15);
    const Tensor<double, 3> got = decode_lockstep(m, ids);
    CHECK(max_diff(got, want) < 1e-12);
    // The test can fail: a cut at 256, at the last id 299, or none gives other logits.
    CHECK(max_diff(got, capped(reference_z(m, ids, 256, true), 300, 15)) > 1e-6);
    CHECK(max_diff(got, capped(reference_z(m, ids, 299, true), 300, 15)) > 1e-6);
    CHECK(max_diff(got, capped(reference_z(m, ids, 7, false), 300, 15)) > 1e-6);
    // Rows at different positions (one token each per step, not in lockstep): the same cuts.
    Tensor<double, 3> reached;
    const Tensor<double, 3> ragged = decode_ragged(m, ids, 2, reached);
    CHECK(max_diff(ragged, masked(want, reached)) < 1e-12);
    CHECK(max_diff(ragged, masked(capped(reference_z(m, ids, 256, true), 300, 15), reached)) > 1e-6);
  }
  // The default BOS (-1: the last id) of the byte vocabulary is still 256.
  lrt::ModelConfig bytes = small_cfg(257);
  bytes.reset_at_bos = true;
  lrt::Model<vs::Lrt, double> mb(bytes, 1);
  randomize(mb, 5);
  Tensor<index_t, 2> ids(Shape<2>{1, bytes.sequence_len});
  for (index_t t = 0; t < ids.numel(); ++t) ids.data()[t] = (t * 37) % 256;
  ids(0, 5) = 256;
  CHECK(max_diff(decode_lockstep(mb, ids), capped(reference_z(mb, ids, 256, true), 257, 15)) < 1e-12);
}

TEST_CASE("config facts: logit_softcap = 30 in the decoder's logits and in Model::loss") {
  lrt::ModelConfig c = small_cfg(13);
  c.logit_softcap = 30;
  lrt::Model<vs::Baseline, double> m(c, 2);
  randomize(m, 9);
  std::mt19937 rng(10);
  fill_random(m.lm_head().value(), rng, -10, 10);  // large logits: 15 and 30 tanh(z / 30) differ a lot
  const index_t T = c.sequence_len, V = c.vocab_size;
  Tensor<index_t, 2> ids(Shape<2>{2, T});
  for (index_t i = 0; i < ids.numel(); ++i) ids.data()[i] = (i * 5 + 3) % V;
  const Tensor<double, 3> z = reference_z(m, ids, c.bos(), false);  // raw head outputs (2, T, Vp)
  double zmax = 0;
  for (index_t i = 0; i < z.numel(); ++i) zmax = std::max(zmax, std::abs(z.data()[i]));
  REQUIRE(zmax > 10);
  const Tensor<double, 3> want = capped(z, V, 30);
  const Tensor<double, 3> got = decode_lockstep(m, ids);
  CHECK(max_diff(got, want) < 1e-12);
  CHECK(max_diff(got, capped(z, V, 15)) > 1e-3);
  Tensor<double, 3> reached;
  const Tensor<double, 3> ragged = decode_ragged(m, ids, 3, reached);  // before `reached` is read
  CHECK(max_diff(ragged, masked(want, reached)) < 1e-12);

  // Model::loss: the mean over non-ignored targets of logsumexp(c) - c_y, c = 30 tanh(z / 30).
  Tensor<index_t, 2> tg(Shape<2>{2, T});
  for (index_t i = 0; i < tg.numel(); ++i) tg.data()[i] = (i * 7 + 1) % V;
  tg(1, 4) = -1;  // ignored
  double total = 0;
  index_t n = 0;
  std::vector<double> per(static_cast<std::size_t>(2 * T), 0.0);
  for (index_t b = 0; b < 2; ++b)
    for (index_t t = 0; t < T; ++t) {
      if (tg(b, t) < 0) continue;
      double mx = -1e300, s = 0;
      for (index_t v = 0; v < V; ++v) mx = std::max(mx, want(b, t, v));
      for (index_t v = 0; v < V; ++v) s += std::exp(want(b, t, v) - mx);
      const double nll = mx + std::log(s) - want(b, t, tg(b, t));
      per[static_cast<std::size_t>(b * T + t)] = nll;
      total += nll, ++n;
    }
  ad::Graph g;
  const auto ce = m.loss(ids, tg);
  CHECK(ce.count == n);
  CHECK(*ce.loss.value().data() == doctest::Approx(total / static_cast<double>(n)).epsilon(1e-12));
  for (index_t i = 0; i < 2 * T; ++i)
    CHECK(ce.per_token(i) == doctest::Approx(per[static_cast<std::size_t>(i)]).epsilon(1e-12));
  // And the default cap (15) gives another loss (the test can fail).
  lrt::ModelConfig c15 = c;
  c15.logit_softcap = 15;
  lrt::Model<vs::Baseline, double> m15(c15, 2);
  randomize(m15, 9);  // the same weights
  std::mt19937 rng15(10);
  fill_random(m15.lm_head().value(), rng15, -10, 10);
  CHECK(std::abs(*m15.loss(ids, tg).loss.value().data() - total / static_cast<double>(n)) > 1e-3);
}

namespace {
struct Batch {
  Tensor<index_t, 2> inputs, targets;
};
std::vector<Batch> batches_of(index_t V, index_t T, unsigned seed) {
  std::vector<Batch> out;
  std::mt19937 rng(seed);
  for (int i = 0; i < 2; ++i) {
    Batch b{Tensor<index_t, 2>(Shape<2>{2, T}), Tensor<index_t, 2>(Shape<2>{2, T})};
    for (index_t j = 0; j < 2 * T; ++j)
      b.inputs.data()[j] = static_cast<index_t>(rng() % V), b.targets.data()[j] = static_cast<index_t>(rng() % V);
    b.targets(1, 2) = -1;  // ignored
    out.push_back(std::move(b));
  }
  return out;
}
/// Bits per byte by hand from the reference logits of every batch (the exact recurrence).
template <class M>
lrt::BpbResult hand_bpb(const M& m, const std::vector<Batch>& batches, const std::vector<index_t>& bytes) {
  const lrt::ModelConfig& c = m.config();
  lrt::BpbResult r;
  for (const Batch& b : batches) {
    const Tensor<double, 3> lg =
        capped(reference_z(m, b.inputs, c.bos(), c.reset_at_bos), c.vocab_size, c.logit_softcap);
    for (index_t bb = 0; bb < 2; ++bb)
      for (index_t t = 0; t < b.inputs.shape()[1]; ++t) {
        const index_t y = b.targets(bb, t);
        if (y < 0 || bytes[static_cast<std::size_t>(y)] == 0) continue;
        double mx = -1e300, s = 0;
        for (index_t v = 0; v < c.vocab_size; ++v) mx = std::max(mx, lg(bb, t, v));
        for (index_t v = 0; v < c.vocab_size; ++v) s += std::exp(lg(bb, t, v) - mx);
        r.nats += mx + std::log(s) - lg(bb, t, y);
        r.bytes += bytes[static_cast<std::size_t>(y)], r.tokens += 1;
      }
  }
  return r;
}
}  // namespace

TEST_CASE(
    "config facts: bits per byte with the tokenizer's TokenBytes table; the byte default refuses other vocabularies") {
  const std::vector<index_t> bytes{1, 2, 1, 3, 0, 1, 2, 1, 1, 0, 4};  // ids 4 and 9: specials; id 10: 4 bytes
  const lrt::TokenBytes tb{bytes};
  CHECK(tb.size() == 11);
  CHECK(tb(3) == 3);
  CHECK(tb(4) == 0);
  CHECK(tb(-1) == 0);
  CHECK(tb(11) == 0);
  CHECK(tb(1000) == 0);

  lrt::ModelConfig c = small_cfg(11, 8);
  const auto batches = batches_of(11, 8, 4);
  {  // baseline: evaluate_bpb and evaluate_parallel<Standard>
    lrt::Model<vs::Baseline, double> m(c, 1);
    randomize(m, 6, 1.0);
    const lrt::BpbResult want = hand_bpb(m, batches, bytes);
    REQUIRE(want.tokens > 0);
    CHECK(want.bytes > want.tokens);  // some targets count several bytes
    const lrt::BpbResult got = lrt::evaluate_bpb(m, batches, tb);
    CHECK(got.tokens == want.tokens);
    CHECK(got.bytes == want.bytes);
    CHECK(got.nats == doctest::Approx(want.nats).epsilon(1e-12));
    CHECK(got.bpb() ==
          doctest::Approx(want.nats / (std::numbers::ln2 * static_cast<double>(want.bytes))).epsilon(1e-12));
    const auto par = lrt::evaluate_parallel<lrt::Standard>(m, batches, tb);
    CHECK(par.merged.bytes == want.bytes);
    CHECK(par.merged.bpb() == doctest::Approx(want.bpb()).epsilon(1e-12));
    CHECK(par.passes.at(0).bytes == want.bytes);
    // One byte per id would give another number (the test can fail).
    const lrt::TokenBytes ones{std::vector<index_t>(11, 1)};
    CHECK(std::abs(lrt::evaluate_bpb(m, batches, ones).bpb() - want.bpb()) > 1e-6);
    // The byte default: refused for this vocabulary, with the operation and what to pass.
    for (const auto& [what, f] : std::vector<std::pair<std::string, std::function<void()>>>{
             {"evaluate_bpb", [&] { (void)lrt::evaluate_bpb(m, batches); }},
             {"evaluate_parallel", [&] { (void)lrt::evaluate_parallel<lrt::Standard>(m, batches); }},
             {"evaluate_sequential", [&] { (void)lrt::evaluate_sequential(m, batches); }}}) {
      const std::string e = error_of(f);
      CAPTURE(e);
      CHECK(contains(e, "[" + what + "]"));
      CHECK(contains(e, "vocab_size 11"));
      CHECK(contains(e, "pass the tokenizer's token bytes"));
    }
    // A table that does not cover the vocabulary, or counts negative bytes, is refused.
    const lrt::TokenBytes short_tb{std::vector<index_t>(10, 1)};
    CHECK(contains(error_of([&] { (void)lrt::evaluate_bpb(m, batches, short_tb); }),
                   "fewer than the model's vocab_size 11"));
    lrt::TokenBytes neg = tb;
    neg.bytes[2] = -1;
    CHECK(contains(error_of([&] { (void)lrt::evaluate_bpb(m, batches, neg); }), "must be >= 0"));
  }
  {  // LRT: the sequential (decode) and parallel (Interleaved<S >= T>) numbers with the table
    lrt::ModelConfig cl = c;
    cl.bos_id = 4, cl.reset_at_bos = true;
    lrt::Model<vs::Lrt, double> m(cl, 1);
    randomize(m, 7, 1.0);
    const lrt::BpbResult want = hand_bpb(m, batches, bytes);
    const lrt::BpbResult seq = lrt::evaluate_sequential(m, batches, tb);
    CHECK(seq.tokens == want.tokens);
    CHECK(seq.bytes == want.bytes);
    CHECK(seq.bpb() == doctest::Approx(want.bpb()).epsilon(1e-10));
    const auto par = lrt::evaluate_parallel<lrt::Interleaved<8>>(m, batches, tb);
    CHECK(par.merged.bytes == want.bytes);
    CHECK(par.merged.bpb() == doctest::Approx(want.bpb()).epsilon(1e-10));
  }
  {  // The byte vocabulary: the default is the byte tokenizer's table; a moved BOS is refused.
    lrt::ModelConfig cb = small_cfg(257, 8);
    lrt::Model<vs::Baseline, double> m(cb, 1);
    randomize(m, 8);
    auto bb = batches_of(257, 8, 5);
    bb[0].targets(0, 1) = 256;  // BOS target: no bytes
    const lrt::TokenBytes table = lrt::data::ByteTokenizer::token_bytes_table();
    const lrt::BpbResult def = lrt::evaluate_bpb(m, bb), explicit_ = lrt::evaluate_bpb(m, bb, table);
    CHECK(def.nats == explicit_.nats);
    CHECK(def.bytes == explicit_.bytes);
    CHECK(def.tokens == explicit_.tokens);
    CHECK(def.bytes == def.tokens);
    index_t scored = 0;
    for (const auto& b : bb)
      for (index_t i = 0; i < b.targets.numel(); ++i) scored += b.targets.data()[i] >= 0 && b.targets.data()[i] < 256;
    CHECK(scored < 2 * 2 * 8 - 2);  // the BOS target is not scored
    CHECK(def.tokens == scored);
    lrt::ModelConfig moved = cb;
    moved.bos_id = 0;
    lrt::Model<vs::Baseline, double> mm(moved, 1);
    const std::string e = error_of([&] { (void)lrt::evaluate_bpb(mm, bb); });
    CHECK(contains(e, "[evaluate_bpb]"));
    CHECK(contains(e, "BOS 0"));
    CHECK(contains(e, "pass the tokenizer's token bytes"));
    CHECK_NOTHROW((void)lrt::evaluate_bpb(mm, bb, table));
  }
}

TEST_CASE("config facts: the byte tokenizer's token-bytes table") {
  using lrt::data::ByteTokenizer;
  const lrt::TokenBytes t = ByteTokenizer::token_bytes_table();
  REQUIRE(t.size() == 257);
  for (int id = 0; id < 257; ++id) CHECK(t(id) == ByteTokenizer::token_bytes(id));
  const lrt::TokenBytes p = ByteTokenizer::token_bytes_table(ByteTokenizer::padded_vocab);
  REQUIRE(p.size() == 320);
  for (index_t id = 0; id < 320; ++id) CHECK(p(id) == (id < 256 ? 1 : 0));
  CHECK(p(-1) == 0);
  CHECK(contains(error_of([] { (void)ByteTokenizer::token_bytes_table(256); }), "vocab_size >= 257"));
}

TEST_CASE("config facts: bos_id and logit_softcap in the config JSON; old JSON loads the defaults; validate") {
  lrt::ModelConfig c = small_cfg(300);
  c.bos_id = 7, c.logit_softcap = 30, c.reset_at_bos = true;
  {
    const lrt::json::Value lj = lrt::lrt_config_json<vs::Lrt>(c);
    CHECK(lj.at("bos_id").as_int() == 7);
    CHECK(lj.at("logit_softcap").as_number() == 30);
    // Through the text form, as in a checkpoint's metadata.
    const lrt::json::Value back = lrt::json::parse(lj.dump());
    const lrt::ModelConfig r = lrt::config_from_json(lrt::release_config_json<vs::Lrt>(c), &back);
    CHECK(r.bos_id == 7);
    CHECK(r.bos() == 7);
    CHECK(r.logit_softcap == 30);
    CHECK(r.reset_at_bos);
  }
  {  // A non-integral cap survives exactly; the default bos (-1) is written resolved.
    lrt::ModelConfig d = small_cfg(257);
    d.logit_softcap = 12.345678901234567;
    const lrt::json::Value back = lrt::json::parse(lrt::lrt_config_json(d).dump());
    CHECK(back.at("bos_id").as_int() == 256);
    const lrt::ModelConfig r = lrt::config_from_json(lrt::release_config_json(d), &back);
    CHECK(r.bos() == 256);
    CHECK(r.logit_softcap == d.logit_softcap);
  }
  {  // Old lrt_config (no bos_id, no logit_softcap) and no lrt_config at all: the defaults.
    const lrt::json::Value old = lrt::json::parse(R"({"mem_offset": 2, "reset_at_bos": true})");
    const lrt::ModelConfig r = lrt::config_from_json(lrt::release_config_json(c), &old);
    CHECK(r.mem_offset == 2);
    CHECK(r.bos_id == -1);
    CHECK(r.bos() == 299);
    CHECK(r.logit_softcap == 15);
    const lrt::ModelConfig r0 = lrt::config_from_json(lrt::release_config_json(c));
    CHECK(r0.bos_id == -1);
    CHECK(r0.logit_softcap == 15);
  }
  {  // Types and ranges are checked.
    const auto bad = [&](const char* text) {
      const lrt::json::Value j = lrt::json::parse(text);
      return error_of([&] { (void)lrt::config_from_json(lrt::release_config_json(c), &j, "test"); });
    };
    CHECK(contains(bad(R"({"bos_id": "7"})"), "field 'bos_id' must be an integer"));
    CHECK(contains(bad(R"({"bos_id": 7.5})"), "field 'bos_id' must be an integer"));
    CHECK(contains(bad(R"({"logit_softcap": true})"), "field 'logit_softcap' must be a number"));
    CHECK(contains(bad(R"({"bos_id": 300})"), "bos_id"));
    CHECK(contains(bad(R"({"logit_softcap": 0})"), "logit_softcap"));
  }
  {  // A checkpoint file round trip.
    const auto dir = std::filesystem::temp_directory_path() / "lrt_test_config_facts";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "m.safetensors").string();
    lrt::Model<vs::Lrt, double> m(c, 1);
    lrt::save_model(m, path, 3);
    const lrt::ModelConfig r = lrt::read_model_config(lrt::st::Reader::open(path));
    CHECK(r.bos() == 7);
    CHECK(r.logit_softcap == 30);
    std::filesystem::remove_all(dir);
  }
  // validate(): bos_id in [-1, vocab_size), logit_softcap finite and > 0.
  const auto invalid = [](lrt::ModelConfig x) { return error_of([&] { x.validate(); }); };
  lrt::ModelConfig v = small_cfg(300);
  CHECK_NOTHROW(v.validate());
  v.bos_id = 299;
  CHECK_NOTHROW(v.validate());
  v.bos_id = 300;
  CHECK(contains(invalid(v), "bos_id"));
  v.bos_id = -2;
  CHECK(contains(invalid(v), "bos_id"));
  v.bos_id = -1;
  v.logit_softcap = 0;
  CHECK(contains(invalid(v), "logit_softcap"));
  v.logit_softcap = -15;
  CHECK(contains(invalid(v), "logit_softcap"));
  v.logit_softcap = std::numeric_limits<double>::infinity();
  CHECK(contains(invalid(v), "logit_softcap"));
  v.logit_softcap = std::nan("");
  CHECK(contains(invalid(v), "logit_softcap"));
}

}  // namespace test_bos_softcap_token_bytes
