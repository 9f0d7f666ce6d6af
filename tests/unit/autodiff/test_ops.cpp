// Every differentiable op's gradient against central finite differences in double precision,
// on random shapes (size-1 axes, broadcasting, T = 1, ignored targets), plus float-vs-double
// agreement of the fused ops.
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/autodiff/ops.hpp>
#include <lrt/backend/cpu/nn.hpp>

#include "../test_util.hpp"

namespace test_ops {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
using P1 = ad::Param<double, 1>;
using P2 = ad::Param<double, 2>;
using P3 = ad::Param<double, 3>;

namespace {
template <int R>
ad::Param<double, R> rand_param(const Shape<R>& s, std::mt19937& rng, double lo = -1.5, double hi = 1.5) {
  Tensor<double, R> t(s);
  fill_random(t, rng, lo, hi);
  return ad::Param<double, R>(std::move(t));
}

/// loss = sum(y * W) for a fixed random W: every output element gets a distinct weight.
template <int R>
ad::Var<double, 0> weighted_sum(const ad::Var<double, R>& y, std::uint64_t seed) {
  return ad::sum(ad::mul(y, ad::constant(Tensor<double, R>(lrt::uniform<double>(y.shape(), seed, 0, -1.0, 1.0)))));
}

template <class F, int R>
void expect_grad(const char* what, F&& f, ad::Param<double, R>& p, double tol = 1e-6) {
  const std::string name = what;
  CAPTURE(name);
  // |error| / max(|a| + |n|, 1e-3): finite-difference noise is ~1e-10 absolute at h = 1e-6
  const auto r = ad::grad_check(f, p, 1e-6, 1, /*floor=*/1e-3);
  CAPTURE(r.max_rel_error);
  CAPTURE(r.worst_index);
  CHECK(r.checked == p.value().numel());
  CHECK(r.max_rel_error < tol);
}
}  // namespace

TEST_CASE("elementwise binary ops with broadcasting") {
  std::mt19937 rng(1);
  for (int rep = 0; rep < 3; ++rep) {
    const Shape<3> sa = random_shape<3>(rng, 1, 4);
    Shape<2> sb{rng() % 2 ? sa[1] : 1, rng() % 2 ? sa[2] : 1};
    auto a = rand_param(sa, rng);
    auto b = rand_param(sb, rng, 0.5, 2.0);  // away from 0 for div
    auto fadd = [&] { return weighted_sum(a.var() + b.var(), 1); };
    auto fsub = [&] { return weighted_sum(b.var() - a.var(), 2); };
    auto fmul = [&] { return weighted_sum(a.var() * b.var(), 3); };
    auto fdiv = [&] { return weighted_sum(a.var() / b.var(), 4); };
    for (auto* p : {&a}) {
      expect_grad("add/a", fadd, *p);
      expect_grad("sub/a", fsub, *p);
      expect_grad("mul/a", fmul, *p);
      expect_grad("div/a", fdiv, *p);
    }
    expect_grad("add/b", fadd, b);
    expect_grad("sub/b", fsub, b);
    expect_grad("mul/b", fmul, b);
    expect_grad("div/b", fdiv, b);
  }
}

TEST_CASE("elementwise unary ops, scalars and the softcap") {
  std::mt19937 rng(2);
  auto x = rand_param(Shape<2>{3, 5}, rng);
  auto xp = rand_param(Shape<2>{3, 5}, rng, 0.2, 3.0);
  expect_grad(
      "exp", [&] { return weighted_sum(ad::exp(x.var()), 1); }, x);
  expect_grad(
      "log", [&] { return weighted_sum(ad::log(xp.var()), 1); }, xp);
  expect_grad(
      "tanh", [&] { return weighted_sum(ad::tanh(x.var()), 1); }, x);
  expect_grad(
      "sigmoid", [&] { return weighted_sum(ad::sigmoid(x.var()), 1); }, x);
  expect_grad(
      "gate2", [&] { return weighted_sum(ad::gate2(x.var()), 1); }, x);
  expect_grad(
      "square", [&] { return weighted_sum(ad::square(x.var()), 1); }, x);
  expect_grad(
      "relu2", [&] { return weighted_sum(ad::relu2(x.var()), 1); }, x);
  expect_grad(
      "relu", [&] { return weighted_sum(ad::relu(x.var()), 1); }, x);
  expect_grad(
      "softcap", [&] { return weighted_sum(ad::softcap(x.var() * 20.0, 15.0), 1); }, x);
  expect_grad(
      "scalars", [&] { return weighted_sum((2.0 - x.var() * 3.0 + 1.0) / 4.0, 1); }, x);
  expect_grad(
      "neg", [&] { return weighted_sum(-x.var(), 1); }, x);
  // gate2 is exactly 1 at zero (the LRT gates start at 1)
  ad::Graph g;
  auto z = ad::gate2(ad::constant(Tensor<float, 1>(Shape<1>{3})));
  CHECK(z.value()(1) == 1.f);
}

TEST_CASE("sum, mean, sum over an axis") {
  std::mt19937 rng(3);
  auto x = rand_param(Shape<3>{2, 3, 4}, rng);
  expect_grad(
      "sum", [&] { return ad::sum(ad::square(x.var())); }, x);
  expect_grad(
      "mean", [&] { return ad::mean(ad::exp(x.var())); }, x);
  for (int axis = 0; axis < 3; ++axis)
    expect_grad(
        "sum axis", [&] { return weighted_sum(ad::sum(x.var(), axis), 5); }, x);
}

TEST_CASE("matmul and linear (rank 2 and 3), including size-1 dims") {
  std::mt19937 rng(4);
  for (auto [M, K, N] : {std::tuple{3, 4, 5}, std::tuple{1, 3, 1}, std::tuple{4, 1, 2}}) {
    auto a = rand_param(Shape<2>{M, K}, rng), b = rand_param(Shape<2>{K, N}, rng);
    auto f = [&] { return weighted_sum(ad::matmul(a.var(), b.var()), 7); };
    expect_grad("matmul/a", f, a);
    expect_grad("matmul/b", f, b);
  }
  auto x3 = rand_param(Shape<3>{2, 3, 4}, rng);
  auto w = rand_param(Shape<2>{5, 4}, rng);
  auto f3 = [&] { return weighted_sum(ad::linear(x3.var(), w.var()), 8); };
  expect_grad("linear3/x", f3, x3);
  expect_grad("linear3/w", f3, w);
  auto x2 = rand_param(Shape<2>{1, 4}, rng);
  auto f2 = [&] { return weighted_sum(ad::linear(x2.var(), w.var()), 9); };
  expect_grad("linear2/x", f2, x2);
  expect_grad("linear2/w", f2, w);
  // a variable used twice accumulates both paths
  expect_grad(
      "reuse",
      [&] {
        return weighted_sum(
            ad::linear(ad::linear(x3.var(), w.var()),
                       ad::matmul(w.var(), ad::constant(Tensor<double, 2>(lrt::uniform<double>(Shape<2>{4, 5}, 3))))),
            2);
      },
      w);
}

TEST_CASE("reshape, slice, concat, gather and scatter of time rows") {
  std::mt19937 rng(5);
  auto x = rand_param(Shape<3>{2, 5, 3}, rng);
  auto y = rand_param(Shape<3>{2, 2, 3}, rng);
  expect_grad(
      "reshape",
      [&] {
        return weighted_sum(ad::tanh(ad::reshape(x.var(), Shape<2>{10, 3})), 1);
      },
      x);
  expect_grad(
      "slice", [&] { return weighted_sum(ad::slice(x.var(), 1, 1, 4), 2); }, x);
  expect_grad(
      "slice neg", [&] { return weighted_sum(ad::slice(x.var(), 2, -2, 3), 2); }, x);
  auto fc = [&] { return weighted_sum(ad::concat(x.var(), y.var(), 1), 3); };
  expect_grad("concat/a", fc, x);
  expect_grad("concat/b", fc, y);
  const lrt::IndexList<lrt::cpu::Device> odd = lrt::IndexList<lrt::cpu::Device>::range(1, 5, 2);  // p mod 2 == 1
  const lrt::IndexList<lrt::cpu::Device> irregular{4, 0, 2};
  expect_grad(
      "gather", [&] { return weighted_sum(ad::square(ad::gather(x.var(), 1, odd)), 4); }, x);
  expect_grad(
      "gather irregular", [&] { return weighted_sum(ad::gather(x.var(), 1, irregular), 4); }, x);
  auto fs = [&] { return weighted_sum(ad::square(ad::scatter(x.var(), 1, odd, y.var())), 5); };
  expect_grad("scatter/buf", fs, x);
  expect_grad("scatter/fresh", fs, y);
}

}  // namespace test_ops
