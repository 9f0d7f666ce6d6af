// lrt/model/checkpoint.hpp: model configs as JSON (the release's GPTConfig field names plus
// lrt's own) and model weights as safetensors with the release's parameter names (spec §9).
// `__metadata__` holds strings only: format ("pt", as PyTorch writes it), model_config (JSON),
// lrt_config (JSON), variant, step, tokenizer, and the caller's extra keys (the Trainer adds
// "schedule"). Loading checks every tensor's presence, name and shape and names the file and the
// tensor in its errors.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../io/file.hpp"
#include "../io/json.hpp"
#include "../io/quantize.hpp"
#include "../io/safetensors.hpp"
#include "config_json.hpp"
#include "gpt.hpp"
#include "training_schedule.hpp"
#include "variant_structure.hpp"

namespace lrt {
inline namespace v0 {

namespace ckpt_detail {
/// "name:N" -> N when the schedule spec starts with name + ':', else -1.
inline std::int64_t schedule_count(std::string_view spec, std::string_view name) {
  if (spec.size() <= name.size() + 1 || spec.substr(0, name.size()) != name || spec[name.size()] != ':') return -1;
  std::int64_t n = 0;
  for (char ch : spec.substr(name.size() + 1)) {
    if (ch < '0' || ch > '9' || n > (1 << 30)) return -1;
    n = n * 10 + (ch - '0');
  }
  return n;
}
}  // namespace ckpt_detail

/// The release's model_config object (GPTConfig field names) for a config of variant V, trained
/// with `schedule` (schedule_spec's spelling; empty: unknown) and options o. The release's schedule
/// fields (spec §9): interleaved:N -> use_interleaved, interleaved_num_passes = N,
/// interleaved_kv_refresh; multirefine:K -> use_multi_refine (use_interleaved false: the release
/// refuses both), multi_refine_num_passes = K (the passes after the zero-memory one, so K + 1 loss
/// weights), multi_refine_detach, multi_refine_loss_weights ([] = all 1). Other schedules and an
/// empty one keep the defaults (use_interleaved = the variant is recurrent, N = 2).
template <class V = variants::Baseline>
json::Value release_config_json(const ModelConfig& c, std::string_view schedule = {}, const ScheduleOptions& o = {}) {
  const std::int64_t S = V::recurrent ? ckpt_detail::schedule_count(schedule, "interleaved") : -1;
  const std::int64_t K = V::recurrent ? ckpt_detail::schedule_count(schedule, "multirefine") : -1;
  json::Value j = json::Value::object();
  j["sequence_len"] = c.sequence_len;
  j["vocab_size"] = c.vocab_size;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["n_kv_head"] = c.n_kv_head;
  j["n_embd"] = c.n_embd;
  j["window_pattern"] = c.window_pattern;
  j["use_value_embeds"] = c.ve_layout != VELayout::None;
  j["ve_every_layer"] = c.ve_layout == VELayout::Every;
  j["use_x0_residual"] = c.use_x0_residual;
  j["use_resid_lambdas"] = c.use_resid_lambdas;
  j["ve_gate_channels"] = c.ve_gate_channels;
  j["use_interleaved"] = V::recurrent && K < 0;
  j["interleaved_num_passes"] = S >= 1 ? S : 2;
  j["interleaved_kv_refresh"] = S >= 1 && V::kv && o.kv_refresh;
  j["use_multi_refine"] = K >= 0;
  j["multi_refine_num_passes"] = K >= 0 ? K : 2;
  j["multi_refine_detach"] = K >= 0 && o.detach;
  json::Value w = json::Value::array();
  if (K >= 0)
    for (double x : o.loss_weights) w.push_back(x);
  j["multi_refine_loss_weights"] = std::move(w);
  return j;
}

/// lrt's own fields (no release equivalent).
template <class V = variants::Baseline>
json::Value lrt_config_json(const ModelConfig& c) {
  json::Value j = json::Value::object();
  j["injection"] = to_string(V::injection);
  j["projection"] = to_string(V::projection);
  if (V::source_layer < 0)
    j["source_layer"] = "final";
  else
    j["source_layer"] = V::source_layer;
  j["mem_offset"] = c.mem_offset;
  j["reset_at_bos"] = c.reset_at_bos;
  j["rope_bf16_tables"] = c.rope_bf16_tables;
  j["bos_id"] = c.bos();  // resolved (-1 is written as vocab_size - 1)
  j["logit_softcap"] = c.logit_softcap;
  return j;
}

/// Writes the model's weights (float32, or bfloat16 with `dtype`) and metadata to `path`
/// atomically. `extra` adds metadata strings; its "schedule" (schedule_spec's spelling), with the
/// schedule options `options`, also sets the release's schedule fields of model_config. A model on
/// a device the host cannot read is copied to the host one parameter at a time: the file is the
/// same whatever the device.
template <class V, class T, Device D>
void save_model(const Model<V, T, D>& m, const std::string& path, std::int64_t step,
                const std::vector<std::pair<std::string, std::string>>& extra = {}, st::DType dtype = st::DType::F32,
                const ScheduleOptions& options = {}) {
  std::string schedule;
  for (const auto& [k, v] : extra)
    if (k == "schedule") schedule = v;
  st::Writer w;
  std::vector<float> buf;
  m.for_each_param([&](auto& p) {
    const auto& v = p.value();
    std::vector<std::int64_t> shape;
    for (int i = 0; i < std::remove_cvref_t<decltype(v.shape())>::rank; ++i) shape.push_back(v.shape()[i]);
    if constexpr (D::host_accessible) {
      buf.assign(v.data(), v.data() + v.numel());  // float32 (or float64 rounded) values
    } else {
      const auto h = lrt::to<cpu::Device>(v);
      buf.assign(h.data(), h.data() + h.numel());
    }
    w.add_f32(p.name(), buf, std::move(shape), dtype);
  });
  w.set_metadata("format", "pt");
  w.set_metadata("model_config", release_config_json<V>(m.config(), schedule, options).dump());
  w.set_metadata("lrt_config", lrt_config_json<V>(m.config()).dump());
  w.set_metadata("variant", variant_name<V>());
  w.set_metadata("step", std::to_string(step));
  w.set_metadata("tokenizer", "bytes257");
  for (const auto& [k, v] : extra) w.set_metadata(k, v);
  w.write(path);
}

/// Loads every parameter of m from r: the file must hold exactly m's tensors with m's shapes (and
/// the scales of those stored int8, io/quantize.hpp: their values are dequantized). A model on a
/// device the host cannot read is filled through a host copy of each tensor.
template <class V, class T, Device D>
void load_weights(const Model<V, T, D>& m, const st::Reader& r) {
  std::vector<std::string> names;
  m.for_each_param([&](auto& p) { names.push_back(p.name()); });
  r.expect_names(stored_names(r, std::move(names)));
  const WeightInfo info = weight_info(r);
  m.for_each_param([&](auto& p) {
    auto& v = p.value();
    using Shp = std::remove_cvref_t<decltype(v.shape())>;
    std::vector<std::int64_t> shape;
    for (int i = 0; i < Shp::rank; ++i) shape.push_back(v.shape()[i]);
    auto fill = [&](auto& host) {  // host: a host tensor of v's type and shape
      if constexpr (std::is_same_v<T, float>) {
        read_weight_f32(r, info, p.name(), std::span<float>(host.data(), static_cast<std::size_t>(host.numel())),
                        shape);
      } else if (r.dtype(p.name()) == st::DType::I8) {  // int8 values stand for floats
        std::vector<float> vals(static_cast<std::size_t>(host.numel()));
        read_weight_f32(r, info, p.name(), vals, shape);
        std::copy(vals.begin(), vals.end(), host.data());
      } else {
        const auto vals = r.read_f64(p.name(), shape);
        std::copy(vals.begin(), vals.end(), host.data());
      }
    };
    if constexpr (D::host_accessible) {
      fill(v);
    } else {
      Tensor<T, Shp::rank, cpu::Device> h(v.shape(), uninitialized);
      fill(h);
      if (h.bytes() > 0) DeviceTraits<D>::copy_from_host(v.data(), h.data(), h.bytes());
    }
  });
}

/// The model stored at path (config from its metadata, or `config` when given).
template <class T = float>
GPT<T> load_model(const std::string& path, const ModelConfig* config = nullptr) {
  const st::Reader r = st::Reader::open(path);
  GPT<T> m(config ? *config : read_model_config(r));
  load_weights(m, r);
  return m;
}

/// The training schedule a release model_config records (spec §9), in schedule_spec's spelling,
/// with its options.
struct ReleaseSchedule {
  bool recurrent = false;             // use_interleaved or use_multi_refine: the release's LRT model
  std::string schedule = "standard";  // interleaved:N, multirefine:K or standard
  ScheduleOptions options;            // kv_refresh; detach, loss_weights
};

/// Reads the schedule fields of a release model_config (or of a meta_XXXXXX.json holding one):
/// use_interleaved -> interleaved:N (N = interleaved_num_passes, default 2) with kv_refresh =
/// interleaved_kv_refresh; use_multi_refine -> multirefine:K (K = multi_refine_num_passes, the
/// refinement passes after the zero-memory pass, default 2; the release runs 1 + K passes) with
/// detach = multi_refine_detach and loss_weights = multi_refine_loss_weights ([] or null: all 1,
/// else K + 1 non-negative numbers with a positive sum); neither -> standard. The fields of the
/// schedule not chosen are ignored; both switches on is an error, as in the release.
inline ReleaseSchedule release_schedule_from_json(const json::Value& in, std::string_view what = "config") {
  const json::Value& j = in.find("model_config") ? in.at("model_config") : in;
  check(j.is_object(), "config", what, ": expected a JSON object with the model's fields");
  auto opt_bool = [&](const char* k) {
    const json::Value* v = j.find(k);
    if (!v || v->is_null()) return false;
    check(v->is_bool(), "config", what, ": field '", k, "' must be true or false");
    return v->as_bool();
  };
  auto count = [&](const char* k, std::int64_t lo) {
    const json::Value* v = j.find(k);
    if (!v || v->is_null()) return std::int64_t{2};  // the release's default for both counts
    check(v->is_integer() && v->as_int() >= lo && v->as_int() <= (1 << 20), "config", what, ": field '", k,
          "' must be an integer >= ", lo);
    return v->as_int();
  };
  ReleaseSchedule r;
  const bool inter = opt_bool("use_interleaved"), multi = opt_bool("use_multi_refine");
  check(!(inter && multi), "config", what, ": use_interleaved and use_multi_refine are mutually exclusive");
  r.recurrent = inter || multi;
  if (inter) {
    r.schedule = "interleaved:" + std::to_string(count("interleaved_num_passes", 1));
    r.options.kv_refresh = opt_bool("interleaved_kv_refresh");
  } else if (multi) {
    const std::int64_t K = count("multi_refine_num_passes", 0);
    r.schedule = "multirefine:" + std::to_string(K);
    r.options.detach = opt_bool("multi_refine_detach");
    if (const json::Value* w = j.find("multi_refine_loss_weights"); w && !w->is_null()) {
      check(w->is_array(), "config", what, ": field 'multi_refine_loss_weights' must be an array of numbers");
      double total = 0;
      for (const json::Value& x : w->items()) {
        check(x.is_number() && std::isfinite(x.as_number()) && x.as_number() >= 0, "config", what,
              ": multi_refine_loss_weights must hold finite numbers >= 0");
        r.options.loss_weights.push_back(x.as_number());
        total += x.as_number();
      }
      check(r.options.loss_weights.empty() || static_cast<std::int64_t>(r.options.loss_weights.size()) == K + 1,
            "config", what, ": multi_refine_loss_weights has ", r.options.loss_weights.size(),
            " entries; multi_refine_num_passes = ", K, " needs ", K + 1, " (one per pass, the zero-memory pass first)");
      check(r.options.loss_weights.empty() || total > 0, "config", what,
            ": multi_refine_loss_weights must have a positive sum");
    }
  }
  return r;
}

/// The structure lrt_config records (injection, projection, source_layer: "final" or a block
/// index); nullopt when it records none (a checkpoint before lrt_config). A field that is there
/// but malformed is an error naming the file.
inline std::optional<VariantStructure> structure_from_lrt_config(const json::Value& j, std::string_view what) {
  if (!j.is_object() || !j.find("injection")) return std::nullopt;
  auto str = [&](const char* k) {
    const json::Value* v = j.find(k);
    check(v != nullptr && v->is_string(), "checkpoint", what, ": lrt_config field '", k, "' must be a string");
    return v->as_string();
  };
  const auto inj = parse_injection(str("injection"));
  check(inj.has_value(), "checkpoint", what, ": lrt_config injection '", str("injection"),
        "' is not none, residual, kv or both");
  VariantStructure s{*inj, Projection::Shared, -1};
  if (j.find("projection")) {
    const auto p = parse_projection(str("projection"));
    check(p.has_value(), "checkpoint", what, ": lrt_config projection '", str("projection"),
          "' is not shared or layerwise");
    s.projection = *p;
  }
  if (const json::Value* v = j.find("source_layer")) {
    if (v->is_string()) {
      check(v->as_string() == "final", "checkpoint", what, ": lrt_config source_layer '", v->as_string(),
            "' is not \"final\" or a block index");
    } else {
      check(v->is_integer() && v->as_int() >= 0 && v->as_int() < (1 << 20), "checkpoint", what,
            ": lrt_config source_layer must be \"final\" or a block index >= 0");
      s.source_layer = static_cast<int>(v->as_int());
    }
  }
  return s.normalised();
}

/// How a checkpoint was trained: the variant's structure (and its name: named variant or
/// spelling), the schedule (schedule_spec's spelling) and the schedule's options.
struct CheckpointSchedule {
  std::string variant, schedule;
  ScheduleOptions options;
  VariantStructure structure;
};

/// lrt's metadata (the structure from lrt_config, else from the variant name of a checkpoint
/// before lrt_config; the schedule, else the structure's natural one; options from the
/// model_config fields of that schedule), else the release's config (`config`, e.g. --config, or
/// the file's model_config): use_interleaved or use_multi_refine -> the release's variant
/// `lrt-release` with the schedule and options of release_schedule_from_json; else the baseline
/// with standard.
inline CheckpointSchedule checkpoint_schedule(const st::Reader& r, const json::Value* config = nullptr) {
  const auto v = r.meta("variant"), s = r.meta("schedule");
  const bool external = config != nullptr;
  std::optional<json::Value> parsed;
  if (!external) {
    if (const auto mc = r.meta("model_config")) {
      parsed = json::parse(*mc, "'" + r.label() + "' model_config");
      config = &*parsed;
    }
  }
  const std::string what = external ? std::string("config") : "'" + r.label() + "' model_config";
  if (v && !external) {  // lrt's own checkpoint
    const std::string file = "'" + r.label() + "'";
    std::optional<VariantStructure> st;
    if (const auto l = r.meta("lrt_config"))
      st = structure_from_lrt_config(json::parse(*l, file + " lrt_config"), file);
    const std::optional<VariantStructure> named = parse_variant(*v);
    check(
        st || named, "checkpoint", file, ": variant '", *v, "' is neither a named variant (",
        [] {
          std::string n;
          for (const NamedVariant& x : named_variants) n += (n.empty() ? "" : ", ") + std::string(x.name);
          return n;
        }(),
        ") nor a spelling injection/projection/source, and the file has no lrt_config structure");
    check(!st || !named || *st == *named, "checkpoint", file, ": variant '", *v, "' (", spell(*named),
          ") contradicts lrt_config's structure ", spell(*st));
    const VariantStructure structure = st ? *st : *named;
    CheckpointSchedule c{variant_name(structure), s ? *s : natural_schedule_spec(structure.recurrent()), {}, structure};
    if (config) {
      const ReleaseSchedule rs = release_schedule_from_json(*config, what);
      if (rs.schedule == c.schedule) c.options = rs.options;  // save_model wrote them for this schedule
    }
    return c;
  }
  constexpr VariantStructure baseline = structure_of<variants::Baseline>(),
                             release = structure_of<variants::LrtRelease>();
  if (!config) return {"baseline", "standard", {}, baseline};
  ReleaseSchedule rs = release_schedule_from_json(*config, what);
  if (!rs.recurrent) return {"baseline", "standard", {}, baseline};
  return {"lrt-release", std::move(rs.schedule), std::move(rs.options), release};
}

/// The (variant, schedule) a checkpoint was trained with (checkpoint_schedule without the options).
inline std::pair<std::string, std::string> checkpoint_variant(const st::Reader& r,
                                                              const json::Value* config = nullptr) {
  CheckpointSchedule c = checkpoint_schedule(r, config);
  return {std::move(c.variant), std::move(c.schedule)};
}

/// The step recorded in a checkpoint (0 if absent).
inline std::int64_t read_step(const st::Reader& r) {
  const auto s = r.meta("step");
  if (!s) return 0;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(*s, &used);
    check(used == s->size() && v >= 0, "checkpoint", "'", r.label(), "': bad step '", *s, "'");
    return v;
  } catch (const std::logic_error&) {
    ::lrt::throw_error("checkpoint", detail::str_cat("'", r.label(), "': bad step '", *s, "'"));
  }
}

}  // namespace v0
}  // namespace lrt
