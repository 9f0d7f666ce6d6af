// lrt/decode/decoder.hpp: KV-cache decoding (one forward per token, spec §6) with the prefill modes
// exact, zero and interleaved:S, and rows of different lengths in one batch. The decoder runs the
// model's own block code with an attend hook that appends the new key and value to a preallocated
// cache and attends over it; no gradient is recorded. Here too: the memory ring's BOS cut
// (MemoryRing::reads_state); the soft-capped logits are model/gpt.hpp's capped_logits. Not here: the
// recorded step (decode/graph_step.hpp) and the sampler (decode/sampler.hpp).
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
// Shared with LeanDecoder (decode/lean.hpp): the block's forward (model/block.hpp, here on the
// tape), the cache geometry and its two copies (a step's slide, a prompt's load), the memory
// ring's slots, the prompt and step checks (decode/decode_state.hpp), and the pass plan: the
// interleaved subsets, the memory's BOS cut and the pass loop (model/training_schedules/
// pass_plan.hpp; this decoder's interleaved prefill is the training schedule's subset_passes), and
// attention sinks (LeanDecoder::Options::sinks, bit for bit). LeanDecoder's alone: fixed-point and approximate prefill,
// packed int8/bf16 weights, and state in the caller's arena with no allocation at all.
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
#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../model/gpt.hpp"
#include "../model/training_schedule.hpp"
#include "decode_state.hpp"
#include "graph_step.hpp"
#include "prefill_mode.hpp"

namespace lrt {
inline namespace v0 {

/// The recurrent memory of a decoder's rows: the source states of each row's last k positions and
/// their tokens, position t in slot t % k (k = the config's mem_offset).
template <class T, Device D>
struct MemoryRing {
  Tensor<T, 3, D> states;     // (k, B, d) source states, slot t % k
  Tensor<index_t, 2> tokens;  // (k, B) their tokens (host)

  /// The BOS cut: whether row b, fed token `tok` at position t, reads the state s_{t-k}
  /// (m~_t = s_{t-k}, spec §3.1) or none (m~_t = 0): none before k tokens (t < k), nor with
  /// reset_at_bos when the config's BOS id (c.bos()) lies in tokens t-k+1..t (the k-1 newest in
  /// the row's ring, and tok).
  bool reads_state(const ModelConfig& c, index_t b, index_t t, index_t tok) const {
    return lrt::reads_state(c, t, tok, [&](index_t j) { return tokens(j % c.mem_offset, b); });
  }
  /// The slot of the state that position t reads (s_{t-k}; 0 before k, where none is read).
  static index_t read_slot(index_t k, index_t t) noexcept { return ring_read_slot(k, t); }
  /// The slot position t's state and token go to.
  static index_t write_slot(index_t k, index_t t) noexcept { return ring_write_slot(k, t); }
  /// Row b's token at position t, into its slot (its state is written by the step).
  void keep_token(index_t k, index_t b, index_t t, index_t tok) { tokens(write_slot(k, t), b) = tok; }
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
      : m_(&model),
        B_(batch),
        cap_(capacity),
        sinks_(sinks),
        pos_(static_cast<std::size_t>(std::max<index_t>(batch, 0)), 0) {
    check(batch >= 1, "decoder", "batch must be >= 1, got ", batch);
    check(capacity >= 0, "decoder", "capacity must be >= 0 (0: no limit), got ", capacity);
    check(sinks >= 0, "decoder", "the number of attention sinks must be >= 0, got ", sinks);
    const ModelConfig& c = model.config();
    for (index_t l = 0; l < c.n_layer; ++l) {
      // window(l) + 1 keys are visible; the buffer holds twice that (or the capacity, if smaller).
      const KvWindow win = KvWindow::of(c, l, cap_);
      const index_t N = win.slots;
      kv_.win.push_back(win), kv_.slots.push_back(N + sinks_);
      kv_.k.emplace_back(Shape<4>{B_, N + sinks_, c.n_kv_head, c.head_dim()});
      kv_.v.emplace_back(Shape<4>{B_, N + sinks_, c.n_kv_head, c.head_dim()});
      if (sinks_ > 0) {
        kv_.sk.emplace_back(Shape<4>{B_, sinks_, c.n_kv_head, c.head_dim()});
        kv_.sv.emplace_back(Shape<4>{B_, sinks_, c.n_kv_head, c.head_dim()});
      }
      step_.qpos.emplace_back(Shape<1>{B_});
    }
    logits_ = Tensor<T, 2, D>(Shape<2>{B_, c.vocab_size});
    step_.rows.reserve(static_cast<std::size_t>(B_));
    step_.tpos.reserve(static_cast<std::size_t>(B_));
    if constexpr (V::recurrent) {  // ring of the last k source states and tokens per row
      mem_.states = Tensor<T, 3, D>(Shape<3>{c.mem_offset, B_, c.n_embd});
      mem_.tokens = Tensor<index_t, 2>(Shape<2>{c.mem_offset, B_});
    }
  }

  index_t batch() const noexcept { return B_; }
  const Model& model() const noexcept { return *m_; }
  /// The most positions a row may reach; 0: no limit.
  index_t capacity() const noexcept { return cap_; }
  /// The attention sinks: the first positions of a row every query sees (0: none).
  index_t sinks() const noexcept { return sinks_; }
  /// The slots of layer l's cache per row (window(l) + 1 keys are ever read; see above).
  index_t cache_slots(index_t l) const {
    check(l >= 0 && l < static_cast<index_t>(kv_.slots.size()), "decoder", "layer ", l, " outside [0, ",
          kv_.slots.size(), ")");
    return kv_.slots[static_cast<std::size_t>(l)];
  }
  /// The position of the next token: every row's while the rows are in lockstep, else the largest.
  index_t position() const noexcept { return *std::max_element(pos_.begin(), pos_.end()); }
  /// The position of row b's next token (the number of tokens it was fed).
  index_t position(index_t b) const {
    check(b >= 0 && b < B_, "decoder", "row ", b, " outside [0, ", B_, ")");
    return pos_[static_cast<std::size_t>(b)];
  }
  /// True when every row is at the same position (steps take the batched path).
  bool lockstep() const noexcept {
    return std::adjacent_find(pos_.begin(), pos_.end(), std::not_equal_to<>()) == pos_.end();
  }
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

  /// Starts a new context in which every row has the same prompt: it is fed once, on row 0, the
  /// way `mode` says, and row 0's cache, memory ring and position are copied to the other rows,
  /// which then continue on their own with step() (the options of one prompt, or several
  /// completions of it, without computing the prompt B times). Returns the logits (B, V), every
  /// row's the same: what prefill() gives with the prompt on every row, but from a one-row pass
  /// (so equal to within rounding, not bit for bit, where the batched products round differently).
  const Tensor<T, 2, D>& prefill_shared(std::span<const index_t> prompt, PrefillMode mode = {}) {
    prefill_rows({prompt}, mode);
    const auto row = [](auto& t, index_t b) { return t.view().slice(0, b, b + 1); };
    for (index_t b = 1; b < B_; ++b) {
      for (std::size_t l = 0; l < kv_.k.size(); ++l) {
        row(kv_.k[l], b) = row(kv_.k[l], 0);
        row(kv_.v[l], b) = row(kv_.v[l], 0);
        if (sinks_ > 0) row(kv_.sk[l], b) = row(kv_.sk[l], 0), row(kv_.sv[l], b) = row(kv_.sv[l], 0);
      }
      if constexpr (V::recurrent) {
        mem_.states.view().slice(1, b, b + 1) = mem_.states.view().slice(1, 0, 1);
        for (index_t s = 0; s < mem_.tokens.shape()[0]; ++s) mem_.tokens(s, b) = mem_.tokens(s, 0);
      }
      row(logits_, b) = row(logits_, 0);
      pos_[static_cast<std::size_t>(b)] = pos_[0];
    }
    return logits_;
  }

  /// Feeds tokens (B), row b's at position(b); returns the next-token logits (B, V),
  /// softcap tanh(z / softcap) with the config's logit_softcap (15 by default).
  const Tensor<T, 2, D>& step(std::span<const index_t> tokens) {
    check(static_cast<index_t>(tokens.size()) == B_, "decoder", "got ", tokens.size(), " tokens for ", B_, " rows");
    feed(tokens, {});
    return logits_;
  }

  /// Whether this device can record steps into a graph (lrt::cuda::Device: CUDA graphs).
  static constexpr bool graphs_supported = GraphStep<T, D, V::recurrent>::supported;
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
    graph_.enable(on);
  }
  bool graphs() const noexcept { return graph_.on(); }
  /// Steps replayed from the recorded graph so far.
  index_t graph_replays() const noexcept { return graph_.replays(); }

 private:
  /// Layer l's cache (see the top of this file): its keys and values, and how they slide.
  struct KvCache {
    std::vector<Tensor<T, 4, D>> k, v;    // per layer (B, slots[l], Hkv, Dh)
    std::vector<Tensor<T, 4, D>> sk, sv;  // per layer (B, sinks, Hkv, Dh): the first positions' K/V
    std::vector<KvWindow> win;            // per layer: the window's geometry (decode/decode_state.hpp)
    std::vector<index_t> slots;           // per layer: all slots (the window's and the sinks)

    /// The position in slot 0 (after the sinks) of layer l's buffer while the newest position is t.
    index_t base(index_t l, index_t t) const { return win[static_cast<std::size_t>(l)].base(t); }
  };

  /// What a step works with, kept between steps so that a step allocates nothing: the tape, the
  /// RoPE rows and query positions of the tokens fed, and where they go in the cache.
  struct StepState {
    std::unique_ptr<ad::Graph> tape = std::make_unique<ad::Graph>(ad::Graph::Detached{});
    std::shared_ptr<Tensor<T, 2, D>> cos = std::make_shared<Tensor<T, 2, D>>();  // (nq, Dh/2)
    std::shared_ptr<Tensor<T, 2, D>> sin = std::make_shared<Tensor<T, 2, D>>();
    std::vector<Tensor<index_t, 1, D>> qpos;          // per layer (B): rel on the device (eager steps)
    std::vector<index_t> rows, tpos;                  // rows fed and their positions (lockstep: one position)
    std::vector<std::vector<index_t>> slot, lo, rel;  // per layer: the slots of tpos, the first slot
                                                      // each query reads, slot - lo
    bool lock = false;                                // the lockstep path: (B, 1), one position
  };

  /// CPU: the step layouts (lockstep, tokens fed, memory) whose attention scratch is reserved.
  struct Scratch {
    std::array<index_t, 3> layout{};               // the last step's
    std::vector<std::array<index_t, 3>> reserved;  // those reserved so far
  };

  bool zero_memory() const noexcept { return mode_.kind == PrefillMode::Kind::Zero; }

  /// Whether row b, fed token `tok` at position t, reads a memory state (see MemoryRing).
  bool reads_state(index_t b, index_t t, index_t tok) const { return mem_.reads_state(m_->config(), b, t, tok); }

  /// The returned logits from head outputs z: (B, 1, Vp) on the lockstep path, every row's; else
  /// (1, n, Vp), token i's into row rows[i] (spec §2.4 softcap, the vocabulary cropped).
  template <class Z>
  void store_logits(const Z& z, bool lock) {
    const ModelConfig& c = m_->config();
    if (lock) {
      logits_ = capped_logits<T>(z.view().select(1, 0).slice(1, 0, c.vocab_size), c);
    } else {
      const auto zr = z.view().select(0, 0);  // (n, Vp)
      for (std::size_t i = 0; i < step_.rows.size(); ++i) {
        const index_t b = step_.rows[i], j = static_cast<index_t>(i);
        logits_.slice(0, b, b + 1) = capped_logits<T>(zr.slice(0, j, j + 1).slice(1, 0, c.vocab_size), c);
      }
    }
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
    const index_t most = *std::max_element(kv_.slots.begin(), kv_.slots.end());
    cpu::CachingAllocator::global().reserve_free_blocks(sizeof(T), static_cast<std::size_t>(most),
                                                        static_cast<std::size_t>(num_threads()));
  }

  /// The slot of position p in layer l's buffer while the newest position is t.
  index_t slot_of(index_t l, index_t t, index_t p) const { return sinks_ + p - kv_.base(l, t); }

  /// Before a step: for every row fed and every layer, moves the keys still visible to the front
  /// when the row's base advances at this position, copies the sinks that left the window in front
  /// of it, and records the position's slot (step_.slot) and the first slot its query reads (step_.lo).
  void make_room() {
    const std::size_t L = kv_.k.size();
    auto &slot = step_.slot, &first = step_.lo, &rel = step_.rel;
    if (slot.size() != L) {
      slot.assign(L, std::vector<index_t>(static_cast<std::size_t>(B_)));
      first = rel = slot;
    }
    const ModelConfig& c = m_->config();
    for (std::size_t l = 0; l < L; ++l) {
      const index_t li = static_cast<index_t>(l);
      for (std::size_t i = 0; i < step_.rows.size(); ++i) {
        const index_t b = step_.rows[i], t = step_.tpos[step_.lock ? 0 : i];
        kv_.win[l].slide(t, [&](index_t from, index_t count) {  // the slots after the sinks
          for (Tensor<T, 4, D>* cache : {&kv_.k[l], &kv_.v[l]}) {
            const auto row = cache->slice(0, b, b + 1);
            row.slice(1, sinks_, sinks_ + count) =
                TensorView<const T, 4, D>(row.slice(1, sinks_ + from, sinks_ + from + count));
          }
        });
        // The window starts at ws; sinks below it go into the slots just before ws's (keys of
        // positions < ws, which no later query reads, or the reserved first `sinks` slots).
        const index_t ws = t - std::min(t, c.window(li)), ns = std::min(sinks_, ws);
        const index_t lo = slot_of(li, t, ws) - ns;
        if (ns > 0) {
          for (std::size_t kv = 0; kv < 2; ++kv) {
            auto& cache = kv == 0 ? kv_.k[l] : kv_.v[l];
            auto& store = kv == 0 ? kv_.sk[l] : kv_.sv[l];
            cache.slice(0, b, b + 1).slice(1, lo, lo + ns) = store.view().slice(0, b, b + 1).slice(1, 0, ns);
          }
        }
        if (i < step_.tpos.size()) {
          slot[l][i] = slot_of(li, t, t), first[l][i] = lo;
          rel[l][i] = slot[l][i] - lo;  // the query's index among the keys it reads
        }
      }
    }
  }

  /// Shared by the prefill overloads: validates, resets and feeds the prompts of rows 0, 1, ...
  /// (every row's, or row 0's for prefill_shared).
  const Tensor<T, 2, D>& prefill_rows(const std::vector<std::span<const index_t>>& prompts, PrefillMode mode) {
    const ModelConfig& c = m_->config();
    bool same = true;
    for (std::size_t b = 0; b < prompts.size(); ++b) {  // both decoders' checks (decode_state.hpp)
      throw_if_error(prompt_status("decoder", c, prompts[b], mode, cap_, sinks_, static_cast<index_t>(b)));
      same = same && prompts[b].size() == prompts[0].size();
    }
    check(!mode.parallel_passes(), "decoder", "prefill ", mode.name(),
          " runs on the lean decoder (lrt::LeanDecoder, decode/lean.hpp, CPU); this decoder takes exact, zero or "
          "interleaved:S");
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
        feed(tok,
             static_cast<index_t>(rows.size()) == B_ ? std::span<const index_t>() : std::span<const index_t>(rows));
      }
      return logits_;
    }
    // zero: the zero-memory forward over the prompt (pass 0); interleaved: pass 0 + S passes.
    const index_t S = mode.kind == PrefillMode::Kind::Zero ? 0 : mode.passes;
    const index_t n = static_cast<index_t>(prompts.size());
    if (same) {
      load(prompts, 0, n, S);
    } else {
      for (index_t b = 0; b < n; ++b) load(prompts, b, 1, S);
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
    for (std::size_t l = 0; l < kv_.k.size(); ++l) {  // positions base..P-1 into their slots
      kv_.win[l].load(P, [&](index_t lo, index_t count) {
        kv_.k[l].slice(0, b0, b0 + nb).slice(1, sinks_, sinks_ + count) = st.k[l].view().slice(1, lo, lo + count);
        kv_.v[l].slice(0, b0, b0 + nb).slice(1, sinks_, sinks_ + count) = st.v[l].view().slice(1, lo, lo + count);
      });
      if (sinks_ > 0) {  // the first positions, kept aside
        const index_t ns = std::min(sinks_, P);
        kv_.sk[l].slice(0, b0, b0 + nb).slice(1, 0, ns) = st.k[l].view().slice(1, 0, ns);
        kv_.sv[l].slice(0, b0, b0 + nb).slice(1, 0, ns) = st.v[l].view().slice(1, 0, ns);
      }
    }
    if constexpr (V::recurrent) {  // the ring holds s_p of the last k prompt positions
      ring_load(c.mem_offset, P, [&](index_t p, index_t slot) {
        mem_.states.view().select(0, slot).slice(0, b0, b0 + nb) = st.source.view().select(1, p);
        for (index_t b = b0; b < b0 + nb; ++b)
          mem_.tokens(slot, b) = prompts[static_cast<std::size_t>(b)][static_cast<std::size_t>(p)];
      });
    }
    logits_.slice(0, b0, b0 + nb) = st.logits;
    for (index_t b = b0; b < b0 + nb; ++b) pos_[static_cast<std::size_t>(b)] = P;
  }

  /// One decode step: tokens[i] goes to row rows[i] (rows ascending and distinct; empty: all rows,
  /// tokens[b] to row b) at that row's position. Writes those rows of logits_.
  void feed(std::span<const index_t> tokens, std::span<const index_t> rows) {
    run_step(tokens, rows);
    if constexpr (std::is_same_v<D, cpu::Device>) {  // every tensor of the step is back in the cache
      auto& done = scratch_.reserved;
      if (std::find(done.begin(), done.end(), scratch_.layout) == done.end()) {
        reserve_attention_scratch();
        done.push_back(scratch_.layout);
      }
    }
  }

  void run_step(std::span<const index_t> tokens, std::span<const index_t> rows) {
    const ModelConfig& c = m_->config();
    const index_t n = static_cast<index_t>(tokens.size());
    const auto row = [&](index_t i) { return rows.empty() ? i : rows[static_cast<std::size_t>(i)]; };
    auto &rows_ = step_.rows, &tpos_ = step_.tpos;
    rows_.clear(), tpos_.clear();
    for (index_t i = 0; i < n; ++i) {
      const index_t b = row(i), tok = tokens[static_cast<std::size_t>(i)];
      check(b >= 0 && b < B_ && (i == 0 || b > row(i - 1)), "decoder", "rows must be ascending and in [0, ", B_, ")");
      const index_t t = pos_[static_cast<std::size_t>(b)];
      throw_if_error(step_status("decoder", c, b, t, tok, cap_));  // both decoders' (decode_state.hpp)
      rows_.push_back(b), tpos_.push_back(t);
    }
    const bool lock = step_.lock = n == B_ && lockstep();
    if (lock) tpos_.resize(1);  // one query position for the whole batch
    const index_t nq = static_cast<index_t>(tpos_.size());
    const bool use_memory = V::recurrent && !zero_memory();
    make_room();
    if constexpr (graphs_supported) {
      if (graph_.on() && lock) {
        graph_step(tokens, use_memory);
        for (index_t b : rows_) ++pos_[static_cast<std::size_t>(b)];
        scratch_.layout = {lock, n, use_memory};
        return;
      }
    }

    const StepScope scope(*step_.tape);

    // Token ids: (B, 1) in lockstep, else (1, n).
    Tensor<index_t, 2> ids_host(lock ? Shape<2>{B_, 1} : Shape<2>{1, n}, uninitialized);
    std::copy(tokens.begin(), tokens.end(), ids_host.data());
    const Tensor<index_t, 2, D> ids = lrt::on_device<D>(std::move(ids_host));
    // Query slots per layer and the RoPE rows of the positions (computed as RopeTable::make does).
    for (std::size_t l = 0; l < step_.qpos.size(); ++l)
      DeviceTraits<D>::copy_from_host(step_.qpos[l].data(), step_.rel[l].data(),
                                      static_cast<std::size_t>(nq) * sizeof(index_t));
    {
      auto [cs, sn] = lrt::rope_tables<T>(TensorView<const index_t, 1>(tpos_.data(), Shape<1>{nq}), c.head_dim(),
                                          c.rope_bf16_tables);
      if constexpr (std::is_same_v<D, cpu::Device>) {
        *step_.cos = std::move(cs), *step_.sin = std::move(sn);
      } else {
        *step_.cos = to<D>(cs), *step_.sin = to<D>(sn);
      }
    }
    const ad::RopeTable<T, D> rope{step_.cos, step_.sin};
    const typename Model::Attend attend = [this](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      return this->attend(l, q, k, v);
    };

    typename Model::Var3 mem;
    if constexpr (V::recurrent) {  // m~_t = s_{t-k}, or 0 where the row reads no state (reads_state)
      if (use_memory) {
        const index_t k = c.mem_offset;
        Tensor<T, 3, D> m(lock ? Shape<3>{B_, 1, c.n_embd} : Shape<3>{1, n, c.n_embd});
        for (index_t i = 0; i < n; ++i) {
          const index_t b = rows_[static_cast<std::size_t>(i)], t = pos_[static_cast<std::size_t>(b)];
          if (!reads_state(b, t, tokens[static_cast<std::size_t>(i)])) continue;
          const auto src = mem_.states.view().select(0, mem_.read_slot(k, t)).slice(0, b, b + 1);  // (1, d)
          if (lock) {
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
        if (lock) {
          mem_.states.view().select(0, mem_.write_slot(k, tpos_[0])) = s.select(1, 0);
        } else {
          for (index_t i = 0; i < n; ++i) {
            const index_t b = rows_[static_cast<std::size_t>(i)];
            mem_.states.view().select(0, mem_.write_slot(k, pos_[static_cast<std::size_t>(b)])).slice(0, b, b + 1) =
                s.select(0, 0).slice(0, i, i + 1);
          }
        }
        for (index_t i = 0; i < n; ++i) {
          const index_t b = rows_[static_cast<std::size_t>(i)];
          mem_.keep_token(k, b, pos_[static_cast<std::size_t>(b)], tokens[static_cast<std::size_t>(i)]);
        }
      }
    }
    const auto z = m_->head(pass.h);  // (B, 1, Vp) or (1, n, Vp)
    store_logits(z.value(), lock);
    for (index_t b : rows_) ++pos_[static_cast<std::size_t>(b)];
    scratch_.layout = {lock, n, use_memory};
  }

  /// A lockstep step through the graph (see use_graphs and decode/graph_step.hpp): the position
  /// and, with memory, the ring slots and which rows read a state into the graph's buffers, then
  /// graph_body run eagerly, recorded or replayed.
  void graph_step(std::span<const index_t> tokens, bool use_memory) {
    if constexpr (graphs_supported) {
      const ModelConfig& c = m_->config();
      const index_t t = step_.tpos[0];
      graph_.set_position(step_.slot, B_, c);
      if constexpr (V::recurrent) {
        if (use_memory) {  // m~_t = s_{t-k} per row, or 0 where the row reads no state (reads_state)
          const index_t k = c.mem_offset;
          graph_.set_memory(mem_.read_slot(k, t), mem_.write_slot(k, t),
                            [&](index_t b) { return reads_state(b, t, tokens[static_cast<std::size_t>(b)]); });
          for (index_t b = 0; b < B_; ++b) mem_.keep_token(k, b, t, tokens[static_cast<std::size_t>(b)]);
        }
      }
      graph_.run(tokens, t, c, use_memory, [this, use_memory] { graph_body(use_memory); });
    }
  }

  /// What the graph records: the forward of the B tokens in the graph's id buffer in its cache
  /// slots (no wait for the device, every temporary freed before it returns).
  void graph_body(bool use_memory) {
    const ModelConfig& c = m_->config();
    const StepScope scope(*step_.tape);
    const ad::RopeTable<T, D> rope = graph_.rope();
    const ad::TokenIds<D> tok(graph_.ids(), c.padded_vocab(), /*checked=*/true);  // run_step checked the tokens
    const typename Model::Attend attend = [this](index_t l, const Var4& q, const Var4& k, const Var4& v) {
      const ModelConfig& cc = m_->config();
      auto& kc = kv_.k[static_cast<std::size_t>(l)];
      auto& vc = kv_.v[static_cast<std::size_t>(l)];
      const IndexList<D>& at = graph_.cache_slot(l);
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
        m.view().template reshape<3>(Shape<3>{1, B_, c.n_embd}) =
            mem_.states.view().gather(0, graph_.ring_read()) * graph_.mask().view();
        mem = ad::constant(std::move(m));
      }
    }
    const auto pass = m_->forward(tok, rope, attend, use_memory ? &mem : nullptr);
    if constexpr (V::recurrent) {
      if (use_memory)
        mem_.states.view().gather(0, graph_.ring_write()) = pass.source.value().view().select(1, 0);  // slot t % k
    }
    const auto z = m_->head(pass.h);  // (B, 1, Vp)
    store_logits(z.value(), /*lock=*/true);
  }

  /// The attend hook of a step: appends the new keys and values to the cache and attends each
  /// query to its row's cached positions (spec §2.2 window rule).
  Var4 attend(index_t l, const Var4& q, const Var4& k, const Var4& v) {
    const ModelConfig& c = m_->config();
    auto& kc = kv_.k[static_cast<std::size_t>(l)];
    auto& vc = kv_.v[static_cast<std::size_t>(l)];
    const T scale = T(1) / std::sqrt(static_cast<T>(c.head_dim()));
    Tensor<T, 4, D> out(q.shape(), uninitialized);
    // The keys a query reads: slots lo..t, all visible (the window, after any sinks in front).
    const auto keys = [](Tensor<T, 4, D>& cache, index_t b0, index_t b1, index_t lo, index_t t) {
      return TensorView<const T, 4, D>(cache.slice(0, b0, b1).slice(1, lo, t + 1));
    };
    const std::size_t ls = static_cast<std::size_t>(l);
    const auto &slot = step_.slot[ls], &lo = step_.lo[ls];
    const auto& qpos = step_.qpos[ls];
    const auto keep_sink = [&](index_t b0, index_t b1, index_t pos, index_t j) {  // the first positions
      if (pos >= sinks_) return;
      kv_.sk[ls].slice(0, b0, b1).slice(1, pos, pos + 1) = k.value().view().slice(1, j, j + 1);
      kv_.sv[ls].slice(0, b0, b1).slice(1, pos, pos + 1) = v.value().view().slice(1, j, j + 1);
    };
    if (step_.lock) {  // (B, 1): every row at position tpos[0], in slot t
      const index_t t = slot[0];
      kc.slice(1, t, t + 1) = k.value();
      vc.slice(1, t, t + 1) = v.value();
      keep_sink(0, B_, step_.tpos[0], 0);
      Tensor<T, 3, D> lse(Shape<3>{B_, c.n_head, 1}, uninitialized);
      NnBackend<D>::template attention_forward<T>(
          q.value().view(), keys(kc, 0, B_, lo[0], t), keys(vc, 0, B_, lo[0], t), qpos.view().slice(0, 0, 1), t - lo[0],
          scale, out.view(), lse.view(), /*qpos_checked=*/true);  // the last key
    } else {  // (1, n): token i is row rows[i] at position tpos[i], in slot slot[i]
      Tensor<T, 3, D> lse(Shape<3>{1, c.n_head, 1}, uninitialized);
      for (std::size_t i = 0; i < step_.rows.size(); ++i) {
        const index_t b = step_.rows[i], t = slot[i], j = static_cast<index_t>(i);
        kc.slice(0, b, b + 1).slice(1, t, t + 1) = k.value().view().slice(1, j, j + 1);
        vc.slice(0, b, b + 1).slice(1, t, t + 1) = v.value().view().slice(1, j, j + 1);
        keep_sink(b, b + 1, step_.tpos[i], j);
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
  KvCache kv_;
  Tensor<T, 2, D> logits_;
  MemoryRing<T, D> mem_;  // recurrent variants only (empty otherwise)
  StepState step_;
  GraphStep<T, D, V::recurrent> graph_;  // use_graphs
  Scratch scratch_;
};

template <class V, class T, Device D>
Decoder(const Model<V, T, D>&, index_t = 1, index_t = 0, index_t = 0) -> Decoder<V, T, D>;

#if defined(LRT_COMPILED_PAIRS)  // compiled in the runtime library (variant.hpp, LRT_COMPILED_VARIANTS)
#define LRT_DETAIL_EXTERN_DECODER(V) extern template class LRT_API Decoder<V>;
LRT_COMPILED_VARIANTS(LRT_DETAIL_EXTERN_DECODER)
#undef LRT_DETAIL_EXTERN_DECODER
#endif

}  // namespace v0
}  // namespace lrt
