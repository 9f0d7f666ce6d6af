// lrt-tour: a short tour of the tensor layer: tensors, fused expressions, GEMM, reductions.
// Prints what each step computes; exits non-zero if a self-check fails.
#include <chrono>
#include <cstdio>

#include <lrt/tensor.hpp>

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;

int main() try {
  fmt::print("lrt {}.{}.{} tour: {} thread(s) (LRT_NUM_THREADS), GEMM via {}\n\n", LRT_VERSION_MAJOR, LRT_VERSION_MINOR,
             LRT_VERSION_PATCH, lrt::num_threads(), lrt::cpu::gemm_summary());

  // 1. Tensors, fills from the counter-based RNG, fused expressions.
  Tensor<float, 2> x(Shape<2>{4, 6});  // x: (T, C)
  x = lrt::normal<float>(x.shape(), /*seed=*/42);
  fmt::print("x = normal(seed 42), shape {}:\n{:.3f}\n\n", x.shape(), x);
  Tensor<float, 1> bias = lrt::iota(Shape<1>{6}, 0.f, 0.5f);  // (C) broadcast over T
  Tensor<float, 2> y = lrt::square(lrt::relu(x)) + bias;      // one pass, no temporaries
  fmt::print("y = relu(x)^2 + bias (bias {}):\n{:.3f}\n\n", bias, y);

  // 2. Views: no copies.
  fmt::print("x[:, 1::2] (stepped slice) =\n{:.3f}\n", x.slice(1, 1, 6, 2));
  fmt::print("x^T shape {} strides {}\n\n", x.t().shape(), x.t().strides());

  // 3. Gather/scatter of position subsets p mod S == i (the interleaved schedule's passes).
  const index_t T = 4, S = 2;
  for (index_t i = 0; i < S; ++i) {
    const auto subset = lrt::IndexList<lrt::cpu::Device>::range(i, T, S);
    Tensor<float, 2> rows = x.gather(0, subset);
    x.gather(0, subset) = rows * 0.f + float(i + 1);  // write fresh values back
  }
  fmt::print("after writing subset i back as i+1:\n{}\n\n", x);

  // 4. Reductions and GEMM.
  Tensor<float, 2> a = lrt::uniform<float>(Shape<2>{3, 5}, 7), b = lrt::uniform<float>(Shape<2>{4, 5}, 8);
  auto c = lrt::matmul(a, b.t());  // (3, 5) x (5, 4)
  fmt::print("matmul(a, b^T) =\n{:.4f}\nrow sums {:.4f}, argmax {}\n\n", c, lrt::sum(c, 1), lrt::argmax(c));

  // 5. A GEMM of transformer size, timed.
  const index_t M = 512, K = 256, N = 1024;
  Tensor<float, 2> p = lrt::uniform<float>(Shape<2>{M, K}, 1), w = lrt::uniform<float>(Shape<2>{N, K}, 2);
  Tensor<float, 2> out(Shape<2>{M, N});
  lrt::gemm(out, p, w.t());
  const auto t0 = std::chrono::steady_clock::now();
  const int reps = 10;
  for (int r = 0; r < reps; ++r) lrt::gemm(out, p, w.t());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("GEMM ({}, {}) x ({}, {})^T: {:.1f} GFLOP/s\n", M, K, N, K, 2.0 * M * N * K * reps / s * 1e-9);

  // 6. Errors name the operation and the shapes.
  try {
    (void)lrt::matmul(a, b);
  } catch (const lrt::Error& e) {
    fmt::print("a bad call says: {}\n", e.what());
  }

  // Self-check: the scatter wrote 1 on even rows and 2 on odd rows.
  const bool ok = x(0, 0) == 1.f && x(1, 5) == 2.f && x(3, 2) == 2.f;
  fmt::print("\ntour {}\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "lrt-tour: %s\n", e.what());
  return 1;
}
