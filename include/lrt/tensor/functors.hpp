// lrt/tensor/functors.hpp: the scalar operations of elementwise expressions (host and device).
// Each functor has a name used in error messages.
#pragma once

#include <cmath>

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace math {

// Overloads that resolve to the CUDA math library in device code and to <cmath> on the host.
#if LRT_ON_DEVICE
LRT_HD inline float exp(float x) { return ::expf(x); }
LRT_HD inline double exp(double x) { return ::exp(x); }
LRT_HD inline float log(float x) { return ::logf(x); }
LRT_HD inline double log(double x) { return ::log(x); }
LRT_HD inline float tanh(float x) { return ::tanhf(x); }
LRT_HD inline double tanh(double x) { return ::tanh(x); }
LRT_HD inline float sqrt(float x) { return ::sqrtf(x); }
LRT_HD inline double sqrt(double x) { return ::sqrt(x); }
LRT_HD inline float rsqrt(float x) { return ::rsqrtf(x); }
LRT_HD inline double rsqrt(double x) { return ::rsqrt(x); }
LRT_HD inline float cos(float x) { return ::cosf(x); }
LRT_HD inline double cos(double x) { return ::cos(x); }
LRT_HD inline float sin(float x) { return ::sinf(x); }
LRT_HD inline double sin(double x) { return ::sin(x); }
#else
inline float exp(float x) { return std::exp(x); }
inline double exp(double x) { return std::exp(x); }
inline float log(float x) { return std::log(x); }
inline double log(double x) { return std::log(x); }
inline float tanh(float x) { return std::tanh(x); }
inline double tanh(double x) { return std::tanh(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline double sqrt(double x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float cos(float x) { return std::cos(x); }
inline double cos(double x) { return std::cos(x); }
inline float sin(float x) { return std::sin(x); }
inline double sin(double x) { return std::sin(x); }
#endif

}  // namespace math

namespace op {

#define LRT_BINARY_FUNCTOR(Name, str, expr)  \
  struct Name {                              \
    static constexpr const char* name = str; \
    template <class A>                       \
    LRT_HD auto operator()(A a, A b) const { \
      return expr;                           \
    }                                        \
  };
LRT_BINARY_FUNCTOR(Add, "add", a + b)
LRT_BINARY_FUNCTOR(Sub, "sub", a - b)
LRT_BINARY_FUNCTOR(Mul, "mul", a* b)
LRT_BINARY_FUNCTOR(Div, "div", a / b)
LRT_BINARY_FUNCTOR(Min, "minimum", b < a ? b : a)
LRT_BINARY_FUNCTOR(Max, "maximum", a < b ? b : a)
LRT_BINARY_FUNCTOR(Less, "less", a < b)
LRT_BINARY_FUNCTOR(LessEq, "less_equal", a <= b)
LRT_BINARY_FUNCTOR(Greater, "greater", a > b)
LRT_BINARY_FUNCTOR(GreaterEq, "greater_equal", a >= b)
LRT_BINARY_FUNCTOR(Equal, "equal", a == b)
LRT_BINARY_FUNCTOR(NotEqual, "not_equal", a != b)
LRT_BINARY_FUNCTOR(And, "logical_and", bool(a) && bool(b))
LRT_BINARY_FUNCTOR(Or, "logical_or", bool(a) || bool(b))
#undef LRT_BINARY_FUNCTOR

#define LRT_UNARY_FUNCTOR(Name, str, expr)   \
  struct Name {                              \
    static constexpr const char* name = str; \
    template <class A>                       \
    LRT_HD A operator()(A x) const {         \
      return expr;                           \
    }                                        \
  };
LRT_UNARY_FUNCTOR(Neg, "neg", -x)
LRT_UNARY_FUNCTOR(Abs, "abs", x < A(0) ? -x : x)
LRT_UNARY_FUNCTOR(Exp, "exp", math::exp(x))
LRT_UNARY_FUNCTOR(Log, "log", math::log(x))
LRT_UNARY_FUNCTOR(Tanh, "tanh", math::tanh(x))
LRT_UNARY_FUNCTOR(Sqrt, "sqrt", math::sqrt(x))
LRT_UNARY_FUNCTOR(Rsqrt, "rsqrt", math::rsqrt(x))
LRT_UNARY_FUNCTOR(Square, "square", x* x)
LRT_UNARY_FUNCTOR(Relu, "relu", x > A(0) ? x : A(0))
LRT_UNARY_FUNCTOR(Sigmoid, "sigmoid", A(1) / (A(1) + math::exp(-x)))
#undef LRT_UNARY_FUNCTOR

struct Not {
  static constexpr const char* name = "logical_not";
  template <class A>
  LRT_HD bool operator()(A x) const {
    return !bool(x);
  }
};

/// Conversion to U (static_cast semantics).
template <class U>
struct Cast {
  static constexpr const char* name = "cast";
  template <class A>
  LRT_HD U operator()(A x) const {
    return static_cast<U>(x);
  }
};

}  // namespace op
}  // namespace v0
}  // namespace lrt
