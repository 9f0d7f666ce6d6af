// lrt/runtime/training_impl.hpp: the models behind lrt/runtime/training.hpp. ModelOf<V, Sched> is
// lrt::Model<V, float> trained with lrt::Trainer<V, Sched>; ModelRegistration<V, Sched> adds the
// pair to the program's table (LRT_RUNTIME_MODEL(NAME, V, Sched) at namespace scope, in a unit it
// links). lrt's own build registers its pairs from the registry's units (examples/tools/registry.hpp),
// so each pair's trainer is compiled once, beside the tools' session of the same pair. The table
// itself (make_model, open_model, model_pairs) is compiled by the unit that defines
// LRT_RUNTIME_IMPLEMENTATION (include/lrt/runtime/runtime.cpp).
#pragma once

#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../data/loader.hpp"
#include "../data/text_tokenizer.hpp"
#include "../eval/core.hpp"
#include "../eval/score.hpp"
#include "../io/safetensors.hpp"
#include "../model/checkpoint.hpp"
#include "../model/checkpoint_file.hpp"
#include "../model/training_schedule.hpp"
#include "../train/eval.hpp"
#include "../train/trainer.hpp"
#include "training.hpp"

namespace lrt {
inline namespace v0 {
namespace runtime {

namespace detail {
/// The documents lrt's data layer reads, from a program's texts.
inline std::vector<data::Document> documents(std::span<const std::string> texts) {
  std::vector<data::Document> docs;
  docs.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) docs.push_back({"text " + std::to_string(i), texts[i]});
  return docs;
}
inline Score score(const BpbResult& r) { return {r.nats, r.bytes, r.tokens}; }
}  // namespace detail

template <class V, class Sched>
class ModelOf;

/// lrt::Trainer<V, Sched> over a ModelOf's model and the rows of its texts.
template <class V, class Sched>
class TrainingOf final : public Training {
 public:
  TrainingOf(ModelOf<V, Sched>& m, std::span<const std::string> texts, const TrainOptions& o)
      : rows_(rows_of(m, texts, o)), trainer_(m.model_, rows_, o, m.tok_) {
    trainer_.schedule_options() = m.options_;
  }

  StepReport step() override {
    check(!trainer_.done(), "step", "the run is at its horizon, ", trainer_.step(), " of ", trainer_.horizon(),
          " steps (TrainOptions::steps): nothing is left to train");
    const StepStats s = trainer_.train_step();
    return {s.step, s.loss, s.lr_multiplier, s.seconds, s.optimizer_seconds};
  }
  std::int64_t steps_done() const override { return trainer_.step(); }
  std::int64_t horizon() const override { return trainer_.horizon(); }
  index_t tokens_per_step() const override { return trainer_.tokens_per_step(); }
  std::string save(const std::string& dir) override { return trainer_.save(dir); }
  void resume(const std::string& path) override { (void)trainer_.resume(path); }

 private:
  /// The texts' rows of sequence_len + 1 tokens, after the checks that need no rows.
  static data::TokenRows rows_of(const ModelOf<V, Sched>& m, std::span<const std::string> texts,
                                 const TrainOptions& o) {
    check(o.steps >= 1, "train", "TrainOptions::steps (the horizon) must be >= 1, got ", o.steps);
    check(!texts.empty(), "train", "no text to train on");
    return data::TokenRows::build(detail::documents(texts), static_cast<int>(m.config().sequence_len), m.tok_);
  }

  data::TokenRows rows_;  // read in place by the trainer: declared first, destroyed last
  Trainer<V, Sched> trainer_;
};

/// Model<V, float> with the pair's schedule and its tokenizer.
template <class V, class Sched>
class ModelOf final : public Model {
 public:
  ModelOf(const ModelConfig& c, std::uint64_t seed, data::TextTokenizer tok, std::string name)
      : model_(c, seed), tok_(std::move(tok)), name_(std::move(name)) {}

  const ModelConfig& config() const override { return model_.config(); }
  VariantStructure structure() const override { return structure_of<V>(); }
  std::string pair() const override { return name_; }
  std::string schedule() const override { return schedule_spec<Sched>(); }
  index_t num_params() const override { return model_.num_params(); }
  double flops_per_token() const override { return model_.flops_per_token(); }
  double pass_factor() const override { return lrt::pass_factor<Sched, V>(); }

  std::unique_ptr<Training> train(std::span<const std::string> texts, const TrainOptions& o) override {
    return std::make_unique<TrainingOf<V, Sched>>(*this, texts, o);
  }
  Score evaluate(std::span<const std::string> texts, Evaluation how, index_t batch_rows) const override {
    check(batch_rows >= 1, "evaluate", "batch_rows must be >= 1, got ", batch_rows);
    check(!texts.empty(), "evaluate", "no text to score");
    const auto batches = data::scoring_batches(detail::documents(texts), static_cast<int>(config().sequence_len),
                                               static_cast<int>(batch_rows), std::numeric_limits<index_t>::max(), tok_);
    const TokenBytes bytes = tok_.token_bytes_table(config().vocab_size);
    if (how == Evaluation::sequential) return detail::score(evaluate_sequential(model_, batches, bytes));
    return detail::score(evaluate_parallel<Sched>(model_, batches, bytes, options_).merged);
  }
  CoreScore core(const std::string& bundle, Evaluation how, index_t max_per_task) const override {
    const eval::CoreBundle b = eval::CoreBundle::open(bundle);
    eval::CoreOptions o;
    o.max_per_task = max_per_task;
    const eval::CoreReport r = eval::evaluate_core(
        b, o, tok_, how == Evaluation::sequential ? eval::sequential_scorer(model_) : eval::zero_memory_scorer(model_));
    CoreScore out;
    out.core = r.core_metric;
    for (const auto& t : r.tasks) out.tasks.push_back({t.task.label, t.examples, t.accuracy, t.centered, t.seconds});
    return out;
  }
  void save(const std::string& file) const override {
    auto meta = tok_.metadata();
    meta.emplace_back("schedule", schedule_spec<Sched>());
    save_model(model_, file, 0, meta, st::DType::F32, options_);
  }

  /// A new model (config c, seed), or (checkpoint not empty) the model of that checkpoint file:
  /// its config, weights and tokenizer. `name`: the pair's name in the table.
  static std::unique_ptr<Model> make(const ModelConfig& c, std::uint64_t seed, const std::string& tokenizer,
                                     const std::string& checkpoint, const std::string& name) {
    if (checkpoint.empty()) {
      data::TextTokenizer tok = tokenizer.empty() ? data::TextTokenizer{} : data::TextTokenizer::load(tokenizer);
      check(tok.vocab_size() <= c.vocab_size, "make_model", "the tokenizer '", tokenizer, "' has ", tok.vocab_size(),
            " tokens; the config's vocab_size is ", c.vocab_size);
      return std::make_unique<ModelOf>(c, seed, std::move(tok), name);
    }
    const st::Reader r = st::Reader::open(checkpoint);
    const CheckpointInfo info = read_checkpoint(r);
    auto m = std::make_unique<ModelOf>(info.config, 0, data::TextTokenizer(info.bpe), name);
    load_weights(m->model_, r);
    m->options_ = info.run.options;  // how it was trained: kv_refresh, MultiRefine's detach and loss weights
    return m;
  }

 private:
  friend class TrainingOf<V, Sched>;
  lrt::Model<V, float> model_;
  data::TextTokenizer tok_;
  std::string name_;
  ScheduleOptions options_;  // the schedule's options (a checkpoint's; default for a new model)
};

/// Registers the pair (V, Sched) under `name` (its --variant name) when constructed.
template <class V, class Sched>
struct ModelRegistration {
  explicit ModelRegistration(const std::string& name) {
    detail::register_model(name, schedule_spec<Sched>(), structure_of<V>(), &ModelOf<V, Sched>::make);
  }
};

#define LRT_RUNTIME_MODEL_CAT_(a, b) a##b
#define LRT_RUNTIME_MODEL_CAT(a, b) LRT_RUNTIME_MODEL_CAT_(a, b)
/// Adds the pair (variant type, schedule type) to the program's model table under NAME (at
/// namespace scope, in a unit it links): LRT_RUNTIME_MODEL("mine", MyVariant, lrt::Interleaved<2>).
#define LRT_RUNTIME_MODEL(NAME, ...)                                                                                   \
  static const ::lrt::runtime::ModelRegistration<__VA_ARGS__> LRT_RUNTIME_MODEL_CAT(lrt_runtime_model_, __COUNTER__) { \
    NAME                                                                                                               \
  }

}  // namespace runtime
}  // namespace v0
}  // namespace lrt
