// lrt/model/decode.hpp: KV-cache decoding (one forward per token, spec §6) with the prefill modes
// exact, zero and interleaved:S, rows of different lengths in one batch, and the sampler
// (temperature, top-k, top-p, counter-based draws so that every backend samples the same tokens).
// The decoder runs the model's own block code with an attend hook that appends the new key and
// value to a preallocated cache and attends over it; no gradient is recorded.
//
// Rows: each row has its own position. While every row is at the same position a step runs the
// B tokens as (B, 1) with one attention call per layer (the lockstep path). Otherwise the tokens
// run as one sequence (1, n) whose time index i is row rows[i] at its own position: every op but
// attention is per token, RoPE takes one table row per token, and the hook attends each token
// against its own row's cache (one call per row). Both give the per-row results of decoding each
// row alone.
//
// Length: positions are unbounded (unless a capacity is given). Layer l's cache keeps the keys
// its attention window can reach, window(l) + 1 of them, in a buffer of twice that many slots:
// position p of a row sits in slot p - base(l, p), and when the newest position reaches the end the
// last window(l) keys move to the front (once every window(l) + 2 positions, so the copy costs about
// one key per token). Attention then runs on the slots in position order with slot indices as
// positions, which the causal window rule cannot tell from the absolute ones. RoPE tables are
// computed per position, and the memory ring only ever holds the last k states, so decoding past
// the training context gives what the whole-sequence forward with the configuration's windows gives.
// Attention sinks (optional, `sinks` > 0): every query also sees the row's first `sinks` positions,
// whose keys are kept aside and copied in front of the window's keys before each attention call
// (the eager path; graphs refuse sinks).
//
// Allocation: after start-up a CPU step allocates nothing from the system: the tape is a detached
// graph kept by the decoder, tensors come from the caching allocator, and after the first step of
// each layout the decoder reserves in that cache the attention kernel's score blocks for every
// context length up to the capacity.
// Shapes: B rows, N_l cache slots of layer l, Hkv KV heads, Dh head dim, V vocabulary (cropped), P prompt.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpt.hpp"
#include "training_schedule.hpp"

namespace lrt {
inline namespace v0 {

namespace detail {
/// DeviceTraits<D>::StepGraph where the device records graphs, else void.
template <class D, class = void>
struct step_graph_of {
  using type = void;
};
template <class D>
struct step_graph_of<D, std::void_t<typename DeviceTraits<D>::StepGraph>> {
  using type = typename DeviceTraits<D>::StepGraph;
};
}  // namespace detail

/// How Decoder::prefill feeds a prompt (spec §6).
struct PrefillMode {
  enum class Kind {
    Exact,        // token by token through the decode step (the release's sequential evaluation)
    Zero,         // zero memory throughout, prompt and generation (the release's chat engine)
    Interleaved,  // pass 0 + S refinement passes over the prompt, then exact decoding; exact iff S >= P
  };
  Kind kind = Kind::Exact;
  index_t passes = 0;  // Interleaved: S >= 1

  static PrefillMode exact() noexcept { return {}; }
  static PrefillMode zero() noexcept { return {Kind::Zero, 0}; }
  static PrefillMode interleaved(index_t S) {
    check(S >= 1, "prefill", "interleaved prefill needs S >= 1 refinement passes, got ", S);
    return {Kind::Interleaved, S};
  }
  /// "exact", "zero" or "interleaved:S" (S >= 1); lrt::Error otherwise.
  static PrefillMode parse(std::string_view s) {
    if (s == "exact") return exact();
    if (s == "zero") return zero();
    constexpr std::string_view pre = "interleaved:";
    if (s.substr(0, pre.size()) == pre) {
      const std::string_view num = s.substr(pre.size());
      long long S = 0;
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), S);
      if (ec == std::errc() && end == num.data() + num.size() && !num.empty() && S >= 1) return interleaved(S);
    }
    throw Error("prefill", detail::str_cat("expected exact, zero or interleaved:S with S >= 1, got '", std::string(s),
                                           "'"));
  }
  /// The spelling parse() reads.
  std::string name() const {
    switch (kind) {
      case Kind::Exact: return "exact";
      case Kind::Zero: return "zero";
      case Kind::Interleaved: return "interleaved:" + std::to_string(passes);
    }
    return "?";
  }
  friend bool operator==(const PrefillMode&, const PrefillMode&) = default;
};

/// Decodes B rows: prefill() feeds prompts (of any lengths), step() one token per row at each row's
/// own position; both return the soft-capped logits (B, V) of every row's next token.
template <class V = variants::Baseline, class T = float, Device D = cpu::Device>
class Decoder {
 public:
  using Model = lrt::Model<V, T, D>;
  using Var4 = ad::Var<T, 4, D>;

  /// A decoder for `batch` rows. capacity 0 (the default): rows may grow without limit (the cache
  /// is a window over the newest positions, see above); capacity > 0: at most that many positions
  /// per row (an lrt::Error past it), with a cache no larger than needed for them. sinks > 0: each
  /// query also attends to its row's first `sinks` positions once they leave its window (0: the
  /// model's own attention, what training computes).
  explicit Decoder(const Model& model, index_t batch = 1, index_t capacity = 0, index_t sinks = 0)
      : m_(&model), B_(batch), cap_(capacity), sinks_(sinks),
        pos_(static_cast<std::size_t>(std::max<index_t>(batch, 0)), 0),
        graph_(std::make_unique<ad::Graph>(ad::Graph::Detached{})),
        cos_(std::make_shared<Tensor<T, 2, D>>()), sin_(std::make_shared<Tensor<T, 2, D>>()) {
    check(batch >= 1, "decoder", "batch must be >= 1, got ", batch);
    check(capacity >= 0, "decoder", "capacity must be >= 0 (0: no limit), got ", capacity);
    check(sinks >= 0, "decoder", "the number of attention sinks must be >= 0, got ", sinks);
    const ModelConfig& c = model.config();
    for (index_t l = 0; l < c.n_layer; ++l) {
      // window(l) + 1 keys are visible; the buffer holds twice that (or the capacity, if smaller).
      const index_t W = c.window(l) + 1;
      const index_t N = cap_ > 0 ? std::min(cap_, 2 * W) : 2 * W;
      keys_.push_back(W), slide_.push_back(N), slots_.push_back(N + sinks_);
      k_.emplace_back(Shape<4>{B_, N + sinks_, c.n_kv_head, c.head_dim()});
      v_.emplace_back(Shape<4>{B_, N + sinks_, c.n_kv_head, c.head_dim()});
      if (sinks_ > 0) {
        sk_.emplace_back(Shape<4>{B_, sinks_, c.n_kv_head, c.head_dim()});
        sv_.emplace_back(Shape<4>{B_, sinks_, c.n_kv_head, c.head_dim()});
      }
      qpos_.emplace_back(Shape<1>{B_});
    }
    logits_ = Tensor<T, 2, D>(Shape<2>{B_, c.vocab_size});
    rows_.reserve(static_cast<std::size_t>(B_));
    tpos_.reserve(static_cast<std::size_t>(B_));
    if constexpr (V::recurrent) {  // ring of the last k source states and tokens per row
      ring_ = Tensor<T, 3, D>(Shape<3>{c.mem_offset, B_, c.n_embd});
      ring_tok_ = Tensor<index_t, 2>(Shape<2>{c.mem_offset, B_});
    }
  }

  index_t batch() const noexcept { return B_; }
  /// The most positions a row may reach; 0: no limit.
  index_t capacity() const noexcept { return cap_; }
  /// The attention sinks: the first positions of a row every query sees (0: none).
  index_t sinks() const noexcept { return sinks_; }
  /// The slots of layer l's cache per row (window(l) + 1 keys are ever read; see above).
  index_t cache_slots(index_t l) const {
    check(l >= 0 && l < static_cast<index_t>(slots_.size()), "decoder", "layer ", l, " outside [0, ", slots_.size(), ")");
    return slots_[static_cast<std::size_t>(l)];
  }
  /// The position of the next token: every row's while the rows are in lockstep, else the largest.
  index_t position() const noexcept { return *std::max_element(pos_.begin(), pos_.end()); }
  /// The position of row b's next token (the number of tokens it was fed).
  index_t position(index_t b) const {
    check(b >= 0 && b < B_, "decoder", "row ", b, " outside [0, ", B_, ")");
    return pos_[static_cast<std::size_t>(b)];
  }
  /// True when every row is at the same position (steps take the batched path).
  bool lockstep() const noexcept { return std::adjacent_find(pos_.begin(), pos_.end(), std::not_equal_to<>()) == pos_.end(); }
  /// The prefill mode in force (exact after construction and reset()); zero keeps the memory at 0.
  const PrefillMode& prefill_mode() const noexcept { return mode_; }
  /// The logits returned by the last prefill() or step().
  const Tensor<T, 2, D>& logits() const noexcept { return logits_; }
  /// Forgets the context (the cache is kept allocated); the prefill mode returns to exact.
  void reset() noexcept {
    std::fill(pos_.begin(), pos_.end(), index_t{0});
    mode_ = PrefillMode{};
  }

  /// Starts a new context from B prompts of P tokens each, row-major (B * P ids), fed the way `mode`
  /// says; returns the logits (B, V) after each row's last prompt token. Mode zero stays in force
  /// for the following steps (until reset() or the next prefill).
  const Tensor<T, 2, D>& prefill(std::span<const index_t> prompts, PrefillMode mode = {}) {
    check(!prompts.empty() && prompts.size() % static_cast<std::size_t>(B_) == 0, "decoder", "got ", prompts.size(),
          " prompt tokens for ", B_, " rows: expected B * P with P >= 1");
    const std::size_t P = prompts.size() / static_cast<std::size_t>(B_);
    std::vector<std::span<const index_t>> rows;
    for (std::size_t b = 0; b < static_cast<std::size_t>(B_); ++b) rows.push_back(prompts.subspan(b * P, P));
    return prefill_rows(rows, mode);
  }
  /// The same with one prompt per row, of any lengths >= 1: the rows continue at different positions.
  const Tensor<T, 2, D>& prefill(std::span<const std::vector<index_t>> prompts, PrefillMode mode = {}) {
    check(static_cast<index_t>(prompts.size()) == B_, "decoder", "got ", prompts.size(), " prompts for ", B_, " rows");
    std::vector<std::span<const index_t>> rows(prompts.begin(), prompts.end());
    return prefill_rows(rows, mode);
  }

  /// Feeds tokens (B), row b's at position(b); returns the next-token logits (B, V),
  /// softcap tanh(z / softcap) with the config's logit_softcap (15 by default).
  const Tensor<T, 2, D>& step(std::span<const index_t> tokens) {
    check(static_cast<index_t>(tokens.size()) == B_, "decoder", "got ", tokens.size(), " tokens for ", B_, " rows");
    feed(tokens, {});
    return logits_;
  }

  /// Whether this device can record steps into a graph (lrt::cuda::Device: CUDA graphs).
  static constexpr bool graphs_supported = !std::is_void_v<typename detail::step_graph_of<D>::type>;
  /// Records steps into a graph and replays it: one launch per token instead of one per kernel
  /// (several hundred). Applies to lockstep steps that feed every row (other steps run as before),
  /// with or without the recurrent memory (a change of that records the graph again). The first
  /// such step runs eagerly through the graph's code path (warm-up), the second records the
  /// graph, later ones replay it; the token ids, the position, its RoPE row and, with memory, the
  /// ring slots to read and write and which rows read a state (0 before k tokens or across a BOS)
  /// are copied into the graph's input buffers before each replay. Results are those of the eager
  /// path (the attention reads the whole cache buffer but, being causal, only keys <= the
  /// position). The graph reads the model's parameter buffers: update parameters in place, or
  /// record again (use_graphs(false), then true). An lrt::Error on devices without graphs.
  void use_graphs(bool on) {
    check(!on || graphs_supported, "decoder", "this device records no graphs (CUDA graphs need lrt::cuda::Device)");
    check(!on || sinks_ == 0, "decoder", "attention sinks run on the eager path: graphs need sinks = 0");
    use_graphs_ = on;
    if constexpr (graphs_supported)
      if (!on && step_graph_) step_graph_->reset();
  }
  bool graphs() const noexcept { return use_graphs_; }
  /// Steps replayed from the recorded graph so far.
  index_t graph_replays() const noexcept { return graph_replays_; }

 private:
  bool zero_memory() const noexcept { return mode_.kind == PrefillMode::Kind::Zero; }

  /// Whether row b, fed token `tok` at position t, reads no memory state (m~_t = 0, spec §3.1):
  /// before k tokens (t < k), or with reset_at_bos when the config's BOS id (cfg.bos()) lies in
  /// tokens t-k+1..t (the k-1 newest in the row's ring, and tok). Recurrent variants only.
  bool memory_cut(index_t b, index_t t, index_t tok) const {
    const ModelConfig& c = m_->config();
    const index_t k = c.mem_offset;
    if (t < k) return true;
    if (!c.reset_at_bos) return false;
    const index_t bos = c.bos();
    if (tok == bos) return true;
    for (index_t j = t - k + 1; j < t; ++j)
      if (ring_tok_(j % k, b) == bos) return true;
    return false;
  }

  /// The logits the decoder returns for head outputs z (rows, V): softcap tanh(z / softcap) with
  /// the config's logit_softcap (spec §2.4); an expression (z is held by value).
  template <class Z>
  auto capped(const Z& z) const {
    const T cap = static_cast<T>(m_->config().logit_softcap);
    return lrt::tanh(z / cap) * cap;
  }

  /// For one step: the decoder's tape is current (no gradient), and emptied after it.
  struct StepScope {
    ad::Graph& g;
    ad::Graph::Use use;
    ad::NoGrad no_grad;
    explicit StepScope(ad::Graph& graph) : g(graph), use(graph) {}
    ~StepScope() { g.clear(); }
  };

  /// CPU only. The attention kernel scores a query against its keys in a scratch block from the
  /// caching allocator whose size class grows with the context, so a later step can need a class
  /// that every earlier step left empty. Called after the first step of each step layout (lockstep
  /// or not, tokens fed, memory or not), when every tensor of that step is back in the cache: gives
  /// each class a step can use for one query row against up to Tmax keys `threads` more free blocks
  /// than the step itself took, so later steps of that layout are served without the system.
  void reserve_attention_scratch() {
    auto& a = cpu::CachingAllocator::global();
    const std::size_t threads = static_cast<std::size_t>(num_threads());
    std::vector<void*> held;
    std::size_t prev = 0;
    const index_t most = *std::max_element(slots_.begin(), slots_.end());
    for (index_t keys = 1; keys <= most; ++keys) {
      const std::size_t s = cpu::CachingAllocator::size_class(static_cast<std::size_t>(keys) * sizeof(T));
      if (s == prev) continue;
      prev = s;
      const std::size_t sys0 = a.stats().system_allocs;
      while (a.stats().system_allocs - sys0 < threads) held.push_back(a.allocate(s));  // free ones first
      for (void* p : held) a.deallocate(p, s);
      held.clear();
    }
  }

  /// The position in slot 0 of layer l's buffer while the newest position is t (see the top of
  /// this file): 0 until the buffer is full, then it advances by slots - keys + 1 at a time, so
  /// that positions t - window .. t always lie in the buffer.
  index_t base(index_t l, index_t t) const {
    const index_t W = keys_[static_cast<std::size_t>(l)], N = slide_[static_cast<std::size_t>(l)], u = t - W + 1;
    if (u <= 0) return 0;  // (a capacity smaller than 2 W bounds t below N, so u <= 0 for N <= W)
    const index_t s = N - W + 1;
    return u / s * s;
  }

  /// The slot of position p in layer l's buffer while the newest position is t.
  index_t slot_of(index_t l, index_t t, index_t p) const { return sinks_ + p - base(l, t); }

  /// Before a step: for every row fed and every layer, moves the keys still visible to the front
  /// when the row's base advances at this position, copies the sinks that left the window in front
  /// of it, and records the position's slot (slot_) and the first slot its query reads (lo_).
  void make_room() {
    const std::size_t L = k_.size();
    if (slot_.size() != L) {
      slot_.assign(L, std::vector<index_t>(static_cast<std::size_t>(B_)));
      lo_ = rel_ = slot_;
    }
    const ModelConfig& c = m_->config();
    for (std::size_t l = 0; l < L; ++l) {
      const index_t li = static_cast<index_t>(l);
      for (std::size_t i = 0; i < rows_.size(); ++i) {
        const index_t b = rows_[i], t = tpos_[lock_ ? 0 : i], nb = base(li, t);
        const index_t ob = t > 0 ? base(li, t - 1) : 0;
        if (nb != ob) {
          // Positions nb..t-1 move from slots sinks+nb-ob.. to sinks.. (disjoint: nb - ob > keys - 1).
          for (Tensor<T, 4, D>* cache : {&k_[l], &v_[l]}) {
            const auto row = cache->slice(0, b, b + 1);
            row.slice(1, sinks_, sinks_ + t - nb) =
                TensorView<const T, 4, D>(row.slice(1, sinks_ + nb - ob, sinks_ + t - ob));
          }
        }
        // The window starts at ws; sinks below it go into the slots just before ws's (keys of
        // positions < ws, which no later query reads, or the reserved first `sinks` slots).
        const index_t ws = t - std::min(t, c.window(li)), ns = std::min(sinks_, ws);
        const index_t lo = slot_of(li, t, ws) - ns;
        if (ns > 0) {
          for (std::size_t kv = 0; kv < 2; ++kv) {
            auto& cache = kv == 0 ? k_[l] : v_[l];
            auto& store = kv == 0 ? sk_[l] : sv_[l];
            cache.slice(0, b, b + 1).slice(1, lo, lo + ns) = store.view().slice(0, b, b + 1).slice(1, 0, ns);
          }
        }
        if (i < tpos_.size()) {
          slot_[l][i] = slot_of(li, t, t), lo_[l][i] = lo;
          rel_[l][i] = slot_[l][i] - lo;  // the query's index among the keys it reads
        }
      }
    }
  }

  /// Shared by both prefill overloads: validates, resets and feeds the prompts.
  const Tensor<T, 2, D>& prefill_rows(const std::vector<std::span<const index_t>>& prompts, PrefillMode mode) {
    const ModelConfig& c = m_->config();
    bool same = true;
    for (std::size_t b = 0; b < prompts.size(); ++b) {
      const index_t P = static_cast<index_t>(prompts[b].size());
      check(P >= 1, "decoder", "the prompt of row ", b, " is empty");
      check(cap_ == 0 || P <= cap_, "decoder", "the prompt of row ", b, " has ", P,
            " tokens, more than the decoder's capacity ", cap_);
      for (index_t tok : prompts[b])
        check(tok >= 0 && tok < c.vocab_size, "decoder", "token id ", tok, " outside the vocabulary [0, ",
              c.vocab_size, ")");
      same = same && prompts[b].size() == prompts[0].size();
    }
    check(mode.kind != PrefillMode::Kind::Interleaved || mode.passes >= 1, "decoder",
          "interleaved prefill needs S >= 1 refinement passes, got ", mode.passes);
    if (sinks_ > 0 && mode.kind != PrefillMode::Kind::Exact) {  // the parallel passes attend without sinks
      index_t shortest = c.window(0);
      for (index_t l = 1; l < c.n_layer; ++l) shortest = std::min(shortest, c.window(l));
      for (std::size_t b = 0; b < prompts.size(); ++b)
        check(static_cast<index_t>(prompts[b].size()) <= shortest + 1, "decoder", "the prompt of row ", b, " has ",
              prompts[b].size(), " tokens: with attention sinks a ", mode.name(),
              " prefill takes at most the shortest window + 1 = ", shortest + 1, " (use exact prefill)");
    }
    reset();
    mode_ = mode;
    if (mode.kind == PrefillMode::Kind::Exact) {  // token by token; rows drop out when their prompt ends
      std::size_t longest = 0;
      for (const auto& p : prompts) longest = std::max(longest, p.size());
      std::vector<index_t> tok, rows;
      for (std::size_t j = 0; j < longest; ++j) {
        tok.clear(), rows.clear();
        for (std::size_t b = 0; b < prompts.size(); ++b)
          if (j < prompts[b].size()) tok.push_back(prompts[b][j]), rows.push_back(static_cast<index_t>(b));
        feed(tok, rows.size() == prompts.size() ? std::span<const index_t>() : std::span<const index_t>(rows));
      }
      return logits_;
    }
    // zero: the zero-memory forward over the prompt (pass 0); interleaved: pass 0 + S passes.
    const index_t S = mode.kind == PrefillMode::Kind::Zero ? 0 : mode.passes;
    if (same) {
      load(prompts, 0, B_, S);
    } else {
      for (index_t b = 0; b < B_; ++b) load(prompts, b, 1, S);
    }
    return logits_;
  }

  /// Runs interleaved_prefill on rows [b0, b0 + nb) (prompts of one length) and loads its buffers
  /// into their cache, memory ring, logits and positions.
  void load(const std::vector<std::span<const index_t>>& prompts, index_t b0, index_t nb, index_t S) {
    const ModelConfig& c = m_->config();
    const index_t P = static_cast<index_t>(prompts[static_cast<std::size_t>(b0)].size());
    Tensor<index_t, 2> ids_host(Shape<2>{nb, P});
    for (index_t b = 0; b < nb; ++b)
      std::copy(prompts[static_cast<std::size_t>(b0 + b)].begin(), prompts[static_cast<std::size_t>(b0 + b)].end(),
                ids_host.data() + b * P);
    const Tensor<index_t, 2, D> ids = lrt::on_device<D>(std::move(ids_host));
    const PrefillState<T, D> st = interleaved_prefill(*m_, ids, S);
    for (std::size_t l = 0; l < k_.size(); ++l) {  // positions base..P-1 into their slots
      const index_t lo = base(static_cast<index_t>(l), P - 1);
      k_[l].slice(0, b0, b0 + nb).slice(1, sinks_, sinks_ + P - lo) = st.k[l].view().slice(1, lo, P);
      v_[l].slice(0, b0, b0 + nb).slice(1, sinks_, sinks_ + P - lo) = st.v[l].view().slice(1, lo, P);
      if (sinks_ > 0) {  // the first positions, kept aside
        const index_t ns = std::min(sinks_, P);
        sk_[l].slice(0, b0, b0 + nb).slice(1, 0, ns) = st.k[l].view().slice(1, 0, ns);
        sv_[l].slice(0, b0, b0 + nb).slice(1, 0, ns) = st.v[l].view().slice(1, 0, ns);
      }
    }
    if constexpr (V::recurrent) {  // the ring holds s_p of the last k prompt positions
      const index_t k = c.mem_offset;
      for (index_t p = std::max<index_t>(0, P - k); p < P; ++p) {
        ring_.view().select(0, p % k).slice(0, b0, b0 + nb) = st.source.view().select(1, p);
        for (index_t b = b0; b < b0 + nb; ++b)
          ring_tok_(p % k, b) = prompts[static_cast<std::size_t>(b)][static_cast<std::size_t>(p)];
      }
    }
    logits_.slice(0, b0, b0 + nb) = st.logits;
    for (index_t b = b0; b < b0 + nb; ++b) pos_[static_cast<std::size_t>(b)] = P;
  }

  /// One decode step: tokens[i] goes to row rows[i] (rows ascending and distinct; empty: all rows,
  /// tokens[b] to row b) at that row's position. Writes those rows of logits_.
  void feed(std::span<const index_t> tokens, std::span<const index_t> rows) {
    run_step(tokens, rows);
    if constexpr (std::is_same_v<D, cpu::Device>) {  // every tensor of the step is back in the cache
      if (std::find(layouts_.begin(), layouts_.end(), layout_) == layouts_.end()) {
        reserve_attention_scratch();
        layouts_.push_back(layout_);
      }
    }
  }

  void run_step(std::span<const index_t> tokens, std::span<const index_t> rows) {
    const ModelConfig& c = m_->config();
    const index_t n = static_cast<index_t>(tokens.size());
    const auto row = [&](index_t i) { return rows.empty() ? i : rows[static_cast<std::size_t>(i)]; };
    rows_.clear(), tpos_.clear();
    for (index_t i = 0; i < n; ++i) {
      const index_t b = row(i), tok = tokens[static_cast<std::size_t>(i)];
      check(b >= 0 && b < B_ && (i == 0 || b > row(i - 1)), "decoder", "rows must be ascending and in [0, ", B_, ")");
      const index_t t = pos_[static_cast<std::size_t>(b)];
      check(cap_ == 0 || t < cap_, "decoder", "context full: position ", t, " of row ", b,
            " is past the decoder's capacity ", cap_, " (capacity 0: no limit)");
      check(t < (index_t{1} << 40), "decoder", "position ", t, " of row ", b, " is past 2^40");
      check(tok >= 0 && tok < c.vocab_size, "decoder", "token id ", tok, " outside the vocabulary [0, ", c.vocab_size,
            ")");
      rows_.push_back(b), tpos_.push_back(t);
    }
    lock_ = n == B_ && lockstep();
    if (lock_) tpos_.resize(1);  // one query position for the whole batch
    const index_t nq = static_cast<index_t>(tpos_.size());
    const bool use_memory = V::recurrent && !zero_memory();
    make_room();
    if constexpr (graphs_supported) {
      if (use_graphs_ && lock_) {
        graph_step(tokens, use_memory);
        for (index_t b : rows_) ++pos_[static_cast<std::size_t>(b)];
        layout_ = {lock_, n, use_memory};
        return;
      }
    }

    const StepScope scope(*graph_);

    // Token ids: (B, 1) in lockstep, else (1, n).
    Tensor<index_t, 2> ids_host(lock_ ? Shape<2>{B_, 1} : Shape<2>{1, n}, uninitialized);
    std::copy(tokens.begin(), tokens.end(), ids_host.data());
    const Tensor<index_t, 2, D> ids = lrt::on_device<D>(std::move(ids_host));
    // Query slots per layer and the RoPE rows of the positions (computed as RopeTable::make does).
    for (std::size_t l = 0; l < qpos_.size(); ++l)
      DeviceTraits<D>::copy_from_host(qpos_[l].data(), rel_[l].data(), static_cast<std::size_t>(nq) * sizeof(index_t));
    {
      auto [cs, sn] = lrt::rope_tables<T>(TensorView<const index_t, 1>(tpos_.data(), Shape<1>{nq}), c.head_dim(),
                                          c.rope_bf16_tables);
      if constexpr (std::is_same_v<D, cpu::Device>) {
        *cos_ = std::move(cs), *sin_ = std::move(sn);
      } else {
        *cos_ = to<D>(cs), *sin_ = to<D>(sn);
      }
    }
    const ad::RopeTable<T, D> rope{cos_, sin_};
    const typename Model::Attend attend = [this](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      return this->attend(l, q, k, v);
    };

    typename Model::Var3 mem;
    if constexpr (V::recurrent) {  // m~_t = s_{t-k} (0 before k, or across a BOS with reset_at_bos)
      if (use_memory) {
        const index_t k = c.mem_offset;
        Tensor<T, 3, D> m(lock_ ? Shape<3>{B_, 1, c.n_embd} : Shape<3>{1, n, c.n_embd});
        for (index_t i = 0; i < n; ++i) {
          const index_t b = rows_[static_cast<std::size_t>(i)], t = pos_[static_cast<std::size_t>(b)];
          if (memory_cut(b, t, tokens[static_cast<std::size_t>(i)])) continue;
          const auto src = ring_.view().select(0, (t - k) % k).slice(0, b, b + 1);  // (1, d)
          if (lock_) {
            m.view().select(1, 0).slice(0, b, b + 1) = src;
          } else {
            m.view().select(0, 0).slice(0, i, i + 1) = src;
          }
        }
        mem = ad::constant(std::move(m));
      }
    }
    const auto pass = m_->forward(ids, rope, attend, use_memory ? &mem : nullptr);
    if constexpr (V::recurrent) {
      if (use_memory) {
        const index_t k = c.mem_offset;
        const auto s = pass.source.value().view();  // (B, 1, d) or (1, n, d)
        if (lock_) {
          ring_.view().select(0, tpos_[0] % k) = s.select(1, 0);
        } else {
          for (index_t i = 0; i < n; ++i) {
            const index_t b = rows_[static_cast<std::size_t>(i)];
            ring_.view().select(0, pos_[static_cast<std::size_t>(b)] % k).slice(0, b, b + 1) =
                s.select(0, 0).slice(0, i, i + 1);
          }
        }
        for (index_t i = 0; i < n; ++i) {
          const index_t b = rows_[static_cast<std::size_t>(i)];
          ring_tok_(pos_[static_cast<std::size_t>(b)] % k, b) = tokens[static_cast<std::size_t>(i)];
        }
      }
    }
    const auto z = m_->head(pass.h);  // (B, 1, Vp) or (1, n, Vp)
    if (lock_) {
      logits_ = capped(z.value().view().select(1, 0).slice(1, 0, c.vocab_size));
    } else {
      const auto zr = z.value().view().select(0, 0);  // (n, Vp)
      for (index_t i = 0; i < n; ++i) {
        const index_t b = rows_[static_cast<std::size_t>(i)];
        logits_.slice(0, b, b + 1) = capped(zr.slice(0, i, i + 1).slice(1, 0, c.vocab_size));
      }
    }
    for (index_t b : rows_) ++pos_[static_cast<std::size_t>(b)];
    layout_ = {lock_, n, use_memory};
  }

  /// A lockstep step through the graph (see use_graphs): inputs into the graph's buffers, then the
  /// body run eagerly (first step), recorded and replayed (second), or replayed (later).
  void graph_step(std::span<const index_t> tokens, bool use_memory) {
    if constexpr (graphs_supported) {
      const ModelConfig& c = m_->config();
      const index_t t = tpos_[0];
      if (gwpos_.empty()) {  // the graph's input buffers: allocated once, refilled in place
        for (const auto& sl : slot_) gwpos_.push_back(std::make_unique<IndexList<D>>(std::vector<index_t>{sl[0]}));
        gids_ = Tensor<index_t, 2, D>(Shape<2>{B_, 1}, uninitialized);
        gcos_ = std::make_shared<Tensor<T, 2, D>>(Shape<2>{1, c.head_dim() / 2});
        gsin_ = std::make_shared<Tensor<T, 2, D>>(Shape<2>{1, c.head_dim() / 2});
        step_graph_ = std::make_unique<typename detail::step_graph_of<D>::type>();
        if constexpr (V::recurrent) {
          gslot_r_ = std::make_unique<IndexList<D>>(std::vector<index_t>{0});
          gslot_w_ = std::make_unique<IndexList<D>>(std::vector<index_t>{0});
          gmask_ = Tensor<T, 3, D>(Shape<3>{1, B_, 1});
          gmask_host_.assign(static_cast<std::size_t>(B_), T(0));
        }
      } else {
        for (std::size_t l = 0; l < gwpos_.size(); ++l) gwpos_[l]->assign(std::span<const index_t>(slot_[l].data(), 1));
      }
      if constexpr (V::recurrent) {
        if (use_memory) {  // m~_t = s_{t-k} per row (0 before k, or across a BOS with reset_at_bos)
          const index_t k = c.mem_offset, r = t >= k ? (t - k) % k : 0, w = t % k;
          for (index_t b = 0; b < B_; ++b) {
            const bool cut = memory_cut(b, t, tokens[static_cast<std::size_t>(b)]);
            gmask_host_[static_cast<std::size_t>(b)] = cut ? T(0) : T(1);
          }
          gslot_r_->assign(std::span<const index_t>(&r, 1));
          gslot_w_->assign(std::span<const index_t>(&w, 1));
          DeviceTraits<D>::copy_from_host(gmask_.data(), gmask_host_.data(), gmask_host_.size() * sizeof(T));
          for (index_t b = 0; b < B_; ++b) ring_tok_(w, b) = tokens[static_cast<std::size_t>(b)];
        }
      }
      if (step_graph_->ready() && graph_memory_ != use_memory) step_graph_->reset();  // the other layout
      DeviceTraits<D>::copy_from_host(gids_.data(), tokens.data(), static_cast<std::size_t>(B_) * sizeof(index_t));
      auto [cs, sn] = lrt::rope_tables<T>(TensorView<const index_t, 1>(&t, Shape<1>{1}), c.head_dim(), c.rope_bf16_tables);
      DeviceTraits<D>::copy_from_host(gcos_->data(), cs.data(), static_cast<std::size_t>(cs.numel()) * sizeof(T));
      DeviceTraits<D>::copy_from_host(gsin_->data(), sn.data(), static_cast<std::size_t>(sn.numel()) * sizeof(T));
      if (step_graph_->ready()) {
        step_graph_->launch();
        ++graph_replays_;
      } else if (graph_warm_) {
        step_graph_->capture([this, use_memory] { graph_body(use_memory); });
        graph_memory_ = use_memory;
        step_graph_->launch();
        ++graph_replays_;
      } else {
        graph_body(use_memory);
        graph_warm_ = true;
      }
    }
  }

  /// What the graph records: the forward of the B tokens in gids_ in cache slots gwpos_ (no wait for
  /// the device, every temporary freed before it returns).
  void graph_body(bool use_memory) {
    const ModelConfig& c = m_->config();
    const StepScope scope(*graph_);
    const ad::RopeTable<T, D> rope{gcos_, gsin_};
    const ad::TokenIds<D> tok(gids_, c.padded_vocab(), /*checked=*/true);  // run_step checked the tokens
    const typename Model::Attend attend = [this](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      const ModelConfig& cc = m_->config();
      auto& kc = k_[static_cast<std::size_t>(l)];
      auto& vc = v_[static_cast<std::size_t>(l)];
      const IndexList<D>& at = *gwpos_[static_cast<std::size_t>(l)];
      kc.view().gather(1, at) = k.value();  // slot t of every row's cache, t read on the device
      vc.view().gather(1, at) = v.value();
      Tensor<T, 4, D> out(q.shape(), uninitialized);
      Tensor<T, 3, D> lse(Shape<3>{B_, cc.n_head, 1}, uninitialized);
      NnBackend<D>::template attention_forward<T>(q.value().view(), TensorView<const T, 4, D>(kc.view()),
                                                  TensorView<const T, 4, D>(vc.view()), at.tensor().view(),
                                                  cc.window(l), T(1) / std::sqrt(static_cast<T>(cc.head_dim())),
                                                  out.view(), lse.view(), /*qpos_checked=*/true);  // t < Tmax
      return ad::constant(std::move(out));
    };
    typename Model::Var3 mem;
    if constexpr (V::recurrent) {
      if (use_memory) {  // row b reads ring slot r (both on the device), times its mask (0 or 1)
        Tensor<T, 3, D> m(Shape<3>{B_, 1, c.n_embd}, uninitialized);
        m.view().template reshape<3>(Shape<3>{1, B_, c.n_embd}) = ring_.view().gather(0, *gslot_r_) * gmask_.view();
        mem = ad::constant(std::move(m));
      }
    }
    const auto pass = m_->forward(tok, rope, attend, use_memory ? &mem : nullptr);
    if constexpr (V::recurrent) {
      if (use_memory) ring_.view().gather(0, *gslot_w_) = pass.source.value().view().select(1, 0);  // slot t % k
    }
    const auto z = m_->head(pass.h);  // (B, 1, Vp)
    logits_ = capped(z.value().view().select(1, 0).slice(1, 0, c.vocab_size));
  }

  /// The attend hook of a step: appends the new keys and values to the cache and attends each
  /// query to its row's cached positions (spec §2.2 window rule).
  Var4 attend(index_t l, const Var4& q, const Var4& k, const Var4& v) {
    const ModelConfig& c = m_->config();
    auto& kc = k_[static_cast<std::size_t>(l)];
    auto& vc = v_[static_cast<std::size_t>(l)];
    const T scale = T(1) / std::sqrt(static_cast<T>(c.head_dim()));
    Tensor<T, 4, D> out(q.shape(), uninitialized);
    // The keys a query reads: slots lo..t, all visible (the window, after any sinks in front).
    const auto keys = [](Tensor<T, 4, D>& cache, index_t b0, index_t b1, index_t lo, index_t t) {
      return TensorView<const T, 4, D>(cache.slice(0, b0, b1).slice(1, lo, t + 1));
    };
    const std::size_t ls = static_cast<std::size_t>(l);
    const auto &slot = slot_[ls], &lo = lo_[ls];
    const auto& qpos = qpos_[ls];
    const auto keep_sink = [&](index_t b0, index_t b1, index_t pos, index_t j) {  // the first positions
      if (pos >= sinks_) return;
      sk_[ls].slice(0, b0, b1).slice(1, pos, pos + 1) = k.value().view().slice(1, j, j + 1);
      sv_[ls].slice(0, b0, b1).slice(1, pos, pos + 1) = v.value().view().slice(1, j, j + 1);
    };
    if (lock_) {  // (B, 1): every row at position tpos_[0], in slot t
      const index_t t = slot[0];
      kc.slice(1, t, t + 1) = k.value();
      vc.slice(1, t, t + 1) = v.value();
      keep_sink(0, B_, tpos_[0], 0);
      Tensor<T, 3, D> lse(Shape<3>{B_, c.n_head, 1}, uninitialized);
      NnBackend<D>::template attention_forward<T>(q.value().view(), keys(kc, 0, B_, lo[0], t), keys(vc, 0, B_, lo[0], t),
                                                  qpos.view().slice(0, 0, 1), t - lo[0], scale, out.view(),
                                                  lse.view(), /*qpos_checked=*/true);  // the last key
    } else {  // (1, n): token i is row rows_[i] at position tpos_[i], in slot slot[i]
      Tensor<T, 3, D> lse(Shape<3>{1, c.n_head, 1}, uninitialized);
      for (std::size_t i = 0; i < rows_.size(); ++i) {
        const index_t b = rows_[i], t = slot[i], j = static_cast<index_t>(i);
        kc.slice(0, b, b + 1).slice(1, t, t + 1) = k.value().view().slice(1, j, j + 1);
        vc.slice(0, b, b + 1).slice(1, t, t + 1) = v.value().view().slice(1, j, j + 1);
        keep_sink(b, b + 1, tpos_[i], j);
        NnBackend<D>::template attention_forward<T>(q.value().view().slice(1, j, j + 1), keys(kc, b, b + 1, lo[i], t),
                                                    keys(vc, b, b + 1, lo[i], t), qpos.view().slice(0, j, j + 1),
                                                    t - lo[i], scale, out.view().slice(1, j, j + 1), lse.view(),
                                                    /*qpos_checked=*/true);  // the last key
      }
    }
    return ad::constant(std::move(out));
  }

  const Model* m_;
  index_t B_, cap_, sinks_;
  std::vector<index_t> pos_;  // per row: the position of its next token
  PrefillMode mode_;
  std::vector<Tensor<T, 4, D>> k_, v_;  // per layer (B, slots_[l], Hkv, Dh)
  std::vector<Tensor<T, 4, D>> sk_, sv_;  // per layer (B, sinks, Hkv, Dh): the first positions' K/V
  std::vector<index_t> keys_, slide_, slots_;  // per layer: window + 1; the window's slots; all slots
  Tensor<T, 2, D> logits_;
  Tensor<T, 3, D> ring_;         // (k, B, d) source states, slot t % k
  Tensor<index_t, 2> ring_tok_;  // (k, B) their tokens (host)
  // Per step (kept to allocate nothing): the tape, RoPE rows, query positions, rows fed.
  std::unique_ptr<ad::Graph> graph_;
  std::shared_ptr<Tensor<T, 2, D>> cos_, sin_;  // (nq, Dh/2)
  std::vector<Tensor<index_t, 1, D>> qpos_;     // per layer (B): rel_ on the device (eager steps)
  std::vector<index_t> rows_, tpos_;            // rows fed and their positions (lockstep: one position)
  std::vector<std::vector<index_t>> slot_, lo_, rel_;  // per layer: the slots of tpos_, the first
                                                      // slot each query reads, slot - lo
  bool lock_ = false;
  // Graphs (use_graphs): the recorded step and its input buffers (ids, position, RoPE row).
  struct NoGraph {
    bool ready() const noexcept { return false; }
    void reset() noexcept {}
  };
  using StepGraphT = std::conditional_t<graphs_supported, typename detail::step_graph_of<D>::type, NoGraph>;
  bool use_graphs_ = false, graph_warm_ = false;
  index_t graph_replays_ = 0;
  std::unique_ptr<StepGraphT> step_graph_;
  std::vector<std::unique_ptr<IndexList<D>>> gwpos_;       // per layer: the cache slot of the position
  std::unique_ptr<IndexList<D>> gslot_r_, gslot_w_;          // ring slots read / written
  Tensor<index_t, 2, D> gids_;
  Tensor<T, 3, D> gmask_;             // (1, B, 1): 1 where the row reads a state
  std::vector<T> gmask_host_;
  bool graph_memory_ = false;         // the recorded graph's layout
  std::shared_ptr<Tensor<T, 2, D>> gcos_, gsin_;
  std::array<index_t, 3> layout_{};                // the last step's (lockstep, tokens, memory)
  std::vector<std::array<index_t, 3>> layouts_;  // CPU: layouts whose attention scratch is reserved
};

template <class V, class T, Device D>
Decoder(const Model<V, T, D>&, index_t = 1, index_t = 0, index_t = 0) -> Decoder<V, T, D>;

struct SamplerOptions {
  double temperature = 1.0;  // 0: greedy (argmax, ties to the lowest id)
  index_t top_k = 0;         // > 0: keep the k largest logits (ties at the k-th kept)
  double top_p = 1.0;        // < 1: keep the shortest most-probable prefix with mass >= p
  std::uint64_t seed = 0;
};

/// The sampler's counter for row `row` at position `t`: row * 2^40 + t, unique per (row, position)
/// for any length a decoder reaches (positions < 2^40, rows < 2^24); row 0's is t.
inline std::uint64_t sample_counter(index_t row, index_t t) {
  check(row >= 0 && row < (index_t{1} << 24) && t >= 0 && t < (index_t{1} << 40), "sample",
        "counter for row ", row, " at position ", t, " outside rows [0, 2^24) x positions [0, 2^40)");
  return (static_cast<std::uint64_t>(row) << 40) | static_cast<std::uint64_t>(t);
}

/// Picks the next token from logits (V) per spec §6. `counter` selects the uniform draw of lrt's
/// Philox stream (key = seed): pass sample_counter(row, t) so that every backend draws the same
/// number and no two (row, position) pairs share one.
template <class T>
index_t sample_token(std::span<const T> logits, const SamplerOptions& o, std::uint64_t counter) {
  const index_t V = static_cast<index_t>(logits.size());
  check(V > 0, "sample", "empty logits");
  check(o.temperature >= 0, "sample", "temperature must be >= 0, got ", o.temperature);
  check(o.top_p > 0 && o.top_p <= 1, "sample", "top_p must be in (0, 1], got ", o.top_p);
  check(o.top_k >= 0, "sample", "top_k must be >= 0, got ", o.top_k);
  if (o.temperature == 0) return static_cast<index_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Scratch reused by this thread (no allocation per token after the first).
  thread_local std::vector<double> prob;
  thread_local std::vector<index_t> order;
  prob.assign(logits.begin(), logits.end());
  if (o.top_k > 0 && o.top_k < V) {
    thread_local std::vector<double> tmp;
    tmp.assign(prob.begin(), prob.end());
    std::nth_element(tmp.begin(), tmp.begin() + (o.top_k - 1), tmp.end(), std::greater<double>());
    const double kth = tmp[static_cast<std::size_t>(o.top_k - 1)];
    for (double& x : prob)
      if (x < kth) x = -std::numeric_limits<double>::infinity();
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (double& x : prob) mx = std::max(mx, x /= o.temperature);
  double sum = 0;
  for (double& x : prob) sum += (x = std::exp(x - mx));
  for (double& x : prob) x /= sum;
  if (o.top_p < 1) {
    order.resize(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), index_t{0});
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return prob[a] > prob[b]; });
    double cum = 0;
    std::size_t keep = 0;
    while (keep < order.size() && (keep == 0 || cum < o.top_p)) cum += prob[static_cast<std::size_t>(order[keep++])];
    for (std::size_t i = keep; i < order.size(); ++i) prob[static_cast<std::size_t>(order[i])] = 0;
    for (double& x : prob) x /= cum;
  }
  // One draw u in [0, 1), then the first id (ascending) whose cumulative mass exceeds u.
  const double u = lrt::detail::unit_float(Philox::generate(o.seed, counter).v[0]);
  double cum = 0;
  index_t last = 0;
  for (index_t i = 0; i < V; ++i) {
    if (prob[static_cast<std::size_t>(i)] <= 0) continue;
    last = i;
    cum += prob[static_cast<std::size_t>(i)];
    if (u < cum) return i;
  }
  return last;  // rounding left u above the total: the last kept id
}

}  // namespace v0
}  // namespace lrt
