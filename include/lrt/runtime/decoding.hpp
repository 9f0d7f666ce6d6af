// lrt/runtime/decoding.hpp: decoding a checkpoint of any variant a program was built with, behind
// one type. This header is light (the standard library and lrt's config, status and variant
// structure: no Eigen, fmt, model, autodiff or kernel header); the decoders are compiled once, in
// the runtime library (include/lrt/runtime/runtime.cpp), and found by the structure a checkpoint
// records, through one table. The build's (variant, schedule) pairs (LRT_TOOL_PAIRS,
// examples/tools/registry/) fill the table with their variants; a runtime compiled without them
// decodes lrt::LeanVariants (baseline, lrt, lrt-release).
//
//   lrt::runtime::DecodingModel m = lrt::runtime::open_decoding("runs/tiny", {.rows = 4});
//   lrt::index_t row = m.decoding->join(prompt);      // prompt: token ids, BOS first
//   m.decoding->step({&row, 1}, {&token, 1});         // feeds one token to each named row
//   std::span<const float> next = m.decoding->logits(row);
//   m.decoding->leave(row);
//
// Rows are the lean decoder's (decode/lean.hpp: exact prefill, batch-invariant products): a row's
// logits are the bits lrt-generate computes for the same tokens, whatever rows step beside it.
// Errors are lrt::Error (the try_ methods of a Decoding return them as an lrt::Status instead).
//
// A program that includes the templates too and defines a variant of its own registers it with
// LRT_RUNTIME_DECODING(V) (lrt/runtime/decoding_impl.hpp) in one of its units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../core/status.hpp"
#include "../model/config.hpp"
#include "../model/variant_structure.hpp"

namespace lrt {
inline namespace v0 {
namespace st {
class Reader;
}
namespace tok {
class Tokenizer;
}

namespace runtime {

/// How a Decoding is laid out.
struct DecodingOptions {
  /// The most rows decoded at once; each has its own KV window and memory ring.
  index_t rows = 1;
  /// Positions per row: 0, unbounded (the cache is a window over the newest positions); > 0, at
  /// most that many (a state error past it) with a cache no larger than they need; -1, the
  /// checkpoint's sequence_len.
  index_t capacity = 0;
};

/// Rows decoded by the lean decoder compiled for one variant, behind a variant-free interface.
class LRT_API Decoding {
 public:
  virtual ~Decoding() = default;
  virtual const ModelConfig& config() const = 0;
  /// The structure of the variant whose decoder this is.
  virtual VariantStructure structure() const = 0;
  /// The rows this decoding holds (DecodingOptions::rows).
  virtual index_t rows() const = 0;

  /// Feeds `prompt` (token ids, BOS first) to a free row (exact prefill); `row` is set on success.
  virtual Status try_join(std::span<const index_t> prompt, index_t& row) = 0;
  /// Feeds tokens[i] to row rows[i] (distinct rows in use), in one forward of all of them.
  virtual Status try_step(std::span<const index_t> rows, std::span<const index_t> tokens) = 0;
  /// Frees a row in use.
  virtual Status try_leave(index_t row) = 0;
  /// The next-token logits of a row in use (valid until its next step).
  virtual std::span<const float> logits(index_t row) const = 0;
  /// The positions a row has been fed (its prompt and steps).
  virtual index_t position(index_t row) const = 0;

  // A row's state position by position (LeanDecoder::try_save_position, try_join_state): what a
  // prompt cache keeps. A row joined from the states of positions 0..n-1 and their tokens continues
  // with the bits of the row they were read from.
  /// The floats one position's state takes: its key and value in every layer, and its source state
  /// where the variant has memory.
  virtual index_t position_state_size() const = 0;
  /// Copies the state of a row's newest position (position(row) - 1) into `out`.
  virtual Status try_save_position(index_t row, std::span<float> out) const = 0;
  /// Takes a free row at position tokens.size() (>= 1) from `states`, one pointer per position to
  /// its position_state_size() floats; `row` is set on success. The row's logits are unset until
  /// its first step.
  virtual Status try_join_state(std::span<const index_t> tokens, std::span<const float* const> states,
                                index_t& row) = 0;

  /// try_join, try_step and try_leave with their errors thrown (lrt::Error).
  index_t join(std::span<const index_t> prompt) {
    index_t row = -1;
    throw_if_error(try_join(prompt, row));
    return row;
  }
  void step(std::span<const index_t> rows, std::span<const index_t> tokens) { throw_if_error(try_step(rows, tokens)); }
  void leave(index_t row) { throw_if_error(try_leave(row)); }
};

/// A checkpoint opened for decoding: its decoder and what it records.
struct DecodingModel {
  std::unique_ptr<Decoding> decoding;
  ModelConfig config;
  VariantStructure structure;
  std::string variant;                        // the variant's name in the table: lrt, kv, lrt-src1, ...
  std::string format;                         // how the weights are stored: f32, int8 or bf16
  std::shared_ptr<const tok::Tokenizer> bpe;  // the recorded BPE tokenizer; nullptr: bytes
  std::int64_t step = 0;                      // the training step it was saved at
};

/// The error of a checkpoint whose variant this program was not built with: its message names the
/// variants it was, and how to build another.
class LRT_API VariantNotBuilt : public Error {
 public:
  using Error::Error;
};

/// Maps `path` (a checkpoint file, or a folder: checkpoint_model_file's model file), reads it
/// with the checks of every program (lrt::read_checkpoint) and lays out a decoder of the variant it
/// records, from this program's table. The weights are read where they lie in the mapped file (the
/// model holds the mapping). Errors: lrt::Error (a file that cannot be read or holds no valid
/// checkpoint; bad options), VariantNotBuilt.
LRT_API DecodingModel open_decoding(const std::string& path, const DecodingOptions& options = {});

/// The model file a path names: a file as it is; a run folder lrt-train wrote, the model of its
/// latest complete checkpoint (what --resume finds: DIR/latest, else the newest step folder; a
/// fallback is described in `note`, if given). Errors: lrt::Error (no complete checkpoint).
LRT_API std::string checkpoint_model_file(const std::string& path, std::string* note = nullptr);

/// The path the CPU's matrix products run on in this process (lrt::cpu::gemm_library()): "OpenBLAS",
/// "lrt AVX-512 (...)", ...: what a benchmark says it measured.
LRT_API std::string products();

/// The variants this program decodes, in the order they were registered.
LRT_API std::vector<VariantStructure> decoding_variants();
/// Their names for messages (the pairs' --variant names): "baseline, lrt, kv and lrt-src2".
LRT_API std::string decoding_variant_names();

namespace detail {
/// Makes V's decoding of a mapped checkpoint (decoding_impl.hpp's make_decoding<V>).
using DecodingFactory = Status (*)(std::shared_ptr<const st::Reader> file, const ModelConfig& config,
                                   const DecodingOptions& options, std::unique_ptr<Decoding>& out);
/// Adds a variant to the table under `name` (its pair's --variant name; empty: variant_name()); a
/// second registration of a structure is ignored.
LRT_API void register_decoding(const VariantStructure& structure, DecodingFactory make, const std::string& name = {});
}  // namespace detail

}  // namespace runtime
}  // namespace v0
}  // namespace lrt
