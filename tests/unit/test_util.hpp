// Helpers shared by the unit tests: random shapes and data from std::mt19937 (independent of
// lrt's RNG), index iteration and element access written here, not taken from the library.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <lrt/lrt.hpp>

namespace lrt_test {

using lrt::index_t;

/// Calls f(idx) for every multi-index of shape in row-major order.
template <int R, class F>
void for_each_index(const lrt::Shape<R>& s, F&& f) {
  if (s.numel() == 0) return;
  lrt::Index<R> idx{};
  for (;;) {
    f(static_cast<const lrt::Index<R>&>(idx));
    int k = R - 1;
    for (; k >= 0; --k) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

/// Element of a host view at a multi-index, by explicit stride arithmetic.
template <class T, int R, class D>
T& elem(const lrt::TensorView<T, R, D>& v, const lrt::Index<R>& i) {
  index_t off = 0;
  for (int k = 0; k < R; ++k) off += i[k] * v.strides()[k];
  return v.data()[off];
}

/// A random shape with extents in [lo, hi].
template <int R>
lrt::Shape<R> random_shape(std::mt19937& rng, index_t lo, index_t hi) {
  std::uniform_int_distribution<index_t> d(lo, hi);
  lrt::Shape<R> s;
  for (int k = 0; k < R; ++k) s[k] = d(rng);
  return s;
}

/// Fills a (possibly strided) host view with uniform values in [lo, hi).
template <class T, int R, class D>
void fill_random(const lrt::TensorView<T, R, D>& v, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> d(lo, hi);
  for_each_index(v.shape(), [&](const auto& i) { elem(v, i) = static_cast<T>(d(rng)); });
}
template <class T, int R, class D>
void fill_random(lrt::Tensor<T, R, D>& t, std::mt19937& rng, double lo = -2, double hi = 2) {
  fill_random(t.view(), rng, lo, hi);
}

/// Every parameter of model m uniform in [-a, a), from a generator seeded with `seed`.
template <class M>
void randomize(M& m, std::uint64_t seed, double a = 0.5) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  m.for_each_param([&](auto& p) { fill_random(p.value(), rng, -a, a); });
}

/// Max |a - b| / (atol + rtol |b|) over all elements: <= 1 means close.
template <class TA, class TB, int R, class D>
void check_close(const lrt::TensorView<TA, R, D>& a, const lrt::TensorView<TB, R, D>& b, double rtol, double atol) {
  REQUIRE(a.shape() == b.shape());
  double worst = 0;
  for_each_index(a.shape(), [&](const auto& i) {
    const double x = static_cast<double>(elem(a, i)), y = static_cast<double>(elem(b, i));
    if (std::isnan(y)) {
      CHECK(std::isnan(x));
      return;
    }
    worst = std::max(worst, std::abs(x - y) / (atol + rtol * std::abs(y)));
  });
  CHECK(worst <= 1.0);
}
template <class A, class B>
void check_close(const A& a, const B& b, double rtol = 1e-6, double atol = 1e-6) {
  check_close(a.view(), b.view(), rtol, atol);
}

/// Every element equal (bitwise for floats, NaN == NaN).
template <class TA, class TB, int R, class D>
bool equal(const lrt::TensorView<TA, R, D>& a, const lrt::TensorView<TB, R, D>& b) {
  if (a.shape() != b.shape()) return false;
  bool eq = true;
  for_each_index(a.shape(), [&](const auto& i) {
    const auto x = elem(a, i), y = elem(b, i);
    if (!(x == y || (x != x && y != y))) eq = false;
  });
  return eq;
}

}  // namespace lrt_test
