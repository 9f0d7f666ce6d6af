// lrt/decode/graph_step.hpp: the decoder's recorded step (Decoder::use_graphs): a lockstep step
// recorded once into the device's graph (DeviceTraits<D>::StepGraph, CUDA graphs) and replayed,
// one launch per token instead of one per kernel. This component holds the graph, its state
// (on, warmed up, which layout it recorded, replays) and its input buffers (token ids, the cache
// slot of the position per layer, the RoPE row and, with the recurrent memory, the ring slots and
// which rows read a state), refilled in place before each replay. The decoder supplies the body
// (the step's forward reading those buffers). On devices without graphs it holds nothing useful.
#pragma once

#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "../model/gpt.hpp"

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

/// The graph type of a device that records none: never ready.
struct NoGraph {
  bool ready() const noexcept { return false; }
  void reset() noexcept {}
};
}  // namespace detail

/// The recorded step of a decoder over B rows of element type T on device D; Memory: the
/// variant's recurrent memory (the graph then reads ring slots and a per-row mask too).
/// A step goes: set_position, then (with memory) set_memory, then run(body). The first run runs
/// body eagerly (warm-up), the second records it and replays it, later ones replay it; a change of
/// layout (memory or not) records again.
template <class T, Device D, bool Memory>
class GraphStep {
 public:
  /// Whether this device can record steps into a graph (lrt::cuda::Device: CUDA graphs).
  static constexpr bool supported = !std::is_void_v<typename detail::step_graph_of<D>::type>;
  using Graph = std::conditional_t<supported, typename detail::step_graph_of<D>::type, detail::NoGraph>;

  bool on() const noexcept { return on_; }
  /// Turns recording on or off; off drops a recorded graph (the next step records it again).
  void enable(bool on) {
    on_ = on;
    if constexpr (supported)
      if (!on && graph_) graph_->reset();
  }
  /// Steps replayed from the recorded graph so far.
  index_t replays() const noexcept { return replays_; }

  /// Before a step: the cache slot of the position in each layer (slot[l][0]) into the graph's
  /// input buffers, which the first step allocates (they are refilled in place after it).
  void set_position(const std::vector<std::vector<index_t>>& slot, index_t B, const ModelConfig& c) {
    if (wpos_.empty()) {
      for (const auto& sl : slot) wpos_.push_back(std::make_unique<IndexList<D>>(std::vector<index_t>{sl[0]}));
      ids_ = Tensor<index_t, 2, D>(Shape<2>{B, 1}, uninitialized);
      cos_ = std::make_shared<Tensor<T, 2, D>>(Shape<2>{1, c.head_dim() / 2});
      sin_ = std::make_shared<Tensor<T, 2, D>>(Shape<2>{1, c.head_dim() / 2});
      graph_ = std::make_unique<Graph>();
      if constexpr (Memory) {
        slot_r_ = std::make_unique<IndexList<D>>(std::vector<index_t>{0});
        slot_w_ = std::make_unique<IndexList<D>>(std::vector<index_t>{0});
        mask_ = Tensor<T, 3, D>(Shape<3>{1, B, 1});
        mask_host_.assign(static_cast<std::size_t>(B), T(0));
      }
    } else {
      for (std::size_t l = 0; l < wpos_.size(); ++l) wpos_[l]->assign(std::span<const index_t>(slot[l].data(), 1));
    }
  }

  /// With memory, after set_position: the ring slots read (r) and written (w), and per row b
  /// whether it reads a state (reads(b): mask 1, else 0).
  template <class Reads>
  void set_memory(index_t r, index_t w, const Reads& reads) {
    if constexpr (Memory) {
      for (std::size_t b = 0; b < mask_host_.size(); ++b) mask_host_[b] = reads(static_cast<index_t>(b)) ? T(1) : T(0);
      slot_r_->assign(std::span<const index_t>(&r, 1));
      slot_w_->assign(std::span<const index_t>(&w, 1));
      DeviceTraits<D>::copy_from_host(mask_.data(), mask_host_.data(), mask_host_.size() * sizeof(T));
    }
  }

  /// The step of `tokens` (B) at position t: the ids and the RoPE row of t into their buffers, then
  /// body() run eagerly, recorded and replayed, or replayed (see above). body must read its
  /// inputs from the buffers below only, wait for nothing and free every temporary it allocates.
  template <class Body>
  void run(std::span<const index_t> tokens, index_t t, const ModelConfig& c, bool use_memory, Body&& body) {
    if constexpr (supported) {
      if (graph_->ready() && memory_ != use_memory) graph_->reset();  // the other layout
      DeviceTraits<D>::copy_from_host(ids_.data(), tokens.data(), tokens.size() * sizeof(index_t));
      auto [cs, sn] =
          lrt::rope_tables<T>(TensorView<const index_t, 1>(&t, Shape<1>{1}), c.head_dim(), c.rope_bf16_tables);
      DeviceTraits<D>::copy_from_host(cos_->data(), cs.data(), static_cast<std::size_t>(cs.numel()) * sizeof(T));
      DeviceTraits<D>::copy_from_host(sin_->data(), sn.data(), static_cast<std::size_t>(sn.numel()) * sizeof(T));
      if (graph_->ready()) {
        graph_->launch();
        ++replays_;
      } else if (warm_) {
        graph_->capture(std::forward<Body>(body));
        memory_ = use_memory;
        graph_->launch();
        ++replays_;
      } else {
        body();
        warm_ = true;
      }
    }
  }

  // The input buffers the body reads (on the device).
  const Tensor<index_t, 2, D>& ids() const noexcept { return ids_; }  // (B, 1)
  ad::RopeTable<T, D> rope() const { return {cos_, sin_}; }           // the position's row
  const IndexList<D>& cache_slot(index_t l) const { return *wpos_[static_cast<std::size_t>(l)]; }
  const IndexList<D>& ring_read() const { return *slot_r_; }
  const IndexList<D>& ring_write() const { return *slot_w_; }
  const Tensor<T, 3, D>& mask() const noexcept { return mask_; }  // (1, B, 1)

 private:
  bool on_ = false, warm_ = false;
  index_t replays_ = 0;
  std::unique_ptr<Graph> graph_;
  std::vector<std::unique_ptr<IndexList<D>>> wpos_;  // per layer: the cache slot of the position
  std::unique_ptr<IndexList<D>> slot_r_, slot_w_;    // ring slots read / written
  Tensor<index_t, 2, D> ids_;
  Tensor<T, 3, D> mask_;  // (1, B, 1): 1 where the row reads a state
  std::vector<T> mask_host_;
  bool memory_ = false;  // the recorded graph's layout
  std::shared_ptr<Tensor<T, 2, D>> cos_, sin_;
};

}  // namespace v0
}  // namespace lrt
