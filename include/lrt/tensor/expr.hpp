// lrt/tensor/expr.hpp: elementwise and broadcast expression templates.
//
// `auto e = a + b * 2.f;` builds a tree of nodes; nothing is computed until e is assigned to a
// tensor or view, which then evaluates it in ONE pass with no temporaries, on the destination's
// device (see assign.hpp). Closure rules (so that `auto` expressions cannot dangle):
//   - a Tensor lvalue is held as a view (the tensor must outlive the expression);
//   - a Tensor rvalue is moved into the node (the node owns it);
//   - views, scalars and sub-expressions are held by value (they are small).
// Operands are broadcast numpy-style (right-aligned; extents equal or 1). Both operands of a
// binary node must have the same element type (use cast<U>(e)) and live on the same device.
// Not here: matmul, reductions, softmax, norms (kernels that force evaluation).
#pragma once

#include <utility>

#include "functors.hpp"
#include "tensor.hpp"

namespace lrt {
inline namespace v0 {

namespace detail {
template <class X>
struct is_tensor : std::false_type {};
template <class T, int R, class D>
struct is_tensor<Tensor<T, R, D>> : std::true_type {};

/// The operand type a node stores for an argument of (forwarding) type E.
template <class E>
auto hold(E&& e) {
  using U = std::remove_cvref_t<E>;
  if constexpr (is_tensor<U>::value && std::is_lvalue_reference_v<E>) {
    return TensorView<const typename U::value_type, U::rank, typename U::device_type>(e.view());
  } else {
    return U(std::forward<E>(e));
  }
}
template <class E>
using hold_t = decltype(hold(std::declval<E>()));

template <class E>
using value_t = typename std::remove_cvref_t<E>::value_type;
}  // namespace detail

/// A number broadcast to any shape (rank 0, runs on any device).
template <class T>
class ScalarExpr : public ExprBase<ScalarExpr<T>> {
 public:
  using value_type = T;
  using device_type = AnyDevice;
  static constexpr int rank = 0;
  struct Eval {
    T v;
    template <int Ro>
    LRT_HD T at(const Index<Ro>&) const {
      return v;
    }
    LRT_HD T lin(index_t) const { return v; }
  };
  explicit ScalarExpr(T v) : v_(v) {}
  Shape<0> shape() const { return {}; }
  template <int Ro>
  bool linear_ok(const Shape<Ro>&) const {
    return true;
  }
  template <int Ro>
  Eval evaluator(const Shape<Ro>&) const {
    return {v_};
  }
  template <class F>
  void visit_leaves(F&&) const {}

 private:
  T v_;
};

template <class Op, class A>
struct UnaryEval {
  A a;
  template <int Ro>
  LRT_HD auto at(const Index<Ro>& i) const {
    return Op{}(a.at(i));
  }
  LRT_HD auto lin(index_t i) const { return Op{}(a.lin(i)); }
};

/// op(a) elementwise.
template <class Op, class A>
class UnaryExpr : public ExprBase<UnaryExpr<Op, A>> {
 public:
  using value_type = decltype(Op{}(std::declval<typename A::value_type>()));
  using device_type = typename A::device_type;
  static constexpr int rank = A::rank;

  explicit UnaryExpr(A a) : a_(std::move(a)) {}
  Shape<rank> shape() const { return a_.shape(); }
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    return a_.linear_ok(out);
  }
  template <int Ro>
  auto evaluator(const Shape<Ro>& out) const {
    return UnaryEval<Op, decltype(a_.evaluator(out))>{a_.evaluator(out)};
  }
  template <class F>
  void visit_leaves(F&& f) const {
    a_.visit_leaves(f);
  }

 private:
  A a_;
};

template <class Op, class A, class B>
struct BinaryEval {
  A a;
  B b;
  template <int Ro>
  LRT_HD auto at(const Index<Ro>& i) const {
    return Op{}(a.at(i), b.at(i));
  }
  LRT_HD auto lin(index_t i) const { return Op{}(a.lin(i), b.lin(i)); }
};

/// op(a, b) elementwise with broadcasting.
template <class Op, class A, class B>
class BinaryExpr : public ExprBase<BinaryExpr<Op, A, B>> {
 public:
  using value_type = decltype(Op{}(std::declval<typename A::value_type>(), std::declval<typename A::value_type>()));
  using device_type = typename detail::common_device<typename A::device_type, typename B::device_type>::type;
  static constexpr int rank = A::rank > B::rank ? A::rank : B::rank;

  BinaryExpr(A a, B b)
      : a_(std::move(a)), b_(std::move(b)), shape_(detail::broadcast_shapes<rank>(a_.shape(), b_.shape(), Op::name)) {}
  const Shape<rank>& shape() const { return shape_; }
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    return a_.linear_ok(out) && b_.linear_ok(out);
  }
  template <int Ro>
  auto evaluator(const Shape<Ro>& out) const {
    return BinaryEval<Op, decltype(a_.evaluator(out)), decltype(b_.evaluator(out))>{a_.evaluator(out),
                                                                                    b_.evaluator(out)};
  }
  template <class F>
  void visit_leaves(F&& f) const {
    a_.visit_leaves(f);
    b_.visit_leaves(f);
  }

 private:
  A a_;
  B b_;
  Shape<rank> shape_;
};

template <class C, class A, class B>
struct SelectEval {
  C c;
  A a;
  B b;
  template <int Ro>
  LRT_HD auto at(const Index<Ro>& i) const {
    return c.at(i) ? a.at(i) : b.at(i);
  }
  LRT_HD auto lin(index_t i) const { return c.lin(i) ? a.lin(i) : b.lin(i); }
};

/// where(c, a, b): a where c is true, else b (all three broadcast).
template <class C, class A, class B>
class SelectExpr : public ExprBase<SelectExpr<C, A, B>> {
 public:
  using value_type = typename A::value_type;
  using device_type = typename detail::common_device<
      typename C::device_type,
      typename detail::common_device<typename A::device_type, typename B::device_type>::type>::type;
  static constexpr int rank = C::rank > A::rank ? (C::rank > B::rank ? C::rank : B::rank)
                                                : (A::rank > B::rank ? A::rank : B::rank);

  SelectExpr(C c, A a, B b)
      : c_(std::move(c)),
        a_(std::move(a)),
        b_(std::move(b)),
        shape_(detail::broadcast_shapes<rank>(detail::broadcast_shapes<rank>(c_.shape(), a_.shape(), "where"),
                                              b_.shape(), "where")) {}
  const Shape<rank>& shape() const { return shape_; }
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    return c_.linear_ok(out) && a_.linear_ok(out) && b_.linear_ok(out);
  }
  template <int Ro>
  auto evaluator(const Shape<Ro>& out) const {
    return SelectEval<decltype(c_.evaluator(out)), decltype(a_.evaluator(out)), decltype(b_.evaluator(out))>{
        c_.evaluator(out), a_.evaluator(out), b_.evaluator(out)};
  }
  template <class F>
  void visit_leaves(F&& f) const {
    c_.visit_leaves(f);
    a_.visit_leaves(f);
    b_.visit_leaves(f);
  }

 private:
  C c_;
  A a_;
  B b_;
  Shape<rank> shape_;
};

template <class G, int Ro>
struct GeneratorEval {
  G g;
  Strides<Ro> bs;  // row-major strides of the generator's own shape, 0 on broadcast axes
  LRT_HD auto at(const Index<Ro>& i) const {
    index_t lin = 0;
    for (int k = 0; k < Ro; ++k) lin += i[k] * bs[k];
    return g(lin);
  }
  LRT_HD auto lin(index_t i) const { return g(i); }
};

/// Element i (row-major position) is g(i): iota, random streams. Runs on any device.
template <class G, int R>
class GeneratorExpr : public ExprBase<GeneratorExpr<G, R>> {
 public:
  using value_type = decltype(std::declval<const G&>()(index_t{}));
  using device_type = AnyDevice;
  static constexpr int rank = R;

  GeneratorExpr(G g, const Shape<R>& shape) : g_(g), shape_(shape) { detail::check_extents(shape, "generator"); }
  const Shape<R>& shape() const { return shape_; }
  template <int Ro>
  bool linear_ok(const Shape<Ro>& out) const {
    if constexpr (Ro != R) {
      return false;
    } else {
      return out == shape_;
    }
  }
  template <int Ro>
  GeneratorEval<G, Ro> evaluator(const Shape<Ro>& out) const {
    return {g_, detail::broadcast_strides(shape_, row_major_strides(shape_), out)};
  }
  template <class F>
  void visit_leaves(F&&) const {}

 private:
  G g_;
  Shape<R> shape_;
};

namespace detail {
template <class A, class B>
constexpr void check_operands() {
  static_assert(std::is_same_v<value_t<A>, value_t<B>>,
                "operands of an elementwise expression must have the same element type: "
                "convert one with lrt::cast<T>(e)");
  static_assert(
      common_device<typename std::remove_cvref_t<A>::device_type, typename std::remove_cvref_t<B>::device_type>::ok,
      "mixing devices in one expression: copy one operand with lrt::to<Device>(t) "
      "first");
}

template <class Op, class A, class B>
auto make_binary(A&& a, B&& b) {
  check_operands<A, B>();
  return BinaryExpr<Op, hold_t<A&&>, hold_t<B&&>>(hold(std::forward<A>(a)), hold(std::forward<B>(b)));
}
template <class Op, class A>
auto make_unary(A&& a) {
  return UnaryExpr<Op, hold_t<A&&>>(hold(std::forward<A>(a)));
}
template <class E, class S>
auto scalar_like(S s) {
  return ScalarExpr<value_t<E>>(static_cast<value_t<E>>(s));
}
}  // namespace detail

// Binary operators and functions: expression (op) expression, expression (op) scalar,
// scalar (op) expression.
#define LRT_DEFINE_BINARY(fn, Op)                                                  \
  template <Expression A, Expression B>                                            \
  auto fn(A&& a, B&& b) {                                                          \
    return detail::make_binary<Op>(std::forward<A>(a), std::forward<B>(b));        \
  }                                                                                \
  template <Expression A, Scalar S>                                                \
  auto fn(A&& a, S s) {                                                            \
    return detail::make_binary<Op>(std::forward<A>(a), detail::scalar_like<A>(s)); \
  }                                                                                \
  template <Scalar S, Expression B>                                                \
  auto fn(S s, B&& b) {                                                            \
    return detail::make_binary<Op>(detail::scalar_like<B>(s), std::forward<B>(b)); \
  }
LRT_DEFINE_BINARY(operator+, op::Add)
LRT_DEFINE_BINARY(operator-, op::Sub)
LRT_DEFINE_BINARY(operator*, op::Mul)
LRT_DEFINE_BINARY(operator/, op::Div)
LRT_DEFINE_BINARY(operator<, op::Less)
LRT_DEFINE_BINARY(operator<=, op::LessEq)
LRT_DEFINE_BINARY(operator>, op::Greater)
LRT_DEFINE_BINARY(operator>=, op::GreaterEq)
LRT_DEFINE_BINARY(operator&&, op::And)
LRT_DEFINE_BINARY(operator||, op::Or)
LRT_DEFINE_BINARY(eq, op::Equal)
LRT_DEFINE_BINARY(ne, op::NotEqual)
LRT_DEFINE_BINARY(minimum, op::Min)
LRT_DEFINE_BINARY(maximum, op::Max)
#undef LRT_DEFINE_BINARY

#define LRT_DEFINE_UNARY(fn, Op)                       \
  template <Expression A>                              \
  auto fn(A&& a) {                                     \
    return detail::make_unary<Op>(std::forward<A>(a)); \
  }
LRT_DEFINE_UNARY(operator-, op::Neg)
LRT_DEFINE_UNARY(operator!, op::Not)
LRT_DEFINE_UNARY(abs, op::Abs)
LRT_DEFINE_UNARY(exp, op::Exp)
LRT_DEFINE_UNARY(log, op::Log)
LRT_DEFINE_UNARY(tanh, op::Tanh)
LRT_DEFINE_UNARY(sqrt, op::Sqrt)
LRT_DEFINE_UNARY(rsqrt, op::Rsqrt)
LRT_DEFINE_UNARY(square, op::Square)
LRT_DEFINE_UNARY(relu, op::Relu)
LRT_DEFINE_UNARY(sigmoid, op::Sigmoid)
#undef LRT_DEFINE_UNARY

/// Elementwise conversion to U.
template <class U, Expression A>
auto cast(A&& a) {
  return detail::make_unary<op::Cast<U>>(std::forward<A>(a));
}

/// a where c is true, else b; a and b may be expressions or scalars.
template <Expression C, class A, class B>
auto where(C&& c, A&& a, B&& b) {
  static_assert(std::is_same_v<detail::value_t<C>, bool>,
                "where(c, a, b) needs a boolean condition (a comparison such as a > b)");
  static_assert(Expression<A> || Expression<B>, "where(c, a, b) needs a or b to be an expression");
  using VT = detail::value_t<std::conditional_t<Expression<A>, A, B>>;
  auto wrap = [](auto&& x) {
    if constexpr (Expression<decltype(x)>) {
      return detail::hold(std::forward<decltype(x)>(x));
    } else {
      return ScalarExpr<VT>(static_cast<VT>(x));
    }
  };
  auto ha = wrap(std::forward<A>(a));
  auto hb = wrap(std::forward<B>(b));
  detail::check_operands<decltype(ha), decltype(hb)>();
  static_assert(
      detail::common_device<typename std::remove_cvref_t<C>::device_type, typename decltype(ha)::device_type>::ok,
      "mixing devices in one expression: copy one operand with lrt::to<Device>(t) "
      "first");
  return SelectExpr<detail::hold_t<C&&>, decltype(ha), decltype(hb)>(detail::hold(std::forward<C>(c)), std::move(ha),
                                                                     std::move(hb));
}

namespace detail {
template <class T>
struct Iota {
  T start, step;
  LRT_HD T operator()(index_t i) const { return start + static_cast<T>(i) * step; }
};
}  // namespace detail

/// start, start+step, ... in row-major order over shape.
template <class T, int R>
auto iota(const Shape<R>& shape, T start = T(0), T step = T(1)) {
  return GeneratorExpr<detail::Iota<T>, R>(detail::Iota<T>{start, step}, shape);
}

}  // namespace v0
}  // namespace lrt
