// GEMM: plain, transposed operands (views), alpha/beta, strided-batched, pointer lists, matmul.
// Checked against a naive triple loop in double.
#include "../test_util.hpp"

namespace test_gemm {

using namespace lrt_test;
using lrt::Shape;
using lrt::Tensor;
using lrt::TensorView;

namespace {
template <class T, class VA, class VB>
Tensor<double, 2> ref_mm(const VA& a, const VB& b) {
  const index_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  Tensor<double, 2> c(Shape<2>{M, N});
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) {
      double acc = 0;
      for (index_t k = 0; k < K; ++k) acc += double(a(i, k)) * double(b(k, j));
      c(i, j) = acc;
    }
  return c;
}
}  // namespace

TEST_CASE_TEMPLATE("gemm with every operand layout matches a naive loop", T, float, double) {
  std::mt19937 rng(9);
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  for (int rep = 0; rep < 12; ++rep) {
    const index_t M = 1 + rng() % 70, K = rng() % 50, N = 1 + rng() % 60;
    CAPTURE(M);
    CAPTURE(K);
    CAPTURE(N);
    Tensor<T, 2> a(Shape<2>{M, K}), at(Shape<2>{K, M}), b(Shape<2>{K, N}), bt(Shape<2>{N, K});
    fill_random(a, rng);
    fill_random(b, rng);
    at = a.t();
    bt = b.t();
    const auto expect = ref_mm<T>(a, b);
    for (int layout = 0; layout < 4; ++layout) {
      CAPTURE(layout);
      Tensor<T, 2> c(Shape<2>{M, N});
      c.fill(std::numeric_limits<T>::quiet_NaN());  // beta = 0 must ignore old contents
      const TensorView<const T, 2> av = (layout & 1) ? at.t() : a.view();
      const TensorView<const T, 2> bv = (layout & 2) ? bt.t() : b.view();
      lrt::gemm(c, av, bv);
      check_close(c, expect, tol, tol);
    }
    // alpha/beta accumulate: C = 2 AB + 0.5 C
    Tensor<T, 2> c = Tensor<T, 2>::full(Shape<2>{M, N}, T(4));
    lrt::gemm(c, a, b, T(2), T(0.5));
    Tensor<double, 2> e2 = expect * 2.0 + 2.0;
    check_close(c, e2, tol, tol);
    // a transposed destination: C^T written through a view
    Tensor<T, 2> ct(Shape<2>{N, M});
    lrt::gemm(ct.t(), a, b);
    check_close(lrt::contiguous(ct.t()), expect, tol, tol);
    // an operand with no unit stride (every other column) is copied, not misread
    Tensor<T, 2> wide(Shape<2>{M, 2 * K});
    fill_random(wide, rng);
    const auto ws = wide.slice(1, 0, 2 * K, 2);
    Tensor<T, 2> c3(Shape<2>{M, N});
    lrt::gemm(c3, ws, b);
    check_close(c3, ref_mm<T>(ws, b), tol, tol);
  }
}

TEST_CASE("large gemm split across threads equals the naive loop") {
  std::mt19937 rng(4);
  Tensor<float, 2> a(Shape<2>{300, 200}), b(Shape<2>{200, 150});
  fill_random(a, rng);
  fill_random(b, rng);
  Tensor<float, 2> c = lrt::matmul(a, b);
  check_close(c, ref_mm<float>(a, b), 1e-5, 1e-3);  // |error| ~ K eps |a||b|
  Tensor<float, 2> g = lrt::matmul(a.t(), a);       // weight-gradient shape: (K, M) x (M, K)
  check_close(g, ref_mm<float>(a.t(), a), 1e-5, 2e-3);
}

TEST_CASE("strided-batched gemm, broadcast operand, pointer lists and matmul ranks") {
  std::mt19937 rng(21);
  const index_t Bt = 5, M = 7, K = 6, N = 4;
  Tensor<double, 3> a(Shape<3>{Bt, M, K}), b(Shape<3>{Bt, K, N});
  fill_random(a, rng);
  fill_random(b, rng);
  Tensor<double, 3> c(Shape<3>{Bt, M, N});
  lrt::gemm_batched(c, a, b);
  for (index_t i = 0; i < Bt; ++i)
    check_close(lrt::contiguous(c.select(0, i)), ref_mm<double>(a.select(0, i), b.select(0, i)), 1e-12, 1e-12);
  // transposed batch operands: (B, K, M)^T per batch via transpose(1, 2)
  Tensor<double, 3> at = a.transpose(1, 2);
  Tensor<double, 3> c2(Shape<3>{Bt, M, N});
  lrt::gemm_batched(c2, at.transpose(1, 2), b);
  CHECK(equal(c.view(), c2.view()));
  // (B, M, K) x (K, N): the rank-2 operand is shared
  Tensor<double, 2> w(Shape<2>{K, N});
  fill_random(w, rng);
  auto c3 = lrt::matmul(a, w);
  CHECK(c3.shape() == Shape<3>{Bt, M, N});
  for (index_t i = 0; i < Bt; ++i)
    check_close(lrt::contiguous(c3.select(0, i)), ref_mm<double>(a.select(0, i), w), 1e-12, 1e-12);
  auto c4 = lrt::matmul(a.transpose(1, 2).transpose(1, 2).slice(1, 0, M), w);  // non-contiguous path
  check_close(c4, c3, 1e-12, 1e-12);
  auto c5 = lrt::matmul(a, b);
  CHECK(equal(c5.view(), c.view()));
  // pointer-list batched
  std::vector<TensorView<double, 2>> cs;
  std::vector<TensorView<const double, 2>> as, bs;
  Tensor<double, 3> c6(Shape<3>{Bt, M, N});
  for (index_t i = 0; i < Bt; ++i) {
    cs.push_back(c6.select(0, i));
    as.push_back(a.select(0, i));
    bs.push_back(b.select(0, i));
  }
  lrt::gemm_batched<double, lrt::cpu::Device>(cs, as, bs);
  CHECK(equal(c6.view(), c.view()));
}

TEST_CASE("gemm shape errors") {
  Tensor<float, 2> a(Shape<2>{2, 3}), b(Shape<2>{4, 5}), c(Shape<2>{2, 5});
  CHECK_THROWS_WITH_AS(lrt::matmul(a, b), "[matmul] inner dims differ: (2, 3) vs (4, 5)", lrt::Error);
  CHECK_THROWS_WITH_AS(lrt::gemm(c, a, b), "[gemm] inner dims differ: (2, 3) vs (4, 5)", lrt::Error);
  Tensor<float, 2> b2(Shape<2>{3, 4});
  CHECK_THROWS_WITH_AS(lrt::gemm(c, a, b2), "[gemm] output shape (2, 5) does not match (2, 3) x (3, 4)", lrt::Error);
  Tensor<float, 3> x(Shape<3>{2, 3, 4}), y(Shape<3>{3, 4, 5});
  CHECK_THROWS_WITH_AS(lrt::matmul(x, y), "[matmul] batch sizes differ: (2, 3, 4) vs (3, 4, 5)", lrt::Error);
  // K = 0: C = beta * C
  Tensor<float, 2> e1(Shape<2>{2, 0}), e2(Shape<2>{0, 3});
  Tensor<float, 2> z = Tensor<float, 2>::full(Shape<2>{2, 3}, 5.f);
  lrt::gemm(z, e1, e2, 1.f, 0.5f);
  CHECK(z(1, 2) == 2.5f);
  lrt::gemm(z, e1, e2);
  CHECK(z(0, 0) == 0.f);
}

TEST_CASE("gemm results do not depend on how the pool splits the rows") {
  // The same GEMM run serially (inside a pool task, where lrt never splits) and on the pool.
  std::mt19937 rng(31);
  // M = 1 with N K >= 2^16: decode's single-row product, split by columns on the pool.
  for (auto [M, K, N] : {std::tuple{64, 637, 64}, std::tuple{300, 200, 150}, std::tuple{1000, 64, 96},
                         std::tuple{257, 129, 33}, std::tuple{1, 512, 700}, std::tuple{1, 300, 257}}) {
    Tensor<float, 2> a(Shape<2>{M, K}), b(Shape<2>{K, N}), bt(Shape<2>{N, K});
    fill_random(a, rng);
    fill_random(b, rng);
    bt = b.t();
    for (bool trans_b : {false, true}) {
      CAPTURE(M);
      CAPTURE(trans_b);
      const TensorView<const float, 2> bv = trans_b ? bt.t() : b.view();
      Tensor<float, 2> pooled = lrt::matmul(a, bv), serial(Shape<2>{M, N});
      lrt::parallel_for(2, 1, [&](index_t b0, index_t) {
        if (b0 == 0) lrt::gemm(serial, a, bv);
      });
      CHECK(equal(pooled.view(), serial.view()));
      if (M == 1) check_close(pooled, ref_mm<float>(a, bv), 1e-4, 1e-4);
    }
  }
}

TEST_CASE_TEMPLATE("single-row gemm (decode's matrix-vector path) matches a naive loop", T, float, double) {
  // M = 1 with a contiguous row bypasses the BLAS (cpu::detail::gemv_row): both weight layouts,
  // alpha/beta, K around the lane count, a row taken from a wider matrix, NaN in C with beta = 0.
  std::mt19937 rng(17);
  for (index_t K : {1, 15, 16, 17, 33, 200, 513})
    for (index_t N : {1, 7, 64}) {
      CAPTURE(K);
      CAPTURE(N);
      // float sums of K products: rounding error grows with K (|x||b| ~ K / 3 here)
      const double tol = (std::is_same_v<T, float> ? 1e-5 : 1e-12) * std::max(1.0, double(K) / 32);
      Tensor<T, 2> wide(Shape<2>{3, K + 5}), b(Shape<2>{K, N}), bt(Shape<2>{N, K});
      fill_random(wide, rng);
      fill_random(b, rng);
      bt = b.t();
      const auto x = wide.slice(0, 1, 2).slice(1, 2, K + 2);  // (1, K), row stride K + 5
      const auto expect = ref_mm<T>(x, b);
      for (bool trans_b : {false, true}) {
        CAPTURE(trans_b);
        const TensorView<const T, 2> bv = trans_b ? bt.t() : b.view();
        Tensor<T, 2> c(Shape<2>{1, N});
        c.fill(std::numeric_limits<T>::quiet_NaN());
        lrt::gemm(c, x, bv);
        check_close(c, expect, tol, tol);
        Tensor<T, 2> c2 = Tensor<T, 2>::full(Shape<2>{1, N}, T(4));
        lrt::gemm(c2, x, bv, T(-1.5), T(0.25));  // C = -1.5 x op(B) + 0.25 C
        Tensor<double, 2> e2 = expect * -1.5 + 1.0;
        check_close(c2, e2, tol, tol);
        Tensor<T, 2> c3 = Tensor<T, 2>::full(Shape<2>{1, N}, T(2));
        lrt::gemm(c3, x, bv, T(1), T(1));  // accumulate
        Tensor<double, 2> e3 = expect + 2.0;
        check_close(c3, e3, tol, tol);
      }
    }
}

}  // namespace test_gemm
