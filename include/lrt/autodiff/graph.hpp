// lrt/autodiff/graph.hpp: reverse-mode autodiff over whole tensors.
//
// A Graph (the tape) records one node per operation while it is the current graph of the thread.
// Var<T, R, D> is a cheap handle to a node: its value, its gradient after backward. Param<T, R, D>
// is a persistent leaf (a model weight) whose gradient accumulates across backward calls until
// zero_grad(). Each differentiable op computes its forward with tensor kernels and records its
// backward rule as a closure next to it (see ops.hpp): MLX's op + vjp, on whole tensors.
//
// Memory: nodes live in the graph's arena; clear() destroys them but keeps the arena and the
// node list, and tensors come from the caching allocator, so a training step that repeats the
// same shapes allocates nothing new from the system after the first one.
// Rules are closures bw(grad_out, out) stored in the node: saved state is what they capture. During backward each
// node frees its value, gradient and saved state as soon as its own backward rule has run
// (nothing later needs them); retain() keeps a node's value and gradient.
//
// Not here: higher-order gradients, in-place ops on recorded values, graph optimisation.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../backend/cpu/device.hpp"  // the host: values read back, the default device
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/assign.hpp"
#include "../tensor/expr.hpp"
#include "../tensor/tensor.hpp"

namespace lrt {
inline namespace v0 {
namespace ad {

namespace detail {
LRT_API inline thread_local bool grad_mode = true;
}  // namespace detail

/// True unless a NoGrad guard is active on this thread.
inline bool grad_enabled() noexcept { return detail::grad_mode; }

/// Within its scope operations record nothing (evaluation, decoding).
class NoGrad {
 public:
  NoGrad() noexcept : prev_(std::exchange(detail::grad_mode, false)) {}
  ~NoGrad() { detail::grad_mode = prev_; }
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool prev_;
};

/// One recorded value (type-erased part).
class Node {
 public:
  explicit Node(const char* op) noexcept : op_(op) {}
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Propagates this node's gradient to its inputs, then frees what backward no longer needs.
  virtual void backward_step() = 0;
  /// Human-readable shape for messages.
  virtual std::string shape_string() const = 0;

  const char* op() const noexcept { return op_; }
  bool requires_grad = false;                        // some input needs a gradient (or this is a trainable leaf)
  bool grad_ready = false;                           // the gradient holds a value
  bool value_freed = false;                          // backward released the value
  bool retained = false;                             // keep value and gradient through backward
  std::size_t index = static_cast<std::size_t>(-1);  // position on the tape (-1: not recorded)

 private:
  const char* op_;
};

/// A node holding a value of type Tensor<T, R, D> and, after backward, its gradient.
template <class T, int R, Device D>
class VarNode : public Node {
 public:
  VarNode(const char* op, Tensor<T, R, D>&& v) : Node(op), value(std::move(v)), shape(value.shape()) {}
  std::string shape_string() const override { return to_string(shape); }
  Tensor<T, R, D> value;
  Tensor<T, R, D> grad;
  Shape<R> shape;
};

/// A node without a backward rule: constants, trainable inputs, parameters.
template <class T, int R, Device D>
class LeafNode final : public VarNode<T, R, D> {
 public:
  LeafNode(const char* op, Tensor<T, R, D>&& v, bool trainable) : VarNode<T, R, D>(op, std::move(v)) {
    this->requires_grad = trainable;
  }
  void backward_step() override {}
};

/// A node with a backward rule F: void(const Tensor<T, R, D>& grad_out, const Tensor<T, R, D>& out).
template <class T, int R, Device D, class F>
class OpNode final : public VarNode<T, R, D> {
 public:
  OpNode(const char* op, Tensor<T, R, D>&& v, F&& f) : VarNode<T, R, D>(op, std::move(v)), bw_(std::move(f)) {
    this->requires_grad = true;
  }
  void backward_step() override {
    check(bw_.has_value(), "backward", "the graph through '", this->op(),
          "' was already freed by an earlier backward: clear the "
          "graph and run the forward again (or retain() what you need)");
    (*bw_)(this->grad, this->value);
    bw_.reset();  // saved activations go now
    if (!this->retained) {
      this->value = Tensor<T, R, D>();
      this->grad = Tensor<T, R, D>();
      this->value_freed = true;
      this->grad_ready = false;
    }
  }

 private:
  std::optional<F> bw_;
};

/// Bump allocator for nodes: blocks are kept across clear().
class Arena {
 public:
  void* allocate(std::size_t n, std::size_t align) {
    for (;;) {
      if (cur_ < blocks_.size()) {
        const std::size_t off = (off_ + align - 1) / align * align;
        if (off + n <= blocks_[cur_].size) {
          off_ = off + n;
          return blocks_[cur_].data.get() + off;
        }
        ++cur_;
        off_ = 0;
        continue;
      }
      const std::size_t size = std::max<std::size_t>(block_size, n + align);
      blocks_.push_back({std::unique_ptr<std::byte[]>(new std::byte[size]), size});
    }
  }
  void reset() noexcept {
    cur_ = 0;
    off_ = 0;
  }
  static constexpr std::size_t block_size = std::size_t{1} << 16;

 private:
  struct Block {
    std::unique_ptr<std::byte[]> data;
    std::size_t size;
  };
  std::vector<Block> blocks_;
  std::size_t cur_ = 0, off_ = 0;
};

template <class T, int R, Device D>
class Var;

/// The tape. While alive it is the thread's current graph (graphs nest as a stack), unless it
/// was made Detached: then only a Graph::Use guard makes it current, for the guard's scope.
class Graph {
 public:
  Graph() : prev_(current_) { current_ = this; }
  /// Tag of a long-lived graph (a decoder's) that is current only inside Graph::Use scopes: its
  /// arena and node list are kept from one use to the next, so a repeated step allocates nothing.
  struct Detached {};
  explicit Graph(Detached) noexcept : prev_(nullptr), detached_(true) {}
  ~Graph() {
    clear();
    if (!detached_) current_ = prev_;
  }

  /// Makes a (detached) graph the thread's current one for this guard's scope, then restores
  /// the previous one.
  class Use {
   public:
    explicit Use(Graph& g) noexcept : prev_(std::exchange(current_, &g)) {}
    ~Use() { current_ = prev_; }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    Graph* prev_;
  };
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// The graph that records on this thread; throws if there is none.
  static Graph& current() {
    check(current_ != nullptr, "autodiff",
          "no active lrt::ad::Graph on this thread: create one before using lrt::ad operations");
    return *current_;
  }

  /// Creates a node in the arena and appends it to the tape.
  template <class N, class... A>
  N* create(A&&... a) {
    void* p = arena_.allocate(sizeof(N), alignof(N));
    N* n = new (p) N(std::forward<A>(a)...);
    n->index = nodes_.size();
    nodes_.push_back(n);
    return n;
  }

  /// Destroys every node (the memory is kept for the next step).
  void clear() noexcept {
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) (*it)->~Node();
    nodes_.clear();
    arena_.reset();
  }

  /// Number of recorded nodes.
  std::size_t size() const noexcept { return nodes_.size(); }

  /// Runs the backward rules from `from` (inclusive) down to the start of the tape.
  void run_backward(std::size_t from) {
    for (std::size_t i = from + 1; i-- > 0;) {
      Node* n = nodes_[i];
      if (n->grad_ready) n->backward_step();
    }
  }

 private:
  Arena arena_;
  std::vector<Node*> nodes_;
  Graph* prev_;
  bool detached_ = false;
  static inline thread_local Graph* current_ = nullptr;
};

/// A handle to a recorded value (valid until its graph is cleared) or to a parameter.
template <class T, int R, Device D = cpu::Device>
class Var {
 public:
  using value_type = T;
  using device_type = D;
  static constexpr int rank = R;

  Var() = default;
  explicit Var(VarNode<T, R, D>* n) noexcept : n_(n) {}

  /// The forward value; throws if backward already freed it.
  const Tensor<T, R, D>& value() const {
    check_node();
    check(!n_->value_freed, "autodiff", "the value of '", n_->op(), "' ", n_->shape,
          " was freed by backward: call retain() before backward to keep it");
    return n_->value;
  }
  /// The gradient after backward; throws if none was computed.
  const Tensor<T, R, D>& grad() const {
    check_node();
    check(n_->grad_ready, "autodiff", "no gradient for '", n_->op(), "' ", n_->shape,
          ": it does not require grad, is not an ancestor of the loss, or backward freed it "
          "(retain() keeps it)");
    return n_->grad;
  }
  const Shape<R>& shape() const {
    check_node();
    return n_->shape;
  }
  bool requires_grad() const noexcept { return n_ && n_->requires_grad; }
  bool has_grad() const noexcept { return n_ && n_->grad_ready; }
  /// Keeps value and gradient of this node through backward.
  const Var& retain() const {
    check_node();
    n_->retained = true;
    return *this;
  }
  VarNode<T, R, D>* node() const noexcept { return n_; }
  explicit operator bool() const noexcept { return n_ != nullptr; }

 private:
  void check_node() const { check(n_ != nullptr, "autodiff", "use of an empty Var"); }
  VarNode<T, R, D>* n_ = nullptr;
};

/// A trainable tensor that outlives graphs; its gradient accumulates until zero_grad().
template <class T, int R, Device D = cpu::Device>
class Param {
 public:
  explicit Param(Tensor<T, R, D> init, std::string name = {})
      : n_(std::make_unique<LeafNode<T, R, D>>("param", std::move(init), true)), name_(std::move(name)) {}
  Param(Param&&) noexcept = default;
  Param& operator=(Param&&) noexcept = default;

  Var<T, R, D> var() const noexcept { return Var<T, R, D>(n_.get()); }
  operator Var<T, R, D>() const noexcept { return var(); }

  Tensor<T, R, D>& value() noexcept { return n_->value; }
  const Tensor<T, R, D>& value() const noexcept { return n_->value; }
  /// The accumulated gradient (zeros if nothing was accumulated since zero_grad()).
  const Tensor<T, R, D>& grad() {
    if (!n_->grad_ready) {
      n_->grad = Tensor<T, R, D>(n_->shape);
      n_->grad_ready = true;
    }
    return n_->grad;
  }
  bool has_grad() const noexcept { return n_->grad_ready; }
  /// The gradient's storage for writing, made ready (zeros when nothing was accumulated): for code
  /// that sets gradients itself, such as a data-parallel reduction.
  Tensor<T, R, D>& grad_storage() {
    (void)grad();
    return n_->grad;
  }
  /// Forgets the accumulated gradient (its storage is reused).
  void zero_grad() noexcept { n_->grad_ready = false; }
  /// Freezes or unfreezes the parameter.
  void set_requires_grad(bool r) noexcept { n_->requires_grad = r; }
  const std::string& name() const noexcept { return name_; }
  const Shape<R>& shape() const noexcept { return n_->shape; }

 private:
  std::unique_ptr<LeafNode<T, R, D>> n_;
  std::string name_;
};

/// A value that needs no gradient (inputs, targets, masks), copied into the graph.
template <class T, int R, Device D>
Var<T, R, D> constant(Tensor<T, R, D> v) {
  return Var<T, R, D>(Graph::current().create<LeafNode<T, R, D>>("constant", std::move(v), false));
}
/// A graph-local leaf that receives a gradient (for gradient checks and input gradients).
template <class T, int R, Device D>
Var<T, R, D> variable(Tensor<T, R, D> v) {
  return Var<T, R, D>(Graph::current().create<LeafNode<T, R, D>>("variable", std::move(v), true));
}

/// The gradient storage of v, made ready for accumulation: zero-filled if nothing was
/// accumulated yet. Returns nullptr when v needs no gradient.
template <class T, int R, Device D>
Tensor<T, R, D>* grad_slot(const Var<T, R, D>& v) {
  if (!v.requires_grad()) return nullptr;
  VarNode<T, R, D>* n = v.node();
  if (!n->grad_ready) {
    if (n->grad.shape() != n->shape || n->grad.numel() == 0) n->grad = Tensor<T, R, D>(n->shape, uninitialized);
    n->grad.fill(T(0));
    n->grad_ready = true;
  }
  return &n->grad;
}

/// The gradient storage of v and the beta to accumulate into it with (0 when nothing was
/// accumulated yet: the storage is then uninitialised, so a GEMM writes it without a zero fill).
/// Returns {nullptr, 0} when v needs no gradient.
template <class T, int R, Device D>
std::pair<Tensor<T, R, D>*, T> grad_target(const Var<T, R, D>& v) {
  if (!v.requires_grad()) return {nullptr, T(0)};
  VarNode<T, R, D>* n = v.node();
  if (n->grad_ready) return {&n->grad, T(1)};
  if (n->grad.shape() != n->shape || n->grad.numel() == 0) n->grad = Tensor<T, R, D>(n->shape, uninitialized);
  n->grad_ready = true;
  return {&n->grad, T(0)};
}

/// Adds g (an expression or tensor that broadcasts to v's shape) into v's gradient, if v wants one.
template <class T, int R, Device D, class E>
void accumulate(const Var<T, R, D>& v, E&& g) {
  if (!v.requires_grad()) return;
  VarNode<T, R, D>* n = v.node();
  const auto gs = g.shape();
  static_assert(std::remove_cvref_t<E>::rank <= R, "a gradient cannot have a higher rank than its variable");
  check(lrt::detail::broadcasts_to(gs, n->shape), "backward", "gradient of shape ", gs, " does not match the shape ",
        n->shape, " of '", n->op(), "'");
  if (!n->grad_ready) {
    if constexpr (std::is_same_v<std::remove_cvref_t<E>, Tensor<T, R, D>> && !std::is_lvalue_reference_v<E>) {
      if (gs == n->shape) {  // take the buffer
        n->grad = std::move(g);
        n->grad_ready = true;
        return;
      }
    }
    if (n->grad.shape() != n->shape || n->grad.numel() == 0) n->grad = Tensor<T, R, D>(n->shape, uninitialized);
    assign(n->grad.view(), g, "backward");
    n->grad_ready = true;
  } else {
    n->grad += g;
  }
}

/// Records an op: value plus backward rule bw(grad_out, out). Nothing is recorded (and bw is
/// dropped) when no input requires a gradient or a NoGrad guard is active.
template <class T, int R, Device D, class F, class... In>
Var<T, R, D> record(const char* op, Tensor<T, R, D>&& value, F&& bw, const In&... inputs) {
  Graph& g = Graph::current();
  const bool needs = grad_enabled() && (inputs.requires_grad() || ...);
  if (!needs) return Var<T, R, D>(g.create<LeafNode<T, R, D>>(op, std::move(value), false));
  return Var<T, R, D>(g.create<OpNode<T, R, D, std::decay_t<F>>>(op, std::move(value), std::forward<F>(bw)));
}

/// Backward from y with gradient seed (y's shape). The seed of a scalar loss is 1.
template <class T, int R, Device D>
void backward(const Var<T, R, D>& y, const Tensor<T, R, D>& seed) {
  check(static_cast<bool>(y), "backward", "backward on an empty Var");
  check(seed.shape() == y.shape(), "backward", "seed of shape ", seed.shape(), " does not match the output shape ",
        y.shape());
  VarNode<T, R, D>* n = y.node();
  check(!n->value_freed, "backward", "the graph through '", n->op(),
        "' was already freed by an earlier backward: clear the graph and run the forward again");
  if (!n->requires_grad) return;  // nothing upstream wants a gradient
  n->retained = true;             // the caller still reads the loss
  accumulate(y, seed);
  if (n->index != static_cast<std::size_t>(-1)) Graph::current().run_backward(n->index);
}

/// Backward from a scalar loss.
template <class T, int R, Device D>
void backward(const Var<T, R, D>& loss) {
  if constexpr (R != 0) {
    ::lrt::throw_error("backward", lrt::detail::str_cat("output '", loss ? loss.node()->op() : "?", "' has shape ",
                                                        loss ? to_string(loss.shape()) : std::string("?"),
                                                        ": backward without a seed needs a scalar (pass a seed of the "
                                                        "output's shape)"));
  } else {
    backward(loss, Tensor<T, 0, D>::full(Shape<0>{}, T(1)));
  }
}

/// In a fresh Graph, runs f() (which returns a scalar Var) and backward through it; returns
/// the loss value. Parameters used by f accumulate their gradients.
template <class F>
auto value_and_grad(F&& f) {
  Graph graph;
  auto loss = f();
  backward(loss);
  using V = decltype(loss);
  using T = typename V::value_type;
  const Tensor<T, 0, typename V::device_type>& v = loss.value();
  if constexpr (V::device_type::host_accessible) {
    return *v.data();
  } else {
    return *to<cpu::Device>(v).data();
  }
}

}  // namespace ad
}  // namespace v0
}  // namespace lrt
