// The device side of lrt-train, lrt-eval and lrt-generate: one model of a (variant, schedule)
// pair on one device, behind the virtual interface tool::Session, so that the tools' bodies
// (runner.hpp, which formats with fmt) are compiled once by the host compiler while the CUDA
// sessions are compiled by nvcc, which cannot take fmt. This header uses no fmt: include
// <lrt/lrt.hpp> (host compiler) or <lrt/cuda.hpp> (nvcc, or the emulator of the tests) first.
//
// The CPU session of a pair is made directly (make_cpu_session); the CUDA sessions register
// themselves in device_registry() from the CUDA registry units (examples/tools/registry.hpp with
// LRT_TOOL_CUDA), which a build links only when it has them (LRT_TOOLS_CUDA, or the emulator
// programs of the tests).
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tool {

/// Where a session runs (--device).
enum class DeviceKind { cpu, cuda };

/// Matmul precision of a session (--precision): fp32 everywhere; tf32 and bf16 only on a GPU,
/// as cuBLAS compute modes over fp32 weights, activations and optimizer state.
enum class Precision { fp32, tf32, bf16 };

inline const char* to_string(DeviceKind d) { return d == DeviceKind::cpu ? "cpu" : "cuda"; }
inline const char* to_string(Precision p) {
  return p == Precision::fp32 ? "fp32" : p == Precision::tf32 ? "tf32" : "bf16";
}

/// Parallel-mode scores: every position by the last pass that computed it, and each pass.
struct Scores {
  lrt::BpbResult merged;
  std::vector<lrt::BpbResult> passes;
};

/// One model on one device, with what the tools do with it: evaluate, train, decode.
class Session {
 public:
  virtual ~Session() = default;
  virtual DeviceKind device() const = 0;
  /// "cpu", or the GPU's name and memory.
  virtual std::string device_name() const = 0;
  virtual const lrt::ModelConfig& config() const = 0;
  virtual lrt::index_t num_params() const = 0;
  virtual lrt::index_t num_matmul_params() const = 0;
  virtual double flops_per_token() const = 0;
  /// The weights of a checkpoint (the same files on every device).
  virtual void load(const lrt::st::Reader& r) = 0;

  // Evaluation (host batches; each device reads them as the CPU does).
  virtual Scores evaluate_parallel(const std::vector<lrt::data::Batch>& batches, const lrt::TokenBytes& token_bytes,
                                   const lrt::ScheduleOptions& o) = 0;
  virtual lrt::BpbResult evaluate_sequential(const std::vector<lrt::data::Batch>& batches,
                                             const lrt::TokenBytes& token_bytes) = 0;
  /// CORE's scorer (lrt::eval::sequential_scorer with the exact recurrence, else
  /// lrt::eval::zero_memory_scorer); on the CPU several threads may call it at once.
  virtual lrt::eval::CoreScorer core_scorer(bool sequential) const = 0;
  virtual std::vector<lrt::BpbResult> evaluate_sequential_by_position(const std::vector<lrt::data::Batch>& batches,
                                                                      const lrt::TokenBytes& token_bytes,
                                                                      lrt::index_t band, lrt::index_t sinks) = 0;

  // Training: start_training() makes the Trainer (it reads `rows` in place: they must outlive it).
  /// Per layer: gamma and the recurrent gate's statistics on rows `inputs` (lrt::memory_statistics).
  virtual std::vector<lrt::LayerMemoryStats> memory_statistics(const lrt::Tensor<lrt::index_t, 2>& inputs) const = 0;

  virtual void start_training(const lrt::data::TokenRows& rows, const lrt::TrainOptions& o,
                              const lrt::data::TextTokenizer& tok, const lrt::ScheduleOptions& so) = 0;
  // Data-parallel training (lrt::Trainer::set_group): before resume() and the first step.
  virtual void set_group(lrt::dist::Group* g, const std::vector<std::pair<std::string, std::string>>& extra) = 0;
  virtual void set_stop_source(const volatile std::sig_atomic_t* flag) = 0;         // lrt::Trainer::set_stop_source
  virtual void set_metadata(const std::string& key, const std::string& value) = 0;  // lrt::Trainer::set_metadata
  virtual lrt::StepStats train_step() = 0;
  virtual double time_step_without_update() = 0;
  virtual std::int64_t step() const = 0;
  virtual std::int64_t horizon() const = 0;
  virtual void set_horizon(std::int64_t n) = 0;
  virtual bool done() const = 0;
  virtual lrt::index_t tokens_per_step() const = 0;
  virtual double forwards_per_step() const = 0;
  virtual lrt::index_t accumulation() const = 0;
  virtual const lrt::TrainOptions& train_options() const = 0;
  virtual lrt::CheckpointLocation resume(const std::string& path) = 0;
  virtual std::string save(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& extra) = 0;

  // Decoding, one row: start_decoding(), prefill(), then sample() and step() per token.
  virtual void start_decoding(lrt::index_t sinks) = 0;
  virtual void prefill(const std::vector<lrt::index_t>& prompt, const lrt::PrefillMode& mode) = 0;
  virtual void step(lrt::index_t token) = 0;
  /// The next token from the last logits, drawn with counter sample_counter(0, position).
  virtual lrt::index_t sample(const lrt::SamplerOptions& o) = 0;
  virtual lrt::index_t position() const = 0;
};

/// A Session of Model<V, float, D> trained with schedule Sched.
template <class V, class Sched, lrt::Device D>
class SessionOf final : public Session {
 public:
  using model_type = lrt::Model<V, float, D>;
  SessionOf(const lrt::ModelConfig& cfg, std::uint64_t seed, DeviceKind kind, std::string name)
      : model_(cfg, seed), kind_(kind), name_(std::move(name)) {}

  DeviceKind device() const override { return kind_; }
  std::string device_name() const override { return name_; }
  const lrt::ModelConfig& config() const override { return model_.config(); }
  lrt::index_t num_params() const override { return model_.num_params(); }
  lrt::index_t num_matmul_params() const override { return model_.num_matmul_params(); }
  double flops_per_token() const override { return model_.flops_per_token(); }
  /// The weights of r (int8 ones dequantized); on the CPU the packed matrices of an int8 or bf16
  /// file are kept too, for the lean decoder to read them packed.
  void load(const lrt::st::Reader& r) override {
    lrt::load_weights(model_, r);
    if constexpr (std::is_same_v<D, lrt::cpu::Device>)
      packed_ = lrt::PackedWeights::read(r, lrt::packable_names(model_.weight_table()));
  }

  Scores evaluate_parallel(const std::vector<lrt::data::Batch>& batches, const lrt::TokenBytes& token_bytes,
                           const lrt::ScheduleOptions& o) override {
    auto r = lrt::evaluate_parallel<Sched>(model_, batches, token_bytes, o);
    return {r.merged, std::move(r.passes)};
  }
  lrt::BpbResult evaluate_sequential(const std::vector<lrt::data::Batch>& batches,
                                     const lrt::TokenBytes& token_bytes) override {
    return lrt::evaluate_sequential(model_, batches, token_bytes);
  }
  std::vector<lrt::BpbResult> evaluate_sequential_by_position(const std::vector<lrt::data::Batch>& batches,
                                                              const lrt::TokenBytes& token_bytes, lrt::index_t band,
                                                              lrt::index_t sinks) override {
    return lrt::evaluate_sequential_by_position(model_, batches, token_bytes, band, sinks);
  }

  lrt::eval::CoreScorer core_scorer(bool sequential) const override {
    return sequential ? lrt::eval::sequential_scorer(model_) : lrt::eval::zero_memory_scorer(model_);
  }

  std::vector<lrt::LayerMemoryStats> memory_statistics(const lrt::Tensor<lrt::index_t, 2>& inputs) const override {
    return lrt::memory_statistics(model_, inputs);
  }

  void start_training(const lrt::data::TokenRows& rows, const lrt::TrainOptions& o, const lrt::data::TextTokenizer& tok,
                      const lrt::ScheduleOptions& so) override {
    trainer_ = std::make_unique<lrt::Trainer<V, Sched, float, D>>(model_, rows, o, tok);
    trainer_->schedule_options() = so;
  }
  void set_group(lrt::dist::Group* g, const std::vector<std::pair<std::string, std::string>>& extra) override {
    tr().set_group(g, extra);
  }
  void set_stop_source(const volatile std::sig_atomic_t* flag) override { tr().set_stop_source(flag); }
  void set_metadata(const std::string& key, const std::string& value) override { tr().set_metadata(key, value); }
  lrt::StepStats train_step() override { return tr().train_step(); }
  double time_step_without_update() override { return tr().time_step_without_update(); }
  std::int64_t step() const override { return tr().step(); }
  std::int64_t horizon() const override { return tr().horizon(); }
  void set_horizon(std::int64_t n) override { tr().set_horizon(n); }
  bool done() const override { return tr().done(); }
  lrt::index_t tokens_per_step() const override { return tr().tokens_per_step(); }
  double forwards_per_step() const override { return tr().forwards_per_step(); }
  lrt::index_t accumulation() const override { return tr().accumulation(); }
  const lrt::TrainOptions& train_options() const override { return tr().options(); }
  lrt::CheckpointLocation resume(const std::string& path) override { return tr().resume(path); }
  std::string save(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& extra) override {
    return tr().save(dir, extra);
  }

  /// On the CPU: the lean decoder (its steps give the Decoder's logits bit for bit, with sinks
  /// too); otherwise the Decoder.
  void start_decoding(lrt::index_t sinks) override {
    lean_.reset(), decoder_.reset();
    if constexpr (std::is_same_v<D, lrt::cpu::Device>) {
      lean_.emplace(lrt::lean_weights(model_, &packed_), lean_options(sinks, -1));
      return;
    }
    decoder_.emplace(model_, 1, 0, sinks);
  }
  void prefill(const std::vector<lrt::index_t>& prompt, const lrt::PrefillMode& mode) override {
    if constexpr (std::is_same_v<D, lrt::cpu::Device>) {
      if (lean_) {
        const auto P = static_cast<lrt::index_t>(prompt.size());
        if (mode.kind != lrt::PrefillMode::Kind::Exact && P > lean_->max_prompt())  // a workspace for this prompt
          lean_.emplace(lrt::lean_weights(model_, &packed_), lean_options(lean_->sinks(), P));
        lean_->prefill(prompt, mode);
        return;
      }
    }
    lrt::check(!mode.parallel_passes(), "generate", "prefill ", mode.name(),
               " runs on the lean CPU decoder: use --device cpu");
    dec().prefill(prompt, mode);
  }
  void step(lrt::index_t token) override {
    if (lean_)
      lean_->step(token);
    else
      dec().step(std::span<const lrt::index_t>(&token, 1));
  }
  lrt::index_t sample(const lrt::SamplerOptions& o) override {
    const lrt::index_t vocab = model_.config().vocab_size;
    if (lean_) return lrt::sample_token<float>(lean_->logits(), o, lrt::sample_counter(0, lean_->position()));
    const std::uint64_t counter = lrt::sample_counter(0, dec().position());
    if constexpr (D::host_accessible) {  // the logits in place: no copy, nothing allocated per token
      return lrt::sample_token<float>(std::span<const float>(dec().logits().data(), static_cast<std::size_t>(vocab)), o,
                                      counter);
    } else {  // drawn on the device (lrt::sample_tokens): only the chosen id comes back
      return lrt::sample_tokens(dec().logits(), vocab, o, std::span<const std::uint64_t>(&counter, 1))[0];
    }
  }
  lrt::index_t position() const override { return lean_ ? lean_->position() : decoder_ ? decoder_->position() : 0; }

 private:
  /// The lean decoder's options: `sinks`, and a workspace for prompts of max_prompt tokens (-1: sequence_len).
  static typename lrt::LeanDecoder<V, float>::Options lean_options(lrt::index_t sinks, lrt::index_t max_prompt) {
    typename lrt::LeanDecoder<V, float>::Options o;
    o.max_prompt = max_prompt, o.sinks = sinks;
    return o;
  }
  lrt::Trainer<V, Sched, float, D>& tr() const {
    lrt::check(trainer_ != nullptr, "session", "start_training() first");
    return *trainer_;
  }
  lrt::Decoder<V, float, D>& dec() {
    lrt::check(decoder_.has_value(), "session", "start_decoding() first");
    return *decoder_;
  }

  model_type model_;
  DeviceKind kind_;
  std::string name_;
  std::unique_ptr<lrt::Trainer<V, Sched, float, D>> trainer_;
  std::optional<lrt::Decoder<V, float, D>> decoder_;
  std::optional<lrt::LeanDecoder<V, float>> lean_;  // the CPU's decoder (start_decoding)
  lrt::PackedWeights packed_;                       // an int8 or bf16 file's matrices, for lean_
};

/// Makes a session of one registered pair on a device other than the CPU at a matmul precision.
using SessionFactory = std::unique_ptr<Session> (*)(const lrt::ModelConfig& cfg, std::uint64_t seed,
                                                    Precision precision);

/// A pair a device build holds: its structure and schedule (as the CPU registry names them) and
/// its factory.
struct DeviceEntry {
  DeviceKind device;
  lrt::VariantStructure structure;
  std::string schedule;
  SessionFactory make;
  std::string (*unavailable)();  // why the device cannot be used here ("" when it can)
};

/// The device sessions linked into this program (empty in a CPU-only build). LRT_API: one per
/// process (the CPU sessions are in the runtime library, whose inline code is local).
LRT_API inline std::vector<DeviceEntry>& device_registry() {
  static std::vector<DeviceEntry> r;
  return r;
}

/// The CPU session of (V, Sched).
template <class V, class Sched>
std::unique_ptr<Session> make_cpu_session(const lrt::ModelConfig& cfg, std::uint64_t seed) {
  return std::make_unique<SessionOf<V, Sched, lrt::cpu::Device>>(cfg, seed, DeviceKind::cpu, "cpu");
}

}  // namespace tool
