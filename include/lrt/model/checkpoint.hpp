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
#include "checkpoint_file.hpp"
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

}  // namespace v0
}  // namespace lrt
