// lrt/runtime/training.hpp: a model of any (variant, schedule) pair a program was built with,
// behind runtime types: made from a config and the pair's name, or opened from a checkpoint;
// trained, evaluated and saved. This header is light (the standard library and lrt's config,
// status, variant structure and training options: no Eigen, fmt, model, autodiff or kernel
// header); the pairs are compiled once, where the program's registry is (the pair files of
// examples/tools/registry/, LRT_TOOL_PAIRS), and found by name through one table.
//
//   lrt::ModelConfig cfg = lrt::preset("tiny");
//   std::unique_ptr<lrt::runtime::Model> m = lrt::runtime::make_model("lrt", cfg, /*seed=*/1);
//   lrt::TrainOptions o;
//   o.batch_rows = 8, o.steps = 40;
//   std::unique_ptr<lrt::runtime::Training> t = m->train(texts, o);  // texts: documents
//   while (!t->done()) t->step();
//   t->save("runs/mine");                      // a checkpoint folder every program reads
//   double bpb = m->evaluate(texts, lrt::runtime::Evaluation::parallel).bits_per_byte();
//   double core = m->core("core-bundle", lrt::runtime::Evaluation::sequential).core;
//
// A pair is named as the programs name it: the --variant name alone for the variant's natural
// schedule (standard without memory, interleaved:2 with), else "variant:schedule" ("lrt:chunked:2").
// The model is trained with lrt::Trainer<V, Sched> and evaluated with lrt::evaluate_parallel<Sched>
// and lrt::evaluate_sequential: the same bits as the templates. Errors are lrt::Error.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../core/status.hpp"
#include "../model/config.hpp"
#include "../model/variant_structure.hpp"
#include "../train/options.hpp"
#include "decoding.hpp"  // VariantNotBuilt

namespace lrt {
inline namespace v0 {
namespace runtime {

/// How a text is scored: every position in the passes of the pair's schedule, each by the last
/// pass that computed it (parallel, as in training), or token by token with the exact recurrence
/// (sequential, as in decoding).
enum class Evaluation { parallel, sequential };

/// A score: the nats of the scored tokens and the bytes of text they stand for.
struct LRT_API Score {
  double nats = 0;
  index_t bytes = 0;
  index_t tokens = 0;
  double bits_per_byte() const noexcept;
  double loss() const noexcept;  // nats per token
};

/// CORE (DCLM's in-context tasks, lrt::eval::evaluate_core) on a bundle: per task, and the mean
/// centered accuracy.
struct CoreTaskScore {
  std::string label;
  index_t examples = 0;
  double accuracy = 0, centered = 0, seconds = 0;
};
struct CoreScore {
  std::vector<CoreTaskScore> tasks;
  double core = 0;
};

/// One optimizer step (lrt::Trainer::train_step).
struct StepReport {
  std::int64_t step = 0;  // its index, from 0
  double loss = 0;        // the mean training loss of its micro-batches
  double lr_multiplier = 0;
  double seconds = 0;            // the whole step
  double optimizer_seconds = 0;  // of which the optimizers
};

class Training;

/// One model of a pair on the CPU, in fp32, with its tokenizer (bytes, or a checkpoint's BPE).
class LRT_API Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual VariantStructure structure() const = 0;
  /// The pair's name ("lrt", "lrt:chunked:2") and schedule ("interleaved:2").
  virtual std::string pair() const = 0;
  virtual std::string schedule() const = 0;
  virtual index_t num_params() const = 0;
  /// Forward FLOPs per token of one pass (the schedule's passes multiply it).
  virtual double flops_per_token() const = 0;
  /// Forwards per training token of the schedule (lrt::pass_factor).
  virtual double pass_factor() const = 0;

  /// Trains this model in place on `texts` (documents: each is BOS and its tokens, cut into rows of
  /// sequence_len + 1 as lrt::data::TokenRows does), with lrt::Trainer. The model must outlive the
  /// training, and `options.steps` must be set. Errors: lrt::Error (too little text for one batch, ...).
  virtual std::unique_ptr<Training> train(std::span<const std::string> texts, const TrainOptions& options) = 0;
  /// Scores every token of `texts` once (lrt::data::scoring_batches: rows of sequence_len, `batch_rows`
  /// per batch).
  virtual Score evaluate(std::span<const std::string> texts, Evaluation how, index_t batch_rows = 8) const = 0;
  /// CORE on the bundle in folder `bundle` (lrt-eval --core's): each example's options scored with
  /// the memory at zero (parallel, the release's evaluation) or with the exact recurrence
  /// (sequential); `max_per_task` > 0 takes that many items per task. The examples run on the
  /// thread pool. Errors: lrt::Error (a bundle that cannot be read).
  virtual CoreScore core(const std::string& bundle, Evaluation how, index_t max_per_task = -1) const = 0;
  /// Writes the weights as a checkpoint file (model.safetensors) that open_model and open_decoding
  /// read; a Training's save writes a whole checkpoint folder instead.
  virtual void save(const std::string& file) const = 0;
};

/// A model being trained (lrt::Trainer): steps, save and resume.
class LRT_API Training {
 public:
  virtual ~Training() = default;
  /// One optimizer step. Errors: lrt::Error (a non-finite loss, ...).
  virtual StepReport step() = 0;
  /// Steps taken, and the horizon (TrainOptions::steps) the schedules run to.
  virtual std::int64_t steps_done() const = 0;
  virtual std::int64_t horizon() const = 0;
  bool done() const { return steps_done() >= horizon(); }
  /// Tokens per optimizer step (batch_rows * sequence_len).
  virtual index_t tokens_per_step() const = 0;
  /// Saves a checkpoint (weights, optimizer and data state) in `dir`/step-N and points `dir`/latest
  /// at it; returns its folder. lrt-train --resume, lrt-eval and lrt-generate read it.
  virtual std::string save(const std::string& dir) = 0;
  /// Continues from a checkpoint folder this pair saved (or a run folder: its latest): the weights,
  /// the optimizers and the data order, so that the next steps are the bits of an unbroken run.
  virtual void resume(const std::string& path) = 0;
};

/// A new model of the pair `pair` with `config`'s sizes, initialised from `seed` (as
/// lrt::Model<V>(config, seed)); `tokenizer`: a BPE tokenizer file (its vocabulary must be
/// config.vocab_size), empty for bytes. Errors: lrt::Error (an unknown pair name: the message
/// lists this program's; a bad config).
LRT_API std::unique_ptr<Model> make_model(const std::string& pair, const ModelConfig& config, std::uint64_t seed = 1,
                                          const std::string& tokenizer = {});
/// The model of a checkpoint (a file, or a folder as checkpoint_model_file resolves it): its pair
/// from what the checkpoint records, its weights and tokenizer. Errors: lrt::Error (what every
/// program's loader refuses; a pair this program was not built with: VariantNotBuilt).
LRT_API std::unique_ptr<Model> open_model(const std::string& path);
/// The pairs this program trains, in the order they were registered ("baseline", "lrt", ...).
LRT_API std::vector<std::string> model_pairs();

namespace detail {
/// Makes a pair's model (training_impl.hpp's ModelOf<V, Sched>): from a config and a seed, or (with
/// `checkpoint` not empty) the weights of that checkpoint file.
using ModelFactory = std::unique_ptr<Model> (*)(const ModelConfig& config, std::uint64_t seed,
                                                const std::string& tokenizer, const std::string& checkpoint,
                                                const std::string& pair);
/// Adds a pair to the table: its variant's --variant name, `schedule` (schedule_spec's spelling)
/// and structure; a second registration of the same structure and schedule is ignored.
LRT_API void register_model(const std::string& name, const std::string& schedule, const VariantStructure& structure,
                            ModelFactory make);
}  // namespace detail

}  // namespace runtime
}  // namespace v0
}  // namespace lrt
