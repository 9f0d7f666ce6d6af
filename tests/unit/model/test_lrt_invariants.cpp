// The LRT invariants of spec §5, in double precision on tiny models with random weights:
// decoding == Exact, Interleaved<S >= T> refinement passes == Exact, the last MultiRefine<K >= T-1>
// pass == Exact, reset at BOS in every path, zeroed additions == the baseline, gradients of the
// interleaved loss against finite differences, Exact's BPTT gradient == MultiRefine's (weights
// 0..0,1), Chunked<1> == MultiRefine<1> and Chunked<T> == Interleaved<T>, parameter overheads.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>

#include "lrt_fixtures.hpp"

namespace test_lrt_invariants {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

namespace {
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

}  // namespace test_lrt_invariants
