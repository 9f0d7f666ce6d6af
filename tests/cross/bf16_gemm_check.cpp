// tests/cross/bf16_gemm_check.cpp: lrt's bf16 GEMM (lrt/backend/cpu/bf16_gemm.hpp) against its
// exact scalar order of operations (gemm_bf16_reference), bit for bit, on the shape classes the
// model's products have (projections, fused QKV, MLP up and down, in their three passes: forward,
// dX, dW), with tails (odd K, edges of tiles and blocks, K over one block), row strides wider than
// the rows, alpha and beta, and special values (ties, NaN, infinities, denormals, values that round
// to infinity); then run-to-run determinism and a split of the rows over threads.
//   lrt_bf16_gemm_check                   exit 0, or 77 (skipped) where the CPU has no bf16 path
//   lrt_bf16_gemm_check --expect-masked   run with LRT_CPU_MASK=avx512_bf16: the path must be none
//                                         and the reason must name the mask
#include <lrt/backend/cpu/bf16_gemm.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using lrt::index_t;
using lrt::cpu::SgemmOperand;

int failures = 0;

/// A stored operand of `rows` x `cols` (op's shape), transposed in memory when trans, each stored
/// row `pad` floats wider than needed.
struct Operand {
  std::vector<float> v;
  index_t ld = 0;
  bool trans = false;
  SgemmOperand op() const { return {v.data(), ld, trans}; }
};

Operand make(index_t rows, index_t cols, bool trans, index_t pad, std::mt19937& g, bool special) {
  Operand o;
  o.trans = trans;
  const index_t srows = trans ? cols : rows, scols = trans ? rows : cols;
  o.ld = scols + pad;
  o.v.assign(std::size_t(srows * o.ld), -7.0f);  // the padding must not be read into C
  std::normal_distribution<float> nd;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -1e-39f,                             // a denormal
                            3.0e38f,                             // rounds to infinity in bf16
                            1.00390625f,                         // 1 + 2^-8: a tie, to even (1)
                            1.01171875f,                         // 1 + 3 * 2^-8: a tie, to even (1 + 2^-6)
                            std::numeric_limits<float>::min()};  // the smallest normal
  std::uniform_int_distribution<int> pick(0, 40);
  for (index_t r = 0; r < srows; ++r)
    for (index_t c = 0; c < scols; ++c) {
      float x = nd(g);
      if (special) {
        const int s = pick(g);
        if (s < int(std::size(specials))) x = specials[s];
      }
      o.v[std::size_t(r * o.ld + c)] = x;
    }
  return o;
}

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

/// Runs par's splits on `threads` threads at once (each range on its own thread), as lrt's pool may.
struct ThreadSplit {
  int threads;
  template <class F>
  void operator()(index_t n, F&& f) const {
    std::vector<std::thread> ts;
    const index_t per = (n + threads - 1) / threads;
    for (index_t b = 0; b < n; b += per) ts.emplace_back([&f, b, e = std::min(n, b + per)] { f(b, e); });
    for (auto& t : ts) t.join();
  }
};

int check(const char* what, index_t M, index_t N, index_t K, bool ta, bool tb, float alpha, float beta, index_t pad,
          bool special, std::mt19937& g) {
  const Operand a = make(M, K, ta, pad, g, special), b = make(K, N, tb, pad, g, special);
  const index_t ldc = N + pad;
  std::vector<float> c0(std::size_t(M * ldc));
  std::normal_distribution<float> nd;
  for (float& x : c0) x = nd(g);
  std::vector<float> got = c0, again = c0, split = c0, want = c0;
  lrt::cpu::gemm_bf16(M, N, K, alpha, a.op(), b.op(), beta, got.data(), ldc);
  lrt::cpu::gemm_bf16(M, N, K, alpha, a.op(), b.op(), beta, again.data(), ldc);
  lrt::cpu::gemm_bf16(M, N, K, alpha, a.op(), b.op(), beta, split.data(), ldc, ThreadSplit{3});
  lrt::cpu::gemm_bf16_reference(M, N, K, alpha, a.op(), b.op(), beta, want.data(), ldc);
  index_t bad = 0, nondet = 0;
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < ldc; ++j) {
      const std::size_t at = std::size_t(i * ldc + j);
      if (j >= N) {  // outside C: untouched
        bad += std::memcmp(&got[at], &c0[at], sizeof(float)) != 0;
        continue;
      }
      if (!same(got[at], want[at]) && bad++ < 3)
        std::printf("  %s: C[%lld][%lld] = %.9g, the scalar order gives %.9g\n", what, static_cast<long long>(i),
                    static_cast<long long>(j), got[at], want[at]);
      nondet += std::memcmp(&got[at], &again[at], sizeof(float)) != 0 ||
                std::memcmp(&got[at], &split[at], sizeof(float)) != 0;
    }
  if (bad || nondet) {
    std::printf(
        "FAIL %s (M %lld, N %lld, K %lld, %s%s, alpha %g, beta %g): %lld elements differ from the scalar "
        "order, %lld between runs or splits\n",
        what, static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), ta ? "T" : "N",
        tb ? "T" : "N", alpha, beta, static_cast<long long>(bad), static_cast<long long>(nondet));
    ++failures;
  }
  return static_cast<int>(M * N);
}

}  // namespace

int main(int argc, char** argv) {
  namespace c = lrt::cpu;
  const bool expect_masked = argc > 1 && std::string(argv[1]) == "--expect-masked";
  std::printf("bf16 GEMM: the CPU offers %s; this process uses %s%s%s\n", c::bf16_path_name(c::cpu_bf16_hardware()),
              c::bf16_path_name(c::cpu_bf16_path()), c::bf16_gemm_supported() ? "" : ": ", c::bf16_missing());
  if (expect_masked) {
    if (c::cpu_bf16_hardware() == c::Bf16Path::none) {
      std::printf("skipped: nothing to mask on this CPU\n");
      return 77;
    }
    const bool ok = !c::bf16_gemm_supported() && std::strstr(c::bf16_missing(), "LRT_CPU_MASK") != nullptr;
    std::printf("%s: with LRT_CPU_MASK=%s the path is %s and the reason names the mask\n", ok ? "ok" : "FAIL",
                std::getenv("LRT_CPU_MASK") ? std::getenv("LRT_CPU_MASK") : "(unset)",
                c::bf16_path_name(c::cpu_bf16_path()));
    return ok ? 0 : 1;
  }
  if (!c::bf16_gemm_supported()) {
    std::printf("skipped: %s\n", c::bf16_missing());
    return 77;
  }
  std::mt19937 g(20261207);
  int shapes = 0;
  long long elements = 0;
  auto run = [&](const char* what, index_t M, index_t N, index_t K, bool ta, bool tb, float alpha = 1, float beta = 0,
                 index_t pad = 0, bool special = false) {
    elements += check(what, M, N, K, ta, tb, alpha, beta, pad, special, g);
    ++shapes;
  };
  // The model's products at small widths: Y = X W (NN), dX = dY W^T (NT), dW = X^T dY (TN), for
  // the projections (d -> d), fused QKV (d -> 3d), MLP up (d -> 4d) and down (4d -> d).
  for (index_t tokens : {1, 7, 64, 100})
    for (index_t d : {32, 48, 128})
      for (auto [kin, nout] : {std::pair<index_t, index_t>{1, 1}, {1, 3}, {1, 4}, {4, 1}}) {
        const index_t K = kin * d, N = nout * d;
        run("fwd", tokens, N, K, false, false);
        run("dX", tokens, K, N, false, true);
        run("dW", K, N, tokens, true, false);
      }
  // Tails and blocks: odd K (a pair half empty), K across blocks of 128 pairs, N across the 2048
  // columns of a panel, M across blocks of 96 rows, edge tiles, strides, both operands transposed.
  run("odd K", 9, 33, 1, false, false);
  run("odd K", 17, 65, 257, true, false);
  run("K across blocks", 13, 40, 600, false, true, 1, 1);
  run("N across panels", 3, 2100, 20, false, false);
  run("M across blocks", 200, 31, 70, true, true);
  run("strides", 21, 37, 45, false, false, 1, 0, 5);
  run("strides, transposed", 21, 37, 45, true, true, 1, 0, 3);
  run("alpha, beta", 16, 64, 128, false, false, 0.5f, 1);
  run("alpha, beta", 11, 35, 77, true, false, 2, -1, 2);
  run("K = 0", 5, 6, 0, false, false, 1, 0.5f);
  run("special values", 24, 48, 96, false, false, 1, 0, 0, true);
  run("special values", 19, 50, 131, true, true, 0.5f, 1, 1, true);
  if (failures) {
    std::printf("%d of %d shapes FAILED\n", failures, shapes);
    return 1;
  }
  std::printf(
      "%s: %d shapes, %lld elements of C bit-exact against the scalar order (two rounded FMAs per pair, odd "
      "first); identical over two runs and a split over 3 threads\n",
      c::bf16_path_name(c::cpu_bf16_path()), shapes, elements);
  return 0;
}
