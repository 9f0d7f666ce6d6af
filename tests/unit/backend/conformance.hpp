// tests/unit/backend/conformance.hpp: device-generic test bodies. Each body is a function template
// over the device D: it builds inputs on the host, runs lrt on D, copies the results back and
// compares them with a reference computed by plain loops on the host (never with lrt itself).
// tests/cuda/test_cuda.cu runs them on lrt::cuda::Device (on a GPU, and on the CPU emulator
// through tests/emu/test_cuda_emu.cpp, which includes it); tests/unit/backend/test_conformance_cpu.cpp runs the same
// bodies on lrt::cpu::Device. Needs doctest and a backend for D (DeviceTraits, Executor, Reducer,
// GemmBackend) included before this header; no fmt, no Eigen.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <lrt/core.hpp>

namespace lrt_conformance {

using lrt::index_t;
using lrt::Shape;
using Host = lrt::cpu::Device;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// n reproducible values: uniform in [lo, hi) for floating T, integers in [lo, hi] otherwise.
template <class T>
std::vector<T> random_vec(std::size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 g(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    const double u = static_cast<double>(g() >> 8) * 0x1p-24;  // [0, 1)
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(lo + u * (hi - lo));
    } else {
      x = static_cast<T>(std::floor(lo + u * (hi - lo + 1.0)));
    }
  }
  return v;
}

/// A tensor on D holding v (row-major), through a host view and lrt::to.
template <class D, class T, int R>
lrt::Tensor<T, R, D> upload(const Shape<R>& s, const std::vector<T>& v) {
  REQUIRE(static_cast<index_t>(v.size()) == s.numel());
  const lrt::TensorView<const T, R, Host> hv(v.data(), s);
  return lrt::to<D>(hv);
}

/// The elements of a tensor or view of any device, row-major, on the host.
template <class X>
auto download(const X& x) {
  const auto h = lrt::to<Host>(x);
  using U = typename std::remove_cvref_t<decltype(h)>::value_type;
  return std::vector<U>(h.data(), h.data() + h.numel());
}

template <class T>
bool is_nan_value(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

/// got[i] == want[i] for all i (NaN matches NaN).
template <class T, class W>
void check_equal(const std::vector<T>& got, const std::vector<W>& want, const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool ok =
        (is_nan_value(got[i]) && is_nan_value(want[i])) || static_cast<double>(got[i]) == static_cast<double>(want[i]);
    if (!ok && bad++ == 0) first = i;
  }
  INFO(std::string(what) << ": " << bad << " of " << got.size() << " differ; first at " << first << ": got "
                         << (bad ? static_cast<double>(got[first]) : 0.0) << ", want "
                         << (bad ? static_cast<double>(want[first]) : 0.0));
  CHECK(bad == 0);
}

/// |got[i] - want[i]| <= tol * max(1, |want[i]|) for all i (NaN matches NaN).
template <class T>
void check_close(const std::vector<T>& got, const std::vector<double>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else {
      const double err = std::abs(g - w) / std::max(1.0, std::abs(w));
      worst = std::max(worst, err);
      ok = err <= tol;
    }
    if (!ok && bad++ == 0) first = i;
  }
  INFO(std::string(what) << ": " << bad << " of " << got.size() << " outside tolerance " << tol
                         << " (worst relative error " << worst << "); first at " << first << ": got "
                         << (bad ? static_cast<double>(got[first]) : 0.0) << ", want " << (bad ? want[first] : 0.0));
  CHECK(bad == 0);
}

/// Float sums: |got[i] - want[i]| <= 1e-6 * max(1, magnitude[i]), magnitude[i] being the sum of
/// the absolute values added (the scale of a summation's rounding error, whatever its order).
template <class T>
void check_sum(const std::vector<T>& got, const std::vector<double>& want, const std::vector<double>& magnitude,
               const char* what) {
  REQUIRE(got.size() == want.size());
  REQUIRE(magnitude.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= 1e-6 * std::max(1.0, magnitude[i])) && bad++ == 0) first = i;
  INFO(std::string(what) << ": " << bad << " of " << got.size() << " sums off; first at " << first << ": got "
                         << (bad ? double(got[first]) : 0.0) << ", want " << (bad ? want[first] : 0.0));
  CHECK(bad == 0);
}

/// Bitwise equality of two host buffers of n elements of T.
template <class T>
void check_bitwise(const T* got, const T* want, index_t n, const char* what) {
  index_t bad = 0, first = 0;
  for (index_t i = 0; i < n; ++i)
    if (std::memcmp(got + i, want + i, sizeof(T)) != 0 && bad++ == 0) first = i;
  INFO(std::string(what) << ": " << bad << " of " << n << " elements differ bitwise; first at " << first);
  CHECK(bad == 0);
}

/// Runs f and checks that it throws lrt::Error whose op() is `op`.
template <class F>
void check_throws_op(F&& f, const char* op, const char* what) {
  std::string got = "(nothing thrown)";
  try {
    f();
  } catch (const lrt::Error& e) {
    got = e.op();
    INFO(std::string(what) << ": " << std::string(e.what()));
    CHECK(got == op);
    return;
  }
  INFO(std::string(what) << ": expected lrt::Error with op " << std::string(op) << ", got " << got);
  CHECK(false);
}

/// Row-major (M, N) = A (M, K) * B (K, N) in double, from element accessors.
template <class FA, class FB>
std::vector<double> ref_matmul(index_t M, index_t N, index_t K, FA a, FB b) {
  std::vector<double> c(static_cast<std::size_t>(M * N), 0.0);
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) {
      double acc = 0;
      for (index_t k = 0; k < K; ++k) acc += static_cast<double>(a(i, k)) * static_cast<double>(b(k, j));
      c[static_cast<std::size_t>(i * N + j)] = acc;
    }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Memory: copies, zero, fill
// ---------------------------------------------------------------------------------------------

template <class D, class T>
void round_trip_one(const char* what) {
  const Shape<2> s{5, 7};
  const auto v = random_vec<T>(35, 11, std::is_signed_v<T> ? -100 : 0, 200);
  const auto d = upload<D>(s, v);
  CHECK((d.shape() == s));
  check_equal(download(d), v, what);
  lrt::Tensor<T, 2, D> copy(d);  // device-to-device copy
  check_equal(download(copy), v, what);
  lrt::Tensor<T, 2, D> assigned;  // copy assignment resizes an empty tensor
  assigned = copy;
  check_equal(download(assigned), v, what);
}

template <class D>
void copies_round_trip() {
  round_trip_one<D, float>("float");
  round_trip_one<D, double>("double");
  round_trip_one<D, std::int32_t>("int32");
  round_trip_one<D, index_t>("int64");
  round_trip_one<D, std::uint8_t>("uint8");

  // Zero-filled construction, full(), and fill() through a strided view.
  lrt::Tensor<float, 2, D> z(Shape<2>{3, 4});
  check_equal(download(z), std::vector<float>(12, 0.f), "zeros");
  auto f = lrt::Tensor<float, 2, D>::full(Shape<2>{3, 4}, 1.5f);
  f.slice(1, 1, 4, 2).fill(7.f);  // columns 1 and 3
  std::vector<float> want(12);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) want[i * 4 + j] = (j % 2) ? 7.f : 1.5f;
  check_equal(download(f), want, "full + strided fill");

  // Empty and rank-0 tensors.
  lrt::Tensor<float, 2, D> e(Shape<2>{0, 3});
  CHECK(download(e).empty());
  CHECK((lrt::to<Host>(e).shape() == Shape<2>{0, 3}));
  lrt::Tensor<float, 0, D> sc(Shape<0>{});
  sc.fill(2.5f);
  check_equal(download(sc), std::vector<float>{2.5f}, "rank 0");

  // A long copy and a long generated fill (more blocks than one grid-stride pass).
  const index_t n = (index_t{3} << 20) + 3;
  lrt::Tensor<float, 1, D> big(Shape<1>{n}, lrt::uninitialized);
  big = lrt::iota<float>(big.shape(), 0.f, 1.f);
  const auto hb = download(big);
  std::vector<float> wb(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) wb[static_cast<std::size_t>(i)] = static_cast<float>(i);
  check_equal(hb, wb, "iota 3M");
  const auto back = upload<D>(Shape<1>{n}, wb);
  check_equal(download(back), wb, "upload 3M");
}

// ---------------------------------------------------------------------------------------------
// Elementwise expressions
// ---------------------------------------------------------------------------------------------

template <class D>
void elementwise_broadcast() {
  const auto va = random_vec<float>(20, 1), vb = random_vec<float>(5, 2), vc = random_vec<float>(4, 3);
  const auto a = upload<D>(Shape<2>{4, 5}, va);
  const auto b = upload<D>(Shape<1>{5}, vb);
  const auto c = upload<D>(Shape<2>{4, 1}, vc);

  lrt::Tensor<float, 2, D> r = a * b + lrt::exp(c) - 2.f;
  std::vector<double> want(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) want[i * 5 + j] = double(va[i * 5 + j]) * vb[j] + std::exp(double(vc[i])) - 2.0;
  check_close(download(r), want, 1e-5, "a * b + exp(c) - 2");

  // Every unary and binary functor once (abs/+1 keep log, sqrt, rsqrt in their domain).
  lrt::Tensor<float, 2, D> u = lrt::tanh(a) + lrt::sqrt(lrt::abs(a)) + lrt::sigmoid(a) + lrt::relu(a) + lrt::square(a) -
                               (-a) + lrt::rsqrt(lrt::abs(a) + 1.f) + lrt::log(lrt::abs(a) + 1.f) + lrt::minimum(a, b) +
                               lrt::maximum(a, 0.25f) + a / (lrt::abs(b) + 1.f) + (1.f - a);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      const double x = va[i * 5 + j], y = vb[j];
      want[i * 5 + j] = std::tanh(x) + std::sqrt(std::abs(x)) + 1.0 / (1.0 + std::exp(-x)) + std::max(x, 0.0) + x * x +
                        x + 1.0 / std::sqrt(std::abs(x) + 1.0) + std::log(std::abs(x) + 1.0) + std::min(x, y) +
                        std::max(x, 0.25) + x / (std::abs(y) + 1.0) + (1.0 - x);
    }
  check_close(download(u), want, 1e-5, "all functors");

  // Rank promotion: (2, 4, 5) + (4, 5); and a double expression.
  const auto v3 = random_vec<float>(40, 4);
  const auto t3 = upload<D>(Shape<3>{2, 4, 5}, v3);
  lrt::Tensor<float, 3, D> r3 = t3 + a;
  std::vector<double> w3(40);
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < 20; ++i) w3[k * 20 + i] = double(v3[k * 20 + i]) + va[i];
  check_close(download(r3), w3, 1e-6, "rank promotion");

  const auto vd = random_vec<double>(20, 5);
  const auto ad = upload<D>(Shape<2>{4, 5}, vd);
  lrt::Tensor<double, 2, D> rd = ad * ad * 3.0 - lrt::exp(ad) / 2.0;
  std::vector<double> wd(20);
  for (int i = 0; i < 20; ++i) wd[i] = vd[i] * vd[i] * 3.0 - std::exp(vd[i]) / 2.0;
  check_close(download(rd), wd, 1e-13, "double expression");
}

template <class D>
void noncontiguous_views() {
  const auto va = random_vec<float>(20, 21), vt = random_vec<float>(20, 22);
  const auto a = upload<D>(Shape<2>{4, 5}, va);
  const auto at = upload<D>(Shape<2>{5, 4}, vt);

  // Transposed source.
  lrt::Tensor<float, 2, D> r = at.t() + a;
  std::vector<double> want(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) want[i * 5 + j] = double(vt[j * 4 + i]) + va[i * 5 + j];
  check_close(download(r), want, 1e-6, "transposed source");

  // Slice with a step as source: columns 1, 3, 5, 7 of a (4, 9).
  const auto vw = random_vec<float>(36, 23);
  const auto wide = upload<D>(Shape<2>{4, 9}, vw);
  lrt::Tensor<float, 2, D> s = wide.slice(1, 1, 9, 2) * 2.f;
  CHECK((s.shape() == Shape<2>{4, 4}));
  std::vector<double> ws(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) ws[i * 4 + j] = 2.0 * vw[i * 9 + 1 + 2 * j];
  check_close(download(s), ws, 0, "stepped slice source");

  // Slice with a step as destination: rows 0, 2, 4 of a (6, 5); the others keep their value.
  auto big = lrt::Tensor<float, 2, D>::full(Shape<2>{6, 5}, 1.f);
  big.slice(0, 0, 6, 2) = a.slice(0, 0, 3) * 3.f;
  std::vector<double> wbig(30, 1.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) wbig[(2 * i) * 5 + j] = 3.f * va[i * 5 + j];  // float product
  check_close(download(big), wbig, 0, "stepped slice destination");

  // Transposed destination.
  lrt::Tensor<float, 2, D> dt(Shape<2>{5, 4});
  dt.t() = a + 0.f;
  std::vector<double> wdt(20);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) wdt[i * 4 + j] = va[j * 5 + i];
  check_close(download(dt), wdt, 0, "transposed destination");

  // Downloading a strided view makes it contiguous first.
  std::vector<double> wtt(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) wtt[i * 5 + j] = vt[j * 4 + i];
  check_close(download(at.t()), wtt, 0, "download of a transposed view");
}

template <class D>
void noncontiguous_rank3() {
  const auto vx = random_vec<float>(24, 31);
  const auto x = upload<D>(Shape<3>{2, 3, 4}, vx);
  lrt::Tensor<float, 3, D> p = x.permute(Shape<3>{2, 0, 1});  // (4, 2, 3)
  std::vector<double> wp(24);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) wp[(k * 2 + i) * 3 + j] = vx[(i * 3 + j) * 4 + k];
  check_close(download(p), wp, 0, "permute");

  lrt::Tensor<float, 2, D> sel = x.select(1, 2) - 1.f;  // (2, 4)
  std::vector<double> wsel(8);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) wsel[i * 4 + k] = vx[(i * 3 + 2) * 4 + k] - 1.f;
  check_close(download(sel), wsel, 0, "select");

  // unsqueeze + broadcast: (4, 1) + (5,) -> (4, 5).
  const auto vc = random_vec<float>(4, 32), vr = random_vec<float>(5, 33);
  const auto col = upload<D>(Shape<1>{4}, vc);
  const auto row = upload<D>(Shape<1>{5}, vr);
  lrt::Tensor<float, 2, D> outer = col.unsqueeze(1) * row;
  std::vector<double> wo(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) wo[i * 5 + j] = double(vc[i]) * vr[j];
  check_close(download(outer), wo, 1e-6, "unsqueeze broadcast");

  // A transposed, stepped view of a rank-3 tensor as both source and destination.
  lrt::Tensor<float, 3, D> y(Shape<3>{4, 3, 2});
  y.transpose(0, 2) = x * 2.f;  // y[k][j][i] = 2 x[i][j][k]
  std::vector<double> wy(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) wy[(k * 3 + j) * 2 + i] = 2.0 * vx[(i * 3 + j) * 4 + k];
  check_close(download(y), wy, 0, "transpose(0, 2) destination");
}

template <class D>
void where_cast_compare() {
  const auto va = random_vec<float>(20, 41), vb = random_vec<float>(20, 42);
  const auto a = upload<D>(Shape<2>{4, 5}, va);
  const auto b = upload<D>(Shape<2>{4, 5}, vb);

  lrt::Tensor<bool, 2, D> gt = a > b;
  lrt::Tensor<bool, 2, D> logic = ((a > 0.f) && !(b < 0.f)) || lrt::eq(a, b);
  lrt::Tensor<float, 2, D> w1 = lrt::where(a > 0.f, a, 0.f);
  lrt::Tensor<float, 2, D> w2 = lrt::where(gt, a, b);
  lrt::Tensor<std::int32_t, 2, D> ci = lrt::cast<std::int32_t>(a * 10.f);
  lrt::Tensor<double, 2, D> cd = lrt::cast<double>(a);
  lrt::Tensor<float, 2, D> cf = lrt::cast<float>(a <= b) + lrt::cast<float>(lrt::ne(ci, 0));
  std::vector<bool> wgt(20), wlogic(20);
  std::vector<double> ww1(20), ww2(20), wcd(20), wcf(20);
  std::vector<std::int32_t> wci(20);
  for (int i = 0; i < 20; ++i) {
    const float x = va[i], y = vb[i];
    wgt[i] = x > y;
    wlogic[i] = ((x > 0.f) && !(y < 0.f)) || x == y;
    ww1[i] = x > 0.f ? x : 0.f;
    ww2[i] = x > y ? x : y;
    wci[i] = static_cast<std::int32_t>(x * 10.f);
    wcd[i] = x;
    wcf[i] = float(x <= y) + float(wci[i] != 0);
  }
  check_equal(download(gt), wgt, "a > b");
  check_equal(download(logic), wlogic, "logic");
  check_close(download(w1), ww1, 0, "where(a > 0, a, 0)");
  check_close(download(w2), ww2, 0, "where(gt, a, b)");
  check_equal(download(ci), wci, "cast<int>");
  check_close(download(cd), wcd, 0, "cast<double>");
  check_close(download(cf), wcf, 0, "cast<float>(bool)");

  // A broadcast condition: (4, 1) picks whole rows.
  const std::vector<float> vcond{1.f, -1.f, 2.f, -2.f};
  const auto cond = upload<D>(Shape<2>{4, 1}, vcond);
  lrt::Tensor<float, 2, D> w3 = lrt::where(cond > 0.f, a, -1.f);
  std::vector<double> ww3(20);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) ww3[i * 5 + j] = vcond[i] > 0.f ? va[i * 5 + j] : -1.0;
  check_close(download(w3), ww3, 0, "broadcast where");
}

template <class D>
void aliasing() {
  const auto va = random_vec<float>(20, 51), vb = random_vec<float>(20, 52);
  auto a = upload<D>(Shape<2>{4, 5}, va);
  const auto b = upload<D>(Shape<2>{4, 5}, vb);
  a = a * b + a;  // same layout on both sides: one pass, in place
  std::vector<double> want(20);
  for (int i = 0; i < 20; ++i) want[i] = double(va[i]) * vb[i] + va[i];
  check_close(download(a), want, 1e-6, "a = a * b + a");
  a += a;
  a *= 0.5f;
  check_close(download(a), want, 1e-6, "a += a; a *= 0.5");

  // A transposed read of the destination goes through a temporary.
  const auto vq = random_vec<float>(25, 53);
  auto q = upload<D>(Shape<2>{5, 5}, vq);
  q = q.t() + 0.f;
  std::vector<double> wq(25);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) wq[i * 5 + j] = vq[j * 5 + i];
  check_close(download(q), wq, 0, "q = q.t()");

  // A shifted overlapping read: v[1:] = v[:-1] (numpy semantics).
  const auto vv = random_vec<float>(10, 54);
  auto v = upload<D>(Shape<1>{10}, vv);
  v.slice(0, 1, 10) = v.slice(0, 0, 9);
  std::vector<double> wv(10);
  wv[0] = vv[0];
  for (int i = 1; i < 10; ++i) wv[i] = vv[i - 1];
  check_close(download(v), wv, 0, "v[1:] = v[:-1]");
}

// ---------------------------------------------------------------------------------------------
// Gather and scatter
// ---------------------------------------------------------------------------------------------

template <class D>
void gather_scatter() {
  const auto vt = random_vec<float>(40, 61);
  const auto table = upload<D>(Shape<2>{10, 4}, vt);
  const lrt::IndexList<D> idx{3, 0, 7, 7};
  const std::vector<int> hidx{3, 0, 7, 7};

  lrt::Tensor<float, 2, D> g = table.gather(0, idx);
  CHECK((g.shape() == Shape<2>{4, 4}));
  std::vector<double> wg(16);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) wg[r * 4 + c] = vt[hidx[r] * 4 + c];
  check_close(download(g), wg, 0, "gather rows");

  const lrt::IndexList<D> cols{3, 1};
  lrt::Tensor<float, 2, D> g1 = table.gather(1, cols);
  std::vector<double> wg1(20);
  for (int r = 0; r < 10; ++r) {
    wg1[r * 2] = vt[r * 4 + 3];
    wg1[r * 2 + 1] = vt[r * 4 + 1];
  }
  check_close(download(g1), wg1, 0, "gather columns");

  // A gather inside a broadcast expression, and a one-row gather broadcast over rows.
  const auto vw = random_vec<float>(4, 62);
  const auto w = upload<D>(Shape<1>{4}, vw);
  lrt::Tensor<float, 2, D> ge = table.gather(0, idx) * w + 1.f;
  std::vector<double> wge(16);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) wge[r * 4 + c] = double(vt[hidx[r] * 4 + c]) * vw[c] + 1.0;
  check_close(download(ge), wge, 1e-6, "gather * w + 1");
  const lrt::IndexList<D> one{5};
  lrt::Tensor<float, 2, D> o(Shape<2>{3, 4});
  o = table.gather(0, one);
  std::vector<double> wo(12);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) wo[r * 4 + c] = vt[5 * 4 + c];
  check_close(download(o), wo, 0, "broadcast one-row gather");

  // Scatter rows, a broadcast scatter, and a range index list.
  const auto vs = random_vec<float>(12, 63);
  const auto src = upload<D>(Shape<2>{3, 4}, vs);
  lrt::Tensor<float, 2, D> dst(Shape<2>{10, 4});
  const lrt::IndexList<D> sidx{1, 4, 6};
  dst.gather(0, sidx) = src;
  std::vector<double> wd(40, 0.0);
  const int hs[3] = {1, 4, 6};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) wd[hs[r] * 4 + c] = vs[r * 4 + c];
  check_close(download(dst), wd, 0, "scatter rows");
  const auto rng = lrt::IndexList<D>::range(2, 10, 3);  // 2, 5, 8
  dst.gather(0, rng) = w * 2.f;
  for (int r : {2, 5, 8})
    for (int c = 0; c < 4; ++c) wd[r * 4 + c] = 2.0 * vw[c];
  check_close(download(dst), wd, 0, "broadcast scatter over a range");

  // Rows permuted within one tensor (the source overlaps the destination).
  auto perm = upload<D>(Shape<2>{10, 4}, vt);
  const lrt::IndexList<D> to_rows{0, 1, 2}, from_rows{2, 0, 1};
  perm.gather(0, to_rows) = perm.gather(0, from_rows);
  std::vector<double> wp(vt.begin(), vt.end());
  const int from[3] = {2, 0, 1};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) wp[r * 4 + c] = vt[from[r] * 4 + c];
  check_close(download(perm), wp, 0, "aliased row permutation");

  // A repeated index cannot scatter.
  check_throws_op([&] { dst.gather(0, idx) = g; }, "scatter", "scatter with a repeated index");
}

// ---------------------------------------------------------------------------------------------
// Random fills
// ---------------------------------------------------------------------------------------------

template <class D>
void random_fills() {
  const Shape<2> s{33, 17};
  lrt::Tensor<float, 2, D> d(s);
  d = lrt::uniform<float>(s, 1234, 777);
  lrt::Tensor<float, 2, Host> h(s);
  h = lrt::uniform<float>(s, 1234, 777);
  const auto hd = lrt::to<Host>(d);
  check_bitwise(hd.data(), h.data(), h.numel(), "uniform<float> [0, 1)");

  // Through a transposed destination (the general kernel path), and in double.
  lrt::Tensor<float, 2, D> dt(Shape<2>{17, 33});
  dt.t() = lrt::uniform<float>(s, 99, 5);
  lrt::Tensor<float, 2, Host> ht(Shape<2>{17, 33});
  ht.t() = lrt::uniform<float>(s, 99, 5);
  check_bitwise(lrt::to<Host>(dt).data(), ht.data(), ht.numel(), "uniform into a transposed view");
  lrt::Tensor<double, 1, D> dd(Shape<1>{1000});
  dd = lrt::uniform<double>(dd.shape(), 7, 3);
  lrt::Tensor<double, 1, Host> hdd(Shape<1>{1000});
  hdd = lrt::uniform<double>(hdd.shape(), 7, 3);
  check_bitwise(lrt::to<Host>(dd).data(), hdd.data(), hdd.numel(), "uniform<double>");

  // A long fill (many blocks) and a Generator's successive draws.
  lrt::Tensor<float, 1, D> dl(Shape<1>{index_t{1} << 20});
  dl = lrt::uniform<float>(dl.shape(), 5, index_t{1} << 33);
  lrt::Tensor<float, 1, Host> hl(Shape<1>{index_t{1} << 20});
  hl = lrt::uniform<float>(hl.shape(), 5, index_t{1} << 33);
  check_bitwise(lrt::to<Host>(dl).data(), hl.data(), hl.numel(), "uniform 1M at offset 2^33");
  lrt::Generator gd(42), gh(42);
  lrt::Tensor<float, 2, D> d1 = gd.uniform<float>(s), d2 = gd.uniform<float>(s);
  lrt::Tensor<float, 2, Host> h1 = gh.uniform<float>(s), h2 = gh.uniform<float>(s);
  check_bitwise(lrt::to<Host>(d1).data(), h1.data(), h1.numel(), "Generator, first draw");
  check_bitwise(lrt::to<Host>(d2).data(), h2.data(), h2.numel(), "Generator, second draw");
  CHECK(gd.offset() == gh.offset());

  // A non-unit range: lo + u * (hi - lo) may be contracted to one FMA in device code, so
  // equality is only to the last bit or two (see the report on random.hpp).
  lrt::Tensor<float, 2, D> dr(s);
  dr = lrt::uniform<float>(s, 3, 0, -2.f, 3.f);
  lrt::Tensor<float, 2, Host> hr(s);
  hr = lrt::uniform<float>(s, 3, 0, -2.f, 3.f);
  std::vector<double> wr(hr.data(), hr.data() + hr.numel());
  check_close(download(dr), wr, 1e-6, "uniform<float> [-2, 3)");

  // normal(): libm vs the CUDA math library may differ in the last bits.
  lrt::Tensor<float, 2, D> dn(s);
  dn = lrt::normal<float>(s, 1234, 13, 0.5f, 2.f);
  lrt::Tensor<float, 2, Host> hn(s);
  hn = lrt::normal<float>(s, 1234, 13, 0.5f, 2.f);
  std::vector<double> wn(hn.data(), hn.data() + hn.numel());
  check_close(download(dn), wn, 1e-5, "normal<float>");
}

// ---------------------------------------------------------------------------------------------
// GEMM
// ---------------------------------------------------------------------------------------------

template <class T>
double gemm_tol() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-12;
}

/// matmul of (M, K) x (K, N) with each operand stored plainly or transposed.
template <class D, class T>
void gemm_layouts(index_t M, index_t N, index_t K) {
  const auto va = random_vec<T>(static_cast<std::size_t>(M * K), 71);
  const auto vb = random_vec<T>(static_cast<std::size_t>(K * N), 72);
  const auto a = upload<D>(Shape<2>{M, K}, va);   // A
  const auto at = upload<D>(Shape<2>{K, M}, va);  // A^T stored: A[i][k] = va[k * M + i]
  const auto b = upload<D>(Shape<2>{K, N}, vb);
  const auto bt = upload<D>(Shape<2>{N, K}, vb);  // B[k][j] = vb[j * K + k]
  auto A = [&](index_t i, index_t k) { return va[i * K + k]; };
  auto AT = [&](index_t i, index_t k) { return va[k * M + i]; };
  auto B = [&](index_t k, index_t j) { return vb[k * N + j]; };
  auto BT = [&](index_t k, index_t j) { return vb[j * K + k]; };
  const double tol = gemm_tol<T>();
  check_close(download(lrt::matmul(a, b)), ref_matmul(M, N, K, A, B), tol, "A B");
  check_close(download(lrt::matmul(at.t(), b)), ref_matmul(M, N, K, AT, B), tol, "A^T B");
  check_close(download(lrt::matmul(a, bt.t())), ref_matmul(M, N, K, A, BT), tol, "A B^T");
  check_close(download(lrt::matmul(at.t(), bt.t())), ref_matmul(M, N, K, AT, BT), tol, "A^T B^T");
}

template <class D>
void gemm_plain_and_transposed() {
  gemm_layouts<D, float>(37, 53, 29);
  gemm_layouts<D, float>(128, 96, 200);
  gemm_layouts<D, float>(1, 7, 5);  // a single row
  gemm_layouts<D, float>(6, 1, 9);  // a single column
  gemm_layouts<D, double>(17, 19, 23);
}

template <class D>
void gemm_alpha_beta_and_outputs() {
  const index_t M = 9, N = 11, K = 13;
  const auto va = random_vec<float>(M * K, 81), vb = random_vec<float>(K * N, 82), vc = random_vec<float>(M * N, 83);
  const auto a = upload<D>(Shape<2>{M, K}, va);
  const auto b = upload<D>(Shape<2>{K, N}, vb);
  auto A = [&](index_t i, index_t k) { return va[i * K + k]; };
  auto B = [&](index_t k, index_t j) { return vb[k * N + j]; };
  const auto ab = ref_matmul(M, N, K, A, B);

  // C = 0.5 A B + 2 C.
  auto c = upload<D>(Shape<2>{M, N}, vc);
  lrt::gemm(c, a, b, 0.5f, 2.f);
  std::vector<double> want(ab.size());
  for (std::size_t i = 0; i < ab.size(); ++i) want[i] = 0.5 * ab[i] + 2.0 * vc[i];
  check_close(download(c), want, 1e-4, "C = 0.5 A B + 2 C");

  // beta == 0 ignores NaN in C.
  auto cn = lrt::Tensor<float, 2, D>::full(Shape<2>{M, N}, std::numeric_limits<float>::quiet_NaN());
  lrt::gemm(cn, a, b);
  check_close(download(cn), ab, 1e-4, "beta = 0 over NaN");

  // A transposed destination: C^T stored as (N, M).
  lrt::Tensor<float, 2, D> ct(Shape<2>{N, M});
  lrt::gemm(ct.t(), a, b);
  std::vector<double> wt(ab.size());
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) wt[j * M + i] = ab[i * N + j];
  check_close(download(ct), wt, 1e-4, "transposed C");

  // A destination BLAS cannot address (stepped on both axes): goes through a temporary.
  auto cbig = lrt::Tensor<float, 2, D>::full(Shape<2>{2 * M, 2 * N}, 1.f);
  lrt::gemm(cbig.slice(0, 0, 2 * M, 2).slice(1, 0, 2 * N, 2), a, b, 1.f, 1.f);
  std::vector<double> wbig(static_cast<std::size_t>(4 * M * N), 1.0);
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) wbig[(2 * i) * (2 * N) + 2 * j] = ab[i * N + j] + 1.0;
  check_close(download(cbig), wbig, 1e-4, "stepped C, beta = 1");
}

template <class D>
void gemm_batched_cases() {
  const index_t Bt = 3, M = 7, K = 5, N = 6;
  const auto va = random_vec<float>(Bt * M * K, 91), vb = random_vec<float>(Bt * K * N, 92);
  const auto a3 = upload<D>(Shape<3>{Bt, M, K}, va);
  const auto b3 = upload<D>(Shape<3>{Bt, K, N}, vb);
  auto batch_ref = [&](auto A, auto B, index_t n) {
    std::vector<double> out;
    for (index_t t = 0; t < Bt; ++t) {
      auto r = ref_matmul(
          M, n, K, [&](index_t i, index_t k) { return A(t, i, k); }, [&](index_t k, index_t j) { return B(t, k, j); });
      out.insert(out.end(), r.begin(), r.end());
    }
    return out;
  };
  auto A3 = [&](index_t t, index_t i, index_t k) { return va[(t * M + i) * K + k]; };
  auto B3 = [&](index_t t, index_t k, index_t j) { return vb[(t * K + k) * N + j]; };
  check_close(download(lrt::matmul(a3, b3)), batch_ref(A3, B3, N), 1e-4, "batched A B");

  // Transposed B per batch: stored (Bt, N, K).
  const auto b3t = upload<D>(Shape<3>{Bt, N, K}, vb);
  auto B3T = [&](index_t t, index_t k, index_t j) { return vb[(t * N + j) * K + k]; };
  check_close(download(lrt::matmul(a3, b3t.transpose(1, 2))), batch_ref(A3, B3T, N), 1e-4, "batched A B^T");

  // (Bt, M, K) x (K, N): folded into one GEMM when A is contiguous, else B broadcast (stride 0).
  const auto vb2 = random_vec<float>(K * N, 93);
  const auto b2 = upload<D>(Shape<2>{K, N}, vb2);
  auto B2 = [&](index_t, index_t k, index_t j) { return vb2[k * N + j]; };
  check_close(download(lrt::matmul(a3, b2)), batch_ref(A3, B2, N), 1e-4, "(B, M, K) x (K, N)");
  const auto vwide = random_vec<float>(Bt * M * 10, 94);
  const auto wide = upload<D>(Shape<3>{Bt, M, 10}, vwide);
  auto AW = [&](index_t t, index_t i, index_t k) { return vwide[(t * M + i) * 10 + k]; };
  check_close(download(lrt::matmul(wide.slice(2, 0, K), b2)), batch_ref(AW, B2, N), 1e-4, "strided A x shared B");

  // gemm_batched with alpha and beta.
  const auto vc = random_vec<float>(Bt * M * N, 95);
  auto c3 = upload<D>(Shape<3>{Bt, M, N}, vc);
  lrt::gemm_batched(c3, a3, b3, 2.f, 0.5f);
  auto want = batch_ref(A3, B3, N);
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = 2.0 * want[i] + 0.5 * vc[i];
  check_close(download(c3), want, 1e-4, "gemm_batched alpha, beta");
}

/// K == 0: C = beta * C (0 when beta == 0), called on the backend directly (see the report:
/// lrt::gemm() does not reach the backend with K == 0 yet).
template <class D>
void gemm_k_zero() {
  auto c = lrt::Tensor<float, 2, D>::full(Shape<2>{3, 4}, 2.f);
  const lrt::MatRef<float> a{c.data(), 1, false}, b{c.data(), 4, false};  // never read
  lrt::GemmBackend<D>::run(index_t{1}, index_t{3}, index_t{4}, index_t{0}, 1.f, a, 0, b, 0, 0.5f, c.data(), index_t{4},
                           0);
  check_close(download(c), std::vector<double>(12, 1.0), 0, "K = 0, beta = 0.5");
  auto c3 = lrt::Tensor<float, 3, D>::full(Shape<3>{2, 3, 4}, std::numeric_limits<float>::quiet_NaN());
  lrt::GemmBackend<D>::run(index_t{2}, index_t{3}, index_t{4}, index_t{0}, 1.f, a, 0, b, 0, 0.f, c3.data(), index_t{4},
                           index_t{12});
  check_close(download(c3), std::vector<double>(24, 0.0), 0, "K = 0, beta = 0 over NaN, batched");
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

/// Host reference of one reduction over axis `ax` of a row-major (d0, d1, d2) array, with the
/// CPU backend's semantics (first extremal index; NaN extremal).
template <class T>
struct RefReduce {
  const std::vector<T>& v;
  index_t d[3];
  template <class F>
  void each_line(int ax, F f) const {
    const index_t st[3] = {d[1] * d[2], d[2], 1};
    index_t o[3];
    int k0 = ax == 0 ? 1 : 0, k1 = ax == 2 ? 1 : 2;
    for (o[k0] = 0; o[k0] < d[k0]; ++o[k0])
      for (o[k1] = 0; o[k1] < d[k1]; ++o[k1]) {
        o[ax] = 0;
        f(&v[static_cast<std::size_t>(o[0] * st[0] + o[1] * st[1] + o[2] * st[2])], d[ax], st[ax]);
      }
  }
  static index_t arg(const T* p, index_t n, index_t s, bool mx) {
    index_t best = 0;
    for (index_t i = 0; i < n; ++i) {
      const T x = p[i * s], b = p[best * s];
      if (is_nan_value(x)) return i;
      if (i > 0 && (mx ? x > b : x < b)) best = i;
    }
    return best;
  }
};

template <class D>
void reductions_axes() {
  const index_t d0 = 4, d1 = 6, d2 = 5;
  auto vx = random_vec<float>(d0 * d1 * d2, 101);
  vx[7] = vx[8];  // a tie
  const auto x = upload<D>(Shape<3>{d0, d1, d2}, vx);
  const RefReduce<float> ref{vx, {d0, d1, d2}};
  for (int ax = 0; ax < 3; ++ax) {
    CAPTURE(ax);
    std::vector<double> ws, wabs, wmax, wmin;
    std::vector<index_t> wam, wan;
    ref.each_line(ax, [&](const float* p, index_t n, index_t s) {
      double acc = 0, mag = 0;
      for (index_t i = 0; i < n; ++i) {
        acc += p[i * s];
        mag += std::abs(p[i * s]);
      }
      ws.push_back(acc);
      wabs.push_back(mag);
      wam.push_back(RefReduce<float>::arg(p, n, s, true));
      wan.push_back(RefReduce<float>::arg(p, n, s, false));
      wmax.push_back(p[wam.back() * s]);
      wmin.push_back(p[wan.back() * s]);
    });
    check_sum(download(lrt::sum(x, ax)), ws, wabs, "sum over axis");
    check_close(download(lrt::max(x, ax)), wmax, 0, "max over axis");
    check_close(download(lrt::min(x, ax)), wmin, 0, "min over axis");
    check_equal(download(lrt::argmax(x, ax)), wam, "argmax over axis");
    check_equal(download(lrt::argmin(x, ax)), wan, "argmin over axis");
  }

  // Over all elements.
  double total = 0, total_abs = 0;
  for (float f : vx) {
    total += f;
    total_abs += std::abs(f);
  }
  check_sum(std::vector<float>{lrt::sum(x)}, {total}, {total_abs}, "sum over all");
  const index_t am = RefReduce<float>::arg(vx.data(), index_t(vx.size()), 1, true);
  const index_t an = RefReduce<float>::arg(vx.data(), index_t(vx.size()), 1, false);
  CHECK(lrt::argmax(x) == am);
  CHECK(lrt::argmin(x) == an);
  CHECK(lrt::max(x) == vx[am]);
  CHECK(lrt::min(x) == vx[an]);
  CHECK(std::abs(double(lrt::mean(x)) - total / vx.size()) <= 1e-6);

  // Non-contiguous input, an expression argument, and mean over an axis.
  std::vector<double> wt(d1 * d2, 0.0), wta(d1 * d2, 0.0), we(d0 * d1, 0.0), wea(d0 * d1, 0.0), wm(d0 * d1, 0.0),
      wma(d0 * d1, 0.0);
  for (index_t i = 0; i < d0; ++i)
    for (index_t j = 0; j < d1; ++j)
      for (index_t k = 0; k < d2; ++k) {
        const double f = vx[(i * d1 + j) * d2 + k];
        wt[k * d1 + j] += f;  // x summed over axis 0, laid out (d2, d1)
        wta[k * d1 + j] += std::abs(f);
        we[i * d1 + j] += 2.0 * f;
        wea[i * d1 + j] += 2.0 * std::abs(f);
        wm[i * d1 + j] += f / d2;
        wma[i * d1 + j] += std::abs(f) / d2;
      }
  // x.transpose(0, 2) is (d2, d1, d0); summing its axis 2 sums x's axis 0.
  check_sum(download(lrt::sum(x.transpose(0, 2), 2)), wt, wta, "sum of a transposed view");
  check_sum(download(lrt::sum(x * 2.f, 2)), we, wea, "sum of an expression");
  check_sum(download(lrt::mean(x, 2)), wm, wma, "mean over axis");

  // Integers sum exactly.
  const auto vi = random_vec<std::int32_t>(50 * 40, 102, -100, 100);
  const auto ti = upload<D>(Shape<2>{50, 40}, vi);
  std::vector<std::int32_t> wi(40, 0);
  long long ti_total = 0;
  for (int r = 0; r < 50; ++r)
    for (int c = 0; c < 40; ++c) {
      wi[c] += vi[r * 40 + c];
      ti_total += vi[r * 40 + c];
    }
  check_equal(download(lrt::sum(ti, 0)), wi, "int sum over axis 0");
  CHECK(lrt::sum(ti) == ti_total);
}

template <class D>
void reductions_nan_ties_empty() {
  // Ties: integer-valued floats; the first extremal index wins.
  auto vt = random_vec<float>(3 * 8, 111, 0, 2);
  for (auto& f : vt) f = std::floor(f * 1.5f);
  const auto t = upload<D>(Shape<2>{3, 8}, vt);
  std::vector<index_t> wam, wan;
  for (int r = 0; r < 3; ++r) {
    wam.push_back(RefReduce<float>::arg(&vt[r * 8], 8, 1, true));
    wan.push_back(RefReduce<float>::arg(&vt[r * 8], 8, 1, false));
  }
  check_equal(download(lrt::argmax(t, 1)), wam, "argmax with ties");
  check_equal(download(lrt::argmin(t, 1)), wan, "argmin with ties");

  // NaN: row 1 has NaN at 2 and 5; max/min give NaN, argmax/argmin the first NaN.
  auto vn = random_vec<float>(3 * 8, 112);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  vn[8 + 2] = nan;
  vn[8 + 5] = nan;
  const auto tn = upload<D>(Shape<2>{3, 8}, vn);
  const auto am = download(lrt::argmax(tn, 1)), an = download(lrt::argmin(tn, 1));
  CHECK(am[1] == 2);
  CHECK(an[1] == 2);
  CHECK(am[0] == RefReduce<float>::arg(&vn[0], 8, 1, true));
  const auto mx = download(lrt::max(tn, 1)), mn = download(lrt::min(tn, 1));
  CHECK(std::isnan(mx[1]));
  CHECK(std::isnan(mn[1]));
  CHECK(!std::isnan(mx[0]));
  CHECK(std::isnan(lrt::max(tn)));
  CHECK(lrt::argmax(tn) == 8 + 2);

  // Empty axes: sums are 0, extrema throw.
  lrt::Tensor<float, 2, D> e(Shape<2>{3, 0});
  check_close(download(lrt::sum(e, 1)), std::vector<double>(3, 0.0), 0, "sum over an empty axis");
  CHECK(lrt::sum(e) == 0.f);
  check_throws_op([&] { (void)lrt::max(e); }, "max", "max of an empty tensor");
  check_throws_op([&] { (void)lrt::argmin(e, 1); }, "argmin", "argmin over an empty axis");
}

template <class D>
void reductions_long() {
  // One long axis (the GPU splits it into chunks): sum, and first-index semantics across chunks.
  const index_t n = (index_t{1} << 20) + 17;
  auto v = random_vec<float>(static_cast<std::size_t>(n), 121, 0, 1);
  v[300000] = 2.f;
  v[700000] = 2.f;
  v[400000] = -1.f;
  v[999999] = -1.f;
  double total = 0;
  for (float f : v) total += f;
  const auto t = upload<D>(Shape<1>{n}, v);
  CHECK(std::abs(double(lrt::sum(t)) - total) <= 1e-5 * total);
  CHECK(lrt::argmax(t) == 300000);
  CHECK(lrt::argmin(t) == 400000);
  CHECK(lrt::max(t) == 2.f);
  v[900000] = std::numeric_limits<float>::quiet_NaN();
  v[500000] = std::numeric_limits<float>::quiet_NaN();
  const auto tn = upload<D>(Shape<1>{n}, v);
  CHECK(lrt::argmax(tn) == 500000);
  CHECK(lrt::argmin(tn) == 500000);
  CHECK(std::isnan(lrt::min(tn)));

  // Few outputs, long rows; many outputs, short rows; a strided axis.
  const index_t R = 4, C = 100000;
  auto vr = random_vec<float>(static_cast<std::size_t>(R * C), 122, 0, 1);  // no cancellation
  vr[2 * C + 5000] = 3.f;
  vr[2 * C + 99999] = 3.f;
  const auto tr = upload<D>(Shape<2>{R, C}, vr);
  std::vector<double> wr(R, 0.0);
  for (index_t r = 0; r < R; ++r)
    for (index_t c = 0; c < C; ++c) wr[r] += vr[r * C + c];
  check_close(download(lrt::sum(tr, 1)), wr, 1e-5, "sum of (4, 100000) over axis 1");
  CHECK(download(lrt::argmax(tr, 1))[2] == 5000);

  const auto vs = random_vec<float>(1000 * 3, 123, 0, 1);
  const auto ts = upload<D>(Shape<2>{1000, 3}, vs);
  std::vector<double> w1(1000, 0.0), w0(3, 0.0);
  for (int r = 0; r < 1000; ++r)
    for (int c = 0; c < 3; ++c) {
      w1[r] += vs[r * 3 + c];
      w0[c] += vs[r * 3 + c];
    }
  check_close(download(lrt::sum(ts, 1)), w1, 1e-5, "sum of (1000, 3) over axis 1");
  check_close(download(lrt::sum(ts, 0)), w0, 1e-5, "sum of (1000, 3) over axis 0");
}

// ---------------------------------------------------------------------------------------------
// Error paths
// ---------------------------------------------------------------------------------------------

template <class D>
void error_paths() {
  lrt::Tensor<float, 2, D> a(Shape<2>{2, 3}), b(Shape<2>{3, 2});
  check_throws_op([&] { a = b + 1.f; }, "assign", "assigning a (3, 2) expression to (2, 3)");
  check_throws_op([&] { a.view() = b.view(); }, "assign", "view assignment of another shape");
  check_throws_op([&] { (void)(a + b); }, "add", "broadcasting (2, 3) with (3, 2)");
  check_throws_op([&] { (void)lrt::matmul(a, a); }, "matmul", "matmul inner dims");
  lrt::Tensor<float, 2, D> c(Shape<2>{3, 3});
  check_throws_op([&] { lrt::gemm(c, a, a.t()); }, "gemm", "gemm output shape");
  check_throws_op([&] { (void)a.t().reshape(Shape<1>{6}); }, "reshape", "reshape of a transpose");
  const lrt::IndexList<D> far{5};
  check_throws_op([&] { (void)a.gather(0, far); }, "gather", "gather out of bounds");
  check_throws_op([&] { (void)a.slice(1, 0, 4); }, "slice", "slice out of bounds");
  check_throws_op([&] { (void)lrt::sum(a, 2); }, "sum", "sum over a missing axis");
}

}  // namespace lrt_conformance

/// Registers every conformance body above as a doctest case for device Dev, named
/// "<prefix>: <body>" (one list, so that every device runs the same cases).
#define LRT_CONFORMANCE_TEST_CASES(Dev, prefix)                                                                       \
  TEST_CASE(prefix ": copies round-trip") { lrt_conformance::copies_round_trip<Dev>(); }                              \
  TEST_CASE(prefix ": elementwise with broadcasting") { lrt_conformance::elementwise_broadcast<Dev>(); }              \
  TEST_CASE(prefix ": non-contiguous views (rank 2)") { lrt_conformance::noncontiguous_views<Dev>(); }                \
  TEST_CASE(prefix ": non-contiguous views (rank 3)") { lrt_conformance::noncontiguous_rank3<Dev>(); }                \
  TEST_CASE(prefix ": where, cast, comparisons") { lrt_conformance::where_cast_compare<Dev>(); }                      \
  TEST_CASE(prefix ": aliasing") { lrt_conformance::aliasing<Dev>(); }                                                \
  TEST_CASE(prefix ": gather and scatter") { lrt_conformance::gather_scatter<Dev>(); }                                \
  TEST_CASE(prefix ": uniform and normal fills match the CPU") { lrt_conformance::random_fills<Dev>(); }              \
  TEST_CASE(prefix ": gemm, plain and transposed operands") { lrt_conformance::gemm_plain_and_transposed<Dev>(); }    \
  TEST_CASE(prefix ": gemm, alpha, beta and output layouts") { lrt_conformance::gemm_alpha_beta_and_outputs<Dev>(); } \
  TEST_CASE(prefix ": gemm, strided batched") { lrt_conformance::gemm_batched_cases<Dev>(); }                         \
  TEST_CASE(prefix ": gemm backend with K = 0") { lrt_conformance::gemm_k_zero<Dev>(); }                              \
  TEST_CASE(prefix ": reductions over axes and over all") { lrt_conformance::reductions_axes<Dev>(); }                \
  TEST_CASE(prefix ": reductions with NaN, ties and empty axes") {                                                    \
    lrt_conformance::reductions_nan_ties_empty<Dev>();                                                                \
  }                                                                                                                   \
  TEST_CASE(prefix ": long reductions") { lrt_conformance::reductions_long<Dev>(); }                                  \
  TEST_CASE(prefix ": error paths") { lrt_conformance::error_paths<Dev>(); }
