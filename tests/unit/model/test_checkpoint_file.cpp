// The one checkpoint loader (lrt/model/checkpoint_file.hpp) and the weight table it checks the
// tensors against (lrt/model/weight_table.hpp): every refusal, in its Status form and its throwing
// form, with the same message; the table against Model's parameters.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include <lrt/model/checkpoint.hpp>

#include "../test_util.hpp"

namespace test_checkpoint_file {

namespace {

using lrt::index_t;
namespace vs = lrt::variants;

lrt::ModelConfig small() {
  lrt::ModelConfig c;
  c.n_layer = 2, c.n_embd = 16, c.n_head = 2, c.n_kv_head = 2, c.sequence_len = 16, c.window_pattern = "SL";
  return c;
}

/// The bytes save_model writes for a V model of config c.
template <class V>
std::string saved_bytes(const lrt::ModelConfig& c) {
  lrt::Model<V> m(c, 3);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lrt_test_ckfile_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  lrt::save_model(m, path, 7, {{"schedule", lrt::natural_schedule_spec(V::recurrent)}});
  std::string bytes = lrt::read_file(path, "test");
  std::filesystem::remove(path);
  return bytes;
}

/// A copy of a checkpoint with its metadata and tensors passed through edits. meta(key, value)
/// may change value; tensor(name, shape, values, writer) returns false to leave the tensor out
/// (having written its own, or none).
struct Edit {
  std::function<void(const std::string&, std::string&)> meta = [](const std::string&, std::string&) {};
  std::function<bool(const std::string&, std::vector<std::int64_t>&, std::vector<float>&, lrt::st::Writer&)> tensor =
      [](const std::string&, std::vector<std::int64_t>&, std::vector<float>&, lrt::st::Writer&) { return true; };
  std::function<void(lrt::st::Writer&)> more = [](lrt::st::Writer&) {};
};
lrt::st::Reader edited(const std::string& bytes, const Edit& e) {
  const lrt::st::Reader r = lrt::st::Reader::from_bytes(bytes, "ck.safetensors");
  lrt::st::Writer w;
  for (auto [k, v] : r.metadata()) {
    e.meta(k, v);
    w.set_metadata(k, v);
  }
  for (const std::string& n : r.names()) {
    std::vector<std::int64_t> shape = r.shape(n);
    std::vector<float> v = r.read_f32(n, shape);
    if (e.tensor(n, shape, v, w)) w.add_f32(n, v, shape);
  }
  e.more(w);
  return lrt::st::Reader::from_bytes(w.serialize(), "ck.safetensors");
}
/// A JSON metadata field edited.
Edit json_field(const std::string& key, const std::string& field, lrt::json::Value value) {
  Edit e;
  e.meta = [=](const std::string& k, std::string& v) {
    if (k != key) return;
    lrt::json::Value j = lrt::json::parse(v);
    j[field] = value;
    v = j.dump();
  };
  return e;
}

/// read_checkpoint refuses r: the Status names `cause`, and the throwing form says the same.
void refused(const lrt::st::Reader& r, const std::string& cause) {
  CAPTURE(cause);
  lrt::CheckpointInfo info;
  const lrt::Status s = lrt::read_checkpoint(r, info);
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).find(cause) != std::string::npos);
  CHECK(std::string(s.message()).find("ck.safetensors") != std::string::npos);  // names the file
  try {
    lrt::read_checkpoint(r);
    FAIL("read_checkpoint did not throw");
  } catch (const lrt::Error& e) {
    CHECK(std::string(e.what()) == s.message());
  }
}

}  // namespace

TEST_CASE("weight table: Model's parameters, shapes and roles in file order, for every structure") {
  const auto same = [](auto v, lrt::ModelConfig c) {
    using V = decltype(v);
    CAPTURE(lrt::spell(lrt::structure_of<V>()));
    lrt::Model<V> m(c, 1);
    // The runtime structure's table (what the loader checks files against) is the model's.
    std::vector<std::tuple<std::string, std::vector<index_t>, lrt::ParamRole>> table, params;
    for (const lrt::WeightSpec& w : lrt::weight_table(m.config(), lrt::structure_of<V>()))
      table.emplace_back(w.name, w.is_vector() ? std::vector<index_t>{w.rows} : std::vector<index_t>{w.rows, w.cols},
                         w.role);
    m.for_each_param_role([&](auto& p, lrt::ParamRole r) {
      std::vector<index_t> shape;
      for (int i = 0; i < std::remove_cvref_t<decltype(p.shape())>::rank; ++i) shape.push_back(p.shape()[i]);
      params.emplace_back(p.name(), shape, r);
    });
    CHECK(table == params);
  };
  lrt::ModelConfig alt = small();
  alt.n_layer = 3, alt.ve_layout = lrt::VELayout::Alternating, alt.ve_gate_channels = 8, alt.n_kv_head = 1;
  for (const lrt::ModelConfig& c : {small(), alt}) {
    same(vs::Baseline{}, c);
    same(vs::Lrt{}, c);
    same(vs::LrtRelease{}, c);
    same(vs::ResidualOnly{}, c);
    same(vs::KVOnly{}, c);
    same(lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared, lrt::BlockSource<1>>{}, c);
  }
}

TEST_CASE("read_checkpoint: what an intact checkpoint holds") {
  const std::string bytes = saved_bytes<vs::Lrt>(small());
  const lrt::st::Reader r = lrt::st::Reader::from_bytes(bytes, "ck.safetensors");
  lrt::CheckpointInfo info;
  const lrt::Status s = lrt::read_checkpoint(r, info);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(info.run.structure == lrt::structure_of<vs::Lrt>());
  CHECK(info.run.variant == "lrt");
  CHECK(info.run.schedule == "interleaved:2");
  CHECK(info.step == 7);
  CHECK(info.config.n_embd == 16);
  CHECK(info.tokenizer_recorded);
  CHECK(info.bpe == nullptr);
  CHECK(info.weights.format == lrt::WeightFormat::F32);
}

TEST_CASE("read_checkpoint: each damage refused, naming its cause, in both forms") {
  const std::string bytes = saved_bytes<vs::Lrt>(small());
  const std::string q = "transformer.h.1.attn.c_q.weight";
  SUBCASE("a NaN, an infinity, stored as F32 or BF16") {
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()})
      for (const bool bf16 : {false, true}) {
        Edit e;
        e.tensor = [&](const std::string& n, std::vector<std::int64_t>& shape, std::vector<float>& v,
                       lrt::st::Writer& w) {
          if (n != q) return true;
          v[5] = bad;
          w.add_f32(n, v, shape, bf16 ? lrt::st::DType::BF16 : lrt::st::DType::F32);
          return false;
        };
        refused(edited(bytes, e), "tensor '" + q + "' holds a non-finite value (NaN or infinity) at index 5");
      }
  }
  SUBCASE("config past its upper bounds") {
    refused(edited(bytes, json_field("model_config", "sequence_len", std::int64_t{1000000000000})),
            "sequence_len must be <= 1048576, got 1000000000000");
    refused(edited(bytes, json_field("model_config", "vocab_size", std::int64_t{1000000000})),
            "vocab_size must be <= 16777216");
    refused(edited(bytes, json_field("model_config", "n_layer", 100000)), "n_layer must be <= 4096");
    refused(edited(bytes, json_field("lrt_config", "mem_offset", 1000000)),
            "mem_offset (the memory offset k) must be <= sequence_len (16)");
  }
  SUBCASE("metadata against the config") {
    refused(edited(bytes, json_field("lrt_config", "injection", "none")),
            "variant 'lrt' (both/shared/final) contradicts lrt_config's structure none/shared/final");
    Edit block5 = json_field("lrt_config", "source_layer", 5);
    block5.meta = [inner = block5.meta](const std::string& k, std::string& v) {
      inner(k, v);
      if (k == "variant") v = "both/shared/block5";  // agrees with lrt_config: only n_layer is wrong
    };
    refused(edited(bytes, block5), "reads its memory from block 5, but the model_config has n_layer 2");
    // A name lrt never writes is refused even where lrt_config alone gives the structure.
    Edit renamed;
    renamed.meta = [](const std::string& k, std::string& v) {
      if (k == "variant") v = "xyz";
    };
    refused(edited(bytes, renamed),
            "variant 'xyz' is neither a named variant (baseline, lrt, lrt-release, residual, kv) nor a spelling "
            "injection/projection/source; its lrt_config structure is lrt (both/shared/final)");
    refused(edited(bytes, json_field("lrt_config", "bos_id", 3)),
            "its tokenizer's BOS is 256, the model_config's bos_id 3");
    Edit sched;
    sched.meta = [](const std::string& k, std::string& v) {
      if (k == "schedule") v = "interleaved:0";
    };
    refused(edited(bytes, sched), "schedule 'interleaved:0' is not one lrt has");
  }
  SUBCASE("tensors: missing, extra, shape, dtype") {
    Edit missing;
    missing.tensor = [](const std::string& n, auto&, auto&, auto&) { return n != "lm_head.weight"; };
    refused(edited(bytes, missing), "no tensor 'lm_head.weight', which a lrt model of this config has");
    Edit extra;
    extra.more = [](lrt::st::Writer& w) { w.add_f32("extra.weight", std::vector<float>{1}, {1}); };
    refused(edited(bytes, extra), "holds 1 tensor a lrt model of this config does not have, first 'extra.weight'");
    Edit shape;
    shape.tensor = [](const std::string& n, std::vector<std::int64_t>& s, auto&, auto&) {
      if (n == "transformer.wte.weight") std::swap(s[0], s[1]);
      return true;
    };
    refused(edited(bytes, shape), "tensor 'transformer.wte.weight' has shape (16, 320), but the model_config");
    Edit dtype;
    dtype.tensor = [](const std::string& n, std::vector<std::int64_t>& s, std::vector<float>& v, lrt::st::Writer& w) {
      if (n != "x0_lambdas") return true;
      w.add_i64(n, std::vector<std::int64_t>(v.size(), 1), s);
      return false;
    };
    refused(edited(bytes, dtype), "tensor 'x0_lambdas' is stored as I64");
  }
  SUBCASE("an int8 tensor without its scales") {
    const lrt::st::Reader r = lrt::st::Reader::from_bytes(bytes, "ck.safetensors");
    const lrt::st::Reader q8 = lrt::st::Reader::from_bytes(
        lrt::quantize_checkpoint(r, lrt::WeightFormat::Int8, 8,
                                 lrt::packable_names(lrt::weight_table(lrt::read_checkpoint(r))))
            .serialize(),
        "ck.safetensors");
    lrt::CheckpointInfo info;
    const lrt::Status ok = lrt::read_checkpoint(q8, info);
    REQUIRE_MESSAGE(ok.ok(), ok.message());
    CHECK(info.weights.format == lrt::WeightFormat::Int8);
    lrt::st::Writer w;
    for (const auto& [k, v] : q8.metadata()) w.set_metadata(k, v);
    for (const std::string& n : q8.names()) {
      if (n == q + ".scales") continue;
      const std::string_view raw = q8.raw(n);
      if (q8.dtype(n) == lrt::st::DType::I8)
        w.add_i8(n, std::span(reinterpret_cast<const std::int8_t*>(raw.data()), raw.size()), q8.shape(n));
      else
        w.add_f32(n, q8.read_f32(n, q8.shape(n)), q8.shape(n));
    }
    refused(lrt::st::Reader::from_bytes(w.serialize(), "ck.safetensors"),
            "int8 tensor '" + q + "' needs '" + q + ".scales' stored as F32 (16, 2)");
  }
}

TEST_CASE("ModelConfig: upper bounds; schedule spellings") {
  lrt::ModelConfig c = small();
  CHECK(c.status().ok());
  c.mem_offset = c.sequence_len;
  CHECK(c.status().ok());
  c.mem_offset = c.sequence_len + 1;
  CHECK_FALSE(c.status().ok());
  c = small(), c.n_embd = lrt::ModelConfig::max_embd * 2, c.n_head = 2;
  CHECK(std::string(c.status().message()).find("n_embd must be <= 65536") != std::string::npos);
  for (const char* ok : {"standard", "exact", "interleaved:1", "interleaved:4", "multirefine:0", "chunked:2"})
    CHECK_MESSAGE(lrt::known_schedule_spec(ok), ok);
  for (const char* bad :
       {"", "interleaved", "interleaved:0", "interleaved:-1", "chunked:x", "multirefine:2a", "parallel"})
    CHECK_MESSAGE(!lrt::known_schedule_spec(bad), bad);
}

}  // namespace test_checkpoint_file
