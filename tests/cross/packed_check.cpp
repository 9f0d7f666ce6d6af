// The packed products (backend/cpu/packed_matvec.hpp) on the build's instruction set (NEON when
// cross-built for aarch64; tests/CMakeLists.txt builds it for each x86-64 path) against double
// products of the values the packing stands for: row counts that leave a partial block of eight,
// columns that leave a tail, groups that end short. Prints one line per shape; exits 1 on a
// difference larger than float rounding or when the path is not argv[1] (if given), 77 (skipped)
// when the CPU lacks the instruction set.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <lrt/backend/cpu/packed_matvec.hpp>
#include <lrt/io/quantize.hpp>

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
  std::printf("packed products compiled for %s\n", lrt::cpu::packed_isa);
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
  return bad ? 1 : 0;
}
