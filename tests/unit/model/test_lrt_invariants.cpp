// The LRT invariants of spec §5, in double precision on tiny models with random weights:
// decoding == Exact, Interleaved<S >= T> refinement passes == Exact, the last MultiRefine<K >= T-1>
// pass == Exact, zeroed additions == the baseline, gradients of the interleaved loss against
// finite differences, Exact's BPTT gradient == MultiRefine's (weights 0..0,1), overheads;
// Interleaved's kv_refresh (no effect at S = 1 and S >= T, == recomputing the stale rows where the
// linear patch is exact, finite differences, refusals); the release's schedule fields in checkpoints.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/decode.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/train/eval.hpp>
#include <lrt/model/training_schedule.hpp>

#include <filesystem>
#include <numeric>
#include <set>

#include "../test_util.hpp"

namespace test_lrt {

using namespace lrt_test;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

namespace {
template <class M>
void randomize(M& m, std::uint64_t seed, double a = 0.5) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  m.for_each_param([&](auto& p) { fill_random(p.value(), rng, -a, a); });
}
lrt::ModelConfig cfg(index_t T = 8) {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = T, c.vocab_size = 11;
  c.window_pattern = "SL";  // layer 0 window T/2: rows of T tokens cross it
  return c;
}
Tensor<index_t, 2> ids_of(index_t B, index_t T, unsigned seed) {
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
double max_diff(const Tensor<double, 3>& a, const Tensor<double, 3>& b) {
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

template <class V>
void check_exactness(const char* name, lrt::ModelConfig c) {
  CAPTURE(name);
  CAPTURE(c.mem_offset);
  lrt::Model<V, double> m(c, 3);
  randomize(m, 17);
  const index_t T = c.sequence_len;
  const Tensor<index_t, 2> ids = ids_of(2, T, 5);
  const auto exact = merged_logits<lrt::Exact>(m, ids);
  // (b) decoding == Exact.
  CHECK(max_diff(decode_logits(m, ids), exact) < 1e-12);
  // (c) Interleaved<S >= T>: every refinement pass gives the Exact logits, also with kv_refresh
  // (it only patches unvisited rows > p, which the query at p never reads).
  CHECK(max_diff(merged_logits<lrt::Interleaved<64>>(m, ids, {}, 1), exact) < 1e-12);
  if constexpr (V::kv) {
    lrt::ScheduleOptions refresh;
    refresh.kv_refresh = true;
    CHECK(max_diff(merged_logits<lrt::Interleaved<64>>(m, ids, refresh, 1), exact) < 1e-12);
  }
  // (d) MultiRefine<K >= ceil(T/k) - 1>: the last pass is exact.
  {
    lrt::ScheduleOptions o;
    o.keep_logits = true;
    ad::Graph g;
    ad::NoGrad ng;
    const auto r = lrt::schedule_loss<lrt::MultiRefine<8>>(m, ids, ids, o);
    Tensor<double, 3> last(Shape<3>{2, T, c.vocab_size});
    last.view() = r.passes.back().logits;
    CHECK(max_diff(last, exact) < 1e-12);
  }
  // Memory matters: the zero-memory pass differs from Exact (the test can fail).
  CHECK(max_diff(merged_logits<lrt::Standard>(m, ids), exact) > 1e-6);
}
}  // namespace

TEST_CASE("lrt invariants: decode == Exact == Interleaved<S >= T> == last pass of MultiRefine<K >= T-1>") {
  check_exactness<vs::Lrt>("lrt", cfg());
  check_exactness<vs::LrtRelease>("lrt-release", cfg());
  check_exactness<vs::ResidualOnly>("residual", cfg());
  check_exactness<vs::KVOnly>("kv", cfg());
  check_exactness<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>>("source block 1",
                                                                                                    cfg());
  lrt::ModelConfig k2 = cfg();
  k2.mem_offset = 2;
  check_exactness<vs::Lrt>("offset 2", k2);
  lrt::ModelConfig gate = cfg();
  gate.ve_gate_channels = 5;
  check_exactness<vs::LrtRelease>("gate width 5", gate);
}

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
  CHECK_THROWS_WITH_AS(dec.step(std::vector<index_t>{1}), doctest::Contains("past the decoder's capacity 5"),
                       lrt::Error);
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

TEST_CASE("lrt invariants: reset at BOS holds in every path") {
  lrt::ModelConfig c = cfg();
  c.vocab_size = 257;  // BOS = 256 is a token
  c.reset_at_bos = true;
  c.mem_offset = 2;
  lrt::Model<vs::Lrt, double> m(c, 1);
  randomize(m, 4);
  Tensor<index_t, 2> ids = ids_of(2, 8, 9);
  ids(0, 3) = 256, ids(1, 6) = 256;
  const auto exact = merged_logits<lrt::Exact>(m, ids);
  CHECK(max_diff(decode_logits(m, ids), exact) < 1e-12);
  CHECK(max_diff(merged_logits<lrt::Interleaved<8>>(m, ids, {}, 1), exact) < 1e-12);
  lrt::ScheduleOptions refresh;
  refresh.kv_refresh = true;
  CHECK(max_diff(merged_logits<lrt::Interleaved<8>>(m, ids, refresh, 1), exact) < 1e-12);
  lrt::ModelConfig nr = c;
  nr.reset_at_bos = false;
  lrt::Model<vs::Lrt, double> m2(nr, 1);
  randomize(m2, 4);
  CHECK(max_diff(merged_logits<lrt::Exact>(m2, ids), exact) > 1e-6);  // the reset changed something
}

TEST_CASE("lrt invariants: zeroed additions give the baseline; Interleaved with S | T then has the Standard loss") {
  lrt::ModelConfig c = cfg();
  lrt::Model<vs::Lrt, double> lrt_m(c, 1);
  randomize(lrt_m, 8);
  // gamma = 0, P = 0, local gate rows 0 (g_loc = 1 exactly).
  lrt_m.gamma()->value().fill(0.0);
  lrt_m.proj_k()->value().fill(0.0);
  lrt_m.proj_v()->value().fill(0.0);
  const index_t Hkv = c.n_kv_head;
  for (const auto& b : lrt_m.blocks()) b.triple_gate->value().slice(0, 0, Hkv).fill(0.0);
  lrt::GPT<double> base(c, 2);  // VE every layer; copy every shared weight
  base.wte().value().view() = lrt_m.wte().value();
  base.lm_head().value().view() = lrt_m.lm_head().value();
  base.resid_lambdas().value().view() = lrt_m.resid_lambdas().value();
  base.x0_lambdas().value().view() = lrt_m.x0_lambdas().value();
  for (std::size_t l = 0; l < base.blocks().size(); ++l) {
    const auto& bb = base.blocks()[l];
    const auto& lb = lrt_m.blocks()[l];
    bb.c_q->value().view() = lb.c_q->value(), bb.c_k->value().view() = lb.c_k->value();
    bb.c_v->value().view() = lb.c_v->value(), bb.c_proj->value().view() = lb.c_proj->value();
    bb.c_fc->value().view() = lb.c_fc->value(), bb.mlp_proj->value().view() = lb.mlp_proj->value();
    bb.value_embed->value().view() = lb.value_embed->value();
    bb.ve_gate->value().view() = lb.triple_gate->value().slice(0, 2 * Hkv, 3 * Hkv);
  }
  const Tensor<index_t, 2> ids = ids_of(2, 8, 3);
  const auto want = merged_logits<lrt::Standard>(base, ids);
  CHECK(max_diff(merged_logits<lrt::Exact>(lrt_m, ids), want) < 1e-12);
  CHECK(max_diff(decode_logits(lrt_m, ids), want) < 1e-12);
  CHECK(max_diff(merged_logits<lrt::Interleaved<2>>(lrt_m, ids, {}, 1), want) < 1e-12);
  ad::Graph g;
  const double l_std = lrt::schedule_loss<lrt::Standard>(base, ids, ids).loss.value()();
  const double l_int = lrt::schedule_loss<lrt::Interleaved<2>>(lrt_m, ids, ids).loss.value()();
  CHECK(l_int == doctest::Approx(l_std).epsilon(1e-12));
  // Residual with gamma = 0 equals None with the same VE layout.
  lrt::Model<vs::ResidualOnly, double> res(c, 5);
  randomize(res, 6);
  res.gamma()->value().fill(0.0);
  lrt::GPT<double> none(c, 5);
  std::vector<double*> dst;
  none.for_each_param([&](auto& p) { dst.push_back(p.value().data()); });
  std::size_t i = 0;
  res.for_each_param([&](auto& p) {
    if (p.name() == "interleaved_lambdas") return;
    std::copy_n(p.value().data(), p.value().numel(), dst[i++]);
  });
  CHECK(max_diff(merged_logits<lrt::Exact>(res, ids), merged_logits<lrt::Standard>(none, ids)) < 1e-12);
}

TEST_CASE("lrt: interleaved loss gradients match finite differences; Exact's BPTT == MultiRefine<T-1> (0,..,0,1)") {
  lrt::ModelConfig c = cfg(6);
  lrt::Model<vs::Lrt, double> m(c, 1);
  randomize(m, 21);
  const Tensor<index_t, 2> in = ids_of(2, 6, 1), tg = ids_of(2, 6, 2);
  const auto loss = [&] { return lrt::schedule_loss<lrt::Interleaved<2>>(m, in, tg).loss; };
  m.for_each_param([&](auto& p) {
    CAPTURE(p.name());
    const auto r = ad::grad_check(loss, p, 1e-6, std::max<index_t>(1, p.shape().numel() / 12), 1e-4);
    CHECK(r.max_rel_error < 1e-5);
  });
  // Exact (token by token, backprop through time) and MultiRefine<T-1> weighted on its last pass
  // have the same gradients (spec §5d).
  std::vector<std::vector<double>> g_exact, g_mr;
  auto grads = [&](auto&& f, std::vector<std::vector<double>>& out) {
    m.zero_grad();
    {
      ad::Graph g;
      ad::backward(f());
    }
    m.for_each_param([&](auto& p) {
      const auto& gr = p.grad();
      out.emplace_back(gr.data(), gr.data() + gr.numel());
    });
  };
  grads([&] { return lrt::schedule_loss<lrt::Exact>(m, in, tg).loss; }, g_exact);
  lrt::ScheduleOptions o;
  o.loss_weights = {0, 0, 0, 0, 0, 1};
  grads([&] { return lrt::schedule_loss<lrt::MultiRefine<5>>(m, in, tg, o).loss; }, g_mr);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < g_exact.size(); ++i)
    for (std::size_t j = 0; j < g_exact[i].size(); ++j) {
      worst = std::max(worst, std::abs(g_exact[i][j] - g_mr[i][j]));
      scale = std::max(scale, std::abs(g_exact[i][j]));
    }
  CHECK(scale > 1e-3);
  CHECK(worst < 1e-10 * std::max(1.0, scale));
}

namespace {
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
double max_abs(const std::vector<double>& a, const std::vector<double>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(a[i] - b[i]));
  return w;
}
double max_abs(const std::vector<double>& a) { return max_abs(a, std::vector<double>(a.size(), 0.0)); }

/// kv_refresh on a KV/Both variant: no effect at S = 1 and at S >= T (loss and gradients), an
/// effect for 1 < S < T.
template <class V>
void check_kv_refresh(const char* name, lrt::ModelConfig c) {
  CAPTURE(name);
  CAPTURE(c.mem_offset);
  lrt::Model<V, double> m(c, 2);
  randomize(m, 31);
  const index_t T = c.sequence_len;
  Tensor<index_t, 2> in = ids_of(2, T, 7);
  const Tensor<index_t, 2> tg = ids_of(2, T, 8);
  if (c.vocab_size > 256) in(0, 3) = 256, in(1, 6) = 256;  // BOS tokens (ResetAtBOS cuts the memory)
  lrt::ScheduleOptions on;
  on.kv_refresh = true;
  // S = 1: pass 1 rewrites every buffer row before reading it (spec §5d: Interleaved<1> is MultiRefine<1>).
  {
    const auto a = loss_and_grads<lrt::Interleaved<1>>(m, in, tg, {});
    const auto b = loss_and_grads<lrt::Interleaved<1>>(m, in, tg, on);
    CHECK(b.first == doctest::Approx(a.first).epsilon(1e-14));
    CHECK(max_abs(a.second) > 1e-3);
    CHECK(max_abs(a.second, b.second) < 1e-13 * std::max(1.0, max_abs(a.second)));
  }
  // S >= T: only rows > p are patched, and they are masked (spec §5c).
  {
    const auto a = loss_and_grads<lrt::Interleaved<64>>(m, in, tg, {});
    const auto b = loss_and_grads<lrt::Interleaved<64>>(m, in, tg, on);
    CHECK(b.first == doctest::Approx(a.first).epsilon(1e-13));
    CHECK(max_abs(a.second, b.second) < 1e-12 * std::max(1.0, max_abs(a.second)));
  }
  // 1 < S < T: the stale rows read by the first subset pass are patched, so its logits and the
  // loss change; pass 0 does not.
  {
    lrt::ScheduleOptions keep = on;
    keep.keep_logits = true;
    ad::Graph g;
    ad::NoGrad ng;
    lrt::ScheduleOptions off;
    off.keep_logits = true;
    const auto a = lrt::schedule_loss<lrt::Interleaved<2>>(m, in, tg, off);
    const auto b = lrt::schedule_loss<lrt::Interleaved<2>>(m, in, tg, keep);
    REQUIRE(a.passes.size() == 3);
    REQUIRE(b.passes.size() == 3);
    auto diff = [](const Tensor<double, 3>& x, const Tensor<double, 3>& y) {
      double w = 0;
      for (index_t i = 0; i < x.numel(); ++i) w = std::max(w, std::abs(x.data()[i] - y.data()[i]));
      return w;
    };
    CHECK(diff(a.passes[0].logits, b.passes[0].logits) == 0.0);
    CHECK(diff(a.passes[1].logits, b.passes[1].logits) > 1e-6);
    CHECK(std::abs(a.loss.value()() - b.loss.value()()) > 1e-8);
  }
}
}  // namespace

TEST_CASE("lrt kv_refresh: no effect at S = 1 and S >= T, changes 1 < S < T, for every KV variant") {
  check_kv_refresh<vs::Lrt>("lrt", cfg());
  check_kv_refresh<vs::LrtRelease>("lrt-release", cfg());
  check_kv_refresh<vs::KVOnly>("kv", cfg());
  lrt::ModelConfig k2 = cfg();
  k2.mem_offset = 2;
  check_kv_refresh<vs::LrtRelease>("offset 2", k2);
  lrt::ModelConfig bos = cfg();
  bos.vocab_size = 257, bos.reset_at_bos = true, bos.mem_offset = 2;
  check_kv_refresh<vs::Lrt>("reset at BOS", bos);
}

TEST_CASE(
    "lrt kv_refresh: one layer, no gamma: the patched rows are the fresh K/V, so the first subset pass == "
    "MultiRefine<1>'s pass 1 there") {
  // With one layer and no residual injection, u (hence every gate, k_loc, v_loc) does not depend
  // on the memory: a refreshed row is exactly the row recomputed with the latest memory, and the
  // first subset's queries see what MultiRefine<1>'s second pass sees (all rows with shift(S0)).
  auto run = [](auto tag, const char* name, index_t k) {
    using V = decltype(tag);
    CAPTURE(name);
    CAPTURE(k);
    lrt::ModelConfig c = cfg();
    c.n_layer = 1, c.mem_offset = k;
    lrt::Model<V, double> m(c, 4);
    randomize(m, 9);
    if (m.gamma()) m.gamma()->value().fill(0.0);
    const Tensor<index_t, 2> ids = ids_of(2, 8, 4);
    const auto mr = merged_logits<lrt::MultiRefine<1>>(m, ids, {}, 1);  // pass 1, all positions
    lrt::ScheduleOptions on;
    on.kv_refresh = true, on.keep_logits = true;
    ad::Graph g;
    ad::NoGrad ng;
    for (bool refresh : {true, false}) {
      on.kv_refresh = refresh;
      const auto r = lrt::schedule_loss<lrt::Interleaved<2>>(m, ids, ids, on);
      const auto& p1 = r.passes[1];  // positions 0, 2, 4, 6
      double w = 0;
      for (index_t b = 0; b < 2; ++b)
        for (std::size_t i = 0; i < p1.positions.size(); ++i)
          for (index_t v = 0; v < c.vocab_size; ++v)
            w = std::max(w, std::abs(p1.logits(b, static_cast<index_t>(i), v) - mr(b, p1.positions[i], v)));
      if (refresh)
        CHECK(w < 1e-12);
      else
        CHECK(w > 1e-6);  // without the refresh the odd rows are pass 0's (the test can fail)
    }
  };
  run(vs::KVOnly{}, "kv", 1);
  run(vs::LrtRelease{}, "lrt-release, gamma 0", 1);
  run(vs::Lrt{}, "lrt, gamma 0", 2);
}

namespace {
/// Reference of Interleaved<S> with kv_refresh for a one-layer model without gamma, where the
/// linear patch is exact: after pass 0 and every subset pass but the last, the unvisited K/V rows
/// are recomputed by a forward of those rows with the latest memory shift_k(Sbuf). Soft-capped
/// logits (B, T, V), each position from its subset pass.
template <class M>
Tensor<double, 3> refresh_reference(const M& m, const Tensor<index_t, 2>& ids, index_t S) {
  using Var4 = ad::Var<double, 4>;
  const lrt::ModelConfig& c = m.config();
  REQUIRE(c.n_layer == 1);
  const index_t B = ids.shape()[0], T = ids.shape()[1], V = c.vocab_size;
  ad::Graph g;
  ad::NoGrad ng;
  auto rope_of = [&](const std::vector<index_t>& P) {
    Tensor<index_t, 1> pos(Shape<1>{static_cast<index_t>(P.size())});
    for (std::size_t i = 0; i < P.size(); ++i) pos(static_cast<index_t>(i)) = P[i];
    return std::make_pair(pos, ad::RopeTable<double>::make(pos.view(), c.head_dim(), c.rope_bf16_tables));
  };
  std::vector<index_t> all(static_cast<std::size_t>(T));
  std::iota(all.begin(), all.end(), index_t{0});
  Var4 Kb, Vb;
  const auto [pos0, rope0] = rope_of(all);
  const typename M::Attend attend0 = [&](index_t l, const Var4& q, const Var4& k, const Var4& v) {
    Kb = k, Vb = v;
    return ad::attention(q, k, v, pos0, c.window(l));
  };
  ad::Var<double, 3> Sbuf = m.forward(ids, rope0, attend0).source;
  auto recompute = [&](const std::vector<index_t>& U) {  // rows U with the latest memory
    if (U.empty()) return;
    const auto [pos, rope] = rope_of(U);
    const lrt::IndexList<lrt::cpu::Device> idx(U);
    const auto mem = lrt::sched_detail::shift_memory(Sbuf, U, c.mem_offset, ids, c.reset_at_bos, index_t{256});
    const typename M::Attend attend = [&](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      Kb = ad::scatter(Kb, 1, idx, k), Vb = ad::scatter(Vb, 1, idx, v);
      return ad::attention(q, Kb, Vb, pos, c.window(l));  // (unused: only the K/V rows matter)
    };
    m.forward(lrt::sched_detail::columns(ids, U), rope, attend, &mem);
  };
  recompute(all);
  Tensor<double, 3> out(Shape<3>{B, T, V});
  std::vector<char> visited(static_cast<std::size_t>(T), 0);
  for (index_t i = 0; i < S; ++i) {
    std::vector<index_t> P;
    for (index_t p = i; p < T; p += S) P.push_back(p);
    const auto [pos, rope] = rope_of(P);
    const lrt::IndexList<lrt::cpu::Device> idx(P);
    const auto mem = lrt::sched_detail::shift_memory(Sbuf, P, c.mem_offset, ids, c.reset_at_bos, index_t{256});
    const typename M::Attend attend = [&](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      Kb = ad::scatter(Kb, 1, idx, k), Vb = ad::scatter(Vb, 1, idx, v);
      return ad::attention(q, Kb, Vb, pos, c.window(l));
    };
    const auto pass = m.forward(lrt::sched_detail::columns(ids, P), rope, attend, &mem);
    Sbuf = ad::scatter(Sbuf, 1, idx, pass.source);
    const auto z = m.head(pass.h);
    for (index_t b = 0; b < B; ++b)
      for (std::size_t j = 0; j < P.size(); ++j)
        for (index_t v = 0; v < V; ++v) out(b, P[j], v) = 15 * std::tanh(z.value()(b, static_cast<index_t>(j), v) / 15);
    for (index_t p : P) visited[static_cast<std::size_t>(p)] = 1;
    std::vector<index_t> U;
    for (index_t p = 0; p < T; ++p)
      if (!visited[static_cast<std::size_t>(p)]) U.push_back(p);
    if (i + 1 < S) recompute(U);
  }
  return out;
}
}  // namespace

TEST_CASE("lrt kv_refresh: one layer, no gamma: every refresh == recomputing the unvisited rows (S = 3, k = 2)") {
  // k = 2 makes the refreshes after subset passes matter too: after pass 1 (rows 0, 3, 6) the
  // rows 2, 5 of subset 2 read updated memory and are attended, stale, by pass 2.
  auto run = [](auto tag, const char* name) {
    using V = decltype(tag);
    CAPTURE(name);
    lrt::ModelConfig c = cfg();
    c.n_layer = 1, c.mem_offset = 2;
    lrt::Model<V, double> m(c, 5);
    randomize(m, 13);
    if (m.gamma()) m.gamma()->value().fill(0.0);
    const Tensor<index_t, 2> ids = ids_of(2, 8, 6);
    lrt::ScheduleOptions on;
    on.kv_refresh = true;
    const auto want = refresh_reference(m, ids, 3);
    CHECK(max_diff(merged_logits<lrt::Interleaved<3>>(m, ids, on, 1), want) < 1e-12);
    CHECK(max_diff(merged_logits<lrt::Interleaved<3>>(m, ids, {}, 1), want) > 1e-6);
  };
  run(vs::KVOnly{}, "kv");
  run(vs::LrtRelease{}, "lrt-release, gamma 0");
}

TEST_CASE("lrt kv_refresh: gradients match finite differences; refused where it does not apply") {
  auto fd = [](auto tag, const char* name, index_t k) {
    using V = decltype(tag);
    CAPTURE(name);
    lrt::ModelConfig c = cfg(6);
    c.mem_offset = k;
    lrt::Model<V, double> m(c, 1);
    randomize(m, 23);
    const Tensor<index_t, 2> in = ids_of(2, 6, 3), tg = ids_of(2, 6, 4);
    lrt::ScheduleOptions on;
    on.kv_refresh = true;
    // S = 3 over T = 6: refreshes after pass 0 (all rows) and after passes 1, 2 (narrowing rows).
    const auto loss = [&] { return lrt::schedule_loss<lrt::Interleaved<3>>(m, in, tg, on).loss; };
    m.for_each_param([&](auto& p) {
      CAPTURE(p.name());
      const auto r = ad::grad_check(loss, p, 1e-6, std::max<index_t>(1, p.shape().numel() / 12), 1e-4);
      CHECK(r.max_rel_error < 1e-5);
    });
  };
  fd(vs::Lrt{}, "lrt, k = 2", 2);
  fd(vs::LrtRelease{}, "lrt-release, k = 1", 1);

  const lrt::ModelConfig c = cfg();
  const Tensor<index_t, 2> ids = ids_of(1, 8, 1);
  lrt::ScheduleOptions on;
  on.kv_refresh = true;
  ad::Graph g;
  lrt::Model<vs::ResidualOnly> res(c, 1);
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::Interleaved<2>>(res, ids, ids, on),
                       doctest::Contains("kv_refresh patches the buffered recurrent K/V and needs KV injection"),
                       lrt::Error);
  lrt::GPT<float> base(c, 1);
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::Standard>(base, ids, ids, on), doctest::Contains("'none'"), lrt::Error);
  lrt::Model<vs::Lrt> lrt_m(c, 1);
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::MultiRefine<2>>(lrt_m, ids, ids, on),
                       doctest::Contains("kv_refresh is an option of Interleaved<S> (spec 4.2), not of schedule "
                                         "'multirefine:2'"),
                       lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::Chunked<2>>(lrt_m, ids, ids, on), doctest::Contains("'chunked:2'"),
                       lrt::Error);
  lrt::ScheduleOptions w;
  w.loss_weights = {1, 2, 3};
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::Interleaved<2>>(lrt_m, ids, ids, w),
                       doctest::Contains("loss weights and detach are options of MultiRefine<K>"), lrt::Error);
  CHECK_NOTHROW(lrt::schedule_loss<lrt::MultiRefine<2>>(lrt_m, ids, ids, w));
  w.loss_weights = {1, 2};
  CHECK_THROWS_WITH_AS(lrt::schedule_loss<lrt::MultiRefine<2>>(lrt_m, ids, ids, w),
                       doctest::Contains("MultiRefine<2> needs 3 loss weights, got 2"), lrt::Error);
}

TEST_CASE("lrt: parameter overhead matches the spec's formula for every variant") {
  for (const char* preset : {"tiny", "small", "medium"}) {
    CAPTURE(preset);
    const lrt::ModelConfig c = lrt::preset(preset);
    const index_t d = c.n_embd, D = c.kv_dim(), L = c.n_layer, Hkv = c.n_kv_head, cc = c.gate_channels();
    const index_t base = lrt::GPT<float>(c).num_params();
    CHECK(lrt::Model<vs::Lrt>(c).num_params() - base == 2 * d * D + 2 * L * Hkv * cc + L);
    CHECK(lrt::Model<vs::LrtRelease>(c).num_params() - base == 2 * L * d * D + 2 * L * Hkv * cc + L);
    CHECK(lrt::Model<vs::KVOnly>(c).num_params() - base == 2 * d * D + 2 * L * Hkv * cc);
    CHECK(lrt::Model<vs::ResidualOnly>(c).num_params() - base == L);
  }
  // The spec's table: tiny + Both/Shared = 36,868, + Both/Layerwise = 135,172.
  const lrt::ModelConfig t = lrt::preset("tiny");
  CHECK(lrt::Model<vs::Lrt>(t).num_params() - lrt::GPT<float>(t).num_params() == 36'868);
  CHECK(lrt::Model<vs::LrtRelease>(t).num_params() - lrt::GPT<float>(t).num_params() == 135'172);
  lrt::ModelConfig bad = cfg();
  bad.mem_offset = 0;
  CHECK_THROWS_WITH_AS(lrt::Model<vs::Lrt>{bad}, doctest::Contains("mem_offset"), lrt::Error);
  using Deep = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<3>>;
  CHECK_THROWS_WITH_AS(lrt::Model<Deep>{cfg()}, doctest::Contains("source layer 3 is beyond"), lrt::Error);
}

TEST_CASE("lrt: checkpoints carry the release's names for every variant and round-trip bit-exactly") {
  const auto dir = std::filesystem::temp_directory_path() / "lrt_test_lrt_ckpt";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.safetensors").string();
  lrt::Model<vs::LrtRelease> m(cfg(), 1);
  std::mt19937 rng(3);
  m.for_each_param([&](auto& p) { fill_random(p.value(), rng, -1, 1); });
  lrt::save_model(m, path, 7);
  const auto r = lrt::st::Reader::open(path);
  for (const char* n :
       {"transformer.h.2.attn.triple_gate.weight", "interleaved_projections.1.W_v.weight",
        "interleaved_key_projections.0.W_v.weight", "interleaved_lambdas", "interleaved_init_value_embeds.2.weight"})
    CHECK_MESSAGE(r.contains(n), n);
  CHECK(r.shape("transformer.h.2.attn.triple_gate.weight") == std::vector<std::int64_t>{3, 8});
  CHECK_FALSE(r.contains("value_embeds.0.weight"));
  CHECK(r.meta("variant") == std::optional<std::string>("lrt-release"));
  CHECK(lrt::json::parse(*r.meta("model_config")).at("use_interleaved").as_bool());
  CHECK(lrt::json::parse(*r.meta("lrt_config")).at("projection").as_string() == "layerwise");
  lrt::Model<vs::LrtRelease> back(cfg(), 2);
  lrt::load_weights(back, r);
  std::vector<float> a, b;
  m.for_each_param([&](auto& p) { a.insert(a.end(), p.value().data(), p.value().data() + p.value().numel()); });
  back.for_each_param([&](auto& p) { b.insert(b.end(), p.value().data(), p.value().data() + p.value().numel()); });
  CHECK(a == b);
  lrt::Model<vs::Lrt> shared(cfg(), 1);
  CHECK_THROWS_WITH_AS(lrt::load_weights(shared, r), doctest::Contains("interleaved_projections.shared.W_v.weight"),
                       lrt::Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lrt checkpoints: the release's schedule fields (kv_refresh, multi-refine) are written and read back") {
  using lrt::json::Value;
  const lrt::ModelConfig c = cfg();
  // Without a schedule: the defaults, as before.
  {
    const Value j = lrt::release_config_json<vs::LrtRelease>(c);
    CHECK(j.at("use_interleaved").as_bool());
    CHECK(j.at("interleaved_num_passes").as_int() == 2);
    CHECK_FALSE(j.at("interleaved_kv_refresh").as_bool());
    CHECK_FALSE(j.at("use_multi_refine").as_bool());
    CHECK(j.at("multi_refine_loss_weights").items().empty());
    CHECK_FALSE(lrt::release_config_json<vs::Baseline>(c, "standard").at("use_interleaved").as_bool());
  }
  // interleaved:3 with kv_refresh.
  lrt::ScheduleOptions kvr;
  kvr.kv_refresh = true;
  {
    const Value j = lrt::json::parse(lrt::release_config_json<vs::LrtRelease>(c, "interleaved:3", kvr).dump());
    CHECK(j.at("use_interleaved").as_bool());
    CHECK(j.at("interleaved_num_passes").as_int() == 3);
    CHECK(j.at("interleaved_kv_refresh").as_bool());
    CHECK_FALSE(j.at("use_multi_refine").as_bool());
    const auto rs = lrt::release_schedule_from_json(j);
    CHECK(rs.recurrent);
    CHECK(rs.schedule == "interleaved:3");
    CHECK(rs.options.kv_refresh);
    CHECK(rs.options.loss_weights.empty());
    // No KV injection: nothing to refresh, not written.
    CHECK_FALSE(
        lrt::release_config_json<vs::ResidualOnly>(c, "interleaved:3", kvr).at("interleaved_kv_refresh").as_bool());
  }
  // multirefine:2 with weights and detach: use_multi_refine (not use_interleaved, which the release
  // refuses together with it); multi_refine_num_passes = K = 2, the passes after the zero-memory one.
  lrt::ScheduleOptions mro;
  mro.loss_weights = {0.1, 0.3, 0.6};
  mro.detach = true;
  {
    const Value j = lrt::json::parse(lrt::release_config_json<vs::Lrt>(c, "multirefine:2", mro).dump());
    CHECK_FALSE(j.at("use_interleaved").as_bool());
    CHECK(j.at("use_multi_refine").as_bool());
    CHECK(j.at("multi_refine_num_passes").as_int() == 2);
    CHECK(j.at("multi_refine_detach").as_bool());
    REQUIRE(j.at("multi_refine_loss_weights").items().size() == 3);
    CHECK(j.at("multi_refine_loss_weights").items()[2].as_number() == 0.6);
    CHECK_FALSE(j.at("interleaved_kv_refresh").as_bool());
    const auto rs = lrt::release_schedule_from_json(j);
    CHECK(rs.recurrent);
    CHECK(rs.schedule == "multirefine:2");
    CHECK(rs.options.loss_weights == mro.loss_weights);
    CHECK(rs.options.detach);
    CHECK_FALSE(rs.options.kv_refresh);
    // The baseline has no multi-refine.
    CHECK_FALSE(lrt::release_config_json<vs::Baseline>(c, "multirefine:2", mro).at("use_multi_refine").as_bool());
  }
  // The release's own configs (bare GPTConfig or a meta_XXXXXX.json).
  {
    const Value mr = lrt::json::parse(R"({"model_config": {"sequence_len": 8, "vocab_size": 11, "n_layer": 3,
      "n_head": 2, "n_embd": 8, "use_multi_refine": true, "multi_refine_num_passes": 3,
      "multi_refine_loss_weights": [0, 0, 0, 1]}})");
    const auto rs = lrt::release_schedule_from_json(mr);
    CHECK(rs.schedule == "multirefine:3");
    CHECK(rs.options.loss_weights == std::vector<double>{0, 0, 0, 1});
    CHECK_FALSE(rs.options.detach);
    const Value mr_default = lrt::json::parse(R"({"use_multi_refine": true, "multi_refine_loss_weights": null})");
    CHECK(lrt::release_schedule_from_json(mr_default).schedule == "multirefine:2");  // the release's default
    const Value inter = lrt::json::parse(R"({"use_interleaved": true, "interleaved_kv_refresh": true,
      "multi_refine_loss_weights": [1]})");  // the other schedule's fields are ignored
    const auto ri = lrt::release_schedule_from_json(inter);
    CHECK(ri.schedule == "interleaved:2");
    CHECK(ri.options.kv_refresh);
    CHECK(ri.options.loss_weights.empty());
    const auto none = lrt::release_schedule_from_json(lrt::json::parse(R"({"interleaved_kv_refresh": true})"));
    CHECK_FALSE(none.recurrent);
    CHECK(none.schedule == "standard");
    CHECK_FALSE(none.options.kv_refresh);
  }
  // Bad fields: clear errors.
  auto bad = [](const char* text, const char* msg) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(lrt::release_schedule_from_json(lrt::json::parse(text), "'meta.json'"), doctest::Contains(msg),
                         lrt::Error);
  };
  bad(R"({"use_interleaved": true, "use_multi_refine": true})",
      "use_interleaved and use_multi_refine are mutually exclusive");
  bad(R"({"use_multi_refine": true, "multi_refine_loss_weights": [1, 1]})",
      "multi_refine_loss_weights has 2 entries; multi_refine_num_passes = 2 needs 3");
  bad(R"({"use_multi_refine": true, "multi_refine_loss_weights": [1, -1, 1]})", "finite numbers >= 0");
  bad(R"({"use_multi_refine": true, "multi_refine_loss_weights": [0, 0, 0]})", "positive sum");
  bad(R"({"use_multi_refine": true, "multi_refine_loss_weights": "0.1,0.3,0.6"})", "must be an array");
  bad(R"({"use_interleaved": true, "interleaved_num_passes": 0})",
      "'meta.json': field 'interleaved_num_passes' must be an integer >= 1");
  bad(R"({"use_interleaved": true, "interleaved_kv_refresh": 1})",
      "field 'interleaved_kv_refresh' must be true or false");
  bad(R"({"use_multi_refine": "yes"})", "field 'use_multi_refine' must be true or false");
}

TEST_CASE(
    "lrt checkpoints: checkpoint_schedule maps lrt metadata and release configs to (variant, schedule, options)") {
  const auto dir = std::filesystem::temp_directory_path() / "lrt_test_lrt_sched";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "m.safetensors").string();
  lrt::Model<vs::Lrt> m(cfg(), 1);
  lrt::ScheduleOptions mro;
  mro.loss_weights = {0.1, 0.3, 0.6};
  mro.detach = true;
  lrt::save_model(m, path, 3, {{"schedule", "multirefine:2"}}, lrt::st::DType::F32, mro);
  const auto r = lrt::st::Reader::open(path);
  {  // lrt's metadata: variant and schedule, options from model_config
    const auto cs = lrt::checkpoint_schedule(r);
    CHECK(cs.variant == "lrt");
    CHECK(cs.schedule == "multirefine:2");
    CHECK(cs.options.loss_weights == mro.loss_weights);
    CHECK(cs.options.detach);
    CHECK(lrt::checkpoint_variant(r) == std::pair<std::string, std::string>{"lrt", "multirefine:2"});
    const auto mc = lrt::json::parse(*r.meta("model_config"));
    CHECK(mc.at("use_multi_refine").as_bool());
    CHECK_FALSE(mc.at("use_interleaved").as_bool());
  }
  {  // a release config given explicitly (--config) wins: the release's variant lrt-release
    const auto j = lrt::json::parse(R"({"sequence_len": 8, "vocab_size": 11, "n_layer": 3, "n_head": 2, "n_embd": 8,
      "use_interleaved": true, "interleaved_num_passes": 4, "interleaved_kv_refresh": true})");
    const auto cs = lrt::checkpoint_schedule(r, &j);
    CHECK(cs.variant == "lrt-release");
    CHECK(cs.schedule == "interleaved:4");
    CHECK(cs.options.kv_refresh);
    const auto mr = lrt::json::parse(R"({"model_config": {"use_multi_refine": true, "multi_refine_num_passes": 1,
      "multi_refine_detach": true}})");
    const auto cm = lrt::checkpoint_schedule(r, &mr);
    CHECK(cm.variant == "lrt-release");
    CHECK(cm.schedule == "multirefine:1");
    CHECK(cm.options.detach);
    const auto base = lrt::json::parse(R"({"use_interleaved": false})");
    CHECK(lrt::checkpoint_schedule(r, &base).variant == "baseline");
    CHECK(lrt::checkpoint_schedule(r, &base).schedule == "standard");
  }
  {  // kv_refresh round trip through a saved interleaved checkpoint
    lrt::ScheduleOptions kvr;
    kvr.kv_refresh = true;
    lrt::save_model(m, path, 4, {{"schedule", "interleaved:2"}}, lrt::st::DType::F32, kvr);
    const auto r2 = lrt::st::Reader::open(path);
    const auto cs = lrt::checkpoint_schedule(r2);
    CHECK(cs.variant == "lrt");
    CHECK(cs.schedule == "interleaved:2");
    CHECK(cs.options.kv_refresh);
    // Saved without a schedule (and so without the options): the defaults.
    lrt::save_model(m, path, 5);
    const auto cs3 = lrt::checkpoint_schedule(lrt::st::Reader::open(path));
    CHECK(cs3.schedule == "interleaved:2");
    CHECK_FALSE(cs3.options.kv_refresh);
  }
  std::filesystem::remove_all(dir);
}

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

namespace {
/// Spec §5(d): Chunked<1> == MultiRefine<1> (one chunk: every position reads pass 0's states,
/// all K/V recomputed) and Chunked<T> == Interleaved<T> (chunks of one position are the strided
/// subsets of S = T): the same loss, passes and gradients, up to rounding.
template <class V>
void check_chunked_equivalences(const char* name, lrt::ModelConfig c) {
  CAPTURE(name);
  CAPTURE(c.mem_offset);
  lrt::Model<V, double> m(c, 4);
  randomize(m, 41);
  const index_t T = c.sequence_len;
  Tensor<index_t, 2> in = ids_of(2, T, 9);
  const Tensor<index_t, 2> tg = ids_of(2, T, 10);
  if (c.vocab_size > 256) in(0, 2) = 256, in(1, 5) = 256;  // BOS tokens (ResetAtBOS cuts the memory)
  const auto close = [](const std::pair<double, std::vector<double>>& a,
                        const std::pair<double, std::vector<double>>& b) {
    CHECK(b.first == doctest::Approx(a.first).epsilon(1e-13));
    CHECK(max_abs(a.second) > 1e-3);
    CHECK(max_abs(a.second, b.second) < 1e-12 * std::max(1.0, max_abs(a.second)));
  };
  close(loss_and_grads<lrt::MultiRefine<1>>(m, in, tg, {}), loss_and_grads<lrt::Chunked<1>>(m, in, tg, {}));
  // Chunked<8> has T = 8 chunks of one position; Interleaved<8> T subsets of one position.
  REQUIRE(T == 8);
  close(loss_and_grads<lrt::Interleaved<8>>(m, in, tg, {}), loss_and_grads<lrt::Chunked<8>>(m, in, tg, {}));
  CHECK(max_diff(merged_logits<lrt::Interleaved<8>>(m, in), merged_logits<lrt::Chunked<8>>(m, in)) < 1e-12);
  // The comparisons can fail: with 1 < C < T the blocked and strided schedules differ.
  const auto i2 = loss_and_grads<lrt::Interleaved<2>>(m, in, tg, {});
  const auto c2 = loss_and_grads<lrt::Chunked<2>>(m, in, tg, {});
  CHECK(std::abs(i2.first - c2.first) > 1e-8);
}
}  // namespace

TEST_CASE("lrt invariants: Chunked<1> == MultiRefine<1> and Chunked<T> == Interleaved<T>, every variant") {
  check_chunked_equivalences<vs::Lrt>("lrt", cfg());
  check_chunked_equivalences<vs::LrtRelease>("lrt-release", cfg());
  check_chunked_equivalences<vs::ResidualOnly>("residual", cfg());
  check_chunked_equivalences<vs::KVOnly>("kv", cfg());
  check_chunked_equivalences<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>>(
      "source block 1", cfg());
  lrt::ModelConfig k2 = cfg();
  k2.mem_offset = 2;
  check_chunked_equivalences<vs::Lrt>("offset 2", k2);
  lrt::ModelConfig bos = cfg();
  bos.vocab_size = 257, bos.reset_at_bos = true;
  check_chunked_equivalences<vs::Lrt>("reset at BOS", bos);
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

}  // namespace test_lrt
