// Interleaved's kv_refresh (spec §4.2), in double precision on tiny models with random weights: no
// effect at S = 1 and S >= T, == recomputing the stale rows where the linear patch is exact
// (against an independent reference), gradients against finite differences, and the refusals of
// kv_refresh and of the other schedules' options where they do not apply.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/model/training_schedule.hpp>

#include <numeric>

#include "lrt_fixtures.hpp"

namespace test_kv_refresh {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

namespace {
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
    const auto mem = lrt::sched_detail::shift_memory(Sbuf, U, ids, c);
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
    const auto mem = lrt::sched_detail::shift_memory(Sbuf, P, ids, c);
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

}  // namespace test_kv_refresh
