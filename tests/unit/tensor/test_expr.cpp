// Elementwise and broadcast expressions against straightforward double-precision loops.
#include "../test_util.hpp"

namespace test_expr {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;

namespace {

/// Index of an operand of shape s (rank R) inside a broadcast output index i (rank Ro).
template <int R, int Ro>
lrt::Index<R> operand_index(const Shape<R>& s, const lrt::Index<Ro>& i) {
  lrt::Index<R> j;
  for (int d = 0; d < R; ++d) j[d] = s[d] == 1 ? 0 : i[d + (Ro - R)];
  return j;
}

/// Shape b derived from a: some axes set to 1, some leading axes dropped (numpy broadcast).
template <int Ra, int Rb>
Shape<Rb> broadcastable_from(const Shape<Ra>& a, std::mt19937& rng) {
  static_assert(Rb <= Ra);
  Shape<Rb> b;
  for (int d = 0; d < Rb; ++d) b[d] = (rng() % 3 == 0) ? 1 : a[d + (Ra - Rb)];
  return b;
}

template <int Ra, int Rb, class F, class RefF>
void check_binary(std::mt19937& rng, F&& f, RefF&& ref, double rtol, bool swap = false) {
  const Shape<Ra> sa = random_shape<Ra>(rng, 0, 5);
  const Shape<Rb> sb = broadcastable_from<Ra, Rb>(sa, rng);
  Tensor<float, Ra> a(sa);
  Tensor<float, Rb> b(sb);
  fill_random(a, rng, 0.5, 2.0);
  fill_random(b, rng, 0.5, 2.0);
  Tensor<float, Ra> out = swap ? Tensor<float, Ra>(f(b, a)) : Tensor<float, Ra>(f(a, b));
  REQUIRE(out.shape() == sa);
  Tensor<double, Ra> expect(sa);
  for_each_index(sa, [&](const auto& i) {
    const double x = elem(a.view(), i), y = elem(b.view(), operand_index(sb, i));
    elem(expect.view(), i) = swap ? ref(y, x) : ref(x, y);
  });
  check_close(out, expect, rtol, 1e-30);
}

template <int Ra, int Rb>
void check_all_binary(std::mt19937& rng) {
  const double r = 1e-6;
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return x + y; }, [](double x, double y) { return x + y; }, r);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return x - y; }, [](double x, double y) { return x - y; }, 1e-5, true);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return x * y; }, [](double x, double y) { return x * y; }, r);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return x / y; }, [](double x, double y) { return x / y; }, r, true);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return lrt::minimum(x, y); }, [](double x, double y) { return std::min(x, y); }, r);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return lrt::maximum(x, y) * 2.f - 1.f; },
      [](double x, double y) { return std::max(x, y) * 2 - 1; }, r);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return lrt::where(x > y, x, y * 3.f); },
      [](double x, double y) { return x > y ? x : y * 3; }, r);
  check_binary<Ra, Rb>(
      rng, [](auto& x, auto& y) { return lrt::cast<float>(x <= y) + lrt::cast<float>(lrt::eq(x, x)); },
      [](double x, double y) { return double(x <= y) + 1.0; }, 0);
}

template <class F, class RefF>
void check_unary(const char* name, std::mt19937& rng, double lo, double hi, F&& f, RefF&& ref, double rtol,
                 double atol) {
  CAPTURE(name);
  const Shape<3> s = random_shape<3>(rng, 1, 7);
  Tensor<float, 3> a(s);
  fill_random(a, rng, lo, hi);
  Tensor<float, 3> out = f(a);
  Tensor<double, 3> expect(s);
  for_each_index(s, [&](const auto& i) { elem(expect.view(), i) = ref(double(elem(a.view(), i))); });
  check_close(out, expect, rtol, atol);
  // the same op on double tensors agrees with the reference to double precision
  Tensor<double, 3> ad = lrt::cast<double>(a);
  Tensor<double, 3> outd = f(ad);
  check_close(outd, expect, 1e-14, 1e-300);
}

}  // namespace

TEST_CASE("binary ops match a double reference, with broadcasting, on random shapes") {
  std::mt19937 rng(42);
  for (int rep = 0; rep < 10; ++rep) {
    check_all_binary<1, 1>(rng);
    check_all_binary<2, 2>(rng);
    check_all_binary<2, 1>(rng);
    check_all_binary<3, 3>(rng);
    check_all_binary<3, 1>(rng);
    check_all_binary<4, 2>(rng);
    check_all_binary<4, 4>(rng);
    check_all_binary<2, 0>(rng);
  }
}

TEST_CASE("unary ops match a double reference") {
  std::mt19937 rng(7);
  for (int rep = 0; rep < 3; ++rep) {
    check_unary(
        "exp", rng, -5, 5, [](auto& a) { return lrt::exp(a); }, [](double x) { return std::exp(x); }, 2e-7, 0);
    check_unary(
        "log", rng, 1e-3, 10, [](auto& a) { return lrt::log(a); }, [](double x) { return std::log(x); }, 1e-6, 1e-7);
    check_unary(
        "tanh", rng, -5, 5, [](auto& a) { return lrt::tanh(a); }, [](double x) { return std::tanh(x); }, 2e-7, 1e-7);
    check_unary(
        "sqrt", rng, 0, 10, [](auto& a) { return lrt::sqrt(a); }, [](double x) { return std::sqrt(x); }, 2e-7, 0);
    check_unary(
        "rsqrt", rng, 1e-2, 10, [](auto& a) { return lrt::rsqrt(a); }, [](double x) { return 1 / std::sqrt(x); }, 3e-7,
        0);
    check_unary(
        "square", rng, -3, 3, [](auto& a) { return lrt::square(a); }, [](double x) { return x * x; }, 2e-7, 0);
    check_unary(
        "relu", rng, -3, 3, [](auto& a) { return lrt::relu(a); }, [](double x) { return x > 0 ? x : 0; }, 0, 0);
    check_unary(
        "sigmoid", rng, -20, 20, [](auto& a) { return lrt::sigmoid(a); },
        [](double x) { return 1 / (1 + std::exp(-x)); }, 3e-7, 1e-30);
    check_unary(
        "abs/neg", rng, -3, 3, [](auto& a) { return -lrt::abs(a); }, [](double x) { return -std::abs(x); }, 0, 0);
    check_unary(
        "composite", rng, -2, 2, [](auto& a) { return lrt::square(lrt::relu(a)) * 0.5 + lrt::sigmoid(a * 2.0) / 3.0; },
        [](double x) { return (x > 0 ? x * x : 0) * 0.5 + 1 / (1 + std::exp(-2 * x)) / 3; }, 1e-6, 1e-7);
  }
}

TEST_CASE("sigmoid saturates without NaN and exp overflows to inf") {
  Tensor<float, 1> a(Shape<1>{4});
  a(0) = -1000.f;
  a(1) = 1000.f;
  a(2) = 0.f;
  a(3) = 100.f;
  Tensor<float, 1> s = lrt::sigmoid(a);
  CHECK(s(0) == 0.f);
  CHECK(s(1) == 1.f);
  CHECK(s(2) == 0.5f);
  Tensor<float, 1> e = lrt::exp(a);
  CHECK(std::isinf(e(3)));
}

TEST_CASE("expressions read and write non-contiguous views") {
  std::mt19937 rng(3);
  Tensor<double, 3> a(Shape<3>{4, 5, 6}), b(Shape<3>{6, 5, 4});
  fill_random(a, rng);
  fill_random(b, rng);
  // a permuted view as operand: (4,5,6) vs b^T (axes 2,1,0) -> (4,5,6)
  auto bt = b.permute(Shape<3>{2, 1, 0});
  Tensor<double, 3> c = a * bt + 1.0;
  for_each_index(a.shape(),
                 [&](const auto& i) { CHECK(elem(c.view(), i) == elem(a.view(), i) * b(i[2], i[1], i[0]) + 1.0); });
  // stepped slices as operand and destination
  Tensor<double, 2> m(Shape<2>{7, 9});
  fill_random(m, rng);
  Tensor<double, 2> orig = m;
  auto dst = m.slice(1, 1, 9, 3);  // columns 1, 4, 7
  REQUIRE(dst.shape() == Shape<2>{7, 3});
  dst = dst * 2.0 + m.slice(1, 0, 9, 3);  // reads columns 0, 3, 6
  for (index_t r = 0; r < 7; ++r)
    for (index_t j = 0; j < 9; ++j) {
      const double expect = (j % 3 == 1) ? orig(r, j) * 2 + orig(r, j - 1) : orig(r, j);
      CHECK(m(r, j) == expect);
    }
  // select and a transposed destination
  Tensor<double, 2> sq(Shape<2>{5, 5});
  fill_random(sq, rng);
  Tensor<double, 2> sq0 = sq;
  sq.t() = sq0 * 1.0;
  for (index_t r = 0; r < 5; ++r)
    for (index_t j = 0; j < 5; ++j) CHECK(sq(r, j) == sq0(j, r));
  auto row = sq.select(0, 2);
  row = row * 0.0 + 7.0;
  for (index_t j = 0; j < 5; ++j) CHECK(sq(2, j) == 7.0);
}

TEST_CASE("aliasing: the destination may appear in its own expression") {
  std::mt19937 rng(5);
  Tensor<float, 2> a(Shape<2>{33, 17}), b(Shape<2>{33, 17});
  fill_random(a, rng);
  fill_random(b, rng);
  Tensor<float, 2> a0 = a;
  a = a * b + a;
  for_each_index(a.shape(), [&](const auto& i) {
    CHECK(elem(a.view(), i) == elem(a0.view(), i) * elem(b.view(), i) + elem(a0.view(), i));
  });
  // in-place transpose of a square matrix (overlapping, different layout)
  Tensor<float, 2> s(Shape<2>{16, 16});
  fill_random(s, rng);
  Tensor<float, 2> s0 = s;
  s = s.t();
  for (index_t r = 0; r < 16; ++r)
    for (index_t j = 0; j < 16; ++j) CHECK(s(r, j) == s0(j, r));
  // shifted overlap: x[1:] = x[:-1] + 1 must read the old values
  Tensor<float, 1> x = lrt::iota(Shape<1>{10}, 0.f);
  x.slice(0, 1, 10) = x.slice(0, 0, 9) + 1.f;
  for (index_t i = 1; i < 10; ++i) CHECK(x(i) == float(i));
  CHECK(x(0) == 0.f);
  // compound assignment
  Tensor<float, 2> c = a0;
  c += b;
  c *= 2.f;
  c -= a0;
  c /= 4.f;
  for_each_index(c.shape(), [&](const auto& i) {
    const float e = ((elem(a0.view(), i) + elem(b.view(), i)) * 2.f - elem(a0.view(), i)) / 4.f;
    CHECK(elem(c.view(), i) == e);
  });
}

namespace {
Tensor<float, 1> make_ramp(index_t n) { return Tensor<float, 1>(lrt::iota(Shape<1>{n}, 1.f)); }
auto make_expr() {
  // The rvalue tensor is moved into the node: the returned expression owns its data.
  return make_ramp(5) * 2.f + make_ramp(5);
}
}  // namespace

TEST_CASE("closure rules: auto expressions hold rvalues by value and lvalues by reference") {
  Tensor<float, 1> a = lrt::iota(Shape<1>{5}, 0.f), b = lrt::iota(Shape<1>{5}, 10.f);
  auto e = a + b * 2.f;
  Tensor<float, 1> r1 = e;
  a.fill(100.f);  // e refers to a: evaluating again sees the new values
  Tensor<float, 1> r2 = e;
  for (index_t i = 0; i < 5; ++i) {
    CHECK(r1(i) == float(i) + 2.f * (10.f + float(i)));
    CHECK(r2(i) == 100.f + 2.f * (10.f + float(i)));
  }
  auto owned = make_expr();
  Tensor<float, 1> r3 = owned;
  for (index_t i = 0; i < 5; ++i) CHECK(r3(i) == 3.f * float(i + 1));
  static_assert(std::is_same_v<decltype(lrt::detail::hold(a)), lrt::TensorView<const float, 1>>);
  static_assert(std::is_same_v<decltype(lrt::detail::hold(std::move(a))), Tensor<float, 1>>);
}

TEST_CASE("integer and boolean expressions") {
  Tensor<int, 2> a = lrt::iota(Shape<2>{3, 4}, 0, 1);
  Tensor<int, 2> b = a * 3 - 2;
  Tensor<int, 2> q = b / 2;
  Tensor<bool, 2> m = (a > 5) && !(lrt::eq(a, 9));
  for (index_t i = 0; i < 3; ++i)
    for (index_t j = 0; j < 4; ++j) {
      const int v = int(i * 4 + j);
      CHECK(b(i, j) == 3 * v - 2);
      CHECK(q(i, j) == (3 * v - 2) / 2);
      CHECK(m(i, j) == (v > 5 && v != 9));
    }
  Tensor<float, 2> f = lrt::cast<float>(a) / 2.f;
  CHECK(f(1, 1) == 2.5f);
  Tensor<std::int64_t, 2> w = lrt::cast<std::int64_t>(f * 2.f);
  CHECK(w(2, 3) == 11);
}

TEST_CASE("empty and size-1 shapes") {
  Tensor<float, 2> e(Shape<2>{0, 3}), f(Shape<2>{0, 3});
  e = e + f * 2.f;  // nothing to do, no crash
  CHECK(e.numel() == 0);
  Tensor<float, 3> one(Shape<3>{1, 1, 1});
  one.fill(2.f);
  Tensor<float, 3> big(Shape<3>{2, 3, 4});
  big = lrt::iota(big.shape(), 0.f) + one;  // (1,1,1) broadcasts against (2,3,4)
  CHECK(big(1, 2, 3) == 23.f + 2.f);
  Tensor<float, 0> scalar;
  scalar = lrt::ScalarExpr<float>(4.f) * 2.f;
  CHECK(*scalar.data() == 8.f);
  // an empty operand broadcast against a size-1 axis gives an empty result
  Tensor<float, 2> z = Tensor<float, 2>(Shape<2>{0, 1}) + Tensor<float, 2>(Shape<2>{1, 5});
  CHECK(z.shape() == Shape<2>{0, 5});
}

TEST_CASE("shape errors name the operation and the shapes") {
  Tensor<float, 2> a(Shape<2>{2, 3}), b(Shape<2>{4, 3}), c(Shape<2>{3, 2});
  CHECK_THROWS_WITH_AS(a + b, "[add] cannot broadcast (2, 3) with (4, 3)", lrt::Error);
  CHECK_THROWS_WITH_AS(a * c, "[mul] cannot broadcast (2, 3) with (3, 2)", lrt::Error);
  CHECK_THROWS_WITH_AS(a = c * 1.f, "[assign] shape mismatch: destination (2, 3) vs expression (3, 2)", lrt::Error);
  CHECK_THROWS_AS(lrt::where(a > 0.f, a, b), lrt::Error);
  try {
    a.slice(1, 0, 4);
    FAIL("slice out of range did not throw");
  } catch (const lrt::Error& e) {
    CHECK(e.op() == "slice");
    CHECK(std::string(e.what()).find("(2, 3)") != std::string::npos);
  }
}

TEST_CASE("iota and fill") {
  Tensor<double, 2> t = lrt::iota(Shape<2>{2, 3}, 1.0, 0.5);
  CHECK(t(0, 0) == 1.0);
  CHECK(t(1, 2) == 3.5);
  t.fill(-1.0);
  CHECK(lrt::sum(t) == -6.0);
  auto full = Tensor<int, 1>::full(Shape<1>{4}, 7);
  CHECK(lrt::sum(full) == 28);
}

}  // namespace test_expr
