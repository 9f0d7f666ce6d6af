// The transformer's fused ops: values against direct formulas, gradients against central
// finite differences in double, float-vs-double agreement, and a two-layer attention + MLP
// network checked end to end.
#include <lrt/autodiff.hpp>
#include <lrt/autodiff/grad_check.hpp>

#include "../test_util.hpp"

namespace test_nn {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;
using Dev = lrt::cpu::Device;

namespace {
template <class T, int R>
ad::Param<T, R> rand_param(const Shape<R>& s, std::mt19937& rng, double lo = -1.5, double hi = 1.5) {
  Tensor<T, R> t(s);
  fill_random(t, rng, lo, hi);
  return ad::Param<T, R>(std::move(t));
}
template <class T, int R>
ad::Var<T, 0> weighted_sum(const ad::Var<T, R>& y, std::uint64_t seed) {
  return ad::sum(ad::mul(y, ad::constant(Tensor<T, R>(lrt::uniform<T>(y.shape(), seed, 0, T(-1), T(1))))));
}
template <class F, int R>
void expect_grad(const char* what, F&& f, ad::Param<double, R>& p, double tol = 1e-6, double h = 1e-6) {
  const std::string name = what;
  CAPTURE(name);
  const auto r = ad::grad_check(f, p, h, 1, 1e-3);
  CAPTURE(r.max_rel_error);
  CHECK(r.max_rel_error < tol);
}
template <class T, int R>
Tensor<T, R> run(const ad::Var<T, R>& v) {
  return Tensor<T, R>(v.value());
}
}  // namespace

TEST_CASE("rmsnorm: unit mean square, the spec's epsilon, gradient") {
  std::mt19937 rng(1);
  auto x = rand_param<double>(Shape<3>{2, 3, 7}, rng);
  ad::Graph g;
  const auto y = run(ad::rmsnorm(x.var()));
  for (index_t b = 0; b < 2; ++b)
    for (index_t t = 0; t < 3; ++t) {
      double ms = 0;
      for (index_t c = 0; c < 7; ++c) ms += x.value()(b, t, c) * x.value()(b, t, c);
      ms /= 7;
      const double r = 1 / std::sqrt(ms + 1.1920929e-07);
      for (index_t c = 0; c < 7; ++c) CHECK(y(b, t, c) == doctest::Approx(x.value()(b, t, c) * r).epsilon(1e-14));
    }
  // epsilon matters for a zero row: output 0, finite gradient
  auto z = ad::rmsnorm(ad::variable(Tensor<double, 2>(Shape<2>{1, 4})));
  CHECK(z.value()(0, 2) == 0.0);
  expect_grad(
      "rmsnorm", [&] { return weighted_sum(ad::rmsnorm(x.var()), 3); }, x);
  auto x1 = rand_param<double>(Shape<2>{1, 1}, rng);  // C = 1
  expect_grad(
      "rmsnorm C=1", [&] { return weighted_sum(ad::rmsnorm(ad::scale(x1.var(), 3.0)), 3); }, x1);
}

TEST_CASE("rope: the release's pairing and sign, tables rounded to bf16, any positions") {
  const index_t Dh = 8;
  const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{5}, index_t{0});
  const auto exact = ad::RopeTable<double>::make(pos.view(), Dh, false);
  const auto rounded = ad::RopeTable<double>::make(pos.view(), Dh, true);
  // table values: cos(p * 10000^(-2j/Dh)) in fp32; bf16 rounding keeps 8 significant bits
  for (index_t p = 0; p < 5; ++p)
    for (index_t j = 0; j < Dh / 2; ++j) {
      const float th = float(p) * (1.0f / std::pow(10000.0f, float(2 * j) / float(Dh)));
      CHECK((*exact.cos)(p, j) == double(std::cos(th)));
      CHECK(std::abs((*rounded.sin)(p, j) - double(std::sin(th))) <= std::abs(std::sin(th)) * 0x1p-8 + 1e-30);
      CHECK(double(lrt::round_to_bf16(float((*rounded.sin)(p, j)))) == (*rounded.sin)(p, j));
    }
  CHECK(lrt::round_to_bf16(1.00390625f) == 1.0f);       // tie -> even
  CHECK(lrt::round_to_bf16(1.01171875f) == 1.015625f);  // tie -> even (up)
  std::mt19937 rng(2);
  auto x = rand_param<double>(Shape<4>{2, 5, 3, Dh}, rng);
  ad::Graph g;
  const auto y = run(ad::rope(x.var(), exact));
  for (index_t t = 0; t < 5; ++t)
    for (index_t j = 0; j < Dh / 2; ++j) {
      const double a = x.value()(1, t, 2, j), b = x.value()(1, t, 2, j + Dh / 2);
      const double c = (*exact.cos)(t, j), s = (*exact.sin)(t, j);
      CHECK(y(1, t, 2, j) == doctest::Approx(a * c + b * s));
      CHECK(y(1, t, 2, j + Dh / 2) == doctest::Approx(-a * s + b * c));
    }
  expect_grad(
      "rope", [&] { return weighted_sum(ad::rope(x.var(), rounded), 4); }, x);
  // tables for a subset of positions give the rows of the full tables
  const Tensor<index_t, 1> sub = lrt::iota(Shape<1>{2}, index_t{1}, index_t{2});  // positions 1, 3
  const auto st = ad::RopeTable<double>::make(sub.view(), Dh, true);
  CHECK((*st.cos)(1, 1) == (*rounded.cos)(3, 1));
  CHECK((*st.sin)(0, 3) == (*rounded.sin)(1, 3));
}

TEST_CASE("rope_rmsnorm: the fused QK-norm equals rmsnorm(rope(x)), and its gradient") {
  const index_t Dh = 10;
  const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{4}, index_t{3}, index_t{2});  // positions 3, 5, 7, 9
  std::mt19937 rng(21);
  // The same operations in the same order: equal bit for bit unless the compiler contracts
  // a*b + c into an FMA at one site and not the other (-march with FMA), hence a few ulps.
  auto check_equal = [&](auto zero) {
    using T = decltype(zero);
    const double tol = std::is_same_v<T, float> ? 4e-7 : 1e-15;
    const auto table = ad::RopeTable<T>::make(pos.view(), Dh, true);
    auto x = rand_param<T>(Shape<4>{2, 4, 3, Dh}, rng);
    const Tensor<T, 4> w(lrt::uniform<T>(x.shape(), 9, 0, T(-1), T(1)));
    auto value_and_grad = [&](bool fused) {
      x.zero_grad();
      ad::Graph g;
      auto y = fused ? ad::rope_rmsnorm(x.var(), table) : ad::rmsnorm(ad::rope(x.var(), table));
      y.retain();
      ad::backward(ad::sum(ad::mul(y, ad::constant(w))));
      return std::make_pair(Tensor<T, 4>(y.value()), Tensor<T, 4>(x.grad()));
    };
    const auto [yf, gf] = value_and_grad(true);
    const auto [ys, gs] = value_and_grad(false);
    double worst_y = 0, worst_g = 0;
    for (index_t i = 0; i < yf.numel(); ++i) {
      worst_y = std::max(worst_y, std::abs(double(yf.data()[i]) - double(ys.data()[i])));
      worst_g = std::max(worst_g, std::abs(double(gf.data()[i]) - double(gs.data()[i])) /
                                      std::max(1.0, std::abs(double(gs.data()[i]))));
    }
    CHECK(worst_y <= tol * 4);  // |y| <= sqrt(Dh)
    CHECK(worst_g <= tol * 4);
  };
  check_equal(0.0);
  check_equal(0.0f);
  // against finite differences (double), including a strided input (a slice along the head axis)
  const auto table = ad::RopeTable<double>::make(pos.view(), Dh, false);
  auto x = rand_param<double>(Shape<4>{2, 4, 3, Dh}, rng);
  expect_grad(
      "rope_rmsnorm", [&] { return weighted_sum(ad::rope_rmsnorm(x.var(), table), 5); }, x);
  expect_grad(
      "rope_rmsnorm on a slice", [&] { return weighted_sum(ad::rope_rmsnorm(ad::slice(x.var(), 2, 1, 3), table), 6); },
      x);
  {  // unit mean square per head vector
    ad::Graph g;
    const auto y = run(ad::rope_rmsnorm(x.var(), table));
    for (index_t h = 0; h < 3; ++h) {
      double ms = 0;
      for (index_t j = 0; j < Dh; ++j) ms += y(1, 2, h, j) * y(1, 2, h, j);
      CHECK(ms / Dh == doctest::Approx(1.0).epsilon(1e-6));
    }
  }
  // clear errors for tables of the wrong length and odd head dims
  ad::Graph g;
  const auto short_table = ad::RopeTable<double>::make(index_t{3}, Dh);
  CHECK_THROWS_WITH_AS(ad::rope_rmsnorm(x.var(), short_table),
                       doctest::Contains("[rope_rmsnorm] x (2, 4, 3, 10) needs tables of shape (4, 5)"), lrt::Error);
  auto odd = rand_param<double>(Shape<4>{1, 4, 1, 3}, rng);
  CHECK_THROWS_WITH_AS(ad::rope_rmsnorm(odd.var(), table), doctest::Contains("head dim must be even"), lrt::Error);
}

TEST_CASE("softmax and embedding") {
  std::mt19937 rng(3);
  auto x = rand_param<double>(Shape<2>{4, 6}, rng, -3, 3);
  {
    ad::Graph g;
    const auto y = run(ad::softmax(x.var()));
    for (index_t i = 0; i < 4; ++i) CHECK(lrt::sum(y.select(0, i)) == doctest::Approx(1.0).epsilon(1e-14));
  }
  expect_grad(
      "softmax", [&] { return weighted_sum(ad::softmax(x.var()), 5); }, x);
  auto table = rand_param<double>(Shape<2>{7, 3}, rng);
  Tensor<index_t, 2> ids(Shape<2>{2, 4});
  const index_t v[] = {3, 0, 3, 6, 1, 3, 0, 2};  // repeats: the backward must add them up
  for (index_t i = 0; i < 8; ++i) ids.data()[i] = v[i];
  {
    ad::Graph g;
    const auto e = run(ad::embedding(ids, table.var()));
    CHECK(e(1, 1, 2) == table.value()(3, 2));
  }
  expect_grad(
      "embedding", [&] { return weighted_sum(ad::embedding(ids, table.var()), 6); }, table);
  Tensor<index_t, 2> bad = ids;
  bad(0, 0) = 7;
  ad::Graph g;
  CHECK_THROWS_WITH_AS(ad::embedding(bad, table.var()), "[embedding] id 7 at position 0 out of range for table (7, 3)",
                       lrt::Error);
}

TEST_CASE("cross-entropy: softcap, ignore index, vocabulary crop, per-token losses") {
  std::mt19937 rng(4);
  const index_t N = 6, Vp = 8, V = 5;
  auto logits = rand_param<double>(Shape<2>{N, Vp}, rng, -20, 20);
  Tensor<index_t, 1> tg(Shape<1>{N});
  const index_t t[] = {0, 4, -1, 2, -1, 1};
  for (index_t i = 0; i < N; ++i) tg(i) = t[i];
  const double cap = 15;
  {
    ad::Graph g;
    auto ce = ad::cross_entropy(logits.var(), tg, cap, V);
    CHECK(ce.count == 4);
    double total = 0;
    for (index_t i = 0; i < N; ++i) {
      if (t[i] < 0) {
        CHECK(ce.per_token(i) == 0.0);
        continue;
      }
      double m = -1e300, s = 0;
      for (index_t j = 0; j < V; ++j) m = std::max(m, cap * std::tanh(logits.value()(i, j) / cap));
      for (index_t j = 0; j < V; ++j) s += std::exp(cap * std::tanh(logits.value()(i, j) / cap) - m);
      const double expect = m + std::log(s) - cap * std::tanh(logits.value()(i, t[i]) / cap);
      CHECK(ce.per_token(i) == doctest::Approx(expect).epsilon(1e-13));
      total += expect;
    }
    CHECK(*ce.loss.value().data() == doctest::Approx(total / 4).epsilon(1e-13));
    ad::backward(ce.loss);
    for (index_t i = 0; i < N; ++i)
      for (index_t j = 0; j < Vp; ++j)
        if (t[i] < 0 || j >= V) CHECK(logits.grad()(i, j) == 0.0);  // ignored rows, cropped columns
    logits.zero_grad();
  }
  // h = 1e-5: the loss is ~10 while many gradients are ~1e-3 (noise ~ eps * loss / h)
  expect_grad(
      "cross_entropy", [&] { return ad::cross_entropy(logits.var(), tg, cap, V).loss; }, logits, 1e-6, 1e-5);
  expect_grad(
      "cross_entropy no cap", [&] { return ad::cross_entropy(logits.var(), tg, 0.0).loss; }, logits, 1e-6, 1e-5);
  Tensor<index_t, 1> none = Tensor<index_t, 1>::full(Shape<1>{N}, -1);
  ad::Graph g;
  auto ce = ad::cross_entropy(logits.var(), none, cap, V);
  CHECK(*ce.loss.value().data() == 0.0);  // CE over no targets is 0, not NaN
  ad::backward(ce.loss);
  CHECK(lrt::max(lrt::abs(logits.grad())) == 0.0);
  Tensor<index_t, 1> oob = tg;
  oob(0) = V;
  CHECK_THROWS_WITH_AS(ad::cross_entropy(logits.var(), oob, cap, V),
                       "[cross_entropy] target 5 at row 0 out of range for vocab 5", lrt::Error);
}

TEST_CASE_TEMPLATE("softcap cross-entropy kernels: vectorised contiguous rows == the scalar strided path", T, float,
                   double) {
  // Contiguous rows take Eigen's vectorised tanh/exp; a transposed view takes the libm loop.
  std::mt19937 rng(12);
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  for (const T cap : {T(15), T(0)}) {
    const index_t N = 9, Vp = 40, V = 37;
    Tensor<T, 2> lg(Shape<2>{N, Vp}), lgt(Shape<2>{Vp, N});
    lrt_test::fill_random(lg, rng, T(-30), T(30));
    lgt = lg.t();
    Tensor<index_t, 1> tg(Shape<1>{N});
    for (index_t i = 0; i < N; ++i) tg(i) = i == 3 ? -1 : (i * 7) % V;
    Tensor<T, 1> loss_a(Shape<1>{N}), lse_a(Shape<1>{N}), loss_b(Shape<1>{N}), lse_b(Shape<1>{N});
    const lrt::TensorView<const T, 2> strided = lgt.t();
    REQUIRE(strided.strides()[1] != 1);
    lrt::cpu::softcap_xent_forward<T>(lg.view(), tg.view(), V, cap, -1, loss_a.view(), lse_a.view());
    lrt::cpu::softcap_xent_forward<T>(strided, tg.view(), V, cap, -1, loss_b.view(), lse_b.view());
    lrt_test::check_close(loss_a, loss_b, tol, tol);
    lrt_test::check_close(lse_a, lse_b, tol, tol);
    Tensor<T, 1> g = Tensor<T, 1>::full(Shape<1>{N}, T(0.5));
    Tensor<T, 2> da(Shape<2>{N, Vp}), dbt(Shape<2>{Vp, N});
    da.fill(std::numeric_limits<T>::quiet_NaN());
    dbt.fill(std::numeric_limits<T>::quiet_NaN());
    lrt::cpu::softcap_xent_backward<T>(lg.view(), tg.view(), V, cap, -1, lse_a.view(), g.view(), da.view());
    lrt::cpu::softcap_xent_backward<T>(strided, tg.view(), V, cap, -1, lse_a.view(), g.view(), dbt.t());
    lrt_test::check_close(da, lrt::contiguous(dbt.t()), tol, tol);
    for (index_t j = V; j < Vp; ++j) CHECK(da(0, j) == T(0));  // padding columns written as zeros
  }
}

TEST_CASE("attention: GQA, window < T, T = 1, subset queries; gradients by finite differences") {
  std::mt19937 rng(5);
  struct Case {
    index_t B, Tk, H, Hkv, Dh, window;
    std::vector<index_t> qpos;
  };
  const std::vector<Case> cases = {
      {1, 1, 2, 1, 4, 0, {0}},                 // T = 1
      {2, 5, 4, 2, 4, 5, {0, 1, 2, 3, 4}},     // GQA, plain causal
      {1, 6, 2, 2, 4, 2, {0, 1, 2, 3, 4, 5}},  // window < T
      {1, 7, 2, 1, 4, 3, {1, 3, 5}},           // p mod 2 == 1 against all keys
      {1, 7, 3, 3, 2, 6, {0, 2, 3, 6}},        // irregular sorted positions
  };
  for (const Case& c : cases) {
    CAPTURE(c.Tk);
    CAPTURE(c.window);
    const index_t Tq = index_t(c.qpos.size());
    auto q = rand_param<double>(Shape<4>{c.B, Tq, c.H, c.Dh}, rng);
    auto k = rand_param<double>(Shape<4>{c.B, c.Tk, c.Hkv, c.Dh}, rng);
    auto v = rand_param<double>(Shape<4>{c.B, c.Tk, c.Hkv, c.Dh}, rng);
    Tensor<index_t, 1> qp(Shape<1>{Tq});
    for (index_t i = 0; i < Tq; ++i) qp(i) = c.qpos[std::size_t(i)];
    auto f = [&] { return weighted_sum(ad::attention(q.var(), k.var(), v.var(), qp, c.window), 7); };
    expect_grad("attention/q", f, q);
    expect_grad("attention/k", f, k);
    expect_grad("attention/v", f, v);
  }
}

TEST_CASE("attention with an IndexList of positions == with a tensor; bad lists are rejected on the host") {
  std::mt19937 rng(8);
  auto q = rand_param<double>(Shape<4>{2, 3, 2, 4}, rng);
  auto k = rand_param<double>(Shape<4>{2, 7, 1, 4}, rng);
  auto v = rand_param<double>(Shape<4>{2, 7, 1, 4}, rng);
  const std::vector<index_t> P{1, 4, 6};
  const lrt::IndexList<lrt::cpu::Device> idx(P);
  CHECK(idx.increasing());
  CHECK(idx.host() == P);
  Tensor<index_t, 1> qp(Shape<1>{3});
  for (index_t i = 0; i < 3; ++i) qp(i) = P[std::size_t(i)];
  ad::Graph g;
  const auto a = run(ad::attention(q.var(), k.var(), v.var(), qp, 3));
  const auto b = run(ad::attention(q.var(), k.var(), v.var(), idx, 3));
  CHECK(lrt::max(lrt::abs(a - b)) == 0.0);
  const lrt::IndexList<lrt::cpu::Device> repeat({1, 1, 2}), late({1, 2, 7});
  CHECK_FALSE(repeat.increasing());
  CHECK_THROWS_WITH_AS(ad::attention(q.var(), k.var(), v.var(), repeat, 3),
                       "[attention] qpos must be strictly increasing: qpos[1] = 1 after qpos[0] = 1", lrt::Error);
  CHECK_THROWS_WITH_AS(ad::attention(q.var(), k.var(), v.var(), late, 3),
                       "[attention] qpos[2] = 7 is not < Tk = 7 (k (2, 7, 1, 4))", lrt::Error);
  // TokenIds: the same lookup and gradient as embedding(ids, table).
  auto table = rand_param<double>(Shape<2>{5, 3}, rng);
  Tensor<index_t, 2> ids(Shape<2>{1, 4});
  const index_t v4[] = {4, 0, 4, 2};
  for (index_t i = 0; i < 4; ++i) ids.data()[i] = v4[i];
  const ad::TokenIds<lrt::cpu::Device> tok(ids, 5);
  CHECK(lrt::max(lrt::abs(run(ad::embedding(tok, table.var())) - run(ad::embedding(ids, table.var())))) == 0.0);
  expect_grad(
      "embedding(TokenIds)", [&] { return weighted_sum(ad::embedding(tok, table.var()), 9); }, table);
}

TEST_CASE("float results agree with double within documented tolerances") {
  // float32 fused ops vs the same ops in double: relative 1e-5 (attention, rmsnorm, rope,
  // softmax) and 1e-5 on cross-entropy values.
  std::mt19937 rng(6);
  Tensor<double, 4> qd(Shape<4>{1, 9, 4, 8}), kd(Shape<4>{1, 9, 2, 8}), vd(Shape<4>{1, 9, 2, 8});
  fill_random(qd, rng);
  fill_random(kd, rng);
  fill_random(vd, rng);
  const Tensor<index_t, 1> qp = lrt::iota(Shape<1>{9}, index_t{0});
  ad::Graph g;
  auto yd = ad::rmsnorm(ad::attention(ad::constant(qd), ad::constant(kd), ad::constant(vd), qp, 4));
  auto yf = ad::rmsnorm(ad::attention(ad::constant(Tensor<float, 4>(lrt::cast<float>(qd))),
                                      ad::constant(Tensor<float, 4>(lrt::cast<float>(kd))),
                                      ad::constant(Tensor<float, 4>(lrt::cast<float>(vd))), qp, 4));
  check_close(yf.value(), yd.value(), 1e-5, 1e-5);
  Tensor<double, 2> ld(Shape<2>{5, 11});
  fill_random(ld, rng, -30, 30);
  Tensor<index_t, 1> tg = lrt::iota(Shape<1>{5}, index_t{0}, index_t{2});
  auto cd = ad::cross_entropy(ad::constant(ld), tg, 15.0);
  auto cf = ad::cross_entropy(ad::constant(Tensor<float, 2>(lrt::cast<float>(ld))), tg, 15.f);
  check_close(cf.per_token, cd.per_token, 1e-5, 1e-5);
}

TEST_CASE("a two-layer attention + MLP network, gradient-checked end to end") {
  std::mt19937 rng(7);
  const index_t B = 2, T = 5, C = 8, H = 2, Hkv = 1, Dh = 4, V = 11;
  auto wte = rand_param<double>(Shape<2>{V, C}, rng, -1, 1);
  std::vector<ad::Param<double, 2>> wq, wk, wv, wo, w1, w2;
  for (int l = 0; l < 2; ++l) {
    wq.push_back(rand_param<double>(Shape<2>{H * Dh, C}, rng, -0.6, 0.6));
    wk.push_back(rand_param<double>(Shape<2>{Hkv * Dh, C}, rng, -0.6, 0.6));
    wv.push_back(rand_param<double>(Shape<2>{Hkv * Dh, C}, rng, -0.6, 0.6));
    wo.push_back(rand_param<double>(Shape<2>{C, H * Dh}, rng, -0.6, 0.6));
    w1.push_back(rand_param<double>(Shape<2>{4 * C, C}, rng, -0.6, 0.6));
    w2.push_back(rand_param<double>(Shape<2>{C, 4 * C}, rng, -0.6, 0.6));
  }
  auto head = rand_param<double>(Shape<2>{V, C}, rng, -0.6, 0.6);
  Tensor<index_t, 2> ids(Shape<2>{B, T}), tg(Shape<2>{B, T});
  for (index_t i = 0; i < B * T; ++i) {
    ids.data()[i] = index_t(rng() % V);
    tg.data()[i] = i == 3 ? -1 : index_t(rng() % V);
  }
  const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{T}, index_t{0});
  const auto rope = ad::RopeTable<double>::make(pos.view(), Dh, true);
  const Tensor<index_t, 1> tflat(tg.view().reshape(Shape<1>{B * T}));
  auto model = [&] {
    auto x = ad::rmsnorm(ad::embedding(ids, wte.var()));
    for (int l = 0; l < 2; ++l) {
      auto u = ad::rmsnorm(x);
      auto q = ad::rmsnorm(ad::rope(ad::reshape(ad::linear(u, wq[l].var()), Shape<4>{B, T, H, Dh}), rope));
      auto k = ad::rmsnorm(ad::rope(ad::reshape(ad::linear(u, wk[l].var()), Shape<4>{B, T, Hkv, Dh}), rope));
      auto v = ad::reshape(ad::linear(u, wv[l].var()), Shape<4>{B, T, Hkv, Dh});
      auto a = ad::attention(q, k, v, pos, l == 0 ? 2 : T);
      x = x + ad::linear(ad::reshape(a, Shape<3>{B, T, H * Dh}), wo[l].var());
      x = x + ad::linear(ad::relu2(ad::linear(ad::rmsnorm(x), w1[l].var())), w2[l].var());
    }
    auto logits = ad::linear(ad::reshape(ad::rmsnorm(x), Shape<2>{B * T, C}), head.var());
    return ad::cross_entropy(logits, tflat, 15.0).loss;
  };
  expect_grad("net/wte", model, wte);
  expect_grad("net/wq0", model, wq[0]);
  expect_grad("net/wk1", model, wk[1]);
  expect_grad("net/wv0", model, wv[0]);
  expect_grad("net/wo1", model, wo[1]);
  expect_grad("net/w1_0", model, w1[0]);
  expect_grad("net/w2_1", model, w2[1]);
  expect_grad("net/head", model, head);
}

}  // namespace test_nn
