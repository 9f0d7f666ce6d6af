// lrt/core/shape.hpp: fixed-rank extents, strides and multi-indices (runtime values, rank R at
// compile time). Trivially copyable and usable in device code, so evaluators can carry them.
#pragma once

#include <initializer_list>
#include <string>

#include "config.hpp"
#include "error.hpp"

namespace lrt {
inline namespace v0 {

/// R runtime extents (or strides, or an index). Rank 0 is a scalar shape.
template <int R>
struct Shape {
  static_assert(R >= 0, "a tensor rank must be >= 0");
  static constexpr int rank = R;
  index_t v[R > 0 ? R : 1] = {};

  constexpr Shape() = default;
  /// Shape<2>{3, 4}; the number of values must equal R.
  constexpr Shape(std::initializer_list<index_t> il) {
    if (static_cast<int>(il.size()) != R)
      ::lrt::throw_error("shape", detail::str_cat("expected ", R, " extents, got ", il.size()));
    int i = 0;
    for (index_t x : il) v[i++] = x;
  }
  LRT_HD constexpr index_t& operator[](int i) { return v[i]; }
  LRT_HD constexpr const index_t& operator[](int i) const { return v[i]; }
  /// Product of the extents (1 for rank 0).
  LRT_HD constexpr index_t numel() const {
    index_t n = 1;
    for (int i = 0; i < R; ++i) n *= v[i];
    return n;
  }
  LRT_HD constexpr bool operator==(const Shape& o) const {
    for (int i = 0; i < R; ++i)
      if (v[i] != o.v[i]) return false;
    return true;
  }
  LRT_HD constexpr bool operator!=(const Shape& o) const { return !(*this == o); }
};

template <int R>
using Index = Shape<R>;
template <int R>
using Strides = Shape<R>;

/// "(2, 3)"; "()" for rank 0. Also used by error messages (no fmt dependency here).
template <int R>
std::string to_string(const Shape<R>& s) {
  std::string out = "(";
  for (int i = 0; i < R; ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (R == 1) out += ",";
  return out + ")";
}

/// Row-major (C order) strides for a shape, in elements.
template <int R>
LRT_HD constexpr Strides<R> row_major_strides(const Shape<R>& s) {
  Strides<R> st;
  index_t acc = 1;
  for (int i = R - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

/// Unravels a linear row-major position into a multi-index.
template <int R>
LRT_HD constexpr Index<R> unravel(index_t lin, const Shape<R>& s) {
  Index<R> idx;
  for (int i = R - 1; i >= 0; --i) {
    const index_t e = s[i];
    idx[i] = e ? lin % e : 0;
    lin = e ? lin / e : 0;
  }
  return idx;
}

namespace detail {
/// Normalises a possibly negative axis against rank R; throws if out of range.
inline int normalize_axis(int axis, int rank, const char* op) {
  const int a = axis < 0 ? axis + rank : axis;
  check(a >= 0 && a < rank, op, "axis ", axis, " out of range for rank ", rank);
  return a;
}
template <int R>
void check_extents(const Shape<R>& s, const char* op) {
  for (int i = 0; i < R; ++i) check(s[i] >= 0, op, "negative extent in shape ", s);
}
}  // namespace detail

}  // namespace v0
}  // namespace lrt
