// Reductions (sum, mean, max, min, argmax, argmin) over an axis and over all elements.
#include "../test_util.hpp"

namespace test_reduce {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;

namespace {
template <int R>
void check_axis_reductions(std::mt19937& rng) {
  const Shape<R> s = random_shape<R>(rng, 1, 6);
  Tensor<double, R> x(s);
  fill_random(x, rng);
  for (int axis = 0; axis < R; ++axis) {
    CAPTURE(axis);
    auto sm = lrt::sum(x, axis);
    auto mx = lrt::max(x, axis);
    auto mn = lrt::min(x, axis);
    auto am = lrt::argmax(x, axis);
    auto an = lrt::argmin(x, axis);
    auto me = lrt::mean(x, axis);
    for_each_index(sm.shape(), [&](const auto& o) {
      double acc = 0, best = -1e300, worst = 1e300;
      index_t bi = 0, wi = 0;
      for (index_t k = 0; k < s[axis]; ++k) {
        lrt::Index<R> i;
        for (int d = 0, j = 0; d < R; ++d) i[d] = d == axis ? k : o[j++];
        const double v = elem(x.view(), i);
        acc += v;
        if (v > best) {
          best = v;
          bi = k;
        }
        if (v < worst) {
          worst = v;
          wi = k;
        }
      }
      CHECK(elem(sm.view(), o) == doctest::Approx(acc).epsilon(1e-13));
      CHECK(elem(me.view(), o) == doctest::Approx(acc / double(s[axis])).epsilon(1e-13));
      CHECK(elem(mx.view(), o) == best);
      CHECK(elem(mn.view(), o) == worst);
      CHECK(elem(am.view(), o) == bi);
      CHECK(elem(an.view(), o) == wi);
    });
  }
}
}  // namespace

TEST_CASE("axis reductions match loops on random shapes") {
  std::mt19937 rng(1);
  for (int rep = 0; rep < 10; ++rep) {
    check_axis_reductions<1>(rng);
    check_axis_reductions<2>(rng);
    check_axis_reductions<3>(rng);
    check_axis_reductions<4>(rng);
  }
}

TEST_CASE("reductions over all, of views and of expressions") {
  Tensor<double, 2> x = lrt::iota(Shape<2>{3, 4}, 1.0);
  CHECK(lrt::sum(x) == 78.0);
  CHECK(lrt::mean(x) == 6.5);
  CHECK(lrt::max(x) == 12.0);
  CHECK(lrt::argmax(x) == 11);
  CHECK(lrt::argmin(x) == 0);
  CHECK(lrt::sum(x.t()) == 78.0);                // non-contiguous view
  CHECK(lrt::sum(x.slice(1, 0, 4, 2)) == 36.0);  // columns 0 and 2: 1+3+5+7+9+11
  CHECK(lrt::sum(x * 2.0 - 1.0) == 144.0);       // an expression is evaluated once
  auto col = lrt::sum(x.t(), 1);                 // sum over the rows of x^T = columns of x... per column
  CHECK(col.shape() == Shape<1>{4});
  CHECK(col(0) == 1.0 + 5.0 + 9.0);
  Tensor<int, 1> ints = lrt::iota(Shape<1>{100}, 0);
  CHECK(lrt::sum(ints) == 4950);
  CHECK(lrt::argmax(ints) == 99);
}

TEST_CASE("sum_tensor: the sum of all elements as a rank-0 tensor") {
  Tensor<double, 2> a(Shape<2>{3, 5});
  for (lrt::index_t i = 0; i < a.numel(); ++i) a.data()[i] = 0.25 * double(i) - 1.0;
  const Tensor<double, 0> s = lrt::sum_tensor(a);
  CHECK(*s.data() == doctest::Approx(lrt::sum(a)).epsilon(1e-15));
  const Tensor<double, 0> st = lrt::sum_tensor(a.t());  // strided view
  CHECK(*st.data() == doctest::Approx(lrt::sum(a)).epsilon(1e-15));
  const Tensor<double, 0> se = lrt::sum_tensor(a * 2.0);  // expression
  CHECK(*se.data() == doctest::Approx(2 * lrt::sum(a)).epsilon(1e-15));
  const Tensor<double, 0> z = lrt::sum_tensor(Tensor<double, 2>(Shape<2>{0, 4}));  // empty
  CHECK(*z.data() == 0.0);
}

TEST_CASE("ties, NaN and empty axes") {
  Tensor<float, 1> t(Shape<1>{5});
  t(0) = 1.f;
  t(1) = 3.f;
  t(2) = 3.f;
  t(3) = -2.f;
  t(4) = -2.f;
  CHECK(lrt::argmax(t) == 1);  // first of equal maxima
  CHECK(lrt::argmin(t) == 3);
  t(3) = std::nanf("");
  CHECK(std::isnan(lrt::max(t)));
  CHECK(std::isnan(lrt::min(t)));
  CHECK(lrt::argmax(t) == 3);
  CHECK(std::isnan(lrt::sum(t)));
  Tensor<float, 2> e(Shape<2>{3, 0});
  CHECK(lrt::sum(e) == 0.f);
  auto s1 = lrt::sum(e, 1);
  CHECK(s1.shape() == Shape<1>{3});
  CHECK(s1(2) == 0.f);
  CHECK(lrt::sum(e, 0).numel() == 0);
  CHECK(std::isnan(lrt::mean(e)));
  CHECK_THROWS_WITH_AS(lrt::max(e, 1), "[max] reduction over the empty axis 1 of shape (3, 0)", lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::argmax(e), "[argmax] reduction over an empty tensor of shape (3, 0)", lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::sum(e, 2), "[sum] axis 2 out of range for rank 2", lrt::Error);
}

TEST_CASE("float sums are pairwise: long sums stay accurate") {
  // 2^22 copies of 0.1f: a naive float loop drifts by ~1e-2 relative, pairwise stays ~1e-6
  const index_t n = index_t{1} << 22;
  Tensor<float, 1> x = Tensor<float, 1>::full(Shape<1>{n}, 0.1f);
  const double exact = double(0.1f) * double(n);
  const float s = lrt::sum(x);
  CHECK(std::abs(double(s) - exact) / exact < 1e-6);
  float naive = 0.f;
  for (index_t i = 0; i < n; ++i) naive += 0.1f;
  CHECK(std::abs(double(naive) - exact) / exact > 1e-3);  // the hazard the pairwise sum avoids
  // a long strided axis too
  Tensor<float, 2> y = Tensor<float, 2>::full(Shape<2>{index_t{1} << 18, 2}, 0.1f);
  auto cs = lrt::sum(y, 0);
  CHECK(std::abs(double(cs(1)) - double(0.1f) * double(index_t{1} << 18)) / (0.1 * double(index_t{1} << 18)) < 1e-6);
}

}  // namespace test_reduce
