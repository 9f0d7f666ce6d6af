// The autodiff engine: recording, backward, gradient accumulation, no-grad, memory reuse,
// freed activations, and errors. (Op gradients: test_ops.cpp.)
#include <lrt/autodiff/grad_check.hpp>
#include <lrt/autodiff/ops.hpp>

#include "../test_util.hpp"

namespace test_engine {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;

TEST_CASE("a small expression: value and gradients by hand") {
  ad::Param<double, 1> x(Tensor<double, 1>(lrt::iota(Shape<1>{3}, 1.0)));  // 1, 2, 3
  ad::Param<double, 1> w(Tensor<double, 1>::full(Shape<1>{3}, 2.0));
  ad::Graph g;
  auto y = ad::sum(ad::square(x.var() * w.var()) + x.var());  // sum((x w)^2 + x)
  CHECK(*y.value().data() == (4.0 + 16 + 36) + 6);
  ad::backward(y);
  // d/dx = 2 x w^2 + 1, d/dw = 2 w x^2
  CHECK(x.grad()(0) == 9.0);
  CHECK(x.grad()(2) == 25.0);
  CHECK(w.grad()(1) == 16.0);
  CHECK(y.value().data()[0] == 62.0);  // the loss is retained through backward
}

TEST_CASE("gradients accumulate across backward calls until zero_grad; a second run is identical") {
  ad::Param<double, 2> w(Tensor<double, 2>(lrt::uniform<double>(Shape<2>{3, 4}, 1)));
  const Tensor<double, 2> xin = lrt::uniform<double>(Shape<2>{5, 3}, 2);
  auto step = [&] {
    ad::Graph g;
    auto loss = ad::mean(ad::tanh(ad::matmul(ad::constant(xin), w.var())));
    ad::backward(loss);
    return *loss.value().data();
  };
  const double l1 = step();
  const Tensor<double, 2> g1 = w.grad();
  const double l2 = step();  // accumulates: twice the gradient
  CHECK(l1 == l2);
  Tensor<double, 2> twice = g1 * 2.0;
  CHECK(equal(w.grad().view(), twice.view()));
  w.zero_grad();
  step();
  CHECK(equal(w.grad().view(), g1.view()));
  // value_and_grad does the same in one call
  w.zero_grad();
  const double l3 = ad::value_and_grad([&] { return ad::mean(ad::tanh(ad::matmul(ad::constant(xin), w.var()))); });
  CHECK(l3 == l1);
}

TEST_CASE("clearing the graph and running again gives identical gradients; memory is reused") {
  ad::Param<float, 2> w(Tensor<float, 2>(lrt::normal<float>(Shape<2>{64, 32}, 3)));
  ad::Param<float, 2> w2(Tensor<float, 2>(lrt::normal<float>(Shape<2>{16, 64}, 4)));
  const Tensor<float, 2> xin = lrt::normal<float>(Shape<2>{40, 32}, 5);
  ad::Graph g;
  auto step = [&] {
    g.clear();
    w.zero_grad();
    w2.zero_grad();
    auto h = ad::relu2(ad::linear(ad::constant(xin), w.var()));
    auto loss = ad::mean(ad::sigmoid(ad::linear(h, w2.var())));
    ad::backward(loss);
    return Tensor<float, 2>(w.grad());
  };
  const Tensor<float, 2> a = step();
  const Tensor<float, 2> b = step();  // second step: everything comes from caches
  CHECK(equal(a.view(), b.view()));
  step();
  const auto s0 = lrt::cpu::memory_stats();
  step();
  step();
  const auto s1 = lrt::cpu::memory_stats();
  CHECK(s1.system_allocs == s0.system_allocs);  // no new system allocation after the first steps
  CHECK(s1.in_use == s0.in_use);                // nothing leaks from step to step
}

TEST_CASE("backward frees activations as it goes; using them afterwards is a clear error") {
  ad::Param<double, 1> x(Tensor<double, 1>::full(Shape<1>{4}, 0.5));
  ad::Graph g;
  auto h = ad::exp(x.var());
  auto kept = ad::square(h);
  kept.retain();
  auto loss = ad::sum(ad::tanh(kept));
  ad::backward(loss);
  CHECK_THROWS_WITH_AS(
      (void)h.value(),
      "[autodiff] the value of 'exp' (4,) was freed by backward: call retain() before backward to keep it", lrt::Error);
  CHECK(kept.value()(0) == doctest::Approx(std::exp(1.0)));
  CHECK(kept.grad()(0) != 0.0);
  CHECK_THROWS_WITH_AS(ad::backward(loss),
                       "[backward] the graph through 'sum' was already freed by an earlier backward: clear the graph "
                       "and run the forward again (or retain() what you need)",
                       lrt::Error);
}

TEST_CASE("backward errors: non-scalar without a seed, bad seed shape, no graph") {
  ad::Param<double, 2> x(Tensor<double, 2>::full(Shape<2>{2, 3}, 1.0));
  {
    ad::Graph g;
    auto y = ad::exp(x.var());
    CHECK_THROWS_WITH_AS(ad::backward(y),
                         "[backward] output 'exp' has shape (2, 3): backward without a seed needs a scalar (pass a "
                         "seed of the output's shape)",
                         lrt::Error);
    CHECK_THROWS_WITH_AS(ad::backward(y, Tensor<double, 2>(Shape<2>{3, 2})),
                         "[backward] seed of shape (3, 2) does not match the output shape (2, 3)", lrt::Error);
    ad::backward(y, Tensor<double, 2>::full(Shape<2>{2, 3}, 1.0));  // an explicit seed works
    CHECK(x.grad()(1, 2) == doctest::Approx(std::exp(1.0)));
    CHECK_THROWS_AS(ad::matmul(x.var(), x.var()), lrt::Error);  // shape error names matmul
  }
  CHECK_THROWS_WITH_AS(ad::exp(x.var()),
                       "[autodiff] no active lrt::ad::Graph on this thread: create one before using lrt::ad operations",
                       lrt::Error);
}

TEST_CASE("NoGrad records nothing that needs a gradient") {
  ad::Param<double, 1> x(Tensor<double, 1>::full(Shape<1>{3}, 1.0));
  ad::Graph g;
  {
    ad::NoGrad ng;
    CHECK(!ad::grad_enabled());
    auto y = ad::sum(ad::exp(x.var()));
    CHECK(!y.requires_grad());
    ad::backward(y);  // nothing to do
    CHECK(!x.has_grad());
  }
  CHECK(ad::grad_enabled());
  auto y = ad::sum(ad::exp(x.var()));
  CHECK(y.requires_grad());
  // constants never require grad
  auto c = ad::constant(Tensor<double, 1>::full(Shape<1>{3}, 2.0));
  CHECK(!ad::exp(c).requires_grad());
}

TEST_CASE("grad_check reports agreement and catches a wrong gradient") {
  ad::Param<double, 2> w(Tensor<double, 2>(lrt::uniform<double>(Shape<2>{3, 3}, 8, 0, -1.0, 1.0)));
  auto good = [&] { return ad::sum(ad::sigmoid(ad::matmul(w.var(), w.var()))); };
  const auto r = ad::grad_check(good, w);
  CHECK(r.checked == 9);
  CHECK(r.max_rel_error < 1e-7);
  // A function whose recorded backward is deliberately wrong (scale by 3 but claim 2) must fail.
  auto wrong = [&] {
    auto x = w.var();
    return ad::sum(ad::record<double, 2, lrt::cpu::Device>(
        "bad_scale", Tensor<double, 2>(x.value() * 3.0),
        [x](const Tensor<double, 2>& gy, const Tensor<double, 2>&) { ad::accumulate(x, gy * 2.0); }, x));
  };
  CHECK(ad::grad_check(wrong, w).max_rel_error > 0.1);
}

TEST_CASE("a backward rule that produces a gradient of the wrong shape is a clear error") {
  ad::Param<double, 2> w(Tensor<double, 2>::full(Shape<2>{2, 3}, 1.0));
  ad::Graph g;
  auto x = w.var();
  auto y = ad::record<double, 2, lrt::cpu::Device>(
      "bad_rule", Tensor<double, 2>(x.value() * 2.0),
      [x](const Tensor<double, 2>&, const Tensor<double, 2>&) {
        ad::accumulate(x, Tensor<double, 2>(Shape<2>{3, 2}));  // transposed by mistake
      },
      x);
  CHECK_THROWS_WITH_AS(ad::backward(ad::sum(y)),
                       "[backward] gradient of shape (3, 2) does not match the shape (2, 3) of 'param'", lrt::Error);
}

}  // namespace test_engine
