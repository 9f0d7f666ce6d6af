// lrt/backend/cpu/bf16_gemm.hpp: a GEMM with bf16 inputs and fp32 accumulation on the CPU:
// C = alpha bf16(op(A)) bf16(op(B)) + beta C, the fp32 operands rounded to bf16 (to nearest, ties
// to even) as they are packed, the products summed in fp32. Paths, chosen at run time from what
// the CPU offers (cpu_bf16_path):
//   avx512_bf16  vdpbf16ps (AVX512-BF16): per fp32 lane, a pair of bf16 products added to the
//                accumulator (two rounded fused multiply-adds, the odd element of the pair first,
//                inputs and results with denormals flushed to zero);
//   none         no bf16 instructions: the caller uses fp32 instead, or refuses (gemm_bf16 throws
//                nothing; bf16_gemm_supported says whether it may be called).
// AMX tiles are not implemented: no machine this was written on had them.
//
// Every element of C is the same sequence of operations wherever it lies (as in sgemm.hpp): per
// block of kc_pairs pairs of k, a chain of pair steps from zero, then C = alpha * sum + beta * C
// (beta = 1 after the first block). gemm_bf16_reference performs exactly that sequence on scalars,
// so the vector path is tested against it bit for bit. Depends on core/config.hpp and the other
// headers of backend/cpu/ it includes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

#include "sgemm.hpp"
#include "simd_level.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu {

/// The float's nearest bf16 (ties to even), as its upper 16 bits; a NaN stays a (quiet) NaN.
inline std::uint16_t to_bf16(float x) noexcept {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float from_bf16(std::uint16_t h) noexcept {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float x = 0;
  std::memcpy(&x, &u, 4);
  return x;
}

/// The bf16 GEMM paths, best first.
enum class Bf16Path : int { none = 0, avx512_bf16 = 1 };

inline const char* bf16_path_name(Bf16Path p) noexcept { return p == Bf16Path::avx512_bf16 ? "avx512_bf16" : "none"; }

/// What the CPU has for bf16 products (cpuid, and the OS's saved AVX-512 state, through the
/// compiler's __builtin_cpu_supports), before any mask.
inline Bf16Path cpu_bf16_hardware() noexcept {
#if LRT_X86_KERNELS
  static const Bf16Path p = [] {
    __builtin_cpu_init();
    return cpu_simd_level() == SimdLevel::avx512 && __builtin_cpu_supports("avx512bf16") ? Bf16Path::avx512_bf16
                                                                                         : Bf16Path::none;
  }();
  return p;
#else
  return Bf16Path::none;
#endif
}

/// The path a hardware path leaves once the features named in `mask` are hidden: a comma-separated
/// list of "avx512_bf16" (and "amx_bf16", which no path needs yet), as LRT_CPU_MASK spells them.
inline Bf16Path bf16_path_masked(Bf16Path hardware, std::string_view mask) noexcept {
  for (std::size_t at = 0; at <= mask.size();) {
    const std::size_t comma = std::min(mask.find(',', at), mask.size());
    if (mask.substr(at, comma - at) == "avx512_bf16") hardware = Bf16Path::none;
    at = comma + 1;
  }
  return hardware;
}

/// The bf16 path this process uses: the hardware's, less the features LRT_CPU_MASK hides (read
/// once), so that a machine with a path also tests what runs on one without.
inline Bf16Path cpu_bf16_path() noexcept {
  static const Bf16Path p = [] {
    const char* mask = std::getenv("LRT_CPU_MASK");
    return bf16_path_masked(cpu_bf16_hardware(), mask ? mask : "");
  }();
  return p;
}

/// Why bf16 products cannot run here, for an error message ("" when they can).
inline const char* bf16_missing() noexcept {
  if (cpu_bf16_path() != Bf16Path::none) return "";
  if (cpu_bf16_hardware() != Bf16Path::none) return "AVX512-BF16 is masked by LRT_CPU_MASK";
  return "this CPU has no AVX512-BF16 (vdpbf16ps) and no AMX";
}

namespace detail::bf16_kernels {

/// Blocking: kc_pairs pairs of k per packed panel, mc_max rows of op(A) per packed block, nc_max
/// columns of op(B) per panel; tiles of 8 rows x 32 columns (16 accumulators).
inline constexpr index_t kc_pairs = 128, mc_max = 96, nc_max = 2048;
inline constexpr int mr = 8, nr = 32;

/// Two bf16 as one 32-bit lane: the even k in the low half, the odd k in the high half.
inline std::uint32_t pair(float even, float odd) noexcept {
  return std::uint32_t(to_bf16(even)) | (std::uint32_t(to_bf16(odd)) << 16);
}

/// The calling thread's packing buffers (32-bit lanes), 64-byte aligned, grown on demand and kept.
struct Buffers {
  std::uint32_t* a = nullptr;
  std::uint32_t* b = nullptr;
  std::size_t na = 0, nb = 0;
  static std::uint32_t* grow(std::uint32_t*& p, std::size_t& have, std::size_t want) {
    if (want <= have) return p;
    ::operator delete[](p, std::align_val_t(64));
    p = static_cast<std::uint32_t*>(::operator new[](want * sizeof(std::uint32_t), std::align_val_t(64)));
    have = want;
    return p;
  }
  ~Buffers() {
    ::operator delete[](a, std::align_val_t(64));
    ::operator delete[](b, std::align_val_t(64));
  }
};
inline Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

/// op(X)[i][k], or 0 past K (an odd K's last pair).
inline float at(const SgemmOperand& x, index_t i, index_t k, index_t K) noexcept {
  if (k >= K) return 0.0f;
  return x.trans ? x.p[k * x.ld + i] : x.p[i * x.ld + k];
}

#if LRT_X86_KERNELS
#define LRT_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")))

/// to_bf16 of 16 floats at once, in the upper half of each 32-bit lane (the lower half is not
/// cleared): round to nearest even; a NaN keeps its bits, made quiet.
LRT_TARGET_AVX512_BF16 LRT_ALWAYS_INLINE __m512i round_bf16(__m512 x) noexcept {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(__mmask16(0xffff), u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
}

/// n (<= 16) floats from p, zero past n.
LRT_TARGET_AVX512_BF16 LRT_ALWAYS_INLINE __m512 load_n(const float* p, index_t n) noexcept {
  return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
}

/// Pairs of two rows, element by element: lane l = (bf16(odd[l]) << 16) | bf16(even[l]), for n
/// (<= 16) lanes from even and odd (odd may be null: zeros, an odd K's last pair); stored to dst.
LRT_TARGET_AVX512_BF16 LRT_ALWAYS_INLINE void pair_rows(const float* even, const float* odd, index_t n,
                                                        std::uint32_t* dst) noexcept {
  const __m512i e = round_bf16(load_n(even, n));
  const __m512i o = odd ? round_bf16(load_n(odd, n)) : _mm512_setzero_si512();
  const __m512i v = _mm512_or_si512(_mm512_and_si512(o, _mm512_set1_epi32(static_cast<int>(0xffff0000u))),
                                    _mm512_maskz_srli_epi32(__mmask16(0xffff), e, 16));
  _mm512_mask_storeu_epi32(dst, n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u), v);
}

/// Pairs of one contiguous run: the n (<= 16) floats at p (zero past n) as n / 2 rounded up pairs
/// of neighbours, pair q = (bf16(p[2q + 1]) << 16) | bf16(p[2q]), written to dst[q * stride].
LRT_TARGET_AVX512_BF16 LRT_ALWAYS_INLINE void pair_run(const float* p, index_t n, std::uint32_t* dst,
                                                       index_t stride) noexcept {
  alignas(32) std::uint32_t q[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(q),
                     _mm512_maskz_cvtepi32_epi16(
                         __mmask16(0xffff), _mm512_maskz_srli_epi32(__mmask16(0xffff), round_bf16(load_n(p, n)), 16)));
  for (index_t i = 0; i < (n + 1) / 2; ++i) dst[i * stride] = q[i];
}

/// Rows [i0, i0 + mc) of op(A) and pairs [p0, p0 + kp) of k, in slivers of mr rows: the sliver s
/// holds at [s * kp * mr + p * mr + r] the pair of op(A)[i0 + s * mr + r][k0 + 2p, k0 + 2p + 1]
/// (k0 = 2 p0; zero past K), zero past row mc.
LRT_TARGET_AVX512_BF16 inline void pack_a(const SgemmOperand& a, index_t K, index_t i0, index_t mc, index_t p0,
                                          index_t kp, std::uint32_t* dst) {
  const index_t k0 = 2 * p0, kend = std::min(K, 2 * (p0 + kp));
  for (index_t s = 0; s * mr < mc; ++s, dst += kp * mr) {
    const index_t rows = std::min<index_t>(mr, mc - s * mr), i = i0 + s * mr;
    std::fill(dst, dst + kp * mr, 0u);
    if (a.trans) {  // op(A)[i][k] = a.p[k * ld + i]: the rows of a pair are rows k, k + 1 of a.p
      for (index_t p = 0; p < kp; ++p) {
        const index_t k = k0 + 2 * p;
        pair_rows(a.p + k * a.ld + i, k + 1 < K ? a.p + (k + 1) * a.ld + i : nullptr, rows, dst + p * mr);
      }
    } else {  // a row of op(A) is contiguous: its pairs are neighbours
      for (index_t r = 0; r < rows; ++r)
        for (index_t k = k0; k < kend; k += 16)
          pair_run(a.p + (i + r) * a.ld + k, std::min<index_t>(16, kend - k), dst + ((k - k0) / 2) * mr + r, mr);
    }
  }
}

/// Pairs [p0, p0 + kp) of k and columns [j0, j0 + nc) of op(B), in slivers of nr columns: the
/// sliver s holds at [s * kp * nr + p * nr + c] the pair of op(B)[k0 + 2p, k0 + 2p + 1][j0 + s * nr + c]
/// (zero past K), zero past column nc. (op(B)[k][j] is b.p[j * ld + k] when trans, else b.p[k * ld + j].)
LRT_TARGET_AVX512_BF16 inline void pack_b(const SgemmOperand& b, index_t K, index_t p0, index_t kp, index_t j0,
                                          index_t nc, std::uint32_t* dst) {
  const index_t k0 = 2 * p0, kend = std::min(K, 2 * (p0 + kp));
  for (index_t s = 0; s * nr < nc; ++s, dst += kp * nr) {
    const index_t cols = std::min<index_t>(nr, nc - s * nr), j = j0 + s * nr;
    std::fill(dst, dst + kp * nr, 0u);
    if (b.trans) {  // a column of op(B) is contiguous: its pairs are neighbours
      for (index_t c = 0; c < cols; ++c)
        for (index_t k = k0; k < kend; k += 16)
          pair_run(b.p + (j + c) * b.ld + k, std::min<index_t>(16, kend - k), dst + ((k - k0) / 2) * nr + c, nr);
    } else {  // the rows of a pair are rows k, k + 1 of b.p
      for (index_t p = 0; p < kp; ++p) {
        const index_t k = k0 + 2 * p;
        for (index_t c = 0; c < cols; c += 16)
          pair_rows(b.p + k * b.ld + j + c, k + 1 < K ? b.p + (k + 1) * b.ld + j + c : nullptr,
                    std::min<index_t>(16, cols - c), dst + p * nr + c);
      }
    }
  }
}

/// A tile of mr rows x 32 columns over kp pairs: acc += pair(A) . pair(B) per lane (vdpbf16ps),
/// then C = alpha acc (+ beta C).
template <std::size_t... R>
LRT_TARGET_AVX512_BF16 inline void tile(index_t kp, const std::uint32_t* __restrict a,
                                        const std::uint32_t* __restrict b, float* c, index_t ldc, float alpha,
                                        float beta, std::index_sequence<R...>) noexcept {
  __m512 acc0[sizeof...(R)], acc1[sizeof...(R)];
  ((acc0[R] = _mm512_setzero_ps(), acc1[R] = _mm512_setzero_ps()), ...);
  for (index_t p = 0; p < kp; ++p, a += sizeof...(R), b += 32) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
    ((acc0[R] = _mm512_dpbf16_ps(acc0[R], (__m512bh)_mm512_set1_epi32(static_cast<int>(a[R])), b0),
      acc1[R] = _mm512_dpbf16_ps(acc1[R], (__m512bh)_mm512_set1_epi32(static_cast<int>(a[R])), b1)),
     ...);
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  (sgemm_kernels::store_row_avx512(c + index_t(R) * ldc, acc0[R], acc1[R], va, vb, beta), ...);
}
#undef LRT_TARGET_AVX512_BF16

inline void kernel_avx512_bf16(index_t kp, const std::uint32_t* a, const std::uint32_t* b, float* c, index_t ldc,
                               float alpha, float beta) noexcept {
  tile(kp, a, b, c, ldc, alpha, beta, std::make_index_sequence<mr>{});
}

/// The blocked product on the kernel (sgemm.hpp's scheme, in pairs of k): par(n, f) runs f over
/// disjoint ranges covering [0, n), perhaps in parallel.
template <class Kernel, class Par>
void run(index_t M, index_t N, index_t K, float alpha, const SgemmOperand& a, const SgemmOperand& b, float beta,
         float* C, index_t ldc, Kernel kernel, Par&& par) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // C = beta C (0 for beta = 0, whatever C held)
    for (index_t i = 0; i < M; ++i)
      for (index_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  constexpr index_t mc_block = (mc_max / mr) * mr;
  const index_t P = (K + 1) / 2;  // pairs of k
  Buffers& own = buffers();
  const index_t kp_top = std::min(P, kc_pairs), nc_top = std::min(N, nc_max);
  std::uint32_t* bp = Buffers::grow(own.b, own.nb, std::size_t(kp_top) * std::size_t((nc_top + nr - 1) / nr * nr));
  const index_t blocks = (M + mc_block - 1) / mc_block;
  for (index_t j0 = 0; j0 < N; j0 += nc_max) {
    const index_t nc = std::min(nc_max, N - j0), slivers = (nc + nr - 1) / nr;
    for (index_t p0 = 0; p0 < P; p0 += kc_pairs) {
      const index_t kp = std::min(kc_pairs, P - p0);
      const float beta_k = p0 == 0 ? beta : 1.0f;
      par(slivers, [&](index_t s0, index_t s1) {
        pack_b(b, K, p0, kp, j0 + s0 * nr, std::min(nc, s1 * nr) - s0 * nr, bp + s0 * kp * nr);
      });
      par(blocks, [&](index_t blk0, index_t blk1) {
        Buffers& mine = buffers();
        std::uint32_t* ap = Buffers::grow(mine.a, mine.na, std::size_t(kp_top) * std::size_t(mc_block));
        alignas(64) float edge[mr * nr];
        for (index_t blk = blk0; blk < blk1; ++blk) {
          const index_t i0 = blk * mc_block, mc = std::min(mc_block, M - i0);
          pack_a(a, K, i0, mc, p0, kp, ap);
          for (index_t jr = 0; jr < nc; jr += nr) {
            const index_t cols = std::min<index_t>(nr, nc - jr);
            const std::uint32_t* bs = bp + (jr / nr) * kp * nr;
            for (index_t ir = 0; ir < mc; ir += mr) {
              const index_t rows = std::min<index_t>(mr, mc - ir);
              const std::uint32_t* as = ap + (ir / mr) * kp * mr;
              float* c = C + (i0 + ir) * ldc + j0 + jr;
              if (rows == mr && cols == nr) {
                kernel(kp, as, bs, c, ldc, alpha, beta_k);
                continue;
              }
              // An edge tile: the full tile on a copy (the same operations for every element).
              for (index_t r = 0; r < mr; ++r)
                for (index_t q = 0; q < nr; ++q)
                  edge[r * nr + q] = (r < rows && q < cols && beta_k != 0.0f) ? c[r * ldc + q] : 0.0f;
              kernel(kp, as, bs, edge, nr, alpha, beta_k);
              for (index_t r = 0; r < rows; ++r)
                for (index_t q = 0; q < cols; ++q) c[r * ldc + q] = edge[r * nr + q];
            }
          }
        }
      });
    }
  }
}
#endif  // LRT_X86_KERNELS

/// A float with denormals flushed to (signed) zero, as vdpbf16ps treats its inputs and results.
inline float flush(float x) noexcept { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

}  // namespace detail::bf16_kernels

/// Whether gemm_bf16 may run here (cpu_bf16_path() is not none).
inline bool bf16_gemm_supported() noexcept { return cpu_bf16_path() != Bf16Path::none; }

/// C (M, N) = alpha bf16(op(A)) bf16(op(B)) + beta C in fp32, row-major with row stride ldc, on
/// the path cpu_bf16_path() (the caller checks bf16_gemm_supported(); with none it does nothing).
/// C is not read when beta = 0. par(n, f) may run f(begin, end) over parts of [0, n) on other
/// threads; the result is the same bits however it splits them.
template <class Par = detail::sgemm_kernels::SerialFor>
void gemm_bf16(index_t M, index_t N, index_t K, float alpha, const SgemmOperand& a, const SgemmOperand& b, float beta,
               float* C, index_t ldc, Par&& par = {}) {
#if LRT_X86_KERNELS
  if (cpu_bf16_path() == Bf16Path::avx512_bf16) {
    namespace k = detail::bf16_kernels;
    k::run(M, N, K, alpha, a, b, beta, C, ldc, k::kernel_avx512_bf16, par);
    return;
  }
#endif
  (void)par, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)b, (void)beta, (void)C, (void)ldc;
}

/// gemm_bf16's exact order of operations on scalars, on any CPU (slow: for tests): per element,
/// per block of kc_pairs pairs from zero, s = fma(a_odd, b_odd, s) then s = fma(a_even, b_even, s),
/// inputs and each result with denormals flushed to zero; then alpha * s, plus beta * C by one more
/// fused multiply-add (beta = 1 after the first block).
inline void gemm_bf16_reference(index_t M, index_t N, index_t K, float alpha, const SgemmOperand& a,
                                const SgemmOperand& b, float beta, float* C, index_t ldc) {
  namespace k = detail::bf16_kernels;
  const SgemmOperand bt{b.p, b.ld, !b.trans};
  const index_t P = (K + 1) / 2;
  if (K <= 0) {
    for (index_t i = 0; i < M; ++i)
      for (index_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  for (index_t i = 0; i < M; ++i)
    for (index_t j = 0; j < N; ++j) {
      float& c = C[i * ldc + j];
      for (index_t p0 = 0; p0 < P; p0 += k::kc_pairs) {
        float s = 0.0f;
        for (index_t p = p0; p < std::min(P, p0 + k::kc_pairs); ++p) {
          auto in = [](float x) { return k::flush(from_bf16(to_bf16(x))); };
          const float a0 = in(k::at(a, i, 2 * p, K)), a1 = in(k::at(a, i, 2 * p + 1, K));
          const float b0 = in(k::at(bt, j, 2 * p, K)), b1 = in(k::at(bt, j, 2 * p + 1, K));
          s = k::flush(std::fma(a1, b1, s));
          s = k::flush(std::fma(a0, b0, s));
        }
        const float beta_k = p0 == 0 ? beta : 1.0f;
        const float v = alpha * s;
        c = beta_k != 0.0f ? std::fma(beta_k, c, v) : v;
      }
    }
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
