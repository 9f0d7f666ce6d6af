// lrt/model/checkpoint_file.hpp: the one checkpoint loader. Every entry point that opens a
// checkpoint (lrt-train --resume, lrt-eval, lrt-generate, lrt-quantize, the Trainer, the C API and
// lrt-embedded-generate) reads it through read_checkpoint, which checks, once and the same way
// everywhere:
//   - the config (ModelConfig::status: lower and upper bounds, mem_offset within sequence_len);
//   - the metadata against the config: the variant name against lrt_config's structure, a source
//     layer the model has, a schedule lrt knows, the tokenizer's ids and BOS against the vocabulary;
//   - the tensors against the weight table of that structure and config (model/weight_table.hpp):
//     every one present, no other, each with its shape and a dtype the file's format allows;
//   - that every stored value is finite (each tensor's bytes are read once; a NaN or infinity is
//     refused, naming the tensor).
// It needs no model (no autodiff), so the decode-only programs use it: read_checkpoint has a Status
// form (no throw; in a build without exceptions, a malformed JSON header still reaches the error
// handler, core/error.hpp) and a throwing one with the same messages.
// Also here: how a checkpoint was trained (checkpoint_schedule) and the release's schedule fields.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/status.hpp"
#include "../data/recorded_tokenizer.hpp"
#include "../io/json.hpp"
#include "../io/quantize.hpp"
#include "../io/safetensors.hpp"
#include "config_json.hpp"
#include "schedule_options.hpp"
#include "variant_structure.hpp"
#include "weight_table.hpp"

namespace lrt {
inline namespace v0 {

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
    // lrt writes the structure's name (variant_name): any other name is a damaged or edited file,
    // refused even where lrt_config alone would give the structure.
    check(
        named.has_value(), "checkpoint", file, ": variant '", *v, "' is neither a named variant (",
        [] {
          std::string n;
          for (const NamedVariant& x : named_variants) n += (n.empty() ? "" : ", ") + std::string(x.name);
          return n;
        }(),
        ") nor a spelling injection/projection/source",
        st ? "; its lrt_config structure is " + variant_label(*st) : std::string(", and the file has no lrt_config"));
    check(!st || *st == *named, "checkpoint", file, ": variant '", *v, "' (", spell(*named),
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
  std::int64_t v = -1;
  const auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  check(ec == std::errc() && end == s->data() + s->size() && v >= 0, "checkpoint", "'", r.label(), "': bad step '", *s,
        "'");
  return v;
}

/// Whether spec names a schedule lrt has: standard, exact, interleaved:S (S >= 1), multirefine:K
/// (K >= 0) or chunked:C (C >= 1), as schedule_spec spells them.
inline bool known_schedule_spec(std::string_view spec) {
  if (spec == "standard" || spec == "exact") return true;
  for (const auto& [name, lo] :
       {std::pair<std::string_view, int>{"interleaved:", 1}, {"multirefine:", 0}, {"chunked:", 1}}) {
    if (spec.substr(0, name.size()) != name) continue;
    const std::string_view n = spec.substr(name.size());
    int v = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    return !n.empty() && ec == std::errc() && end == n.data() + n.size() && v >= lo && v <= (1 << 20);
  }
  return false;
}

/// What read_checkpoint found in a checkpoint, checked.
struct CheckpointInfo {
  ModelConfig config;
  CheckpointSchedule run;  // the variant's structure and name, the schedule and its options
  WeightInfo weights;      // f32, bf16 or int8 (and its group)
  std::int64_t step = 0;
  bool tokenizer_recorded = false;            // the file names its tokenizer (release weights do not)
  std::shared_ptr<const tok::Tokenizer> bpe;  // the recorded BPE; nullptr: bytes
};

namespace ckpt_detail {
/// The index of the first non-finite value of n floats of dtype t at p (unaligned), or -1.
inline std::int64_t first_non_finite(const char* p, std::int64_t n, st::DType t) {
  switch (t) {
    case st::DType::F32:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint32_t u;
        std::memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return i;
      }
      return -1;
    case st::DType::BF16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t u;
        std::memcpy(&u, p + 2 * i, 2);
        if ((u & 0x7f80u) == 0x7f80u) return i;
      }
      return -1;
    case st::DType::F16:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t u;
        std::memcpy(&u, p + 2 * i, 2);
        if ((u & 0x7c00u) == 0x7c00u) return i;
      }
      return -1;
    case st::DType::F64:
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint64_t u;
        std::memcpy(&u, p + 8 * i, 8);
        if ((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull) return i;
      }
      return -1;
    default:
      return -1;  // integers are finite
  }
}

/// The shape of a table entry as the file states shapes.
inline std::vector<std::int64_t> spec_shape(const WeightSpec& w) {
  if (w.is_vector()) return {w.rows};
  return {w.rows, w.cols};
}
}  // namespace ckpt_detail

/// Checks the tensors of r against `table`, the parameter table of a `variant` model of config c
/// (model/weight_table.hpp; `variant` names it in messages): each present with its shape, stored as a float type (F32,
/// BF16, F16, F64), or where the file's format packs it (info: int8) as I8 with NAME.scales; no tensor the table does
/// not list; every stored float finite. Errors name the file and the tensor.
inline Status check_weights(const st::Reader& r, const ModelConfig& c, const WeightTable& table,
                            const std::string& variant, const WeightInfo& info) {
  constexpr const char* op = "checkpoint";
  const std::string file = "'" + r.label() + "'";
  Status status;
  std::vector<std::string> listed;
  const auto finite = [&](const std::string& name) {
    const st::DType t = r.dtype(name);
    if (!st::is_floating(t)) return true;
    const std::string_view raw = r.raw(name);
    const std::int64_t n = static_cast<std::int64_t>(raw.size() / st::dtype_size(t));
    const std::int64_t at = ckpt_detail::first_non_finite(raw.data(), n, t);
    if (at < 0) return true;
    status = Status::error(StatusCode::bad_file, op, file, ": tensor '", name, "' holds a non-finite value (NaN or ",
                           "infinity) at index ", at, ": the weights are damaged or training diverged");
    return false;
  };
  for (const WeightSpec& w : table) {
    if (!status.ok()) break;
    listed.push_back(w.name);
    const std::vector<std::int64_t> shape = ckpt_detail::spec_shape(w);
    if (!r.contains(w.name)) {
      status = Status::error(StatusCode::bad_file, op, file, ": no tensor '", w.name, "', which a ", variant,
                             " model of this config has (the file is damaged or of another variant)");
      continue;
    }
    const st::DType t = r.dtype(w.name);
    const bool int8 = t == st::DType::I8 && w.packable && info.format == WeightFormat::Int8;
    if (!st::is_floating(t) && !int8) {
      status = Status::error(StatusCode::bad_file, op, file, ": tensor '", w.name, "' is stored as ", st::dtype_name(t),
                             "; a ", to_string(info.format), " checkpoint stores it as F32, BF16, F16 or F64",
                             w.packable && info.format == WeightFormat::Int8 ? " or I8" : "");
      continue;
    }
    if (r.shape(w.name) != shape) {
      status = Status::error(StatusCode::bad_file, op, file, ": tensor '", w.name, "' has shape ",
                             st::shape_string(r.shape(w.name)), ", but the model_config (n_layer ", c.n_layer,
                             ", n_embd ", c.n_embd, ", n_head ", c.n_head, ", n_kv_head ", c.n_kv_head, ", vocab_size ",
                             c.vocab_size, ") needs ", st::shape_string(shape));
      continue;
    }
    if (int8) {
      const std::string scales = w.name + std::string(quant_scales_suffix);
      listed.push_back(scales);
      const std::vector<std::int64_t> sshape{w.rows, quant_groups(w.cols, info.group)};
      if (!r.contains(scales) || r.dtype(scales) != st::DType::F32 || r.shape(scales) != sshape) {
        status = Status::error(StatusCode::bad_file, op, file, ": int8 tensor '", w.name, "' needs '", scales,
                               "' stored as F32 ", st::shape_string(sshape), " (quant_group ", info.group, ")");
        continue;
      }
      finite(scales);
      continue;
    }
    finite(w.name);
  }
  if (!status.ok()) return status;
  const std::vector<std::string> names = r.names();
  if (names.size() != listed.size()) {
    std::sort(listed.begin(), listed.end());
    std::size_t extra = 0;
    std::string first;
    for (const std::string& n : names)
      if (!std::binary_search(listed.begin(), listed.end(), n)) {
        if (extra++ == 0) first = n;
      }
    if (extra > 0)
      return Status::error(StatusCode::bad_file, op, file, ": holds ", extra, " tensor", extra == 1 ? "" : "s", " a ",
                           variant, " model of this config does not have, first '", first,
                           "' (the file is damaged or of another variant)");
  }
  return status;
}

/// check_weights against the table of the library's variant of structure s.
inline Status check_weights(const st::Reader& r, const ModelConfig& c, const VariantStructure& s,
                            const WeightInfo& info) {
  return check_weights(r, c, weight_table(c, s), variant_name(s), info);
}

/// The parameter table of the model a checkpoint holds (read_checkpoint's config and structure).
inline WeightTable weight_table(const CheckpointInfo& info) { return weight_table(info.config, info.run.structure); }

/// read_checkpoint's metadata half (throws; see the top of this file).
inline CheckpointInfo read_checkpoint_metadata(const st::Reader& r, const json::Value* config = nullptr) {
  const std::string file = "'" + r.label() + "'";
  CheckpointInfo info;
  info.config = config ? config_from_json(*config, nullptr, "config") : read_model_config(r);
  info.run = checkpoint_schedule(r, config);
  const ModelConfig& c = info.config;
  const VariantStructure& s = info.run.structure;
  check(s.source_layer < c.n_layer, "checkpoint", file, ": variant ", info.run.variant, " (", spell(s),
        ") reads its memory from block ", s.source_layer, ", but the model_config has n_layer ", c.n_layer,
        " (blocks 0..", c.n_layer - 1, ")");
  check(known_schedule_spec(info.run.schedule), "checkpoint", file, ": schedule '", info.run.schedule,
        "' is not one lrt has (standard, exact, interleaved:S, multirefine:K, chunked:C)");
  info.weights = weight_info(r);
  info.step = read_step(r);
  info.tokenizer_recorded = r.meta("tokenizer").has_value();
  info.bpe = data::recorded_tokenizer(r);
  if (info.tokenizer_recorded) {
    const index_t ids = info.bpe ? static_cast<index_t>(info.bpe->vocab_size()) : data::ByteTokenizer::vocab_size;
    const index_t bos = info.bpe ? static_cast<index_t>(info.bpe->bos()) : data::ByteTokenizer::bos;
    check(ids <= c.vocab_size, "checkpoint", file, ": its tokenizer (", *r.meta("tokenizer"), ") has ", ids,
          " ids, more than the model_config's vocab_size ", c.vocab_size);
    check(bos == c.bos(), "checkpoint", file, ": its tokenizer's BOS is ", bos, ", the model_config's bos_id ",
          c.bos());
  }
  return info;
}

/// Reads and checks a checkpoint (see the top of this file): its config (or `config`, the release's
/// model_config given apart, e.g. lrt-eval --config), how it was trained, its tokenizer, its
/// tensors and their values. Throws lrt::Error naming the file and the cause.
inline CheckpointInfo read_checkpoint(const st::Reader& r, const json::Value* config = nullptr) {
  CheckpointInfo info = read_checkpoint_metadata(r, config);
  throw_if_error(check_weights(r, info.config, info.run.structure, info.weights));
  return info;
}

/// read_checkpoint with the result as a Status: the same checks and messages, no throw (a build
/// without exceptions reports a malformed metadata JSON through the error handler).
inline Status read_checkpoint(const st::Reader& r, CheckpointInfo& out, const json::Value* config = nullptr) {
#if LRT_EXCEPTIONS
  try {
    out = read_checkpoint_metadata(r, config);
  } catch (const Error& e) {
    const std::string& o = e.op();
    const char* op = o == "config" ? "config" : o == "tokenizer" ? "tokenizer" : o == "json" ? "json" : "checkpoint";
    const std::string_view what = std::string_view(e.what()).substr(o.size() + 3);
    return Status::error(StatusCode::bad_file, op, what);
  }
#else
  out = read_checkpoint_metadata(r, config);
#endif
  return check_weights(r, out.config, out.run.structure, out.weights);
}

}  // namespace v0
}  // namespace lrt
