// lrt/model/config_json.hpp: a model's config from JSON (the release's GPTConfig field names plus
// lrt's own, spec §9) and from a checkpoint's metadata (model_config, lrt_config), apart from
// model/checkpoint.hpp so that a decode-only program reads a checkpoint's config without the
// model and its autodiff layer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "../io/json.hpp"
#include "../io/safetensors.hpp"
#include "config.hpp"

namespace lrt {
inline namespace v0 {

/// A config from the release's model_config (or a bare GPTConfig object, or a release
/// meta_XXXXXX.json holding one under "model_config"), plus lrt's fields when given.
/// Size fields are required; the others default to lrt's defaults.
inline ModelConfig config_from_json(const json::Value& in, const json::Value* lrt_fields = nullptr,
                                    std::string_view what = "config") {
  const json::Value& j = in.find("model_config") ? in.at("model_config") : in;
  check(j.is_object(), "config", what, ": expected a JSON object with the model's fields");
  ModelConfig c;
  auto req = [&](const char* k) {
    const json::Value* v = j.find(k);
    check(v != nullptr, "config", what, ": missing field '", k, "'");
    check(v->is_integer(), "config", what, ": field '", k, "' must be an integer");
    return static_cast<index_t>(v->as_int());
  };
  auto opt_bool = [&](const char* k, bool def) {
    const json::Value* v = j.find(k);
    if (!v) return def;
    check(v->is_bool(), "config", what, ": field '", k, "' must be true or false");
    return v->as_bool();
  };
  c.sequence_len = req("sequence_len");
  c.vocab_size = req("vocab_size");
  c.n_layer = req("n_layer");
  c.n_head = req("n_head");
  c.n_kv_head = j.find("n_kv_head") ? req("n_kv_head") : c.n_head;
  c.n_embd = req("n_embd");
  if (const json::Value* v = j.find("window_pattern")) {
    check(v->is_string(), "config", what, ": field 'window_pattern' must be a string");
    c.window_pattern = v->as_string();
  }
  const bool ve = opt_bool("use_value_embeds", true), every = opt_bool("ve_every_layer", true);
  c.ve_layout = !ve ? VELayout::None : every ? VELayout::Every : VELayout::Alternating;
  c.use_x0_residual = opt_bool("use_x0_residual", true);
  c.use_resid_lambdas = opt_bool("use_resid_lambdas", true);
  if (j.find("ve_gate_channels")) c.ve_gate_channels = req("ve_gate_channels");
  if (lrt_fields) {
    check(lrt_fields->is_object(), "config", what, ": lrt_config must be a JSON object");
    if (const json::Value* v = lrt_fields->find("mem_offset")) {
      check(v->is_integer(), "config", what, ": field 'mem_offset' must be an integer");
      c.mem_offset = static_cast<index_t>(v->as_int());
    }
    if (const json::Value* v = lrt_fields->find("reset_at_bos")) {
      check(v->is_bool(), "config", what, ": field 'reset_at_bos' must be true or false");
      c.reset_at_bos = v->as_bool();
    }
    if (const json::Value* v = lrt_fields->find("rope_bf16_tables")) {
      check(v->is_bool(), "config", what, ": field 'rope_bf16_tables' must be true or false");
      c.rope_bf16_tables = v->as_bool();
    }
    // Absent (checkpoints before these fields): the defaults, bos_id -1 (the last id) and 15.
    if (const json::Value* v = lrt_fields->find("bos_id")) {
      check(v->is_integer(), "config", what, ": field 'bos_id' must be an integer");
      c.bos_id = static_cast<index_t>(v->as_int());
    }
    if (const json::Value* v = lrt_fields->find("logit_softcap")) {
      check(v->is_number(), "config", what, ": field 'logit_softcap' must be a number");
      c.logit_softcap = v->as_number();
    }
  }
  if (const Status s = c.status(); !s.ok()) ::lrt::throw_error("config", detail::str_cat(what, ": ", s.what()));
  return c;
}

/// The config stored in a checkpoint's metadata.
inline ModelConfig read_model_config(const st::Reader& r) {
  const auto mc = r.meta("model_config");
  check(mc.has_value(), "checkpoint", "'", r.label(),
        "': no 'model_config' in __metadata__ (pass the release's config JSON with --config)");
  const json::Value j = json::parse(*mc, "'" + r.label() + "' model_config");
  std::optional<json::Value> lj;
  if (const auto l = r.meta("lrt_config")) lj = json::parse(*l, "'" + r.label() + "' lrt_config");
  return config_from_json(j, lj ? &*lj : nullptr, "'" + r.label() + "'");
}

}  // namespace v0
}  // namespace lrt
