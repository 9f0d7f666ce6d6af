// LRT checkpoints (model/checkpoint.hpp, model/checkpoint_file.hpp): the release's tensor names for
// every variant and bit-exact round trips; the release's schedule fields (kv_refresh, multi-refine)
// written and read back, with clear errors for bad fields; checkpoint_schedule's (variant,
// schedule, options) from lrt's metadata and from release configs.
#include <lrt/model/checkpoint.hpp>

#include <filesystem>

#include "lrt_fixtures.hpp"

namespace test_lrt_checkpoints {

using namespace lrt_test;
using namespace lrt_fixtures;
using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
namespace vs = lrt::variants;

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

}  // namespace test_lrt_checkpoints
