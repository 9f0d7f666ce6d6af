// The CPU GEMM's paths (backend/cpu/sgemm.hpp, backend/cpu/gemm.hpp): lrt's own AVX-512 and AVX2
// kernels, each on a CPU that has it, against a naive loop in double; the bits of an element not
// depending on where it lies or how the rows are split; and the choice of a path from the CPU, the
// OpenBLAS core and LRT_GEMM.
#include "../test_util.hpp"

#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

namespace test_gemm_paths {

using lrt::index_t;
using lrt::cpu::GemmChoice;
using lrt::cpu::GemmPath;
using lrt::cpu::SgemmOperand;
using lrt::cpu::SimdLevel;

namespace {

/// The kernels this build has and this CPU runs.
std::vector<SimdLevel> runnable_kernels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::avx2, SimdLevel::avx512})
    if (lrt::cpu::sgemm_has_kernel(l) && lrt::cpu::cpu_simd_level() >= l) out.push_back(l);
  return out;
}

/// op(X)[i][k] of a row-major operand.
float at(const SgemmOperand& x, index_t i, index_t k) { return x.trans ? x.p[k * x.ld + i] : x.p[i * x.ld + k]; }

}  // namespace

TEST_CASE("lrt's fp32 kernels match a naive loop in double for every layout, edge and alpha/beta") {
  const auto kernels = runnable_kernels();
  if (kernels.empty()) MESSAGE("this CPU runs none of lrt's GEMM kernels (AVX2 + FMA, AVX-512): nothing to check");
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (SimdLevel level : kernels) {
    CAPTURE(lrt::cpu::simd_name(level));
    // Sizes around the tiles (6 x 16, 8 x 32), the blocks (kc 256, mc 128) and the panels (nc 2048).
    const index_t Ms[] = {1, 2, 7, 8, 13, 129, 300}, Ns[] = {1, 15, 32, 33, 70, 2050}, Ks[] = {0, 1, 5, 256, 513};
    int cases = 0;
    for (index_t M : Ms)
      for (index_t N : Ns)
        for (index_t K : Ks) {
          if (M * N * std::max<index_t>(K, 1) > 3000000) continue;
          const int layout = cases++ % 4;
          const bool ta = layout & 1, tb = layout & 2;
          const float beta = (cases % 3 == 0)   ? 0.0f
                             : (cases % 3 == 1) ? 1.0f
                                                : -0.75f,
                      alpha = 0.5f + float(cases % 2);
          CAPTURE(M);
          CAPTURE(N);
          CAPTURE(K);
          CAPTURE(layout);
          CAPTURE(beta);
          const index_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 5;
          std::vector<float> A(std::size_t((ta ? K : M) * lda + 1)), B(std::size_t((tb ? N : K) * ldb + 1));
          for (auto& x : A) x = u(rng);
          for (auto& x : B) x = u(rng);
          std::vector<float> C(std::size_t(M * ldc));
          for (auto& x : C) x = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
          const std::vector<float> C0 = C;
          const SgemmOperand a{A.data(), lda, ta}, b{B.data(), ldb, tb};
          lrt::cpu::sgemm(level, M, N, K, alpha, a, b, beta, C.data(), ldc);
          int bad = 0;
          for (index_t i = 0; i < M; ++i)
            for (index_t j = 0; j < ldc; ++j) {
              const float got = C[std::size_t(i * ldc + j)], old = C0[std::size_t(i * ldc + j)];
              if (j >= N) {  // the padding of C is left alone, bit for bit
                if (std::memcmp(&got, &old, sizeof got) != 0) ++bad;
                continue;
              }
              double s = 0, mag = 0;
              for (index_t k = 0; k < K; ++k) {
                s += double(at(a, i, k)) * double(at(b, k, j));
                mag += std::abs(double(at(a, i, k)) * double(at(b, k, j)));
              }
              const double want = double(alpha) * s + (beta == 0.0f ? 0.0 : double(beta) * double(old));
              if (!(std::abs(double(got) - want) <= 1e-6 * (1 + 2 * mag + std::abs(want)))) ++bad;
            }
          REQUIRE(bad == 0);
        }
  }
}

TEST_CASE("lrt's fp32 kernels give an element the same bits wherever it lies and however rows are split") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const index_t M = 300, N = 77, K = 300;
  std::vector<float> A(std::size_t(M * K)), B(std::size_t(K * N));
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  for (SimdLevel level : runnable_kernels()) {
    CAPTURE(lrt::cpu::simd_name(level));
    std::vector<float> whole(std::size_t(M * N)), parts(std::size_t(M * N)), split(std::size_t(M * N));
    const SgemmOperand b{B.data(), N, false};
    lrt::cpu::sgemm(level, M, N, K, 1.0f, SgemmOperand{A.data(), K, false}, b, 0.0f, whole.data(), N);
    // Row ranges of odd sizes, each a separate call (as lrt's pool splits a GEMM).
    for (index_t r0 = 0; r0 < M;) {
      const index_t rows = std::min<index_t>(M - r0, 1 + (r0 * 7) % 23);
      lrt::cpu::sgemm(level, rows, N, K, 1.0f, SgemmOperand{A.data() + r0 * K, K, false}, b, 0.0f,
                      parts.data() + r0 * N, N);
      r0 += rows;
    }
    CHECK(std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)) == 0);
    // The same call with its panels and row blocks handed out one at a time in reverse order.
    const auto backwards = [](index_t n, auto&& f) {
      for (index_t i = n - 1; i >= 0; --i) f(i, i + 1);
    };
    lrt::cpu::sgemm(level, M, N, K, 1.0f, SgemmOperand{A.data(), K, false}, b, 0.0f, split.data(), N, backwards);
    CHECK(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("OpenBLAS core names map to the instruction set of their kernels") {
  using lrt::cpu::detail::openblas_core_level;
  CHECK(openblas_core_level("Prescott") == SimdLevel::sse2);
  CHECK(openblas_core_level("Nehalem") == SimdLevel::sse2);
  CHECK(openblas_core_level("Sandybridge") == SimdLevel::avx);
  CHECK(openblas_core_level("Haswell") == SimdLevel::avx2);
  CHECK(openblas_core_level("Zen") == SimdLevel::avx2);
  CHECK(openblas_core_level("SkylakeX") == SimdLevel::avx512);
  CHECK(openblas_core_level("COOPERLAKE") == SimdLevel::avx512);
  CHECK(openblas_core_level("SapphireRapids") == SimdLevel::avx512);
  CHECK(openblas_core_level("NeoverseN1") == SimdLevel::none);  // unknown: trusted
}

TEST_CASE("the GEMM path follows the CPU, the OpenBLAS core, Eigen's build and LRT_GEMM") {
  using lrt::cpu::detail::choose_gemm;
  int measured = 0;
  const auto gflops = [&](double lrt, double blas, double eigen) {
    return [&measured, lrt, blas, eigen](const GemmChoice& c) {
      ++measured;
      return c.path == GemmPath::lrt ? lrt : c.path == GemmPath::openblas ? blas : eigen;
    };
  };
  // Debian 12's OpenBLAS on a Xeon with AMX: Prescott kernels. lrt's AVX-512, without measuring.
  GemmChoice c = choose_gemm("", SimdLevel::avx512, "Prescott", SimdLevel::sse2, gflops(1, 100, 1));
  CHECK(c.path == GemmPath::lrt);
  CHECK(c.level == SimdLevel::avx512);
  CHECK(c.name == "lrt AVX-512");
  CHECK(c.why.find("OpenBLAS reports Prescott on a CPU with AVX-512") != std::string::npos);
  CHECK(measured == 0);
  // Haswell kernels on an AVX-512 CPU: older too.
  c = choose_gemm("auto", SimdLevel::avx512, "Haswell", SimdLevel::sse2, gflops(1, 100, 1));
  CHECK(c.path == GemmPath::lrt);
  CHECK(measured == 0);
  // OpenBLAS with the CPU's kernels: the first fit, without a timing (every process on the machine
  // takes the same path, so ranks, a server and lrt-generate compute the same bits).
  c = choose_gemm("", SimdLevel::avx512, "SkylakeX", SimdLevel::sse2, gflops(90, 60, 20));
  CHECK(c.path == GemmPath::openblas);
  CHECK(c.name == "OpenBLAS (SkylakeX)");
  CHECK(c.why ==
        "the first fit of OpenBLAS, lrt, Eigen; also fit: lrt AVX-512 (LRT_GEMM=measure times them); "
        "Eigen is compiled for SSE2");
  CHECK(measured == 0);
  c = choose_gemm("auto", SimdLevel::avx2, "Haswell", SimdLevel::sse2, gflops(90, 60, 20));
  CHECK(c.path == GemmPath::openblas);
  CHECK(measured == 0);
  // LRT_GEMM=measure: the fit paths timed, the faster wins.
  c = choose_gemm("measure", SimdLevel::avx512, "SkylakeX", SimdLevel::sse2, gflops(60, 90, 20));
  CHECK(c.path == GemmPath::openblas);
  CHECK(c.why.rfind("measured", 0) == 0);
  CHECK(measured == 2);  // OpenBLAS and lrt; Eigen (SSE2) is not fit
  c = choose_gemm("measure", SimdLevel::avx2, "Haswell", SimdLevel::sse2, gflops(60, 50, 20));
  CHECK(c.path == GemmPath::lrt);
  CHECK(c.level == SimdLevel::avx2);
  // Within 5 %, the first fit stays (a choice that does not flip with noise).
  c = choose_gemm("measure", SimdLevel::avx2, "Haswell", SimdLevel::sse2, gflops(63, 60, 20));
  CHECK(c.path == GemmPath::openblas);
  // A native build: Eigen compiled for the CPU's instruction set is fit after lrt's kernels.
  measured = 0;
  c = choose_gemm("", SimdLevel::avx512, "Prescott", SimdLevel::avx512, gflops(60, 1, 70));
  CHECK(c.path == GemmPath::lrt);
  CHECK(measured == 0);
  c = choose_gemm("measure", SimdLevel::avx512, "Prescott", SimdLevel::avx512, gflops(60, 1, 70));
  CHECK(c.path == GemmPath::eigen);
  CHECK(c.name == "Eigen (AVX-512)");
  CHECK(measured == 2);
  // No OpenBLAS in the build, a CPU without AVX2: Eigen, the only one.
  c = choose_gemm("", SimdLevel::avx, nullptr, SimdLevel::sse2, gflops(1, 1, 1));
  CHECK(c.path == GemmPath::eigen);
  // Not x86-64 (no kernels of lrt's, no cpuid): OpenBLAS is trusted.
  c = choose_gemm("", SimdLevel::none, "NeoverseN1", SimdLevel::none, gflops(0, 10, 5));
  CHECK(c.path == GemmPath::openblas);
  // Forced.
  measured = 0;
  c = choose_gemm("openblas", SimdLevel::avx512, "Prescott", SimdLevel::sse2, gflops(1, 1, 1));
  CHECK(c.path == GemmPath::openblas);
  CHECK(c.why == "forced (LRT_GEMM)");
  c = choose_gemm("eigen", SimdLevel::avx512, "SkylakeX", SimdLevel::sse2, gflops(1, 1, 1));
  CHECK(c.path == GemmPath::eigen);
  CHECK(measured == 0);
  CHECK_THROWS_WITH_AS(choose_gemm("fast", SimdLevel::avx512, nullptr, SimdLevel::sse2, gflops(1, 1, 1)),
                       "[gemm] LRT_GEMM='fast': expected lrt, openblas, eigen, auto or measure", lrt::Error);
  CHECK_THROWS_WITH_AS(choose_gemm("openblas", SimdLevel::avx512, nullptr, SimdLevel::sse2, gflops(1, 1, 1)),
                       doctest::Contains("this build has no OpenBLAS"), lrt::Error);
  CHECK_THROWS_WITH_AS(choose_gemm("lrt", SimdLevel::sse2, nullptr, SimdLevel::sse2, gflops(1, 1, 1)),
                       doctest::Contains("need AVX2 and FMA"), lrt::Error);
}

TEST_CASE("this process's GEMM path (LRT_TEST_GEMM_EXPECT: the path the environment should give)") {
  // Run by the kernel.gemm_choice_* tests with OPENBLAS_CORETYPE forced; here it only has to agree
  // with what it says. OpenBLAS told SkylakeX runs AVX-512 code: not on a CPU without it.
  const char* expect = std::getenv("LRT_TEST_GEMM_EXPECT");
  if (expect && std::string(expect) == "openblas" && lrt::cpu::cpu_simd_level() < SimdLevel::avx512) {
    MESSAGE("this CPU has no AVX-512: OpenBLAS cannot run its SkylakeX kernels here");
    return;
  }
  const GemmChoice& c = lrt::cpu::gemm_choice();
  MESSAGE("GEMM via " << lrt::cpu::gemm_summary());
  CHECK(std::string(lrt::cpu::gemm_library()) == c.name);
  if (!expect) return;
  const std::string e = expect;
  if (e == "not-openblas") {
    // OpenBLAS told it runs on a Prescott: never chosen on a CPU with AVX2 or wider.
    if (lrt::cpu::cpu_simd_level() < SimdLevel::avx2) return;
    CHECK(c.path != GemmPath::openblas);
    CHECK(c.why.find("OpenBLAS reports Prescott") != std::string::npos);
  } else if (e == "openblas") {
    // OpenBLAS told it runs AVX-512 kernels, on a CPU with AVX-512: the first fit.
    CHECK(c.path == GemmPath::openblas);
    CHECK(c.why.find("also fit: lrt AVX-512") != std::string::npos);
  }
}

TEST_CASE("--precision bf16 on the CPU: every float GEMM on the bf16 kernels, whatever its shape, until set back") {
  if (!lrt::cpu::bf16_gemm_supported()) {
    MESSAGE("skipped: " << lrt::cpu::bf16_missing());
    CHECK_THROWS_WITH_AS(lrt::cpu::set_cpu_matmul(lrt::cpu::CpuMatmul::bf16),
                         doctest::Contains("bf16 matrix products need AVX512-BF16"), lrt::Error);
    return;
  }
  struct Restore {  // the process's other tests run in fp32
    ~Restore() { lrt::cpu::set_cpu_matmul(lrt::cpu::CpuMatmul::fp32); }
  } restore;
  for (auto [M, N, K] :
       {std::array<index_t, 3>{1, 48, 40}, {7, 33, 65}, {300, 96, 130}}) {  // a row, a block, rows over the pool
    CAPTURE(M);
    const lrt::Tensor<float, 2> A = lrt::uniform<float>(lrt::Shape<2>{M, K}, 1, 0, -1.f, 1.f);
    const lrt::Tensor<float, 2> B =
        lrt::uniform<float>(lrt::Shape<2>{N, K}, 2, 0, -1.f, 1.f);  // used as B^T, as a layer's weights
    lrt::Tensor<float, 2> fp32({M, N}), bf16({M, N}), want({M, N});
    lrt::gemm(fp32, A, B.t());
    lrt::cpu::set_cpu_matmul(lrt::cpu::CpuMatmul::bf16);
    CHECK(lrt::cpu::cpu_matmul_name() == "bf16 (avx512_bf16)");
    lrt::gemm(bf16, A, B.t());
    lrt::cpu::set_cpu_matmul(lrt::cpu::CpuMatmul::fp32);
    lrt::cpu::gemm_bf16_reference(M, N, K, 1.f, SgemmOperand{A.data(), K, false}, SgemmOperand{B.data(), K, true}, 0.f,
                                  want.data(), N);
    CHECK(std::memcmp(bf16.data(), want.data(), sizeof(float) * std::size_t(M * N)) == 0);
    CHECK(std::memcmp(bf16.data(), fp32.data(), sizeof(float) * std::size_t(M * N)) != 0);  // it did change
  }
}

}  // namespace test_gemm_paths
