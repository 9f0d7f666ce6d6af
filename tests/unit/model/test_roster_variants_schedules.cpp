// One home for every fact: the parameter roster (roles, counts, the optimizer groups built from
// it), variant structures (names, spellings, what checkpoints record and how they are read back,
// including a checkpoint written before the roster existed) and the schedules' own facts
// (spelling, pass factor, options; a schedule defined here, outside the library, runs through
// schedule_loss unchanged).
#include <lrt/train/trainer.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "../test_util.hpp"

namespace test_roster_variants_schedules {

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace fs = std::filesystem;

namespace {
lrt::ModelConfig small_config() {
  lrt::ModelConfig c;
  c.n_layer = 3, c.n_embd = 16, c.n_head = 2, c.n_kv_head = 1, c.sequence_len = 8, c.vocab_size = 257;
  c.window_pattern = "SL";
  c.ve_layout = lrt::VELayout::Alternating;
  return c;
}

/// Role -> summed parameter count, and every name once.
template <class M>
std::map<lrt::ParamRole, index_t> role_counts(const M& m, std::set<std::string>& names) {
  std::map<lrt::ParamRole, index_t> n;
  m.for_each_param_role([&](auto& p, lrt::ParamRole r) {
    CHECK_MESSAGE(names.insert(p.name()).second, "parameter listed twice: ", p.name());
    n[r] += p.shape().numel();
  });
  return n;
}

/// N_mm by hand (spec §10) for config c of variant V: per layer q, k, v, proj, fc, mlp-proj,
/// the gate (ve_gate on VE layers for None/Residual, the triple gate for KV/Both), layerwise
/// projections; shared projections once; the head.
template <class V>
index_t matmul_params_by_hand(lrt::ModelConfig c) {
  if constexpr (V::kv) c.ve_layout = lrt::VELayout::Every;
  const index_t d = c.n_embd, Dk = c.kv_dim(), hd = c.n_head * c.head_dim(), ch = c.gate_channels();
  index_t n = c.padded_vocab() * d;
  for (index_t l = 0; l < c.n_layer; ++l) {
    n += hd * d + 2 * Dk * d + d * hd + 8 * d * d;
    if constexpr (V::kv)
      n += 3 * c.n_kv_head * ch;
    else if (c.has_ve(l))
      n += c.n_kv_head * ch;
    if constexpr (V::kv && V::projection == lrt::Projection::Layerwise) n += 2 * Dk * d;
  }
  if constexpr (V::kv && V::projection == lrt::Projection::Shared) n += 2 * Dk * d;
  return n;
}

template <class V>
void check_roster() {
  const lrt::ModelConfig c = small_config();
  lrt::Model<V, float> m(c, 1);
  std::set<std::string> names;
  auto n = role_counts(m, names);
  CHECK(m.num_matmul_params() == matmul_params_by_hand<V>(c));
  CHECK(n[lrt::ParamRole::Matrix] + n[lrt::ParamRole::Gate] + n[lrt::ParamRole::Projection] +
            n[lrt::ParamRole::Unembedding] ==
        m.num_matmul_params());
  // Gates: ve_gate on VE layers (None/Residual), the triple gate on every layer (KV/Both).
  const index_t gate_rows = V::kv ? 3 * c.n_kv_head * c.n_layer : c.n_kv_head * c.num_ve_layers();
  CHECK(n[lrt::ParamRole::Gate] == gate_rows * c.gate_channels());
  // Memory projections: P_k and P_v, shared or per layer (KV/Both).
  const index_t proj_sets = !V::kv ? 0 : V::projection == lrt::Projection::Layerwise ? c.n_layer : 1;
  CHECK(n[lrt::ParamRole::Projection] == proj_sets * 2 * c.kv_dim() * c.n_embd);
  CHECK(n[lrt::ParamRole::Unembedding] == c.padded_vocab() * c.n_embd);
  CHECK(n[lrt::ParamRole::ResidLambda] == c.n_layer);
  CHECK(n[lrt::ParamRole::X0Lambda] == c.n_layer);
  CHECK(n[lrt::ParamRole::MemoryGain] == (V::residual ? c.n_layer : 0));
  // Embeddings: wte; one value table per VE layer (every layer for KV/Both).
  const index_t ve_layers = V::kv ? c.n_layer : c.num_ve_layers();
  CHECK(n[lrt::ParamRole::Embedding] == c.padded_vocab() * c.n_embd);
  CHECK(n[lrt::ParamRole::ValueEmbedding] == c.padded_vocab() * ve_layers * c.kv_dim());
  index_t total = 0;
  for (const auto& [r, k] : n) total += k;
  CHECK(total == m.num_params());

  // The optimizer groups read the roster: every parameter in exactly one optimizer, Muon holding
  // the matrices, AdamW the rest in the release's groups (spec §8).
  lrt::TrainOptions o;
  const auto opt = lrt::make_optimizers(m, o, 4 * c.sequence_len);
  std::map<std::string, std::string> where;  // parameter -> optimizer/group
  for (const auto& p : opt->muon.params()) where[p.name] = "muon";
  for (const auto& g : opt->adamw.groups())
    for (const auto& p : g.params) {
      CHECK_MESSAGE(where.count(p.name) == 0, p.name, " is in two optimizers");
      where[p.name] = g.name;
    }
  CHECK(where.size() == names.size());
  CHECK(where["transformer.wte.weight"] == "embeddings");
  CHECK(where["lm_head.weight"] == "head");
  CHECK(where["resid_lambdas"] == "resid_scalars");
  CHECK(where["x0_lambdas"] == "x0_scalars");
  CHECK(where["transformer.h.1.mlp.c_fc.weight"] == "muon");
  if constexpr (V::residual) CHECK(where["interleaved_lambdas"] == "memory_gains");
  if constexpr (V::kv) {
    CHECK(where["transformer.h.0.attn.triple_gate.weight"] == "muon");
    CHECK(where["interleaved_init_value_embeds.2.weight"] == "embeddings");
  }
  // Group rates (spec §8): dls = (d/768)^-0.5 on the head and embeddings.
  const float dls = static_cast<float>(std::pow(16.0 / 768.0, -0.5));
  for (const auto& g : opt->adamw.groups()) {
    if (g.name == "head") CHECK(g.lr == doctest::Approx(o.unembedding_lr * dls));
    if (g.name == "embeddings") CHECK(g.lr == doctest::Approx(o.embedding_lr * dls));
    if (g.name == "x0_scalars") CHECK(g.beta1 == doctest::Approx(0.96f));
  }
}
}  // namespace

TEST_CASE("optimizer groups: gamma's rate is scalar_lr's unless gamma_lr is given") {
  const lrt::ModelConfig c = small_config();
  lrt::Model<lrt::variants::Lrt, float> m(c, 1);
  const auto rate = [&](const lrt::TrainOptions& o, const std::string& group) {
    const auto opt = lrt::make_optimizers(m, o, 4 * c.sequence_len);
    for (const auto& g : opt->adamw.groups())
      if (g.name == group) return g.lr;
    FAIL("no group ", group);
    return -1.f;
  };
  lrt::TrainOptions o;
  o.scalar_lr = 0.4f;
  CHECK(rate(o, "memory_gains") == 0.4f);
  CHECK(rate(o, "x0_scalars") == 0.4f);
  o.gamma_lr = 0.05f;
  CHECK(rate(o, "memory_gains") == 0.05f);
  CHECK(rate(o, "x0_scalars") == 0.4f);
  o.gamma_lr = 0.f;  // zero is a rate (gamma held fixed), not "unset"
  CHECK(rate(o, "memory_gains") == 0.f);
  CHECK(o.to_json().at("gamma_lr").as_number() == 0.0);
}

TEST_CASE("roster: roles, counts and optimizer groups of every variant") {
  SUBCASE("baseline") { check_roster<lrt::variants::Baseline>(); }
  SUBCASE("lrt") { check_roster<lrt::variants::Lrt>(); }
  SUBCASE("lrt-release") { check_roster<lrt::variants::LrtRelease>(); }
  SUBCASE("residual") { check_roster<lrt::variants::ResidualOnly>(); }
  SUBCASE("kv") { check_roster<lrt::variants::KVOnly>(); }
  SUBCASE("src1") { check_roster<lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>>(); }
}

TEST_CASE("variant structure: names, spellings, normalisation") {
  using lrt::Injection, lrt::Projection, lrt::VariantStructure;
  using Src1 = lrt::Variant<Injection::Both, Projection::Shared, lrt::BlockSource<1>>;
  CHECK(lrt::variant_name<lrt::variants::Lrt>() == "lrt");
  CHECK(lrt::variant_name<lrt::variants::LrtRelease>() == "lrt-release");
  CHECK(lrt::variant_name<Src1>() == "both/shared/block1");
  CHECK(lrt::spell(lrt::structure_of<lrt::variants::Baseline>()) == "none/shared/final");
  // Every name and spelling parses back to its structure.
  for (const auto& n : lrt::named_variants) {
    CHECK(lrt::parse_variant(n.name) == n.structure);
    CHECK(lrt::parse_variant(lrt::spell(n.structure)) == n.structure);
  }
  CHECK(lrt::parse_variant("both/shared/block1") == lrt::structure_of<Src1>());
  CHECK(lrt::parse_variant("both/shared/1") == lrt::structure_of<Src1>());
  CHECK(lrt::parse_variant("both/layerwise/final") == lrt::structure_of<lrt::variants::LrtRelease>());
  // Projection and source do not apply without KV injection / memory.
  CHECK((lrt::structure_of<lrt::Variant<Injection::Residual, Projection::Layerwise>>() ==
         lrt::structure_of<lrt::variants::ResidualOnly>()));
  CHECK(VariantStructure{Injection::None, Projection::Layerwise, 3} == lrt::structure_of<lrt::variants::Baseline>());
  CHECK_FALSE(lrt::structure_of<Src1>() == lrt::structure_of<lrt::variants::Lrt>());
  for (const char* bad : {"", "lrt-src1", "both", "both/shared", "both/shared/block", "both/shared/block-1",
                          "both/sharde/final", "al/shared/final", "both/shared/final/x", "both/shared/blockx"})
    CHECK_MESSAGE(!lrt::parse_variant(bad).has_value(), bad);
}

namespace {
template <class V>
lrt::CheckpointSchedule saved_and_read(const fs::path& dir, const std::string& schedule,
                                       const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  lrt::Model<V, float> m(small_config(), 2);
  auto meta = extra;
  meta.insert(meta.begin(), {"schedule", schedule});
  const std::string path = (dir / "m.safetensors").string();
  lrt::save_model(m, path, 3, meta);
  return lrt::checkpoint_schedule(lrt::st::Reader::open(path));
}
}  // namespace

TEST_CASE("variant structure: what a checkpoint records is what it is read back as") {
  const fs::path dir = fs::temp_directory_path() / "lrt_test_facts_ckpt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  using Src1 = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>;
  using Src2 = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<2>>;
  using KvLayer = lrt::Variant<lrt::Injection::KV, lrt::Projection::Layerwise, lrt::BlockSource<0>>;
  {
    const auto c = saved_and_read<Src1>(dir, "interleaved:2");
    CHECK(c.structure == lrt::structure_of<Src1>());
    CHECK(c.variant == "both/shared/block1");
    CHECK(c.schedule == "interleaved:2");
  }
  CHECK(saved_and_read<Src2>(dir, "interleaved:4").structure == lrt::structure_of<Src2>());
  CHECK(saved_and_read<KvLayer>(dir, "chunked:2").structure == lrt::structure_of<KvLayer>());
  CHECK(saved_and_read<lrt::variants::Baseline>(dir, "standard").structure ==
        lrt::structure_of<lrt::variants::Baseline>());
  {
    const auto c = saved_and_read<lrt::variants::LrtRelease>(dir, "multirefine:2");
    CHECK(c.variant == "lrt-release");
    CHECK(c.schedule == "multirefine:2");
  }
  // A variant name that contradicts the recorded structure is an error naming both.
  CHECK_THROWS_WITH_AS(saved_and_read<Src1>(dir, "interleaved:2", {{"variant", "lrt"}}),
                       doctest::Contains("contradicts lrt_config's structure both/shared/block1"), lrt::Error);
  // A malformed structure field names the field.
  {
    lrt::Model<lrt::variants::Lrt, float> m(small_config(), 2);
    const std::string path = (dir / "bad.safetensors").string();
    lrt::save_model(m, path, 1, {{"lrt_config", R"({"injection": "both", "projection": "sideways"})"}});
    CHECK_THROWS_WITH_AS(lrt::checkpoint_schedule(lrt::st::Reader::open(path)),
                         doctest::Contains("projection 'sideways' is not shared or layerwise"), lrt::Error);
  }
  fs::remove_all(dir);
}

TEST_CASE("variant structure: checkpoints written before the roster load and score as before") {
  // tests/data/pre_roster: tiny models written by the library at 63fcc96 (before this change),
  // see its README. The src1 file is the one whose variant name the tools could not find.
  const fs::path dir = fs::path(LRT_TEST_DATA_DIR) / "pre_roster";
  using Src1 = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>;
  const auto r = lrt::st::Reader::open((dir / "src1_interleaved2.safetensors").string());
  const auto cs = lrt::checkpoint_schedule(r);
  CHECK(cs.structure == lrt::structure_of<Src1>());
  CHECK(cs.schedule == "interleaved:2");
  const lrt::ModelConfig c = lrt::read_model_config(r);
  CHECK(c.n_layer == 2);
  CHECK(c.bos() == 256);  // absent in the file: the last id of 257
  CHECK(c.logit_softcap == doctest::Approx(15));
  lrt::Model<Src1, float> m(c);
  lrt::load_weights(m, r);
  const auto mr = lrt::checkpoint_schedule(lrt::st::Reader::open((dir / "lrt_multirefine2.safetensors").string()));
  CHECK(mr.structure == lrt::structure_of<lrt::variants::Lrt>());
  CHECK(mr.schedule == "multirefine:2");
  REQUIRE(mr.options.loss_weights.size() == 3);
  CHECK(mr.options.loss_weights[2] == doctest::Approx(0.5));
  const auto b = lrt::checkpoint_schedule(lrt::st::Reader::open((dir / "baseline_standard.safetensors").string()));
  CHECK(b.structure == lrt::structure_of<lrt::variants::Baseline>());
  CHECK(b.variant == "baseline");
}

// ---------------------------------------------------------------- schedules carry their facts

namespace {
/// A schedule defined outside the library: pass 0, then the even positions refined once, then the
/// odd ones (Interleaved<2> by another route). Only this type is needed to run it.
struct EvenThenOdd {
  static std::string spec() { return "even-then-odd"; }
  static constexpr double pass_factor = 2;
  static constexpr bool takes_kv_refresh = false, takes_loss_weights = false, takes_zero_interior = false;
  static void check_options(const lrt::ScheduleOptions&) {}
  template <class V, class T, lrt::Device D>
  static lrt::ScheduleResult<T, D> run(const lrt::Model<V, T, D>& m, const Tensor<index_t, 2, D>& ids,
                                       const Tensor<index_t, 2, D>& tg, const lrt::ScheduleOptions& o) {
    std::vector<std::vector<index_t>> sub(2);
    for (index_t p = 0; p < ids.shape()[1]; ++p) sub[static_cast<std::size_t>(p % 2)].push_back(p);
    return lrt::sched_detail::subset_passes<lrt::Model<V, T, D>, T, D>(m, ids, tg, sub, false, false,
                                                                       {o.keep_logits, nullptr});
  }
};
static_assert(lrt::TrainingSchedule<EvenThenOdd>);
static_assert(lrt::TrainingSchedule<lrt::Interleaved<3>> && lrt::TrainingSchedule<lrt::Exact>);
static_assert(!lrt::TrainingSchedule<int>);
}  // namespace

TEST_CASE("schedules: spelling, pass factor and options are each schedule's own") {
  using lrt::variants::Lrt, lrt::variants::Baseline;
  CHECK(lrt::schedule_spec<lrt::Standard>() == "standard");
  CHECK(lrt::schedule_spec<lrt::Interleaved<3>>() == "interleaved:3");
  CHECK(lrt::schedule_spec<lrt::MultiRefine<2>>() == "multirefine:2");
  CHECK(lrt::schedule_spec<lrt::Chunked<4>>() == "chunked:4");
  CHECK(lrt::schedule_spec<lrt::Exact>() == "exact");
  CHECK((lrt::pass_factor<lrt::MultiRefine<3>, Lrt>()) == 4);
  CHECK((lrt::pass_factor<lrt::MultiRefine<3>, Baseline>()) == 1);
  CHECK((lrt::pass_factor<lrt::Interleaved<4>, Lrt>()) == 2);
  CHECK((lrt::pass_factor<lrt::Chunked<2>, Lrt>()) == 2);
  CHECK((lrt::pass_factor<lrt::Exact, Lrt>()) == 1);
  // model/schedule_options.hpp spells the natural schedules without the schedules: they must agree.
  CHECK(lrt::natural_schedule_spec(true) == lrt::schedule_spec<lrt::default_schedule<Lrt>>());
  CHECK(lrt::natural_schedule_spec(false) == lrt::schedule_spec<lrt::default_schedule<Baseline>>());
  CHECK(lrt::natural_schedule_spec(true) == "interleaved:2");
  lrt::ScheduleOptions zi;
  zi.zero_interior_memory = true;
  CHECK_NOTHROW((lrt::check_schedule_options<lrt::Chunked<2>, Lrt>(zi)));
  CHECK_THROWS_WITH_AS((lrt::check_schedule_options<lrt::Interleaved<2>, Lrt>(zi)),
                       doctest::Contains("zero_interior_memory is an option of Chunked<C>"), lrt::Error);
  lrt::ScheduleOptions w;
  w.loss_weights = {1, 2};
  CHECK_THROWS_WITH_AS((lrt::check_schedule_options<lrt::MultiRefine<2>, Lrt>(w)),
                       doctest::Contains("MultiRefine<2> needs 3 loss weights, got 2"), lrt::Error);
  CHECK_THROWS_WITH_AS((lrt::check_schedule_options<EvenThenOdd, Lrt>(w)),
                       doctest::Contains("not of schedule 'even-then-odd'"), lrt::Error);
}

TEST_CASE("schedules: a schedule type from outside the library runs through schedule_loss") {
  lrt::ModelConfig c = small_config();
  lrt::Model<lrt::variants::Lrt, double> m(c, 4);
  // Non-zero weights everywhere so the memory matters.
  m.for_each_param([](auto& p) {
    auto& v = p.value();
    for (index_t i = 0; i < v.numel(); ++i) v.data()[i] += 0.03 * std::sin(0.7 * double(i) + 1.0);
  });
  Tensor<index_t, 2> ids(Shape<2>{2, 8}), tg(Shape<2>{2, 8});
  for (index_t b = 0; b < 2; ++b)
    for (index_t t = 0; t < 8; ++t) ids(b, t) = (b * 37 + t * 11) % 257, tg(b, t) = (b * 5 + t * 29) % 257;
  lrt::ad::Graph g;
  lrt::ScheduleOptions o;
  o.keep_logits = true;
  const auto a = lrt::schedule_loss<EvenThenOdd>(m, ids, tg, o);
  const auto ref = lrt::schedule_loss<lrt::Interleaved<2>>(m, ids, tg, o);
  CHECK(a.token_forwards == 2.0 * 16);
  REQUIRE(a.passes.size() == 3);
  CHECK(a.loss.value()() == ref.loss.value()());  // the same passes in the same order
  CHECK(a.passes[2].logits.shape() == Shape<3>{2, 4, c.vocab_size});
  // keep_logits is an explicit option: off, no pass keeps logits.
  const auto off = lrt::schedule_loss<EvenThenOdd>(m, ids, tg);
  CHECK(off.passes[1].logits.numel() == 0);
  CHECK(off.loss.value()() == a.loss.value()());
}

}  // namespace test_roster_variants_schedules
