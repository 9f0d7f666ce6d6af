// lrt/decode/lean.hpp: LeanDecoder<V, T>, KV-cache decoding on the CPU that calls the kernels
// directly: no autodiff graph, no std::function per layer, nothing allocated after construction.
// Everything it works with (each row's KV cache with each layer's window and its memory ring, the
// scratch of a step and of a whole-prompt pass, the RoPE rows, its per-layer tables) is laid out
// once, at construction, in one buffer: one allocation, or none in the caller's arena
// (Options::arena, sized by required_bytes()). It reads the weights through views (LeanWeights:
// from a Model with lean_weights(), decode/lean_model.hpp; from a checkpoint's bytes with
// lean_file_weights(), decode/lean_file.hpp; or from any memory the caller keeps alive). A matrix
// it multiplies by may be packed, int8 with per-group scales or bf16 (io/quantize.hpp): those
// products run in cpu/packed_matvec.hpp and match the float values' within rounding.
//
// Rows (Options::rows, 1 by default): requests that come and go. join(prompt, mode) takes a free
// row and feeds it the prompt, step(rows, tokens) feeds any rows in use one token each in one
// forward, leave(row) frees a row; each row has its own position, cache and memory ring, and
// prefill() / step(token) are row 0's. A step's products give every row the arithmetic it gets
// alone (cpu::rowwise_product for float weights, the packed products of several rows): the
// products are the only operations that mix rows (the norms, RoPE, elementwise ops and each row's
// attention are per row), so a row's logits are the bits a one-row decoder gives it, whatever
// runs beside it (tests/unit/decode/test_lean_rows.cpp); and the weights are read once per step
// for all its rows. Rows that decode without memory (zero prefill) run as a forward of their own.
// Options::batch_invariant = false takes the batched BLAS products instead (their rounding
// depends on the batch).
//
// Same results as Decoder (decode/decoder.hpp): a step runs model_forward (model/block.hpp), the
// function Model::forward runs on the tape, for one token through the same kernels (lrt::gemm's
// single-row product, the RMSNorm and RoPE kernels, the attention kernel's softmax row, the
// expressions of the elementwise ops), so that its logits equal the Decoder's bit for bit in fp32 and fp64, for every
// variant (tests/unit/decode/test_lean.cpp); exact prefill is one step per prompt token. The cache is the Decoder's
// too: layer l keeps window(l) + 1 keys in 2 (window(l) + 1) slots (or the capacity) and moves the newest window to the
// front when it reaches the end, so rows run past the training context. Shared with Decoder: the block's forward
// (model/block.hpp: model_forward run by DirectExec below; Decoder runs it on the tape), the cache geometry and its two
// copies (a step's slide, a prompt's load), the memory ring's slots, the prompt and step checks
// (decode/decode_state.hpp), and the pass plan: the interleaved subsets, the memory's BOS cut and the pass loop
// (model/training_schedules/pass_plan.hpp, which training runs too), and attention sinks (Options::sinks: the
// Decoder's, bit for bit, tests/unit/decode/test_past_context.cpp). Decoder's alone: ragged batches of the autodiff
// model (its rows agree with a row alone within rounding: the BLAS products of several rows), devices
// other than the CPU and CUDA graphs.
//
// Whole-prompt passes (prefill modes zero, interleaved:S, fixed-point, approximate:TOL) run the
// same model_forward on n positions at once (matrix products of n rows, the attention kernel with
// subset queries) in a workspace that holds the prompt's K/V and source states, up to
// `max_prompt` positions, then load the window each layer needs into the cache:
//   zero          one zero-memory pass; decoding goes on without memory (the Decoder's zero mode)
//   interleaved:S pass 0 + the S subset passes of the Interleaved<S> schedule (interleaved_prefill)
//   fixed-point   the exact recurrence m~_p = s_{p-k} solved by passes: pass 0 reads zero memory,
//                 pass j the source states of pass j - 1, recomputing only the positions at or past
//                 the exact frontier F. Positions below k read no state, so F = k after pass 0; a
//                 pass that leaves the states of positions < q unchanged bit for bit fixes every
//                 position < q + k (their inputs no longer change), so F = q + k >= F + k. It stops
//                 when F reaches P or a pass changes no state: at most ceil(P / k) passes.
//   approximate:TOL  the same passes, but a state that moved by at most TOL counts as settled: the
//                 frontier becomes (the first state that moved by more) + k, and the passes stop
//                 when none did. Approximate: each pass may leave errors of about TOL behind.
// These differ from exact prefill only by rounding (products of n rows round differently from n
// products of one row): within 1e-5 on the tests' models.
//
// Errors: the constructor, prefill() and step() throw lrt::Error. Their checks are also offered as
// values: validate() (the weights and options), create() (a decoder or a Status), try_prefill()
// and try_step() check everything they are given and return a Status instead, so that a build
// without exceptions (core/error.hpp) reaches the error handler only on an internal inconsistency.
// Shapes: d width, H heads, Hkv KV heads, Dh head dim, D = Hkv Dh, V vocabulary, Vp padded, P prompt.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../backend/cpu/attention.hpp"
#include "../backend/cpu/gemm.hpp"
#include "../backend/cpu/nn.hpp"
#include "../backend/cpu/packed_matvec.hpp"
#include "../backend/rope_table.hpp"
#include "../core/status.hpp"
#include "../io/quantize.hpp"
#include "../model/config.hpp"
#include "../model/block.hpp"
#include "../model/logits.hpp"
#include "../model/variant.hpp"
#include "../model/weight_table.hpp"
#include "decode_state.hpp"
#include "prefill_mode.hpp"

namespace lrt {
inline namespace v0 {

/// A weight matrix (rows, cols), row-major and contiguous, read-only; a plain handle (assigning
/// one rebinds it; nothing is copied). Its values are in `data` (T), or packed (io/quantize.hpp):
/// int8 in `q` with `scales` per `group` values of a row, or bf16 bits in `bf16`. Empty: none set.
template <class T>
struct LeanMatrix {
  const T* data = nullptr;
  index_t rows = 0, cols = 0;
  const std::int8_t* q = nullptr;
  const float* scales = nullptr;  // (rows, ceil(cols / group))
  index_t group = 0;
  const std::uint16_t* bf16 = nullptr;
  TensorView<const T, 2> view() const noexcept { return {data, Shape<2>{rows, cols}}; }
  bool empty() const noexcept { return data == nullptr && q == nullptr && bf16 == nullptr; }
  WeightFormat format() const noexcept {
    return q ? WeightFormat::Int8 : bf16 ? WeightFormat::BF16 : WeightFormat::F32;
  }
};

/// One block's weights (spec §2.2-2.3, §3.2), as Model::Block names them; empty views where the
/// variant or layer has none.
template <class T>
struct LeanLayerWeights {
  LeanMatrix<T> c_q, c_k, c_v, c_proj, c_fc, mlp_proj;
  LeanMatrix<T> ve_gate;         // None/Residual, value-embedding layers: (Hkv, c)
  LeanMatrix<T> triple_gate;     // KV/Both: (3 Hkv, c), rows local, rec, ve
  LeanMatrix<T> value_embed;     // (Vp, D) on value-embedding layers (every layer for KV/Both)
  LeanMatrix<T> proj_k, proj_v;  // KV/Both with Layerwise projections: (D, d)
};

/// A model's weights as views (the memory belongs to the caller and must outlive the decoder).
template <class T>
struct LeanWeights {
  ModelConfig config;  // the model's (validated; KV/Both: value embeddings on every layer)
  LeanMatrix<T> wte, lm_head;
  LeanMatrix<T> proj_k, proj_v;  // KV/Both with Shared projections: (D, d)
  const T* resid_lambdas = nullptr;
  const T* x0_lambdas = nullptr;
  const T* gamma = nullptr;  // Residual/Both: (L)
  std::vector<LeanLayerWeights<T>> layers;
  /// Tensors of the parameter table outside these fields (a variant's own, WeightSlot::other):
  /// checked, and read by the block where a variant wires them in (model/block.hpp). A vector of
  /// n values is an (n, 1) matrix.
  struct Other {
    std::string name;
    LeanMatrix<T> m;
  };
  std::vector<Other> other;
};

/// What the last prefill did: passes over the prompt (exact: 0) and positions computed in them.
struct PrefillStats {
  index_t passes = 0;
  index_t positions = 0;
  bool converged = false;  // fixed-point / approximate: stopped by the rule (not by running out)
};

/// Decodes rows of a V model in T (float or double) on the CPU; see the top of this file.
template <class V, class T = float>
class LeanDecoder {
  static_assert(std::is_floating_point_v<T>, "LeanDecoder<V, T>: T is float or double");

 public:
  struct Options {
    /// 0: positions unbounded (the cache is a window over the newest ones); > 0: at most that
    /// many positions (an lrt::Error past it), with a cache no larger than needed for them.
    index_t capacity = 0;
    /// The longest prompt the whole-prompt prefill modes take (their workspace is laid out for
    /// it); -1: the config's sequence_len; 0: exact prefill only (the smallest layout).
    index_t max_prompt = -1;
    /// Memory for the decoder's state (any alignment, at least required_bytes() bytes, alive and
    /// untouched while the decoder is), or null: the decoder allocates it, once.
    void* arena = nullptr;
    std::size_t arena_bytes = 0;
    /// The most rows decoded at once (join(), step(rows, tokens)); each has its own cache and
    /// memory ring in the state. 1: one row, through prefill() and step(token).
    index_t rows = 1;
    /// true: a step's fp32 products give every row the arithmetic of a single-row step
    /// (cpu::rowwise_product), so a row's logits do not depend on the rows beside it; false: the
    /// batched BLAS product (lrt::gemm), whose rounding depends on how many rows a step has.
    /// Packed (int8, bf16) products are per row either way.
    bool batch_invariant = true;
    /// Attention sinks (0: none, the model's own attention, what training computes): each query
    /// also attends to its row's first `sinks` positions once they leave its window (Decoder's
    /// sinks, bit for bit). The whole-prompt modes then take prompts of at most the shortest
    /// window + 1 tokens (their passes attend without sinks).
    index_t sinks = 0;
  };

  explicit LeanDecoder(LeanWeights<T> w) : LeanDecoder(std::move(w), Options{}) {}
  LeanDecoder(LeanWeights<T> w, Options o) : w_(std::move(w)), c_(w_.config) {
    throw_if_error(validate(w_, o));
    throw_if_error(init(o));
  }

  /// The bytes of state a decoder of this config with these options lays out (what an arena
  /// needs; 0 if the config or options are invalid).
  static std::size_t required_bytes(const ModelConfig& c, const Options& o) {
    if (!options_status(o).ok() || !c.status().ok()) return 0;
    LeanWeights<T> none;
    none.config = c;
    LeanDecoder probe(Unchecked{}, std::move(none));
    probe.cap_ = o.capacity, probe.max_prompt_ = prompt_room(c, o), probe.R_ = o.rows, probe.sinks_ = o.sinks;
    return probe.carve(nullptr) + 63;
  }

  /// Checks the weights (every matrix present, of its shape, in one format; none the variant
  /// lacks) and the options; what the constructor would throw, as a value.
  static Status validate(const LeanWeights<T>& w, const Options& o) { return weights_status(w, o); }

  /// A decoder in `out`, or the reason there is none (nothing thrown for bad weights, options or
  /// a small arena; an allocation failure is out_of_memory).
  static Status create(LeanWeights<T> w, const Options& o, std::optional<LeanDecoder>& out) {
    out.reset();
    Status s = validate(w, o);
    if (!s.ok()) return s;
    out.emplace(Unchecked{}, std::move(w));
    s = out->init(o);
    if (!s.ok()) out.reset();
    return s;
  }
  LeanDecoder(const LeanDecoder&) = delete;
  LeanDecoder& operator=(const LeanDecoder&) = delete;
  LeanDecoder(LeanDecoder&&) noexcept = default;  // the buffers stay where they are
  LeanDecoder& operator=(LeanDecoder&&) noexcept = default;
  struct Unchecked {};
  /// For create(): the weights, not yet checked, and no state.
  LeanDecoder(Unchecked, LeanWeights<T> w) : w_(std::move(w)), c_(w_.config) {}

  const ModelConfig& config() const noexcept { return c_; }
  index_t capacity() const noexcept { return cap_; }
  /// The attention sinks (Options::sinks).
  index_t sinks() const noexcept { return sinks_; }
  index_t max_prompt() const noexcept { return max_prompt_; }
  /// The position of row 0's next token (the number of tokens it was fed).
  index_t position() const noexcept { return rpos_ ? rpos_[0] : 0; }
  /// The position of row r's next token.
  index_t position(index_t r) const {
    check(r >= 0 && r < R_, "lean decoder", "row ", r, " outside [0, ", R_, ")");
    return rpos_[r];
  }
  /// The rows the decoder holds (Options::rows), and whether row r is in use (joined or prefilled).
  index_t rows() const noexcept { return R_; }
  bool active(index_t r) const {
    check(r >= 0 && r < R_, "lean decoder", "row ", r, " outside [0, ", R_, ")");
    return ract_[r] != 0;
  }
  /// The rows in use.
  index_t active_rows() const noexcept { return static_cast<index_t>(std::count(ract_, ract_ + R_, 1)); }
  /// The slots of layer l's cache (window(l) + 1 keys are ever read).
  index_t cache_slots(index_t l) const {
    check(l >= 0 && l < c_.n_layer, "lean decoder", "layer ", l, " outside [0, ", c_.n_layer, ")");
    return win_[l].slots;
  }
  /// The bytes laid out at construction (everything the decoder writes; the weights excluded).
  std::size_t state_bytes() const noexcept { return state_size_; }
  /// Whether the state lies in the caller's arena (Options::arena).
  bool in_caller_arena() const noexcept { return own_ == nullptr && state_size_ > 0; }
  /// The mode and the passes of the last prefill() or join().
  const PrefillMode& prefill_mode() const noexcept { return mode_; }
  const PrefillStats& prefill_stats() const noexcept { return stats_; }
  /// Row 0's logits (V) after its last token: what the last prefill() or step() returned.
  std::span<const T> logits() const noexcept { return {logits_, static_cast<std::size_t>(c_.vocab_size)}; }
  /// Row r's logits (V) after its last token (join(), step(rows, tokens)).
  std::span<const T> logits(index_t r) const {
    check(r >= 0 && r < R_, "lean decoder", "row ", r, " outside [0, ", R_, ")");
    return {logits_ + r * c_.vocab_size, static_cast<std::size_t>(c_.vocab_size)};
  }
  /// Forgets every row's context (nothing is freed); the prefill mode returns to exact.
  void reset() noexcept {
    if (rpos_) std::fill(rpos_, rpos_ + R_, index_t{0}), std::fill(ract_, ract_ + R_, std::uint8_t{0});
    mode_ = PrefillMode{};
    stats_ = {};
  }

  /// Starts a new context from a prompt (>= 1 token ids), fed the way `mode` says; returns the
  /// logits after its last token. Mode zero stays in force for the following steps. With several
  /// rows: every row is freed and the prompt goes to row 0.
  std::span<const T> prefill(std::span<const index_t> prompt, PrefillMode mode = {}) {
    throw_if_error(try_prefill(prompt, mode));
    return logits();
  }

  /// Feeds one token to row 0 at position(); returns the next-token logits (V), soft-capped.
  std::span<const T> step(index_t token) {
    throw_if_error(try_step(token));
    return logits();
  }

  /// prefill() with its checks returned: on an error nothing has changed (the context is kept).
  Status try_prefill(std::span<const index_t> prompt, PrefillMode mode = {}) {
    Status s = prompt_status(prompt, mode);
    if (!s.ok()) return s;
    reset();
    start_row(0, prompt, mode);
    return s;
  }

  /// step() with its checks returned: a bad token or a full context changes nothing. Row 0 starts
  /// an empty context if it is not in use.
  Status try_step(index_t token) {
    if (!ract_[0]) {
      if (Status s = step_status("lean decoder", c_, 0, 0, token, cap_); !s.ok()) return s;
      ract_[0] = 1, rpos_[0] = 0, rzero_[0] = 0;
    }
    const index_t row = 0;
    return try_step(std::span<const index_t>(&row, 1), std::span<const index_t>(&token, 1));
  }

  /// Takes a free row for a new request: feeds its prompt the way `mode` says (exact: token by
  /// token; the other rows wait) and returns the row; its logits are logits(row). Mode zero stays
  /// in force for the row's steps. An lrt::Error when every row is in use.
  index_t join(std::span<const index_t> prompt, PrefillMode mode = {}) {
    index_t row = -1;
    throw_if_error(try_join(prompt, mode, row));
    return row;
  }
  /// join() with its checks returned; `row` is set on success. On an error nothing has changed.
  Status try_join(std::span<const index_t> prompt, PrefillMode mode, index_t& row) {
    Status s = prompt_status(prompt, mode);
    if (!s.ok()) return s;
    const std::uint8_t* free = std::find(ract_, ract_ + R_, std::uint8_t{0});
    if (free == ract_ + R_)
      return Status::error(StatusCode::state, "lean decoder", "every row is in use (", R_,
                           " rows, Options::rows): leave() one first");
    row = static_cast<index_t>(free - ract_);
    start_row(row, prompt, mode);
    return s;
  }

  /// Frees row r (its state is kept until a join reuses the row; nothing is freed).
  void leave(index_t r) { throw_if_error(try_leave(r)); }
  Status try_leave(index_t r) {
    Status s;
    if (fails(s, r >= 0 && r < R_, "row ", r, " outside [0, ", R_, ")") ||
        fails(s, ract_[r] != 0, "row ", r, " is not in use"))
      return s;
    ract_[r] = 0, rpos_[r] = 0;
    return s;
  }

  /// Feeds tokens[i] to row rows[i] (distinct rows in use, in any order) at that row's position, in
  /// one forward of all of them; each row's next-token logits are then logits(row), the bits a
  /// single-row decoder gives that row (with Options::batch_invariant). Rows not named wait.
  void step(std::span<const index_t> rows, std::span<const index_t> tokens) { throw_if_error(try_step(rows, tokens)); }
  /// step(rows, tokens) with its checks returned: on an error no row has changed.
  Status try_step(std::span<const index_t> rows, std::span<const index_t> tokens) {
    Status s;
    const index_t n = static_cast<index_t>(rows.size());
    if (fails(s, rows.size() == tokens.size(), "got ", tokens.size(), " tokens for ", rows.size(), " rows") ||
        fails(s, n <= R_, "got ", n, " rows; this decoder holds ", R_))
      return s;
    std::fill(seen_, seen_ + R_, std::uint8_t{0});
    for (index_t i = 0; i < n; ++i) {
      const index_t r = rows[static_cast<std::size_t>(i)];
      if (fails(s, r >= 0 && r < R_, "row ", r, " outside [0, ", R_, ")") ||
          fails(s, ract_[r] != 0, "row ", r, " is not in use (join() it first)") ||
          fails(s, !seen_[r], "row ", r, " is given twice"))
        return s;
      seen_[r] = 1;
      if (s = step_status("lean decoder", c_, r, rpos_[r], tokens[static_cast<std::size_t>(i)], cap_); !s.ok())
        return s;
    }
    if (n > 0) step_rows(rows.data(), tokens.data(), n);
    return s;
  }

  // A row's state, position by position (lrt-server's prompt cache): a position's state is its key
  // and value in every layer and, with memory, its source state s_p, position_state_size() values
  // laid out as [layer 0 key, layer 0 value, layer 1 key, ..., s_p]. The state of positions 0..n-1
  // and their tokens are all a row at position n holds (its cache windows and memory ring are cut
  // from them), so a row joined from them at n continues with the bits of the row they were read
  // from: exact prefill is one step per token, and the steps are batch-invariant.

  /// The values one position's state takes: 2 L D, plus d with memory.
  index_t position_state_size() const noexcept { return 2 * c_.n_layer * c_.kv_dim() + (V::recurrent ? c_.n_embd : 0); }
  /// Copies the state of row r's newest position (position(r) - 1) into `out` (position_state_size()
  /// values). The row must read memory where its variant has any (not a zero-mode prefill).
  Status try_save_position(index_t r, std::span<T> out) const {
    Status s;
    if (fails(s, r >= 0 && r < R_, "row ", r, " outside [0, ", R_, ")") ||
        fails(s, ract_[r] != 0 && rpos_[r] > 0, "row ", r, " holds no position (join() it first)") ||
        fails(s, !rzero_[r], "row ", r, " decodes without memory (zero prefill): its state is not the exact one") ||
        fails(s, static_cast<index_t>(out.size()) == position_state_size(), "a position's state has ",
              position_state_size(), " values, got room for ", out.size()))
      return s;
    const index_t t = rpos_[r] - 1, D = c_.kv_dim(), d = c_.n_embd;
    T* o = out.data();
    for (index_t l = 0; l < c_.n_layer; ++l, o += 2 * D) {
      const std::size_t ls = static_cast<std::size_t>(l);
      const index_t slot = t - base(l, t);
      std::memcpy(o, kcache(ls, r) + slot * D, static_cast<std::size_t>(D) * sizeof(T));
      std::memcpy(o + D, vcache(ls, r) + slot * D, static_cast<std::size_t>(D) * sizeof(T));
    }
    if constexpr (V::recurrent)
      std::memcpy(o, ring(r) + ring_write_slot(c_.mem_offset, t) * d, static_cast<std::size_t>(d) * sizeof(T));
    return s;
  }
  /// Takes a free row at position n = tokens.size() (>= 1) from the states of positions 0..n-1,
  /// `state(p)` pointing at position p's (as try_save_position wrote it); `row` is set on success.
  /// The row's logits are unset until its first step. On an error nothing has changed.
  template <class StateAt>
  Status try_join_state(std::span<const index_t> tokens, StateAt&& state, index_t& row) {
    Status s = prompt_status(tokens, PrefillMode{});
    if (!s.ok()) return s;
    const std::uint8_t* free = std::find(ract_, ract_ + R_, std::uint8_t{0});
    if (free == ract_ + R_)
      return Status::error(StatusCode::state, "lean decoder", "every row is in use (", R_,
                           " rows, Options::rows): leave() one first");
    const index_t r = static_cast<index_t>(free - ract_), D = c_.kv_dim();
    const auto at = [&](index_t p) { return static_cast<const T*>(state(p)); };
    load_row(
        r, tokens, [&](index_t l, index_t p) { return at(p) + 2 * l * D; },
        [&](index_t l, index_t p) { return at(p) + 2 * l * D + D; },
        [&](index_t p) { return at(p) + 2 * c_.n_layer * D; });
    ract_[r] = 1, rzero_[r] = 0;
    row = r;
    return s;
  }

 private:
  using Mat = TensorView<T, 2>;
  using CMat = TensorView<const T, 2>;

  // ------------------------------------------------------------ construction

  /// Sets s to an invalid_argument error of the lean decoder unless cond; returns !cond.
  template <class... Parts>
  static bool fails(Status& s, bool cond, const Parts&... parts) {
    if (!cond) s = Status::error(StatusCode::invalid_argument, "lean decoder", parts...);
    return !cond;
  }
  /// The checks of a prompt fed the way `mode` says (prefill, join): both decoders' (prompt_status,
  /// decode_state.hpp), then the workspace's room for the whole-prompt modes.
  Status prompt_status(std::span<const index_t> prompt, const PrefillMode& mode) const {
    Status s = lrt::prompt_status("lean decoder", c_, prompt, mode, cap_, sinks_);
    const index_t P = static_cast<index_t>(prompt.size());
    if (s.ok())
      fails(s, mode.kind == PrefillMode::Kind::Exact || P <= max_prompt_, "a ", mode.name(), " prefill of ", P,
            " tokens needs max_prompt >= ", P, " (this decoder was laid out for ", max_prompt_,
            "; exact prefill takes any length)");
    return s;
  }
  static Status options_status(const Options& o) {
    Status s;
    if (fails(s, o.rows >= 1, "rows must be >= 1, got ", o.rows) ||
        fails(s, o.capacity >= 0, "capacity must be >= 0 (0: no limit), got ", o.capacity) ||
        fails(s, o.max_prompt >= -1, "max_prompt must be >= -1 (-1: sequence_len), got ", o.max_prompt) ||
        fails(s, o.sinks >= 0, "the number of attention sinks must be >= 0, got ", o.sinks))
      return s;
    fails(s, o.arena != nullptr || o.arena_bytes == 0, "arena_bytes is ", o.arena_bytes, " without an arena");
    return s;
  }
  /// The prompt length the workspace is laid out for.
  static index_t prompt_room(const ModelConfig& c, const Options& o) noexcept {
    index_t n = o.max_prompt < 0 ? c.sequence_len : o.max_prompt;
    return o.capacity > 0 ? std::min(n, o.capacity) : n;
  }

  /// A matrix of shape (r, cols): packed ones only where `packed` (the products; embedding tables
  /// and gates are read as values), with one format and, for int8, scales and a group.
  static bool bad(Status& s, const LeanMatrix<T>& m, index_t r, index_t cols, const std::string& what,
                  bool packed = true) {
    const int formats = (m.data != nullptr) + (m.q != nullptr) + (m.bf16 != nullptr);
    return fails(s, !m.empty(), "weight ", what, " is missing") ||
           fails(s, m.rows == r && m.cols == cols, "weight ", what, " has shape ", Shape<2>{m.rows, m.cols},
                 ", expected ", Shape<2>{r, cols}) ||
           fails(s, formats == 1, "weight ", what, " has values in ", formats, " formats (give one)") ||
           fails(s, packed || m.data != nullptr, "weight ", what, " is ", to_string(m.format()),
                 ": embedding tables and gates are read as floats, not packed") ||
           fails(s, m.q == nullptr || (m.scales != nullptr && m.group >= 1), "int8 weight ", what,
                 " needs its scales and a group >= 1 (group ", m.group, ")");
  }
  /// The weights checked against the parameter table of a V model of their config
  /// (model/weight_table.hpp): every tensor it lists present with its shape (packed only where
  /// the table says packable), every field it does not list empty.
  static Status weights_status(const LeanWeights<T>& w, const Options& o) {
    Status s = options_status(o);
    if (!s.ok()) return s;
    const ModelConfig& c = w.config;
    if (s = c.status(); !s.ok()) return s;
    if (fails(s, V::source_layer < c.n_layer, "source layer ", V::source_layer, " is beyond the last block (",
              c.n_layer, " layers)") ||
        fails(s, !V::kv || c.ve_layout == VELayout::Every,
              "KV/Both variants have value embeddings on every layer (config.ve_layout = every)") ||
        fails(s, static_cast<index_t>(w.layers.size()) == c.n_layer, "weights of ", w.layers.size(),
              " layers for a config of ", c.n_layer))
      return s;
    const WeightTable table = weight_table<V>(c);
    std::vector<char> listed;  // by field: (layer + 1) * slots + slot
    constexpr std::size_t slots = static_cast<std::size_t>(WeightSlot::other);
    listed.assign(static_cast<std::size_t>(c.n_layer + 1) * slots, 0);
    const auto at = [&](WeightSlot slot, index_t layer) {
      return static_cast<std::size_t>(layer + 1) * slots + static_cast<std::size_t>(slot);
    };
    for (const WeightSpec& t : table) {
      bool wrong = false;
      const bool field = visit_field(
          w, t, [&](const LeanMatrix<T>& m) { wrong = bad(s, m, t.rows, t.cols, t.name, t.packable); },
          [&](const T* v) { wrong = fails(s, v != nullptr, "weight ", t.name, " is missing"); });
      if (field) {
        listed[at(t.slot, t.layer)] = 1;
      } else {
        const auto it = std::find_if(w.other.begin(), w.other.end(), [&](const auto& x) { return x.name == t.name; });
        wrong = fails(s, it != w.other.end(), "weight ", t.name, " is missing") ||
                bad(s, it->m, t.rows, t.is_vector() ? 1 : t.cols, t.name, t.packable);
      }
      if (wrong) return s;
    }
    for (const auto& x : w.other)
      if (fails(s, std::any_of(table.begin(), table.end(), [&](const WeightSpec& t) { return t.name == x.name; }),
                "weight ", x.name, " is given but a ", variant_name<V>(), " model has none"))
        return s;
    for_each_field(c.n_layer, [&](WeightSlot slot, index_t layer) {
      if (!s.ok() || listed[at(slot, layer)]) return;
      const WeightSpec t{std::string(), layer, slot};
      const std::string what =
          (layer < 0 ? "" : "layers[" + std::to_string(layer) + "].") + std::string(to_string(slot));
      const auto none = [&](bool empty) {
        fails(s, empty, "weight ", what, " is given but a ", variant_name<V>(), " model of this config has none");
      };
      visit_field(
          w, t, [&](const LeanMatrix<T>& m) { none(m.empty()); }, [&](const T* v) { none(v == nullptr); });
    });
    return s;
  }

  /// Lays out the state in `base` (64-byte aligned; null: only counts the bytes), for c_, cap_
  /// and max_prompt_, setting every state pointer; returns the bytes used.
  std::size_t carve(std::byte* base) {
    const index_t L = c_.n_layer, d = c_.n_embd, D = c_.kv_dim(), hd = c_.n_head * c_.head_dim();
    const index_t n = std::max({index_t{1}, max_prompt_, R_}), half = c_.head_dim() / 2, R = R_;
    std::size_t at = 0;
    const auto take = [&]<class U>(U*& p, index_t count) {
      at = (at + 63) / 64 * 64;
      p = base ? reinterpret_cast<U*>(base + at) : nullptr;
      at += static_cast<std::size_t>(count) * sizeof(U);
    };
    take(win_, L), take(kc_, L), take(vc_, L), take(wk_, L), take(wv_, L), take(sk_, L), take(sv_, L);
    index_t most = 1;
    const index_t S = sinks_;
    for (index_t l = 0; l < L; ++l) {
      const KvWindow win = KvWindow::of(c_, l, cap_);
      const index_t N = win.slots + S;  // the sinks' slots in front of the window's
      most = std::max(most, N);
      T *kc, *vc, *wk = nullptr, *wv = nullptr, *sk = nullptr, *sv = nullptr;
      take(kc, R * N * D), take(vc, R * N * D);
      if (S > 0) take(sk, R * S * D), take(sv, R * S * D);
      if (max_prompt_ > 0) take(wk, max_prompt_ * D), take(wv, max_prompt_ * D);
      if (base) win_[l] = win, kc_[l] = kc, vc_[l] = vc, wk_[l] = wk, wv_[l] = wv, sk_[l] = sk, sv_[l] = sv;
    }
    take(qpos_, n), take(sub_, n), take(tok_, n);
    take(rpos_, R), take(ract_, R), take(rzero_, R), take(seen_, R), take(srow_, R), take(stok_, R);
    if (V::recurrent) take(ring_tok_, R * c_.mem_offset), take(ring_, R * c_.mem_offset * d);
    if (V::recurrent && max_prompt_ > 0) take(src_, max_prompt_ * d), take(prev_, max_prompt_ * d);
    take(x_, n * d), take(x0_, n * d), take(u_, n * d), take(t_, n * d), take(h_, n * d), take(s_, n * d);
    take(mem_, n * d);
    take(q_, n * hd), take(q2_, n * hd), take(y_, n * hd);
    take(k_, n * D), take(k2_, n * D), take(v_, n * D), take(e_, n * D), take(krec_, n * D), take(vrec_, n * D);
    take(tmp_, n * std::max(D, 4 * d));
    take(gz_, n * 3 * c_.n_kv_head), take(g_, n * 3 * c_.n_kv_head);
    take(f_, n * 4 * d), take(f2_, n * 4 * d);
    take(rinv_, n * std::max<index_t>(c_.n_head, 1)), take(lse_, n * c_.n_head);
    take(cos_, n * half), take(sin_, n * half);
    take(p_, std::max(most, max_prompt_)), take(z_, R * c_.padded_vocab()), take(logits_, R * c_.vocab_size);
    return (at + 63) / 64 * 64;
  }

  /// Lays out the state in the caller's arena or one allocation (after validate()).
  Status init(const Options& o) {
    cap_ = o.capacity, R_ = o.rows, invariant_ = o.batch_invariant, sinks_ = o.sinks;
    max_prompt_ = prompt_room(c_, o);
    const std::size_t need = carve(nullptr);
    std::byte* base = nullptr;
    if (o.arena) {
      void* p = o.arena;
      std::size_t room = o.arena_bytes;
      if (!std::align(64, need, p, room))
        return Status::error(StatusCode::out_of_memory, "lean decoder", "the arena holds ", o.arena_bytes,
                             " bytes; this decoder needs ", need + 63, " (required_bytes())");
      base = static_cast<std::byte*>(p);
    } else {
      own_.reset(static_cast<std::byte*>(::operator new[](need, std::align_val_t(64), std::nothrow)));
      if (!own_)
        return Status::error(StatusCode::out_of_memory, "lean decoder", "cannot allocate ", need,
                             " bytes of decoder state");
      base = own_.get();
    }
    std::memset(base, 0, need);
    state_size_ = need;
    carve(base);
    return {};
  }

  // ------------------------------------------------------------ the kernels of the block (n rows)

  /// Views of n rows of a scratch buffer.
  static Mat rows(T* p, index_t n, index_t cols) noexcept { return Mat(p, Shape<2>{n, cols}); }
  static CMat crows(const T* p, index_t n, index_t cols) noexcept { return CMat(p, Shape<2>{n, cols}); }
  /// y = x W^T for n rows of x, `ldx` apart (Model's ad::linear). Packed weights: the packed
  /// product of each row (cpu/packed_matvec.hpp, the weights read once for all rows). Float
  /// weights: the rows of a decode step (`step`, with Options::batch_invariant) through
  /// cpu::rowwise_product, each row's arithmetic that of one row alone; else lrt::gemm (a
  /// whole-prompt pass: the BLAS product; one row: the same single-row product).
  void product(const T* x, index_t n, index_t ldx, const LeanMatrix<T>& w, T* y, bool step) const {
    if (w.q) {
      cpu::matmul_int8_rows<T>(x, n, ldx, w.q, w.scales, w.rows, w.cols, w.group, y, w.rows);
    } else if (w.bf16) {
      cpu::matmul_bf16_rows<T>(x, n, ldx, w.bf16, w.rows, w.cols, y, w.rows);
    } else if (step && invariant_) {
      cpu::rowwise_product<T>(n, w.rows, w.cols, x, ldx, w.data, w.cols, y, w.rows);
    } else {
      lrt::gemm(rows(y, n, w.rows), CMat(x, Shape<2>{n, w.cols}, Strides<2>{ldx, 1}), w.view().t());
    }
  }
  void rmsnorm(const T* x, index_t n, T* y) {
    cpu::rmsnorm_forward<T>(crows(x, n, c_.n_embd), rows(y, n, c_.n_embd), TensorView<T, 1>(rinv_, Shape<1>{n}),
                            rmsnorm_eps);
  }
  /// y = sigmoid(z) * 2 (ad::gate2), over count values.
  static void gate2(const T* z, index_t count, T* y) {
    TensorView<T, 1>(y, Shape<1>{count}) = lrt::sigmoid(TensorView<const T, 1>(z, Shape<1>{count})) * T(2);
  }
  /// a[i] = a[i] + b[i] (an ad::operator+ of two tensors).
  static void add(T* a, const T* b, index_t count) noexcept {
    for (index_t i = 0; i < count; ++i) a[i] = a[i] + b[i];
  }
  /// out[r, h, :] = g[r * gs + h] * x[r, h, :] for n rows of Hkv heads of Dh (a per-head gate
  /// broadcast over the head dim, as in ad's g * x).
  void head_scale(const T* g, index_t gs, const T* x, index_t n, T* out) const noexcept {
    const index_t Hkv = c_.n_kv_head, Dh = c_.head_dim();
    for (index_t r = 0; r < n; ++r)
      for (index_t h = 0; h < Hkv; ++h) {
        const T gh = g[r * gs + h];
        const T* xr = x + (r * Hkv + h) * Dh;
        T* o = out + (r * Hkv + h) * Dh;
        for (index_t e = 0; e < Dh; ++e) o[e] = gh * xr[e];
      }
  }

  /// The direct execution of model/block.hpp: each op runs its kernel on n rows of the decoder's
  /// scratch (the Buf names which) and returns a view of the result. Rows/Heads: n rows of `cols`
  /// values, `ld` apart; Gate: a gate per KV head of each row, `stride` apart; Coef: a scalar.
  template <class Attend>
  struct DirectExec {
    struct Rows {
      const T* p = nullptr;
      index_t cols = 0, ld = 0;
    };
    using Heads = Rows;
    struct Gate {
      const T* p = nullptr;
      index_t stride = 0;
    };
    using Coef = T;

    LeanDecoder& d;
    const index_t* tok;
    index_t n;
    Attend& attend_fn;
    bool step;  // a decode step's rows (LeanDecoder::product), not a whole-prompt pass

    const ModelConfig& config() const noexcept { return d.c_; }
    static bool has(const LeanMatrix<T>& w) noexcept { return !w.empty(); }
    static constexpr bool observing() noexcept { return false; }
    T* buf(Buf b) const noexcept {
      switch (b) {
        case Buf::emb:
        case Buf::proj:
          return d.t_;
        case Buf::x:
          return d.x_;
        case Buf::x0:
          return d.x0_;
        case Buf::u:
          return d.u_;
        case Buf::q:
          return d.q_;
        case Buf::k:
          return d.k_;
        case Buf::v:
          return d.v_;
        case Buf::gz:
          return d.gz_;
        case Buf::g:
          return d.g_;
        case Buf::e:
          return d.e_;
        case Buf::kr:
          return d.krec_;
        case Buf::vr:
          return d.vrec_;
        case Buf::tmp:
          return d.tmp_;
        case Buf::qn:
          return d.q2_;
        case Buf::kn:
          return d.k2_;
        case Buf::y:
          return d.y_;
        case Buf::fc:
          return d.f_;
        case Buf::act:
          return d.f2_;
        case Buf::source:
          return d.s_;
        case Buf::h:
          return d.h_;
      }
      return nullptr;
    }
    Rows out(Buf b, index_t cols) const noexcept { return {buf(b), cols, cols}; }
    Mat rows(Buf b, index_t cols) const noexcept { return Mat(buf(b), Shape<2>{n, cols}); }
    CMat view(const Rows& x) const noexcept { return CMat(x.p, Shape<2>{n, x.cols}, Strides<2>{x.ld, 1}); }

    Rows rows_of(const LeanMatrix<T>& w, Buf dst) const noexcept {
      T* y = buf(dst);
      for (index_t r = 0; r < n; ++r)
        std::memcpy(y + r * w.cols, w.data + tok[r] * w.cols, static_cast<std::size_t>(w.cols) * sizeof(T));
      return out(dst, w.cols);
    }
    /// A variant's own vector tensor (LeanWeights::other; validate() checked that it is there).
    static const T* other_vector(const LeanWeights<T>& w, std::string_view name) noexcept {
      for (const auto& o : w.other)
        if (o.name == name) return o.m.data;
      return nullptr;
    }
    Rows rmsnorm(const Rows& x, Buf dst) const noexcept {
      cpu::rmsnorm_forward<T>(view(x), rows(dst, x.cols), TensorView<T, 1>(d.rinv_, Shape<1>{n}), rmsnorm_eps);
      return out(dst, x.cols);
    }
    Rows copy(const Rows& x, Buf dst) const noexcept {
      std::memcpy(buf(dst), x.p, static_cast<std::size_t>(n * x.cols) * sizeof(T));
      return out(dst, x.cols);
    }
    Rows lambda_mix(const Rows& x, const Rows& x0, index_t l, Buf dst) const noexcept {
      const T al = d.c_.use_resid_lambdas ? d.w_.resid_lambdas[l] : T(1);
      const T bl = d.c_.use_x0_residual ? d.w_.x0_lambdas[l] : T(0);
      rows(dst, x.cols) = view(x) * al + view(x0) * bl;  // alpha_l x first, then + beta_l x0
      return out(dst, x.cols);
    }
    static T coef(const T* v, index_t l) noexcept { return v[l]; }
    static T coef_mul(T a, T b) noexcept { return a * b; }
    static T coef_sigmoid(T a) noexcept {
      T y;
      TensorView<T, 1>(&y, Shape<1>{1}) = lrt::sigmoid(TensorView<const T, 1>(&a, Shape<1>{1}));
      return y;
    }
    Rows scaled_add(const Rows& x, const Rows& m, T g, Buf dst) const noexcept {
      rows(dst, x.cols) = view(x) + view(m) * g;
      return out(dst, x.cols);
    }
    Rows linear(const Rows& x, const LeanMatrix<T>& w, Buf dst) const noexcept {
      d.product(x.p, n, x.ld, w, buf(dst), step);
      return out(dst, w.rows);
    }
    static Rows heads(const Rows& x, index_t) noexcept { return x; }
    static Rows flat(const Rows& y) noexcept { return y; }
    static Rows first_channels(const Rows& u, index_t c) noexcept { return {u.p, c, u.ld}; }
    Rows gate2(const Rows& z, Buf dst) const noexcept {
      LeanDecoder::gate2(z.p, n * z.cols, buf(dst));
      return out(dst, z.cols);
    }
    static Gate gate(const Rows& g, index_t j, index_t Hkv) noexcept { return {g.p + j * Hkv, g.cols}; }
    Rows head_mul(const Gate& g, const Rows& x, Buf dst) const noexcept {
      d.head_scale(g.p, g.stride, x.p, n, buf(dst));
      return out(dst, x.cols);
    }
    Rows add(const Rows& a, const Rows& b, Buf dst) const noexcept {
      T* y = buf(dst);
      for (index_t i = 0; i < n * a.cols; ++i) y[i] = a.p[i] + b.p[i];
      return out(dst, a.cols);
    }
    Rows value_embedding(const LeanMatrix<T>& w, Buf dst) const noexcept { return rows_of(w, dst); }
    Rows rope_norm(const Rows& x, Buf dst) const noexcept {
      d.rope_norm(x.p, n, x.cols / d.c_.head_dim(), buf(dst));
      return out(dst, x.cols);
    }
    Rows attend(index_t l, const Rows& q, const Rows& k, const Rows& v, Buf dst) const noexcept {
      attend_fn(l, q.p, k.p, v.p, buf(dst));
      return out(dst, q.cols);
    }
    Rows relu2(const Rows& x, Buf dst) const noexcept {
      rows(dst, x.cols) = lrt::square(lrt::relu(view(x)));
      return out(dst, x.cols);
    }
    static void observe(index_t, const Gate&, const Rows&) noexcept {}
  };

  /// Runs model_forward (model/block.hpp) directly for n tokens at positions pos (ascending), with
  /// memory rows mem (n, d) or none, attending through attend(l, q (n, H*Dh), k (n, D), v (n, D),
  /// y (n, H*Dh)): the RoPE rows of pos, then DirectExec. Leaves the final normed states in h_ and
  /// the source states in s_ (n, d each). step: the rows of a decode step (see product()).
  template <class Attend>
  void run_direct(const index_t* tok, index_t n, const index_t* pos, const T* mem, Attend&& attend, bool step) {
    const index_t Dh = c_.head_dim(), half = Dh / 2, d = c_.n_embd;
    for (index_t r = 0; r < n; ++r) rope_row<T>(pos[r], Dh, c_.rope_bf16_tables, cos_ + r * half, sin_ + r * half);
    DirectExec<std::remove_reference_t<Attend>> e{*this, tok, n, attend, step};
    using Rows = typename decltype(e)::Rows;
    const Rows m{mem, d, d};
    model_forward<V>(e, w_, mem ? &m : nullptr);
  }
  /// y = rmsnorm(rope(x)) per head vector of n rows of `heads` heads, RoPE rows cos_/sin_.
  void rope_norm(const T* x, index_t n, index_t heads, T* y) {
    const index_t Dh = c_.head_dim();
    const Shape<4> s{1, n, heads, Dh};
    const Shape<2> cs{n, Dh / 2};
    cpu::rope_rmsnorm_forward<T>(TensorView<const T, 4>(x, s), TensorView<const T, 2>(cos_, cs),
                                 TensorView<const T, 2>(sin_, cs), TensorView<T, 4>(y, s),
                                 TensorView<T, 1>(rinv_, Shape<1>{n * heads}), rmsnorm_eps);
  }
  /// Row `row`'s logits = softcapped head(h rows i0..i0+n) over the vocabulary
  /// (Decoder::store_logits), for rows[j] = the row of h row i0 + j (null: `row0`).
  void head_logits(index_t i0, index_t n, const index_t* rows, index_t row0, bool step) {
    const index_t Vp = c_.padded_vocab(), nv = c_.vocab_size;
    product(h_ + i0 * c_.n_embd, n, c_.n_embd, w_.lm_head, z_, step);
    for (index_t j = 0; j < n; ++j) {
      const index_t r = rows ? rows[j] : row0;
      TensorView<T, 2>(logits_ + r * nv, Shape<2>{1, nv}) =
          capped_logits<T>(CMat(z_ + j * Vp, Shape<2>{1, Vp}).slice(1, 0, nv), c_);
    }
  }

  // ------------------------------------------------------------ decode steps

  /// The position in slot 0 of layer l's cache while the newest position is t (KvWindow::base).
  index_t base(index_t l, index_t t) const noexcept { return win_[l].base(t); }

  /// Row r's cache of layer l: (slots, D), after `sinks` slots in front of it (slots -sinks..-1).
  T* kcache(std::size_t l, index_t r) const noexcept {
    return kc_[l] + (r * (win_[l].slots + sinks_) + sinks_) * c_.kv_dim();
  }
  T* vcache(std::size_t l, index_t r) const noexcept {
    return vc_[l] + (r * (win_[l].slots + sinks_) + sinks_) * c_.kv_dim();
  }
  /// Row r's sinks of layer l: the keys and values of its first `sinks` positions, (sinks, D).
  T* ksinks(std::size_t l, index_t r) const noexcept { return sk_[l] + r * sinks_ * c_.kv_dim(); }
  T* vsinks(std::size_t l, index_t r) const noexcept { return sv_[l] + r * sinks_ * c_.kv_dim(); }
  T* ring(index_t r) const noexcept { return ring_ + r * c_.mem_offset * c_.n_embd; }
  index_t* ring_tokens(index_t r) const noexcept { return ring_tok_ + r * c_.mem_offset; }

  /// Takes row r for a prompt (checked by prompt_status): exact, token by token; else the
  /// whole-prompt passes, loaded into the row.
  void start_row(index_t r, std::span<const index_t> prompt, const PrefillMode& mode) {
    ract_[r] = 1, rpos_[r] = 0, rzero_[r] = mode.kind == PrefillMode::Kind::Zero;
    mode_ = mode, stats_ = {};
    if (mode.kind == PrefillMode::Kind::Exact) {
      for (index_t tok : prompt) step_rows(&r, &tok, 1);
    } else {
      passes(r, prompt, mode);
    }
  }

  /// One decode step of n rows (checked by try_step): the rows that read memory in one forward,
  /// those that do not (zero mode, or no recurrence) in another, so that each forward is what the
  /// row alone runs.
  void step_rows(const index_t* rows, const index_t* toks, index_t n) {
    for (const bool memory : {true, false}) {
      index_t m = 0;
      for (index_t i = 0; i < n; ++i)
        if ((V::recurrent && !rzero_[rows[i]]) == memory) srow_[m] = rows[i], stok_[m] = toks[i], ++m;
      if (m > 0) forward_rows(srow_, stok_, m, memory);
    }
  }

  /// The forward of tokens toks[i] at rows[i]'s positions, each attending over its own row's
  /// cache, reading (memory) and writing its own ring; every row's logits and position advance.
  void forward_rows(const index_t* rows, const index_t* toks, index_t n, bool use_memory) {
    const index_t d = c_.n_embd, k = c_.mem_offset, hd = c_.n_head * c_.head_dim(), D = c_.kv_dim();
    for (index_t i = 0; i < n; ++i) {
      const index_t r = rows[i], t = rpos_[r], tok = toks[i];
      for (index_t l = 0; l < c_.n_layer; ++l) {  // the window moves to the front when the buffer is full
        const std::size_t ls = static_cast<std::size_t>(l);
        win_[l].slide(t, [&](index_t from, index_t count) {
          for (T* cache : {kcache(ls, r), vcache(ls, r)})
            std::memmove(cache, cache + from * D, static_cast<std::size_t>(count * D) * sizeof(T));
        });
      }
      qpos_[i] = t, tok_[i] = tok;
      if (use_memory) {  // m~_t = s_{t-k}, or 0 where the row reads no state
        const index_t* rt = ring_tokens(r);
        const bool reads =
            reads_state(c_, t, tok, [&](index_t j) { return rt[static_cast<std::size_t>(ring_write_slot(k, j))]; });
        T* row = mem_ + i * d;
        if (reads)
          std::memcpy(row, ring(r) + ring_read_slot(k, t) * d, static_cast<std::size_t>(d) * sizeof(T));
        else
          std::fill(row, row + d, T(0));
      }
    }
    run_direct(
        tok_, n, qpos_, use_memory ? mem_ : nullptr,
        [&](index_t l, const T* q, const T* kk, const T* vv, T* y) {
          for (index_t i = 0; i < n; ++i)
            attend_one(l, rows[i], qpos_[i], q + i * hd, kk + i * D, vv + i * D, y + i * hd);
        },
        /*step=*/true);
    for (index_t i = 0; i < n; ++i) {
      const index_t r = rows[i], t = qpos_[i];
      if (use_memory) {
        std::memcpy(ring(r) + ring_write_slot(k, t) * d, s_ + i * d, static_cast<std::size_t>(d) * sizeof(T));
        ring_tokens(r)[static_cast<std::size_t>(ring_write_slot(k, t))] = toks[i];
      }
    }
    head_logits(0, n, rows, 0, /*step=*/true);
    for (index_t i = 0; i < n; ++i) ++rpos_[rows[i]];
  }

  /// One query at position t against layer l's cache: its key and value into slot t - base (and,
  /// among the first `sinks` positions, into the sinks), the sinks that left the window into the
  /// slots just before it (Decoder::make_room: slots of positions no later query reads, or the
  /// ones in front), then attention over those slots and the window (cpu::attention_forward's
  /// arithmetic for one query row: scores by lrt::gemm, the kernel's softmax row, probabilities
  /// times values by lrt::gemm, then / sum).
  void attend_one(index_t l, index_t r, index_t t, const T* q, const T* k, const T* v, T* y) {
    const std::size_t ls = static_cast<std::size_t>(l);
    T *const kc = kcache(ls, r), *const vc = vcache(ls, r);
    const index_t H = c_.n_head, Hkv = c_.n_kv_head, Dh = c_.head_dim(), D = c_.kv_dim();
    const index_t nb = base(l, t), slot = t - nb, ws = t - std::min(t, c_.window(l)), ns = std::min(sinks_, ws);
    const index_t lo = ws - nb - ns, m = slot - lo + 1;
    const std::size_t row = static_cast<std::size_t>(D) * sizeof(T);
    std::memcpy(kc + slot * D, k, row);
    std::memcpy(vc + slot * D, v, row);
    if (t < sinks_) std::memcpy(ksinks(ls, r) + t * D, k, row), std::memcpy(vsinks(ls, r) + t * D, v, row);
    if (ns > 0) {
      std::memcpy(kc + lo * D, ksinks(ls, r), static_cast<std::size_t>(ns) * row);
      std::memcpy(vc + lo * D, vsinks(ls, r), static_cast<std::size_t>(ns) * row);
    }
    const T scale = T(1) / std::sqrt(static_cast<T>(Dh));
    const index_t group = H / Hkv;
    for (index_t h = 0; h < H; ++h) {
      const index_t g = h / group;
      const CMat qt(q + h * Dh, Shape<2>{1, Dh});
      const CMat kr(kc + lo * D + g * Dh, Shape<2>{m, Dh}, Strides<2>{D, 1});
      const CMat vr(vc + lo * D + g * Dh, Shape<2>{m, Dh}, Strides<2>{D, 1});
      const Mat p(p_, Shape<2>{1, m});
      lrt::gemm(p, qt, kr.t(), scale);  // S = scale q K^T
      T max;
      const T sum = cpu::detail::masked_exp_row(p_, m, index_t{0}, m, &max);
      const T inv = T(1) / sum;
      const Mat ot(y + h * Dh, Shape<2>{1, Dh});
      lrt::gemm(ot, CMat(p), vr);
      for (index_t e = 0; e < Dh; ++e) ot(0, e) *= inv;
    }
  }

  // ------------------------------------------------------------ whole-prompt passes

  /// One pass over positions pos (ascending) of the prompt in the workspace: their K/V go into
  /// wk_/wv_ before each layer attends over positions 0..pos.back() (Interleaved's write-back), their
  /// source states into src_. mem: memory rows (n, d) or none.
  void pass(index_t r, std::span<const index_t> prompt, std::span<const index_t> pos, const T* mem) {
    const index_t n = static_cast<index_t>(pos.size()), D = c_.kv_dim(), d = c_.n_embd;
    const index_t H = c_.n_head, Dh = c_.head_dim(), hi = pos.back() + 1;
    for (std::size_t i = 0; i < pos.size(); ++i) tok_[i] = prompt[static_cast<std::size_t>(pos[i])];
    const auto attend = [&](index_t l, const T* q, const T* k, const T* v, T* y) {
      const std::size_t ls = static_cast<std::size_t>(l);
      for (index_t i = 0; i < n; ++i) {
        std::memcpy(wk_[ls] + pos[static_cast<std::size_t>(i)] * D, k + i * D, static_cast<std::size_t>(D) * sizeof(T));
        std::memcpy(wv_[ls] + pos[static_cast<std::size_t>(i)] * D, v + i * D, static_cast<std::size_t>(D) * sizeof(T));
      }
      const Shape<4> kv{1, hi, c_.n_kv_head, Dh}, qs{1, n, H, Dh};
      cpu::attention_forward<T>(
          TensorView<const T, 4>(q, qs), TensorView<const T, 4>(wk_[ls], kv), TensorView<const T, 4>(wv_[ls], kv),
          TensorView<const index_t, 1>(pos.data(), Shape<1>{n}), c_.window(l), T(1) / std::sqrt(static_cast<T>(Dh)),
          TensorView<T, 4>(y, qs), TensorView<T, 3>(lse_, Shape<3>{1, H, n}));
    };
    run_direct(tok_, n, pos.data(), mem, attend, /*step=*/false);
    if constexpr (V::recurrent)
      for (index_t i = 0; i < n; ++i)
        std::memcpy(src_ + pos[static_cast<std::size_t>(i)] * d, s_ + i * d, static_cast<std::size_t>(d) * sizeof(T));
    if (hi == static_cast<index_t>(prompt.size()))  // the logits after the prompt's last token
      head_logits(n - 1, 1, nullptr, r, /*step=*/false);
    ++stats_.passes, stats_.positions += n;
  }

  /// Memory rows for positions pos from the source states in `from` (m~_p = s_{p-k}, or 0 where the
  /// pass plan's memory rule reads none).
  void memory_rows(std::span<const index_t> prompt, std::span<const index_t> pos, const T* from) {
    const index_t d = c_.n_embd;
    const auto token_at = [&](index_t j) { return prompt[static_cast<std::size_t>(j)]; };
    for (std::size_t i = 0; i < pos.size(); ++i) {
      T* row = mem_ + static_cast<index_t>(i) * d;
      if (const index_t src = memory_source(c_, pos[i], token_at); src >= 0)
        std::memcpy(row, from + src * d, static_cast<std::size_t>(d) * sizeof(T));
      else
        std::fill(row, row + d, T(0));
    }
  }

  /// The whole-prompt modes (see the top of this file), then the cache, ring and logits from the workspace.
  void passes(index_t r, std::span<const index_t> prompt, const PrefillMode& mode) {
    const index_t P = static_cast<index_t>(prompt.size()), d = c_.n_embd, k = c_.mem_offset;
    for (index_t p = 0; p < P; ++p) qpos_[p] = p;
    const std::span<const index_t> all(qpos_, static_cast<std::size_t>(P));
    using K = PrefillMode::Kind;
    if (mode.kind == K::Zero || !V::recurrent) {
      pass(r, prompt, all, nullptr);
      stats_.converged = true;
    } else if (mode.kind == K::Interleaved) {  // the schedule's pass loop, each subset reading the latest states
      run_subset_passes(
          all, interleaved_subset_count(P, mode.passes),
          [&](index_t i) {
            return std::span<const index_t>(sub_,
                                            static_cast<std::size_t>(interleaved_subset(P, mode.passes, i, sub_)));
          },
          [&](std::span<const index_t> pos, bool memory) {
            if (memory) memory_rows(prompt, pos, src_);
            pass(r, prompt, pos, memory ? mem_ : nullptr);
          },
          [](std::span<const index_t>, bool) {});
    } else {  // fixed-point / approximate
      std::fill(mem_, mem_ + P * d, T(0));
      pass(r, prompt, all, mem_);  // pass 0: every position reads zero memory (exact below k)
      index_t F = std::min(k, P);
      while (F < P) {
        std::memcpy(prev_, src_, static_cast<std::size_t>(P * d) * sizeof(T));
        const auto part = all.subspan(static_cast<std::size_t>(F));
        memory_rows(prompt, part, prev_);
        pass(r, prompt, part, mem_);
        bool converged = false;
        F = fixed_point_frontier(src_, prev_, d, P, F, k, mode.kind == K::Approximate ? mode.tolerance : 0.0,
                                 converged);
        if (converged) break;
      }
      if (F >= P) stats_.converged = true;
    }
    load(r, prompt);  // the logits: from the last pass that computed position P - 1
  }

  /// Row r loaded with positions 0..n-1 = prompt.size() - 1 at once (the whole-prompt passes'
  /// workspace, saved states): each layer's window into its cache (KvWindow::load), the last k
  /// source states and tokens into the ring (ring_load); the position becomes n. key(l, p),
  /// value(l, p), source(p): where position p's key and value in layer l and its source state are.
  template <class Key, class Value, class Source>
  void load_row(index_t r, std::span<const index_t> prompt, Key&& key, Value&& value, Source&& source) {
    const index_t n = static_cast<index_t>(prompt.size()), D = c_.kv_dim(), d = c_.n_embd;
    const auto put = [](T* to, const T* from, index_t count) {
      std::memcpy(to, from, static_cast<std::size_t>(count) * sizeof(T));
    };
    for (index_t l = 0; l < c_.n_layer; ++l) {
      const std::size_t ls = static_cast<std::size_t>(l);
      win_[l].load(n, [&](index_t lo, index_t count) {
        for (index_t i = 0; i < count; ++i)
          put(kcache(ls, r) + i * D, key(l, lo + i), D), put(vcache(ls, r) + i * D, value(l, lo + i), D);
      });
      for (index_t p = 0; p < std::min(sinks_, n); ++p)  // the first positions, kept aside
        put(ksinks(ls, r) + p * D, key(l, p), D), put(vsinks(ls, r) + p * D, value(l, p), D);
    }
    if constexpr (V::recurrent)
      ring_load(c_.mem_offset, n, [&](index_t p, index_t slot) {
        put(ring(r) + slot * d, source(p), d);
        ring_tokens(r)[static_cast<std::size_t>(slot)] = prompt[static_cast<std::size_t>(p)];
      });
    rpos_[r] = n;
  }
  /// The row from the whole-prompt passes' workspace.
  void load(index_t r, std::span<const index_t> prompt) {
    const index_t D = c_.kv_dim(), d = c_.n_embd;
    load_row(
        r, prompt, [&](index_t l, index_t p) { return wk_[static_cast<std::size_t>(l)] + p * D; },
        [&](index_t l, index_t p) { return wv_[static_cast<std::size_t>(l)] + p * D; },
        [&](index_t p) { return src_ + p * d; });
  }

  struct Free {
    void operator()(std::byte* p) const noexcept { ::operator delete[](p, std::align_val_t(64)); }
  };

  LeanWeights<T> w_;
  ModelConfig c_;
  index_t cap_ = 0, max_prompt_ = 0, R_ = 1, sinks_ = 0;
  bool invariant_ = true;
  PrefillMode mode_;
  PrefillStats stats_;
  std::unique_ptr<std::byte[], Free> own_;  // the state, unless it is in the caller's arena
  std::size_t state_size_ = 0;
  // The state (in own_ or the arena, laid out by carve()):
  KvWindow* win_ = nullptr;                                      // per layer: the cache's geometry
  T **kc_ = nullptr, **vc_ = nullptr;                            // per layer: cache (R, sinks + slots, D)
  T **wk_ = nullptr, **wv_ = nullptr;                            // per layer: workspace (max_prompt, D)
  T **sk_ = nullptr, **sv_ = nullptr;                            // per layer: sinks (R, sinks, D)
  T* ring_ = nullptr;                                            // (R, k, d) source states, position t in slot t % k
  index_t* ring_tok_ = nullptr;                                  // (R, k) their tokens
  index_t *rpos_ = nullptr, *srow_ = nullptr, *stok_ = nullptr;  // (R) per row: next position; a step's rows, tokens
  std::uint8_t *ract_ = nullptr, *rzero_ = nullptr, *seen_ = nullptr;  // (R) per row: in use, zero memory; checks
  index_t *qpos_ = nullptr, *sub_ = nullptr, *tok_ = nullptr;          // (max_prompt) a pass's positions, tokens
  T *src_ = nullptr, *prev_ = nullptr;  // workspace (max_prompt, d): source states, the pass before's
  T *x_ = nullptr, *x0_ = nullptr, *u_ = nullptr, *t_ = nullptr, *h_ = nullptr, *s_ = nullptr, *mem_ = nullptr;
  T *q_ = nullptr, *q2_ = nullptr, *y_ = nullptr, *k_ = nullptr, *k2_ = nullptr, *v_ = nullptr, *e_ = nullptr;
  T *krec_ = nullptr, *vrec_ = nullptr, *tmp_ = nullptr, *gz_ = nullptr, *g_ = nullptr, *f_ = nullptr, *f2_ = nullptr;
  T *rinv_ = nullptr, *lse_ = nullptr, *cos_ = nullptr, *sin_ = nullptr, *p_ = nullptr, *z_ = nullptr;
  T* logits_ = nullptr;
};

}  // namespace v0
}  // namespace lrt
