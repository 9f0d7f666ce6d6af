// The parameter table (model/weight_table.hpp): its initialisation order against draws made by
// hand, which matrices lrt-quantize packs, and a test-only variant whose own tensors, added
// through the table alone, reach the model, its checkpoint, the optimizer groups, the quantizer
// and the lean decoder's weights.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <lrt/decode/lean_file.hpp>
#include <lrt/decode/lean_model.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/model/checkpoint_file.hpp>
#include <lrt/train/optimizer_groups.hpp>

#include "../test_util.hpp"

namespace test_weight_table {

namespace {

using lrt::index_t;
namespace vs = lrt::variants;

lrt::ModelConfig small() {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 16, c.n_head = 2, c.n_kv_head = 2, c.sequence_len = 16, c.window_pattern = "SL";
  return c;
}

/// The LRT with two tensors of its own, added through the table and read by nothing else: a
/// per-layer scalar (AdamW, with the memory gains) and a matrix Muon steps and lrt-quantize packs.
struct Probe : vs::Lrt {
  static void add_weights(const lrt::ModelConfig& c, lrt::WeightTable& t) {
    using K = lrt::WeightInit::Kind;
    using R = lrt::ParamRole;
    const auto other = lrt::WeightSlot::other;
    t.push_back(
        {.name = "probe_scalars", .slot = other, .role = R::MemoryGain, .rows = c.n_layer, .init = {K::Full, 0.25}});
    t.push_back({.name = "probe.proj.weight",
                 .slot = other,
                 .role = R::Matrix,
                 .rows = c.n_embd,
                 .cols = c.n_embd,
                 .init = {K::Uniform, 0.5},
                 .packable = true});
  }
};

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          ("lrt_test_weight_table_" + tag + "_" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

std::string msg(const lrt::Status& s) { return s.message(); }

template <class P>
std::vector<float> values(const P& p) {
  return std::vector<float>(p.value().data(), p.value().data() + p.value().numel());
}

}  // namespace

TEST_CASE("weight table: Model draws its initial values in the documented order") {
  // By hand, from the same Philox stream: wte N(0, 1); per layer c_q, c_k, c_v, c_fc U(-a, a), the
  // value embedding, the layer's projections (P_v then P_k); shared projections; lm_head N(0,
  // 0.001); zeros and constants draw nothing.
  const auto by_hand = [](auto v) {
    using V = decltype(v);
    CAPTURE(lrt::variant_name<V>());
    const lrt::ModelConfig c = small();
    lrt::Model<V> m(c, 11);
    lrt::Generator g(11);
    const index_t d = c.n_embd, Vp = c.padded_vocab(), D = c.kv_dim(), hd = c.n_head * c.head_dim();
    const float a = static_cast<float>(std::sqrt(3.0 / d));
    const auto same = [](const auto& p, const auto& expr) {
      CAPTURE(p.name());
      const lrt::Tensor<float, 2> drawn(expr);
      CHECK(std::memcmp(p.value().data(), drawn.data(), sizeof(float) * static_cast<std::size_t>(drawn.numel())) == 0);
    };
    same(m.wte(), g.normal<float>(lrt::Shape<2>{Vp, d}, 0.f, 1.f));
    for (const auto& b : m.blocks()) {
      same(*b.c_q, g.uniform<float>(lrt::Shape<2>{hd, d}, -a, a));
      same(*b.c_k, g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
      same(*b.c_v, g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
      same(*b.c_fc, g.uniform<float>(lrt::Shape<2>{4 * d, d}, -a, a));
      if (b.value_embed) same(*b.value_embed, g.uniform<float>(lrt::Shape<2>{Vp, D}, -a, a));
      if (b.proj_v) same(*b.proj_v, g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
      if (b.proj_k) same(*b.proj_k, g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
      CHECK(values(*b.c_proj) == std::vector<float>(static_cast<std::size_t>(d * hd), 0.f));
    }
    if (m.proj_v()) same(*m.proj_v(), g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
    if (m.proj_k()) same(*m.proj_k(), g.uniform<float>(lrt::Shape<2>{D, d}, -a, a));
    same(m.lm_head(), g.normal<float>(lrt::Shape<2>{Vp, d}, 0.f, 0.001f));
    CHECK(values(m.resid_lambdas()) == std::vector<float>(2, 1.f));
    CHECK(values(m.x0_lambdas()) == std::vector<float>(2, 0.1f));
    if (m.gamma()) CHECK(values(*m.gamma()) == std::vector<float>(2, 0.1f));
  };
  by_hand(vs::Baseline{});
  by_hand(vs::Lrt{});
  by_hand(vs::LrtRelease{});
  by_hand(vs::KVOnly{});
}

TEST_CASE("weight table: the matrices lrt-quantize packs") {
  const lrt::ModelConfig c = small();
  const auto release = lrt::packable_names(lrt::weight_table(c, lrt::structure_of<vs::LrtRelease>()));
  for (const char* n : {"transformer.h.1.mlp.c_fc.weight", "transformer.h.0.attn.c_proj.weight",
                        "interleaved_key_projections.1.W_v.weight", "lm_head.weight"})
    CHECK_MESSAGE(release.contains(n), n);
  for (const char* n : {"transformer.wte.weight", "interleaved_init_value_embeds.0.weight",
                        "transformer.h.0.attn.triple_gate.weight", "resid_lambdas"})
    CHECK_MESSAGE(!release.contains(n), n);
  // 6 per layer, 2 per layer of projections, and the head.
  CHECK(release.size() == 2 * 6 + 2 * 2 + 1);
  const auto shared = lrt::packable_names(lrt::weight_table(c, lrt::structure_of<vs::Lrt>()));
  CHECK(shared.contains("interleaved_projections.shared.W_v.weight"));
  CHECK(shared.size() == 2 * 6 + 2 + 1);
  const auto base = lrt::packable_names(lrt::weight_table(c, lrt::structure_of<vs::Baseline>()));
  CHECK(!base.contains("value_embeds.0.weight"));
  CHECK(!base.contains("transformer.h.0.attn.ve_gate.weight"));
  CHECK(base.size() == 2 * 6 + 1);
}

TEST_CASE(
    "weight table: a variant's own tensors reach the model, checkpoints, optimizers, quantizer and lean weights") {
  const lrt::ModelConfig c = small();
  lrt::Model<Probe> m(c, 5);
  const lrt::Model<vs::Lrt> plain(c, 5);

  SUBCASE("the model: in the roster, in file order by role, initialised; the library's tensors unchanged") {
    std::vector<std::string> names;
    m.for_each_param_spec([&](auto&, const lrt::WeightSpec& s) { names.push_back(s.name); });
    std::vector<std::string> plain_names;
    plain.for_each_param([&](auto& p) { plain_names.push_back(p.name()); });
    REQUIRE(names.size() == plain_names.size() + 2);
    // probe.proj.weight closes the block matrices (before lm_head); probe_scalars follows gamma.
    const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
    CHECK(at("probe.proj.weight") + 1 == at("lm_head.weight"));
    CHECK(at("probe_scalars") == at("interleaved_lambdas") + 1);
    m.for_each_param_spec([&](auto& p, const lrt::WeightSpec& s) {
      if (s.name == "probe_scalars") CHECK(values(p) == std::vector<float>(2, 0.25f));
      if (s.name == "probe.proj.weight") {
        CHECK(p.shape().numel() == 16 * 16);
        const auto v = values(p);
        CHECK(*std::max_element(v.begin(), v.end()) <= 0.5f);
        CHECK(*std::max_element(v.begin(), v.end()) > 0.25f);
      }
    });
    // Its tensors are drawn after the library's, whose values stay those of the plain variant.
    plain.for_each_param([&](auto& q) {
      m.for_each_param([&](auto& p) {
        if (p.name() == q.name()) CHECK_MESSAGE(values(p) == values(q), p.name());
      });
    });
    CHECK(m.num_matmul_params() == plain.num_matmul_params() + 16 * 16);
    CHECK(m.num_params() == plain.num_params() + 16 * 16 + 2);
  }

  SUBCASE("the optimizer groups") {
    const auto opt = lrt::make_optimizers(m, lrt::TrainOptions{}, 64);
    std::string where_scalars, where_proj;
    for (const auto& p : opt->muon.params())
      if (p.name == "probe.proj.weight") where_proj = "muon";
    for (const auto& g : opt->adamw.groups())
      for (const auto& p : g.params)
        if (p.name == "probe_scalars") where_scalars = g.name;
    CHECK(where_proj == "muon");
    CHECK(where_scalars == "memory_gains");
  }

  SUBCASE("the checkpoint: saved, checked against the variant's table, loaded") {
    const std::string path = temp_path("probe");
    lrt::save_model(m, path, 3);
    const lrt::st::Reader r = lrt::st::Reader::open(path);
    std::filesystem::remove(path);
    CHECK(r.shape("probe_scalars") == std::vector<std::int64_t>{2});
    CHECK(r.shape("probe.proj.weight") == std::vector<std::int64_t>{16, 16});
    const lrt::WeightInfo info = lrt::weight_info(r);
    const lrt::Status ok = lrt::check_weights(r, c, lrt::weight_table<Probe>(c), "probe", info);
    CHECK_MESSAGE(ok.ok(), ok.message());
    // The plain LRT's table does not list them: the loader refuses the file as another variant's.
    const lrt::Status other = lrt::check_weights(r, c, lrt::structure_of<vs::Lrt>(), info);
    REQUIRE_FALSE(other.ok());
    CHECK(std::string(other.message()).find("holds 2 tensors a lrt model of this config does not have") !=
          std::string::npos);
    lrt::Model<Probe> back(c, 99);
    lrt::load_weights(back, r);
    m.for_each_param([&](auto& p) {
      back.for_each_param([&](auto& q) {
        if (p.name() == q.name()) CHECK_MESSAGE(values(p) == values(q), p.name());
      });
    });
  }

  SUBCASE("the quantizer packs the matrix and keeps the scalars") {
    const std::string path = temp_path("probe_q");
    lrt::save_model(m, path, 3);
    const lrt::st::Reader r = lrt::st::Reader::open(path);
    std::filesystem::remove(path);
    const lrt::PackableNames packable = lrt::packable_names(m.weight_table());
    CHECK(packable.contains("probe.proj.weight"));
    CHECK(!packable.contains("probe_scalars"));
    const lrt::st::Reader q = lrt::st::Reader::from_bytes(
        lrt::quantize_checkpoint(r, lrt::WeightFormat::Int8, 8, packable).serialize(), "probe-int8");
    CHECK(q.dtype("probe.proj.weight") == lrt::st::DType::I8);
    CHECK(q.dtype("probe_scalars") == lrt::st::DType::F32);
    CHECK(lrt::pack_weights(m, lrt::WeightFormat::Int8, 8).find("probe.proj.weight") != nullptr);
    // The lean decoder's views of the int8 file: the packed matrix where the table puts it.
    lrt::LeanWeights<float> w;
    std::vector<std::byte> spill;
    const lrt::Status s = lrt::lean_file_weights<Probe>(q, c, w, spill);
    REQUIRE_MESSAGE(s.ok(), s.message());
    REQUIRE(w.other.size() == 2);
    for (const auto& o : w.other) {
      if (o.name == "probe.proj.weight") CHECK(o.m.q != nullptr);
      if (o.name == "probe_scalars") CHECK((o.m.data != nullptr && o.m.rows == 2 && o.m.cols == 1));
    }
  }

  SUBCASE("the lean weights: viewed, validated, and decoded as the plain LRT") {
    lrt::LeanWeights<float> w = lrt::lean_weights(m);
    REQUIRE(w.other.size() == 2);
    CHECK(w.other[0].name == "probe.proj.weight");  // file order
    CHECK(w.other[1].name == "probe_scalars");
    lrt::LeanDecoder<Probe> probe(w);
    lrt::LeanDecoder<vs::Lrt> lrt_dec(lrt::lean_weights(plain));
    const std::vector<index_t> prompt{1, 5, 9, 2};
    probe.prefill(prompt);
    lrt_dec.prefill(prompt);
    const auto a = probe.step(7), b = lrt_dec.step(7);
    CHECK(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    // The decoder checks them against the table.
    lrt::LeanWeights<float> missing = w;
    missing.other.pop_back();
    CHECK(msg(lrt::LeanDecoder<Probe>::validate(missing, {})).find("weight probe_scalars is missing") !=
          std::string::npos);
    lrt::LeanWeights<float> wrong = w;
    wrong.other[0].m.rows = 8;
    CHECK(msg(lrt::LeanDecoder<Probe>::validate(wrong, {}))
              .find("weight probe.proj.weight has shape (8, 16), expected (16, 16)") != std::string::npos);
    // The plain LRT has none of them.
    CHECK(msg(lrt::LeanDecoder<vs::Lrt>::validate(w, {})).find("weight probe.proj.weight is given but a lrt model") !=
          std::string::npos);
    lrt::LeanWeights<float> stray = lrt::lean_weights(plain);
    stray.layers[1].ve_gate = stray.layers[1].c_q;
    CHECK(msg(lrt::LeanDecoder<vs::Lrt>::validate(stray, {}))
              .find("weight layers[1].ve_gate is given but a lrt model of this config has none") != std::string::npos);
  }
}

}  // namespace test_weight_table
