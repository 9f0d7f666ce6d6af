// lrt/runtime/decoding_impl.hpp: the decoders behind lrt/runtime/decoding.hpp. DecodingOf<V> is
// the lean decoder of variant V (decode/lean.hpp) over a mapped checkpoint;
// LRT_RUNTIME_DECODING(V) adds V to the program's table (a static object: write it in a unit the
// program links, at namespace scope). One unit of the program defines LRT_RUNTIME_IMPLEMENTATION
// before including this header: it compiles the table and open_decoding, and registers
// lrt::LeanVariants unless LRT_RUNTIME_NO_LEAN_VARIANTS is defined. The runtime library's unit,
// include/lrt/runtime/runtime.cpp, is that unit; it also registers the build's pairs.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <memory>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../decode/lean_file.hpp"
#include "../decode/lean_variants.hpp"
#include "../io/safetensors.hpp"
#include "../model/checkpoint_file.hpp"
#include "decoding.hpp"

namespace lrt {
inline namespace v0 {
namespace runtime {

/// The rows of LeanDecoder<V, float> over the weights of a mapped checkpoint.
template <class V>
class DecodingOf final : public Decoding {
 public:
  const ModelConfig& config() const override { return dec_->config(); }
  VariantStructure structure() const override { return structure_of<V>(); }
  index_t rows() const override { return dec_->rows(); }
  Status try_join(std::span<const index_t> prompt, index_t& row) override {
    return dec_->try_join(prompt, PrefillMode{}, row);
  }
  Status try_step(std::span<const index_t> rows, std::span<const index_t> tokens) override {
    return dec_->try_step(rows, tokens);
  }
  Status try_leave(index_t row) override { return dec_->try_leave(row); }
  std::span<const float> logits(index_t row) const override { return dec_->logits(row); }
  index_t position(index_t row) const override { return dec_->position(row); }
  index_t position_state_size() const override { return dec_->position_state_size(); }
  Status try_save_position(index_t row, std::span<float> out) const override {
    return dec_->try_save_position(row, out);
  }
  Status try_join_state(std::span<const index_t> tokens, std::span<const float* const> states, index_t& row) override {
    if (states.size() != tokens.size())
      return Status::error(StatusCode::invalid_argument, "lean decoder", "got ", states.size(), " states for ",
                           tokens.size(), " tokens");
    return dec_->try_join_state(
        tokens, [&](index_t p) { return states[static_cast<std::size_t>(p)]; }, row);
  }

  /// The decoding of the checkpoint `file` (read_checkpoint's config), or why there is none.
  static Status make(std::shared_ptr<const st::Reader> file, const ModelConfig& config, const DecodingOptions& o,
                     std::unique_ptr<Decoding>& out) {
    LeanWeights<float> w;
    std::vector<std::byte> spill;
    if (Status s = lean_file_weights<V>(*file, config, w, spill); !s.ok()) return s;
    return over(std::move(w), o, std::move(file), std::move(spill), out);
  }
  /// The decoding of weights w (lrt::lean_weights(model), say), which point into what `keep` holds
  /// (or outlive the decoding), and into `spill`.
  static Status over(LeanWeights<float> w, const DecodingOptions& o, std::shared_ptr<const void> keep,
                     std::vector<std::byte> spill, std::unique_ptr<Decoding>& out) {
    auto d = std::unique_ptr<DecodingOf>(new DecodingOf);
    d->keep_ = std::move(keep), d->spill_ = std::move(spill);
    typename LeanDecoder<V, float>::Options lo;
    lo.rows = o.rows, lo.capacity = o.capacity < 0 ? w.config.sequence_len : o.capacity;
    lo.max_prompt = 0;  // exact prefill only: the smallest state
    if (Status s = LeanDecoder<V, float>::create(std::move(w), lo, d->dec_); !s.ok()) return s;
    out = std::move(d);
    return {};
  }

 private:
  DecodingOf() = default;
  std::shared_ptr<const void> keep_;  // what the weights point into (the mapped checkpoint)
  std::vector<std::byte> spill_;      // what the file holds unaligned or in another float type
  std::optional<LeanDecoder<V, float>> dec_;
};

/// V's decoding over weights in memory (a model's, lrt::lean_weights(model): it must outlive the
/// decoding), for a program that makes its weights itself; an lrt::Error says why not.
template <class V>
std::unique_ptr<Decoding> make_decoding(LeanWeights<float> w, const DecodingOptions& o = {}) {
  std::unique_ptr<Decoding> out;
  throw_if_error(DecodingOf<V>::over(std::move(w), o, nullptr, {}, out));
  return out;
}

/// Registers V's decoding in the table when constructed.
template <class V>
struct DecodingRegistration {
  explicit DecodingRegistration(const std::string& name = {}) {
    detail::register_decoding(structure_of<V>(), &DecodingOf<V>::make, name);
  }
};

#define LRT_RUNTIME_CAT_(a, b) a##b
#define LRT_RUNTIME_CAT(a, b) LRT_RUNTIME_CAT_(a, b)
/// Adds variant type V to the program's decoding table (at namespace scope, in a unit it links).
#define LRT_RUNTIME_DECODING(...) \
  static const ::lrt::runtime::DecodingRegistration<__VA_ARGS__> LRT_RUNTIME_CAT(lrt_runtime_decoding_, __COUNTER__) {}

}  // namespace runtime
}  // namespace v0
}  // namespace lrt

#if defined(LRT_RUNTIME_IMPLEMENTATION)

#include "../backend/cpu/gemm.hpp"  // products
#include "../data/text_tokenizer.hpp"
#include "../decode/sampler.hpp"
#include "../train/run_directory.hpp"  // checkpoint_model_file: what --resume finds
#include "text.hpp"
#include "training.hpp"

namespace lrt {
inline namespace v0 {
namespace runtime {
namespace detail {

struct TableEntry {
  VariantStructure structure;
  DecodingFactory make;
  std::string name;
};

std::vector<TableEntry>& table() {
  static std::vector<TableEntry> t;
  return t;
}

void register_decoding(const VariantStructure& structure, DecodingFactory make, const std::string& name) {
  auto& t = table();
  if (std::none_of(t.begin(), t.end(), [&](const TableEntry& e) { return e.structure == structure; }))
    t.push_back({structure, make, name.empty() ? variant_name(structure) : name});
}

template <class... V>
void register_list(VariantList<V...>) {
  (register_decoding(structure_of<V>(), &DecodingOf<V>::make), ...);
}

}  // namespace detail

std::string checkpoint_model_file(const std::string& path, std::string* note) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return path;
  const CheckpointLocation at = find_checkpoint(path);
  if (note != nullptr) *note = at.note;
  return at.model_path();
}

std::string products() { return cpu::gemm_library(); }

std::vector<VariantStructure> decoding_variants() {
  std::vector<VariantStructure> out;
  for (const auto& e : detail::table()) out.push_back(e.structure);
  return out;
}

std::string decoding_variant_names() {
  const auto& t = detail::table();
  std::string out;
  for (std::size_t i = 0; i < t.size(); ++i) out += (i == 0 ? "" : i + 1 == t.size() ? " and " : ", ") + t[i].name;
  return out.empty() ? "no variant" : out;
}

DecodingModel open_decoding(const std::string& path, const DecodingOptions& options) {
  constexpr const char* op = "open_decoding";
  check(options.rows >= 1 && options.rows <= (index_t{1} << 20), op, "rows must be in [1, 2^20], got ", options.rows);
  check(options.capacity >= -1, op, "capacity must be >= -1 (0: unbounded; -1: the sequence_len), got ",
        options.capacity);
  // A run's --out folder (or a checkpoint's) stands for its model file, as in every program.
  const std::string file = checkpoint_model_file(path, nullptr);
  auto reader = std::make_shared<const st::Reader>(st::Reader::map(file));
  CheckpointInfo info;
  throw_if_error(read_checkpoint(*reader, info));
  DecodingModel m;
  m.config = info.config, m.structure = info.run.structure;
  m.format = to_string(info.weights.format), m.bpe = info.bpe, m.step = info.step;
  for (const auto& e : detail::table())
    if (e.structure == info.run.structure) {
      throw_if_error(e.make(reader, info.config, options, m.decoding));
      m.variant = e.name;
      return m;
    }
  throw VariantNotBuilt(op, "'" + file + "' holds variant " + variant_label(info.run.structure) +
                                "; this program decodes " + decoding_variant_names() +
                                " (a build decodes the variants of its pairs: LRT_TOOL_PAIRS, lrt_add_variant)");
}

index_t Text::vocab_size() const noexcept { return data::TextTokenizer(bpe_).vocab_size(); }

void Text::encode(std::string_view text, std::vector<index_t>& out) const {
  const std::vector<data::token_t> ids = data::TextTokenizer(bpe_).encode(text);
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string_view Text::token_text(index_t id) const noexcept {
  static const auto bytes = [] {
    std::array<char, 256> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i);
    return b;
  }();
  if (id < 0) return {};
  if (bpe_ == nullptr) return id < 256 ? std::string_view(&bytes[static_cast<std::size_t>(id)], 1) : std::string_view();
  return static_cast<std::size_t>(id) < bpe_->vocab_size() ? bpe_->token(static_cast<tok::token_t>(id))
                                                           : std::string_view();
}

index_t sample(std::span<const float> logits, const Sampling& s, index_t position) {
  SamplerOptions o;
  o.temperature = s.temperature, o.top_k = s.top_k, o.top_p = s.top_p, o.seed = s.seed;
  return sample_token<float>(logits, o, sample_counter(0, position));
}

// The model table of training.hpp: the pairs a program trains (registered by ModelRegistration,
// training_impl.hpp), found by name or by what a checkpoint records.
namespace detail {

struct ModelEntry {
  std::string variant, schedule;  // the --variant name and schedule_spec's spelling
  VariantStructure structure;
  ModelFactory make;
  /// The pair's name: the variant's alone for its natural schedule, else "variant:schedule".
  std::string pair() const {
    return schedule == natural_schedule_spec(structure.recurrent()) ? variant : variant + ":" + schedule;
  }
};

std::vector<ModelEntry>& models() {
  static std::vector<ModelEntry> t;
  return t;
}

void register_model(const std::string& name, const std::string& schedule, const VariantStructure& structure,
                    ModelFactory make) {
  auto& t = models();
  if (std::none_of(t.begin(), t.end(),
                   [&](const ModelEntry& e) { return e.structure == structure && e.schedule == schedule; }))
    t.push_back({name.empty() ? variant_name(structure) : name, schedule, structure, make});
}

std::string model_pair_list() {
  std::string out;
  for (const ModelEntry& e : models()) out += (out.empty() ? "" : ", ") + e.pair();
  return out.empty() ? "none" : out;
}

}  // namespace detail

double Score::bits_per_byte() const noexcept {
  return bytes > 0 ? nats / (std::numbers::ln2 * static_cast<double>(bytes)) : 0.0;
}
double Score::loss() const noexcept { return tokens > 0 ? nats / static_cast<double>(tokens) : 0.0; }

std::vector<std::string> model_pairs() {
  std::vector<std::string> out;
  for (const auto& e : detail::models()) out.push_back(e.pair());
  return out;
}

std::unique_ptr<Model> make_model(const std::string& pair, const ModelConfig& config, std::uint64_t seed,
                                  const std::string& tokenizer) {
  const std::size_t colon = pair.find(':');
  const std::string variant = pair.substr(0, colon);
  const std::string schedule = colon == std::string::npos ? std::string() : pair.substr(colon + 1);
  bool known = false;
  for (const auto& e : detail::models()) {
    if (e.variant != variant) continue;
    known = true;
    if (e.schedule == (schedule.empty() ? natural_schedule_spec(e.structure.recurrent()) : schedule)) {
      config.validate();
      return e.make(config, seed, tokenizer, {}, e.pair());
    }
  }
  const std::string what = known ? "this program trains variant " + variant + " with other schedules" : "no such pair";
  throw Error("make_model", "'" + pair + "': " + what + "; its pairs are " + detail::model_pair_list() +
                                " (a build holds the pairs of LRT_TOOL_PAIRS; a program adds its own with "
                                "LRT_RUNTIME_MODEL)");
}

std::unique_ptr<Model> open_model(const std::string& path) {
  const std::string file = checkpoint_model_file(path, nullptr);
  CheckpointInfo info;
  {
    const st::Reader r = st::Reader::open(file);
    throw_if_error(read_checkpoint(r, info));
  }
  for (const auto& e : detail::models())
    if (e.structure == info.run.structure && e.schedule == info.run.schedule)
      return e.make(info.config, 0, {}, file, e.pair());
  throw VariantNotBuilt("open_model", "'" + file + "' holds variant " + variant_label(info.run.structure) +
                                          " trained with schedule " + info.run.schedule + "; this program trains " +
                                          detail::model_pair_list() +
                                          " (a build holds the pairs of LRT_TOOL_PAIRS; a program adds its own with "
                                          "LRT_RUNTIME_MODEL)");
}

#if !defined(LRT_RUNTIME_NO_LEAN_VARIANTS)
namespace detail {
/// lrt::LeanVariants, in every table.
static const bool lean_variants_registered = (register_list(LeanVariants{}), true);
}  // namespace detail
#endif

}  // namespace runtime
}  // namespace v0
}  // namespace lrt

#endif  // LRT_RUNTIME_IMPLEMENTATION
