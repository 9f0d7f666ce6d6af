// The Decoder past the training context, in double precision on tiny models with random weights:
// decoding N = 5T positions == the Exact schedule without gradients over the whole sequence
// (lockstep, long prompts exact and interleaved, ragged rows), attention sinks against a slow
// token-by-token reference, capacities, long inputs with gradients refused, the sampler's counters.
#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>

#include <cstring>
#include <set>
#include <span>
#include <string>

#include "../model/lrt_fixtures.hpp"

namespace test_past_context {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

/// Decoding far past the training context (N = 5T) == the Exact schedule run without gradients over
/// the whole sequence with the configuration's windows: teacher forcing in lockstep, a prompt longer
/// than every window fed exact and interleaved:S (S >= P), and ragged rows that never share a
/// position (each row's cache moves on its own).
template <class V>
void check_past_context(const std::string& name, lrt::ModelConfig c) {
  CAPTURE(name);
  lrt::Model<V, double> m(c, 3);
  // Weights in +-0.3: with +-0.5 the release variant's recurrence amplifies rounding by ~1.5 per
  // position, which 5T positions turn into 1e-11 on any path that sums in another order.
  randomize(m, 29, 0.3);
  const index_t T = c.sequence_len, N = 5 * T, Vv = c.vocab_size;
  const Tensor<index_t, 2> ids = ids_of(2, N, 31);
  const auto ref = merged_logits<lrt::Exact>(m, ids);  // (2, N, V): no gradients, N > sequence_len
  // The reference can fail: positions past T really see another context than a fresh row would.
  {
    const Tensor<index_t, 2> tail(ids.view().slice(1, N - T, N));
    const auto fresh = merged_logits<lrt::Exact>(m, tail);
    double w = 0;
    for (index_t t = 0; t < T; ++t)
      for (index_t v = 0; v < Vv; ++v) w = std::max(w, std::abs(fresh(0, t, v) - ref(0, N - T + t, v)));
    CHECK(w > 1e-6);
  }
  CHECK(max_diff(decode_logits(m, ids), ref) < 1e-12);
  lrt::Decoder cap_check(m, 2);
  CHECK(cap_check.capacity() == 0);
  CHECK(cap_check.cache_slots(0) == 2 * (c.window(0) + 1));
  CHECK(cap_check.cache_slots(c.n_layer - 1) == 2 * (T + 1));
  // A prompt of 3T + 1 tokens, then teacher-forced steps to N.
  const index_t P = 3 * T + 1;
  for (const lrt::PrefillMode mode : {lrt::PrefillMode::exact(), lrt::PrefillMode::interleaved(4 * T)}) {
    CAPTURE(mode.name());
    lrt::Decoder dec(m, 2);
    std::vector<index_t> prompts;
    for (index_t b = 0; b < 2; ++b)
      for (index_t t = 0; t < P; ++t) prompts.push_back(ids(b, t));
    double w = 0;
    const auto take = [&](const Tensor<double, 2>& lg, index_t t) {
      for (index_t b = 0; b < 2; ++b)
        for (index_t v = 0; v < Vv; ++v) w = std::max(w, std::abs(lg(b, v) - ref(b, t, v)));
    };
    take(dec.prefill(prompts, mode), P - 1);
    for (index_t t = P; t < N; ++t) take(dec.step(std::vector<index_t>{ids(0, t), ids(1, t)}), t);
    CHECK(w < 1e-12);
    CHECK(dec.position() == N);
  }
  // Ragged: row 1 is always 2T + 3 positions behind row 0 (its own shifts, never lockstep).
  {
    const index_t lag = 2 * T + 3;
    lrt::Decoder dec(m, 2);
    std::vector<std::vector<index_t>> pr(2);
    for (index_t t = 0; t < lag + 1; ++t) pr[0].push_back(ids(0, t));
    pr[1].push_back(ids(1, 0));
    double w = 0;
    const auto& lg0 = dec.prefill(std::span<const std::vector<index_t>>(pr));
    for (index_t v = 0; v < Vv; ++v)
      w = std::max({w, std::abs(lg0(0, v) - ref(0, lag, v)), std::abs(lg0(1, v) - ref(1, 0, v))});
    for (index_t j = 1; lag + j < N; ++j) {
      CHECK_FALSE(dec.lockstep());
      const auto& lg = dec.step(std::vector<index_t>{ids(0, lag + j), ids(1, j)});
      double w0 = 0, w1 = 0;
      for (index_t v = 0; v < Vv; ++v)
        w0 = std::max(w0, std::abs(lg(0, v) - ref(0, lag + j, v))),
        w1 = std::max(w1, std::abs(lg(1, v) - ref(1, j, v)));
      w = std::max({w, w0, w1});
    }
    CHECK(w < 1e-12);
  }
}

TEST_CASE("decoding past the training context == Exact (no gradients) over the whole sequence, every variant") {
  check_past_context<vs::Baseline>("baseline", cfg());
  check_past_context<vs::Lrt>("lrt", cfg());
  check_past_context<vs::LrtRelease>("lrt-release", cfg());
  check_past_context<vs::ResidualOnly>("residual", cfg());
  check_past_context<vs::KVOnly>("kv", cfg());
  check_past_context<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>>("source block 1",
                                                                                                       cfg());
  auto k2 = cfg(6);
  k2.mem_offset = 2, k2.window_pattern = "SSL";
  check_past_context<vs::Lrt>("offset 2, T 6, SSL", k2);
  auto odd = cfg(7);  // odd T: short window 3
  check_past_context<vs::Lrt>("T 7", odd);
}

/// Soft-capped logits (B, N, V) of the exact recurrence with `sinks` attention sinks, the slow
/// way: token by token, every layer attending over the keys of positions < sinks and those of its
/// window (concatenated from all keys computed so far). sinks = 0 is the Exact schedule.
template <class V>
Tensor<double, 3> sink_reference(const lrt::Model<V, double>& m, const Tensor<index_t, 2>& ids, index_t sinks) {
  using M = lrt::Model<V, double>;
  const lrt::ModelConfig& c = m.config();
  const index_t B = ids.shape()[0], N = ids.shape()[1], Vv = c.vocab_size;
  ad::Graph g;
  ad::NoGrad ng;
  std::vector<ad::Var<double, 4>> Kc(static_cast<std::size_t>(c.n_layer)), Vc(Kc.size());
  std::vector<typename M::Var3> states;
  Tensor<double, 3> out(Shape<3>{B, N, Vv});
  for (index_t t = 0; t < N; ++t) {
    const lrt::IndexList<lrt::cpu::Device> at(std::vector<index_t>{t});
    const auto rope = ad::RopeTable<double>::make(at, c.head_dim(), c.rope_bf16_tables);
    const typename M::Attend attend = [&](index_t l, const ad::Var<double, 4>& q, const ad::Var<double, 4>& k,
                                          const ad::Var<double, 4>& v) {
      auto& kc = Kc[static_cast<std::size_t>(l)];
      auto& vc = Vc[static_cast<std::size_t>(l)];
      kc = t == 0 ? k : ad::concat(kc, k, 1);
      vc = t == 0 ? v : ad::concat(vc, v, 1);
      const index_t ws = t - std::min(t, c.window(l)), ns = std::min(sinks, ws);
      ad::Var<double, 4> ks = ad::slice(kc, 1, ws, t + 1), vv = ad::slice(vc, 1, ws, t + 1);
      if (ns > 0) ks = ad::concat(ad::slice(kc, 1, 0, ns), ks, 1), vv = ad::concat(ad::slice(vc, 1, 0, ns), vv, 1);
      const index_t last = ks.shape()[1] - 1;
      return ad::attention(q, ks, vv, lrt::IndexList<lrt::cpu::Device>(std::vector<index_t>{last}), last);
    };
    Tensor<index_t, 2> col(Shape<2>{B, 1});
    for (index_t b = 0; b < B; ++b) col(b, 0) = ids(b, t);
    typename M::Var3 mem;
    const bool read = V::recurrent && t >= c.mem_offset;
    if (read) mem = states[static_cast<std::size_t>(t - c.mem_offset)];
    const auto p = m.forward(col, rope, attend, read ? &mem : nullptr);
    states.push_back(p.source);
    const auto z = m.head(p.h).value();
    for (index_t b = 0; b < B; ++b)
      for (index_t v = 0; v < Vv; ++v) out(b, t, v) = 15 * std::tanh(z(b, 0, v) / 15);
  }
  return out;
}

/// The lean decoder with `S` sinks against the Decoder's (bit for bit) and the reference ref
/// (B, N, V): row 0 from a prompt past the window through exact prefill; row 1 joined from row 0's
/// saved states at q (the sinks come from them), then both stepped on row 0's tokens; a short
/// prompt through interleaved prefill; a long one refused.
template <class V>
void check_lean_sinks(const lrt::Model<V, double>& m, const Tensor<index_t, 2>& ids, const Tensor<double, 3>& ref,
                      index_t S) {
  const lrt::ModelConfig& c = m.config();
  const index_t T = c.sequence_len, N = ids.shape()[1], Vv = c.vocab_size, P = 2 * T + 3, q = 3 * T + 1;
  typename lrt::LeanDecoder<V, double>::Options o;
  o.rows = 2, o.sinks = S;
  auto lean = lrt::make_lean_decoder(m, o);
  CHECK(lean.sinks() == S);
  lrt::Decoder<V, double> dec(m, 1, 0, S);
  const auto same = [&](index_t r, const Tensor<double, 2>& lg) {
    return std::memcmp(lean.logits(r).data(), lg.data(), static_cast<std::size_t>(Vv) * sizeof(double)) == 0;
  };
  std::vector<index_t> row0;
  for (index_t t = 0; t < P; ++t) row0.push_back(ids(0, t));
  const index_t r0 = lean.join(row0);
  CHECK(same(r0, dec.prefill(std::span<const index_t>(row0))));
  std::vector<std::vector<double>> states;  // row 0's, position by position
  const auto save = [&] {
    states.emplace_back(static_cast<std::size_t>(lean.position_state_size()));
    REQUIRE(lean.try_save_position(r0, states.back()).ok());
  };
  bool bits = true;
  double w = 0;
  index_t r1 = -1;
  for (index_t t = P; t < N; ++t) {
    const index_t tok = ids(0, t);
    if (t == q) {  // row 1 from row 0's states of positions 0..q-1 (saved since P) and a replay below P
      lrt::LeanDecoder<V, double> replay = lrt::make_lean_decoder(m, o);
      std::vector<std::vector<double>> early;
      for (index_t p = 0; p < P; ++p) {
        replay.step(ids(0, p));
        early.emplace_back(static_cast<std::size_t>(replay.position_state_size()));
        REQUIRE(replay.try_save_position(0, early.back()).ok());
      }
      std::vector<index_t> toks(row0);
      for (index_t p = P; p < q; ++p) toks.push_back(ids(0, p));
      REQUIRE(lean.try_join_state(
                      toks,
                      [&](index_t p) {
                        return p < P ? early[static_cast<std::size_t>(p)].data()
                                     : states[static_cast<std::size_t>(p - P)].data();
                      },
                      r1)
                  .ok());
    }
    const std::vector<index_t> rows = r1 < 0 ? std::vector<index_t>{r0} : std::vector<index_t>{r0, r1};
    lean.step(rows, std::vector<index_t>(rows.size(), tok));
    if (r1 < 0) save();
    const auto& lg = dec.step(std::vector<index_t>{tok});
    for (const index_t r : rows) bits = bits && same(r, lg);
    for (index_t v = 0; v < Vv; ++v)
      w = std::max(w, std::abs(lean.logits(r0)[static_cast<std::size_t>(v)] - ref(0, t, v)));
  }
  CHECK(r1 >= 0);
  CHECK(bits);
  CHECK(w < 1e-12);
  // Whole-prompt modes: within the shortest window, as the Decoder's; past it, refused alike.
  index_t shortest = c.window(0);
  for (index_t l = 1; l < c.n_layer; ++l) shortest = std::min(shortest, c.window(l));
  o.max_prompt = std::max(T, shortest + 1);
  lrt::LeanDecoder<V, double> short_lean = lrt::make_lean_decoder(m, o);
  lrt::Decoder<V, double> short_dec(m, 1, 0, S);
  const std::vector<index_t> pr(row0.begin(), row0.begin() + shortest + 1);
  const auto mode = lrt::PrefillMode::interleaved(2);
  short_lean.prefill(pr, mode);
  short_dec.prefill(std::span<const index_t>(pr), mode);
  w = 0;
  for (index_t t = shortest + 1; t < N; ++t) {
    short_lean.step(ids(0, t));
    const auto& lg = short_dec.step(std::vector<index_t>{ids(0, t)});
    for (index_t v = 0; v < Vv; ++v)
      w = std::max(w, std::abs(short_lean.logits()[static_cast<std::size_t>(v)] - lg(0, v)));
  }
  CHECK(w < 1e-12);
  CHECK_THROWS_WITH_AS(short_lean.prefill(row0, mode), doctest::Contains("use exact prefill"), lrt::Error);
  o.sinks = -1;
  CHECK_THROWS_WITH_AS(lrt::make_lean_decoder(m, o), doctest::Contains("attention sinks must be >= 0"), lrt::Error);
}

template <class V>
void check_sinks(const std::string& name, lrt::ModelConfig c) {
  CAPTURE(name);
  lrt::Model<V, double> m(c, 3);
  randomize(m, 37, 0.3);
  const index_t T = c.sequence_len, N = 5 * T, Vv = c.vocab_size, S = 2;
  const Tensor<index_t, 2> ids = ids_of(2, N, 41);
  const auto exact = merged_logits<lrt::Exact>(m, ids);
  CHECK(max_diff(sink_reference(m, ids, 0), exact) < 1e-12);  // the slow reference itself
  const auto ref = sink_reference(m, ids, S);
  CHECK(max_diff(ref, exact) > 1e-6);  // sinks change what positions past the window see
  // Teacher forcing, lockstep.
  lrt::Decoder dec(m, 2, 0, S);
  CHECK(dec.sinks() == S);
  CHECK(dec.cache_slots(c.n_layer - 1) == 2 * (T + 1) + S);
  double w = 0;
  for (index_t t = 0; t < N; ++t) {
    const auto& lg = dec.step(std::vector<index_t>{ids(0, t), ids(1, t)});
    for (index_t b = 0; b < 2; ++b)
      for (index_t v = 0; v < Vv; ++v) w = std::max(w, std::abs(lg(b, v) - ref(b, t, v)));
  }
  CHECK(w < 1e-12);
  check_lean_sinks(m, ids, ref, S);
  // A long prompt through interleaved:S >= P (the sinks come from the prefill's buffers), then
  // ragged rows: row 1 restarts from a one-token prompt and stays behind.
  const index_t P = 3 * T + 1;
  std::vector<std::vector<index_t>> pr(2);
  for (index_t t = 0; t < P; ++t) pr[0].push_back(ids(0, t));
  pr[1].push_back(ids(1, 0));
  for (const lrt::PrefillMode mode : {lrt::PrefillMode::exact(), lrt::PrefillMode::interleaved(4 * T)}) {
    CAPTURE(mode.name());
    lrt::Decoder rd(m, 2, 0, S);
    if (mode.kind != lrt::PrefillMode::Kind::Exact) {
      // The parallel passes attend without sinks: refused past the shortest window, fine within.
      CHECK_THROWS_WITH_AS(rd.prefill(std::span<const std::vector<index_t>>(pr), mode),
                           doctest::Contains("use exact prefill"), lrt::Error);
      const index_t Ps = c.window(0) + 1;
      std::vector<std::vector<index_t>> short_pr{std::vector<index_t>(pr[0].begin(), pr[0].begin() + Ps), pr[1]};
      w = 0;
      rd.prefill(std::span<const std::vector<index_t>>(short_pr), mode);
      for (index_t j = 0; Ps + j < N; ++j) {
        const auto& lg = rd.step(std::vector<index_t>{ids(0, Ps + j), ids(1, j + 1)});
        for (index_t v = 0; v < Vv; ++v)
          w = std::max({w, std::abs(lg(0, v) - ref(0, Ps + j, v)), std::abs(lg(1, v) - ref(1, j + 1, v))});
      }
      CHECK(w < 1e-12);
      continue;
    }
    w = 0;
    const auto& lg0 = rd.prefill(std::span<const std::vector<index_t>>(pr), mode);
    for (index_t v = 0; v < Vv; ++v)
      w = std::max({w, std::abs(lg0(0, v) - ref(0, P - 1, v)), std::abs(lg0(1, v) - ref(1, 0, v))});
    for (index_t j = 1; P - 1 + j < N; ++j) {
      const auto& lg = rd.step(std::vector<index_t>{ids(0, P - 1 + j), ids(1, j)});
      for (index_t v = 0; v < Vv; ++v)
        w = std::max({w, std::abs(lg(0, v) - ref(0, P - 1 + j, v)), std::abs(lg(1, v) - ref(1, j, v))});
    }
    CHECK(w < 1e-12);
  }
}

TEST_CASE("decoding with attention sinks == the recurrence whose queries also see the first positions") {
  check_sinks<vs::Baseline>("baseline", cfg());
  check_sinks<vs::Lrt>("lrt", cfg());
  check_sinks<vs::KVOnly>("kv", cfg());
  auto odd = cfg(7);
  odd.window_pattern = "SSL";
  check_sinks<vs::LrtRelease>("lrt-release T 7 SSL", odd);
  lrt::Model<vs::Lrt, double> m(cfg(), 3);
  CHECK_THROWS_WITH_AS(lrt::Decoder(m, 1, 0, -1), doctest::Contains("attention sinks must be >= 0"), lrt::Error);
  lrt::Decoder dec(m, 1, 0, 2);
  CHECK_THROWS_WITH_AS(dec.use_graphs(true), doctest::Contains("graphs"), lrt::Error);
}

TEST_CASE("decoding past the context: capacities, long inputs with gradients refused, sampler counters") {
  const auto c = cfg();
  lrt::Model<vs::Lrt, double> m(c, 3);
  // A given capacity bounds the positions (and the cache to what they need).
  lrt::Decoder dec(m, 1, 5);
  CHECK(dec.capacity() == 5);
  CHECK(dec.cache_slots(0) == 5);
  for (index_t t = 0; t < 5; ++t) dec.step(std::vector<index_t>{1});
  CHECK_THROWS_WITH_AS(dec.step(std::vector<index_t>{1}), doctest::Contains("past the capacity 5"), lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::Decoder(m, 1, -1), doctest::Contains("capacity must be >= 0"), lrt::Error);
  // Sequences longer than sequence_len: scored without gradients, refused with them.
  const Tensor<index_t, 2> ids = ids_of(1, 3 * c.sequence_len, 3);
  {
    ad::Graph g;
    CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::Exact>(m, ids, ids), doctest::Contains("only without gradients"),
                         lrt::Error);
  }
  // Counters: unique per (row, position), row 0's is the position.
  CHECK(lrt::sample_counter(0, 77) == 77);
  CHECK(lrt::sample_counter(1, 0) != lrt::sample_counter(0, index_t{1} << 20));
  std::set<std::uint64_t> seen;
  for (index_t row = 0; row < 4; ++row)
    for (index_t t : {index_t{0}, index_t{1}, index_t{1} << 20, (index_t{1} << 40) - 1})
      seen.insert(lrt::sample_counter(row, t));
  CHECK(seen.size() == 16);
  CHECK_THROWS_WITH_AS(lrt::sample_counter(0, index_t{1} << 40), doctest::Contains("outside rows"), lrt::Error);
}

}  // namespace test_past_context
