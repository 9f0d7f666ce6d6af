// The packed products (backend/cpu/packed_matvec.hpp) on the build's instruction set (NEON when
// cross-built for aarch64; tests/CMakeLists.txt builds it for each x86-64 path) against double
// products of the values the packing stands for: row counts that leave a partial block of eight,
// columns that leave a tail, groups that end short. Then the products of several rows at once
// (the packed ones and the row-wise float product, backend/cpu/rowwise.hpp): every row bit for
// bit the product of that row alone, and the float one in dot_lanes' documented order (on x87,
// where intermediates carry extended precision wherever the compiler keeps them in registers,
// within float rounding: batch invariance holds bit for bit where FLT_EVAL_METHOD is 0, every
// SSE, AVX and NEON build). Prints one
// line per shape; exits 1 on a difference larger than float rounding (or any, where bits are
// promised) or when the path is not argv[1] (if given), 77 (skipped) when the CPU lacks the
// instruction set.
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <lrt/backend/cpu/packed_matvec.hpp>
#include <lrt/backend/cpu/rowwise.hpp>
#include <lrt/io/quantize.hpp>

/// Bit for bit where float arithmetic rounds each operation to float; within rounding on x87,
/// whose intermediates keep extended precision wherever the compiler leaves them in registers.
static bool same_float(float a, float b, lrt::index_t K) {
#if FLT_EVAL_METHOD == 0
  (void)K;
  return std::memcmp(&a, &b, sizeof a) == 0;
#else
  return std::abs(double(a) - double(b)) <= 1e-6 * double(K);
#endif
}

int main(int argc, char** argv) {
  using lrt::index_t;
#if defined(__x86_64__) && defined(__AVX512F__)
  const bool have = __builtin_cpu_supports("avx512f");
#elif defined(__x86_64__) && defined(__AVX2__)
  const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool have = true;
#endif
  if (!have) {
    std::printf("skipped: this CPU has no %s\n", lrt::cpu::packed_isa);
    return 77;
  }
  // The row-wise float products take the path of the build's instruction set (each build checks
  // its own: the AVX-512 and AVX2 intrinsics, else the plain loop), whatever the CPU has beyond it.
#if defined(__x86_64__) && defined(__AVX512F__)
  const lrt::cpu::SimdLevel rowwise = lrt::cpu::SimdLevel::avx512;
#elif defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
  const lrt::cpu::SimdLevel rowwise = lrt::cpu::SimdLevel::avx2;
#else
  const lrt::cpu::SimdLevel rowwise = lrt::cpu::SimdLevel::none;
#endif
  if (lrt::cpu::detail::set_rowwise_level(rowwise) != rowwise) {
    std::printf("FAIL: the row-wise products cannot take the %s path\n", lrt::cpu::simd_name(rowwise));
    return 1;
  }
  std::printf("packed products compiled for %s; row-wise float products on %s (%s)\n", lrt::cpu::packed_isa,
              rowwise == lrt::cpu::SimdLevel::none ? "the plain loop" : lrt::cpu::simd_name(rowwise),
              lrt::cpu::detail::rowwise_fused() ? "fused" : "not fused");
  if (argc > 1 && std::strcmp(argv[1], lrt::cpu::packed_isa) != 0) {  // the path the build was meant to take
    std::printf("FAIL: expected the %s path\n", argv[1]);
    return 1;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int bad = 0;
  const std::array<std::array<index_t, 3>, 5> shapes{
      {{13, 70, 16}, {24, 64, 64}, {5, 9, 4}, {17, 200, 7}, {40, 512, 64}}};
  for (const auto& [rows, cols, group] : shapes) {
    std::vector<float> w(static_cast<std::size_t>(rows * cols)), x(static_cast<std::size_t>(cols)), back(w.size()),
        y(static_cast<std::size_t>(rows));
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> s(static_cast<std::size_t>(rows * lrt::quant_groups(cols, group)));
    lrt::quantize_int8(w, rows, cols, group, q, s);
    lrt::dequantize_int8(q, s, rows, cols, group, back);
    const auto worst = [&](const std::vector<float>& vals) {
      double m = 0;
      for (index_t o = 0; o < rows; ++o) {
        double r = 0;
        for (index_t i = 0; i < cols; ++i)
          r += double(vals[static_cast<std::size_t>(o * cols + i)]) * x[static_cast<std::size_t>(i)];
        m = std::max(m, std::abs(r - y[static_cast<std::size_t>(o)]));
      }
      return m;
    };
    lrt::cpu::matvec_int8<float>(x.data(), q.data(), s.data(), rows, cols, group, y.data());
    const double e8 = worst(back);
    std::vector<std::uint16_t> h(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) h[i] = lrt::st::f32_to_bf16(w[i]), back[i] = lrt::st::bf16_to_f32(h[i]);
    lrt::cpu::matvec_bf16<float>(x.data(), h.data(), rows, cols, y.data());
    const double e16 = worst(back);
    const bool ok = e8 < 1e-5 * double(cols) && e16 < 1e-5 * double(cols);
    std::printf("%s (%lld, %lld) groups of %lld: int8 %.2e, bf16 %.2e\n", ok ? "ok  " : "FAIL",
                static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(group), e8, e16);
    bad += !ok;
  }
  // Several rows at once: each row's bits are its own product's, whatever the rows beside it.
  for (const auto& [R, N, K] : std::array<std::array<index_t, 3>, 6>{
           {{1, 37, 70}, {3, 13, 64}, {4, 24, 256}, {5, 9, 17}, {16, 40, 512}, {17, 300, 33}}}) {
    std::vector<float> x(static_cast<std::size_t>(R * K)), w(static_cast<std::size_t>(N * K)),
        y(static_cast<std::size_t>(R * N)), one(static_cast<std::size_t>(N));
    for (auto& v : w) v = u(rng);
    for (auto& v : x) v = u(rng);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> sc(static_cast<std::size_t>(N * lrt::quant_groups(K, 16)));
    lrt::quantize_int8(w, N, K, 16, q, sc);
    std::vector<std::uint16_t> h(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) h[i] = lrt::st::f32_to_bf16(w[i]);
    const auto rows_alone = [&](auto&& product_of, auto&& one_row) {
      product_of(y.data());
      bool same = true;
      for (index_t r = 0; r < R; ++r) {
        one_row(x.data() + r * K, one.data());
#if FLT_EVAL_METHOD == 0
        same = same && std::memcmp(one.data(), y.data() + r * N, one.size() * sizeof(float)) == 0;
#else  // x87: see the order check below
        for (index_t n = 0; n < N; ++n)
          same = same && std::abs(double(one[static_cast<std::size_t>(n)]) -
                                  double(y[static_cast<std::size_t>(r * N + n)])) <= 1e-6 * double(K);
#endif
      }
      return same;
    };
    const bool i8 = rows_alone(
        [&](float* out) { lrt::cpu::matmul_int8_rows<float>(x.data(), R, K, q.data(), sc.data(), N, K, 16, out, N); },
        [&](const float* xr, float* out) { lrt::cpu::matvec_int8<float>(xr, q.data(), sc.data(), N, K, 16, out); });
    const bool b16 =
        rows_alone([&](float* out) { lrt::cpu::matmul_bf16_rows<float>(x.data(), R, K, h.data(), N, K, out, N); },
                   [&](const float* xr, float* out) { lrt::cpu::matvec_bf16<float>(xr, h.data(), N, K, out); });
    const bool f32 = rows_alone(
        [&](float* out) {
          lrt::cpu::detail::gemv_rows<float>(R, 0, N, K, 1.0f, x.data(), K, w.data(), K, 0.0f, out, N);
        },
        [&](const float* xr, float* out) {
          for (index_t n = 0; n < N; ++n) out[n] = lrt::cpu::detail::dot_lanes<float>(K, xr, w.data() + n * K);
        });
    // The packed sums of a block of weight rows, taken several at once, against one weight row at a
    // time (each output's lanes summed alone, Lanes::sum).
    bool blocks = true;
    for (index_t r = 0; r < R; ++r) {
      const float* xr = x.data() + r * K;
      lrt::cpu::matvec_int8<float>(xr, q.data(), sc.data(), N, K, 16, one.data());
      const index_t ng = lrt::quant_groups(K, 16);
      for (index_t n = 0; n < N; ++n) {
        float alone = 0;
        lrt::cpu::packed_detail::rows_int8<1, 1>(&xr, q.data() + n * K, sc.data() + n * ng, K, 16, ng, nullptr, &alone,
                                                 1);
        blocks = blocks && same_float(alone, one[static_cast<std::size_t>(n)], K);
      }
      lrt::cpu::matvec_bf16<float>(xr, h.data(), N, K, one.data());
      for (index_t n = 0; n < N; ++n) {
        float alone = 0;
        lrt::cpu::packed_detail::rows_bf16<1, 1>(&xr, h.data() + n * K, K, nullptr, &alone, 1);
        blocks = blocks && same_float(alone, one[static_cast<std::size_t>(n)], K);
      }
    }
    bool order = true;  // dot_lanes' order written out in scalars
    const bool fused = lrt::cpu::detail::rowwise_fused();
    const auto madd = [fused](float acc, float a, float b) {
      return fused ? lrt::cpu::detail::lane_madd<true>(acc, a, b) : lrt::cpu::detail::lane_madd<false>(acc, a, b);
    };
    for (index_t r = 0; r < R; ++r)
      for (index_t n = 0; n < N; ++n) {
        const float *xr = x.data() + r * K, *wn = w.data() + n * K;
        float lane[16] = {};
        index_t k = 0;
        for (; k + 16 <= K; k += 16)
          for (int l = 0; l < 16; ++l) lane[l] = madd(lane[l], xr[k + l], wn[k + l]);
        for (int hh = 8; hh > 0; hh /= 2)
          for (int l = 0; l < hh; ++l) lane[l] += lane[l + hh];
        float want = lane[0];
        for (; k < K; ++k) want = madd(want, xr[k], wn[k]);
        const float got = y[static_cast<std::size_t>(r * N + n)];
#if FLT_EVAL_METHOD == 0
        order = order && std::memcmp(&want, &got, sizeof want) == 0;
#else  // x87 (the plain build): intermediates in extended precision, rounded where the compiler spills
        order = order && std::abs(double(want) - double(got)) <= 1e-6 * double(K);
#endif
      }
    // y holds the float rows' product (the last rows_alone): compare it with the scalar order.
    const bool ok = i8 && b16 && f32 && order && blocks;
    std::printf(
        "%s %lld rows x (%lld, %lld): each row alone: int8 %s, bf16 %s, float %s; float in dot_lanes' order %s; packed "
        "sums of a block as one by one %s\n",
        ok ? "ok  " : "FAIL", static_cast<long long>(R), static_cast<long long>(N), static_cast<long long>(K),
        i8 ? "same" : "DIFFER", b16 ? "same" : "DIFFER", f32 ? "same" : "DIFFER", order ? "yes" : "NO",
        blocks ? "same" : "DIFFER");
    bad += !ok;
  }
  return bad ? 1 : 0;
}
