// lrt/tensor/expr_base.hpp: what every expression (tensor, view, elementwise node) provides,
// and the leaf evaluator that reads strided memory with broadcasting.
//
// An expression E has: value_type, rank, device_type, shape(), linear_ok(out), evaluator(out)
// and visit_leaves(f). Its evaluator is a small trivially-copyable struct with LRT_HD
//   value_type at(const Index<Ro>& i) const   // element at multi-index i of the output
//   value_type lin(index_t i) const          // element i when linear_ok(out) held
// so the same evaluator runs in a CPU loop and inside a CUDA kernel.
#pragma once

#include <concepts>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"

namespace lrt {
inline namespace v0 {

/// CRTP base of every expression type (tensors, views and expression nodes).
template <class Derived>
struct ExprBase {
  const Derived& derived() const noexcept { return static_cast<const Derived&>(*this); }
};

/// Anything that can stand in an elementwise expression.
template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, ExprBase<std::remove_cvref_t<E>>>;

/// A plain number usable as a broadcast scalar in an expression.
template <class S>
concept Scalar = std::is_arithmetic_v<std::remove_cvref_t<S>>;

namespace detail {

/// Right-aligned broadcast of two shapes (numpy rules); throws naming op and both shapes.
template <int Ro, int Ra, int Rb>
Shape<Ro> broadcast_shapes(const Shape<Ra>& a, const Shape<Rb>& b, const char* op) {
  static_assert(Ro >= Ra && Ro >= Rb);
  Shape<Ro> out;
  for (int k = 0; k < Ro; ++k) {
    const int ia = k - (Ro - Ra), ib = k - (Ro - Rb);
    const index_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
    if (ea == eb || eb == 1) {
      out[k] = ea;
    } else if (ea == 1) {
      out[k] = eb;
    } else {
      ::lrt::throw_error(op, str_cat("cannot broadcast ", to_string(a), " with ", to_string(b)));
    }
  }
  return out;
}

/// Strides (in elements) that read a rank-R operand as a broadcast rank-Ro operand.
template <int Ro, int R>
LRT_HD Strides<Ro> broadcast_strides(const Shape<R>& shape, const Strides<R>& strides, const Shape<Ro>& out) {
  Strides<Ro> bs;
  for (int k = 0; k < Ro; ++k) {
    const int d = k - (Ro - R);
    bs[k] = (d < 0 || (shape[d] == 1 && out[k] != 1)) ? 0 : strides[d];
  }
  return bs;
}

}  // namespace detail

/// Reads strided memory: the evaluator of every tensor and view.
template <class T, int Ro>
struct LeafEval {
  const T* p;
  Strides<Ro> bs;  // broadcast strides, 0 on broadcast axes
  LRT_HD T at(const Index<Ro>& i) const {
    index_t off = 0;
    for (int k = 0; k < Ro; ++k) off += i[k] * bs[k];
    return p[off];
  }
  LRT_HD T lin(index_t i) const { return p[i]; }
};

/// Writes strided memory: the destination evaluator of tensors and views.
template <class T, int R>
struct DstEval {
  T* p;
  Strides<R> st;
  LRT_HD T& at(const Index<R>& i) const {
    index_t off = 0;
    for (int k = 0; k < R; ++k) off += i[k] * st[k];
    return p[off];
  }
  LRT_HD T& lin(index_t i) const { return p[i]; }
};

}  // namespace v0
}  // namespace lrt
