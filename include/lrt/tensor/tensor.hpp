// lrt/tensor/tensor.hpp: Tensor<T, R, D>, an owning, contiguous, row-major tensor on device D.
// Copies are deep, moves are cheap. Views (view(), slice(), ...) borrow its memory.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <utility>

#include "view.hpp"

namespace lrt {
inline namespace v0 {

/// Tag: construct a tensor without initialising its elements.
struct Uninitialized {};
inline constexpr Uninitialized uninitialized{};

namespace detail {
/// Number of allocations made through DeviceTraits since start (all devices); for tests.
LRT_API inline std::atomic<long long>& device_allocations() {
  static std::atomic<long long> n{0};
  return n;
}
}  // namespace detail

/// Raw owning storage of n elements of T on device D.
template <class T, Device D>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(index_t n) : n_(n) {
    if (n > 0) {
      p_ = static_cast<T*>(DeviceTraits<D>::allocate(static_cast<std::size_t>(n) * sizeof(T)));
      detail::device_allocations().fetch_add(1, std::memory_order_relaxed);
    }
  }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  T* data() const noexcept { return p_; }
  index_t size() const noexcept { return n_; }

 private:
  void release() noexcept {
    if (p_) DeviceTraits<D>::deallocate(p_, static_cast<std::size_t>(n_) * sizeof(T));
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  index_t n_ = 0;
};

/// An owning tensor: contiguous row-major storage, runtime extents, rank R, device D.
template <class T, int R, Device D = cpu::Device>
class Tensor : public ExprBase<Tensor<T, R, D>>, public ViewOps<Tensor<T, R, D>, T, R, D> {
  static_assert(std::is_arithmetic_v<T>, "Tensor elements must be arithmetic types");

 public:
  using element_type = T;
  using value_type = T;
  using device_type = D;
  static constexpr int rank = R;

  /// An empty tensor (all extents 0; rank 0 holds one zero); assigning an expression sizes it.
  Tensor() : Tensor(Shape<R>{}) {}
  /// Zero-filled tensor of the given shape.
  explicit Tensor(const Shape<R>& shape) : Tensor(shape, uninitialized) {
    if (buf_.data()) DeviceTraits<D>::zero(buf_.data(), bytes());
  }
  /// Tensor of the given shape with unspecified contents.
  Tensor(const Shape<R>& shape, Uninitialized) : shape_(checked(shape)), buf_(shape.numel()) {}
  /// Evaluates an expression into a new tensor of its shape.
  template <Expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor>) Tensor(const E& e) : Tensor(shape_of(e), uninitialized) {
    assign(view(), e);
  }
  Tensor(const Tensor& o) : Tensor(o.shape_, uninitialized) {
    if (buf_.data()) DeviceTraits<D>::copy_within(buf_.data(), o.buf_.data(), bytes());
  }
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&& o) noexcept = default;
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      if (shape_ != o.shape_) *this = Tensor(o.shape_, uninitialized);
      if (buf_.data()) DeviceTraits<D>::copy_within(buf_.data(), o.buf_.data(), bytes());
    }
    return *this;
  }
  /// Evaluates e into this tensor. A tensor with no elements takes e's shape; otherwise the
  /// shapes must match (after broadcasting e).
  template <Expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>, Tensor>) Tensor& operator=(const E& e) {
    if (numel() == 0 && E::rank == R) {
      const Shape<R> s = shape_of(e);
      if (s != shape_) *this = Tensor(s, uninitialized);
    }
    assign(view(), e);
    return *this;
  }

  /// Tensor of shape filled with x.
  static Tensor full(const Shape<R>& shape, T x) {
    Tensor t(shape, uninitialized);
    t.fill(x);
    return t;
  }
  static Tensor zeros(const Shape<R>& shape) { return Tensor(shape); }
  void fill(T x) { view().fill(x); }

  TensorView<T, R, D> view() noexcept { return {buf_.data(), shape_, row_major_strides(shape_)}; }
  TensorView<const T, R, D> view() const noexcept { return {buf_.data(), shape_, row_major_strides(shape_)}; }
  operator TensorView<T, R, D>() noexcept { return view(); }
  operator TensorView<const T, R, D>() const noexcept { return view(); }

  T* data() noexcept { return buf_.data(); }
  const T* data() const noexcept { return buf_.data(); }
  const Shape<R>& shape() const noexcept { return shape_; }
  Strides<R> strides() const noexcept { return row_major_strides(shape_); }
  index_t size(int axis) const { return shape_[detail::normalize_axis(axis, R, "size")]; }
  index_t numel() const noexcept { return shape_.numel(); }
  bool empty() const noexcept { return numel() == 0; }
  bool is_contiguous() const noexcept { return true; }
  std::size_t bytes() const noexcept { return static_cast<std::size_t>(numel()) * sizeof(T); }

  template <class... I>
  T& operator()(I... i) {
    return view()(i...);
  }
  template <class... I>
  const T& operator()(I... i) const {
    return view()(i...);
  }
  template <class... I>
  T& at(I... i) {
    return view().at(i...);
  }
  template <class... I>
  const T& at(I... i) const {
    return view().at(i...);
  }

  /// Compound assignment evaluates in one pass (the destination aliases itself safely).
  template <class E>
  Tensor& operator+=(const E& e);
  template <class E>
  Tensor& operator-=(const E& e);
  template <class E>
  Tensor& operator*=(const E& e);
  template <class E>
  Tensor& operator/=(const E& e);

  // --- expression interface (a tensor reads like its view) ---
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    return view().linear_ok(out);
  }
  template <int Ro>
  LeafEval<T, Ro> evaluator(const Shape<Ro>& out) const {
    return view().evaluator(out);
  }
  template <class F>
  void visit_leaves(F&& f) const {
    f(view(), false);
  }

 private:
  static const Shape<R>& checked(const Shape<R>& s) {
    detail::check_extents(s, "tensor");
    return s;
  }
  template <class E>
  static Shape<R> shape_of(const E& e) {
    static_assert(E::rank <= R, "rank mismatch: the expression has a higher rank than the tensor");
    if constexpr (E::rank == R) {
      return e.shape();
    } else {
      ::lrt::throw_error("tensor",
                         detail::str_cat("cannot size a rank-", R, " tensor from a lower-rank expression of shape ",
                                         to_string(e.shape())));
    }
  }

  Shape<R> shape_{};
  Buffer<T, D> buf_;
};

/// A contiguous copy of a view (or a tensor) on the same device.
template <class T, int R, Device D>
Tensor<std::remove_const_t<T>, R, D> contiguous(const TensorView<T, R, D>& v) {
  return Tensor<std::remove_const_t<T>, R, D>(v);
}

/// Copies a tensor or view to device D2 (host <-> device copies need no GPU code on the host side
/// beyond the backend's DeviceTraits).
template <Device D2, class T, int R, Device D>
Tensor<std::remove_const_t<T>, R, D2> to(const TensorView<T, R, D>& v) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<D, D2>) {
    return Tensor<U, R, D2>(v);
  } else {
    if (!v.is_contiguous()) return to<D2>(contiguous(v).view());
    Tensor<U, R, D2> out(v.shape(), uninitialized);
    const std::size_t bytes = out.bytes();
    if (bytes == 0) return out;
    if constexpr (D::host_accessible) {
      DeviceTraits<D2>::copy_from_host(out.data(), v.data(), bytes);
    } else {
      static_assert(D2::host_accessible, "copies between two accelerators go through the host");
      DeviceTraits<D>::copy_to_host(out.data(), v.data(), bytes);
    }
    return out;
  }
}
template <Device D2, class T, int R, Device D>
Tensor<T, R, D2> to(const Tensor<T, R, D>& t) {
  return to<D2>(t.view());
}

/// t on device D2 without a copy when it is there already: t itself (a reference), else to<D2>(t).
/// For a batch of host ids fed to a model on a GPU, or results read back on the host.
template <Device D2, class T, int R, Device D>
decltype(auto) on_device(const Tensor<T, R, D>& t) {
  if constexpr (std::is_same_v<D, D2>) {
    return (t);
  } else {
    return to<D2>(t);
  }
}
/// The same for a tensor given up by the caller: moved when it is on D2 already.
template <Device D2, class T, int R, Device D>
Tensor<T, R, D2> on_device(Tensor<T, R, D>&& t) {
  if constexpr (std::is_same_v<D, D2>) {
    return std::move(t);
  } else {
    return to<D2>(t);
  }
}
/// t where the host can read it: t itself when D's memory is host-accessible, else a host copy.
template <class T, int R, Device D>
decltype(auto) host_readable(const Tensor<T, R, D>& t) {
  if constexpr (D::host_accessible) {
    return (t);
  } else {
    return to<cpu::Device>(t);
  }
}

}  // namespace v0
}  // namespace lrt
