// The LRT invariants of spec §5, in double precision on tiny models with random weights:
// decoding == Exact, Interleaved<S >= T> refinement passes == Exact, the last MultiRefine<K >= T-1>
// pass == Exact, zeroed additions == the baseline, gradients of the interleaved loss against
// finite differences, Exact's BPTT gradient == MultiRefine's (weights 0..0,1), overheads.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/model/decode.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/model/eval.hpp>
#include <lrt/model/schedule.hpp>

#include <filesystem>

#include "test_util.hpp"

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
  // (c) Interleaved<S >= T>: every refinement pass gives the Exact logits.
  CHECK(max_diff(merged_logits<lrt::Interleaved<64>>(m, ids, {}, 1), exact) < 1e-12);
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
  for (const char* n : {"transformer.h.2.attn.triple_gate.weight", "interleaved_projections.1.W_v.weight",
                        "interleaved_key_projections.0.W_v.weight", "interleaved_lambdas",
                        "interleaved_init_value_embeds.2.weight"})
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
