// lrt/backend/cpu/packed_matvec.hpp: y = W x for one row x against a matrix W stored packed
// (io/quantize.hpp): int8 with per-group scales, or bf16. Decoding one row is bound by the bytes
// of W it streams, so these read W once, four rows at a time (four independent accumulators
// sharing each load of x), widening 8 values per step in registers (GCC/Clang vector extensions:
// SSE/AVX on x86-64, NEON on aarch64, whatever the build's -march allows).
//   int8:  y[o] = sum over groups g of scales[o, g] * (sum over i in g of q[o, i] x[i])
//   bf16:  y[o] = sum over i of float(w[o, i]) x[i]  (bf16 -> float is exact: the bits << 16)
// The sums run in float in an order of their own, so y differs from the product of x with the
// dequantized matrix (dequantize_int8) by rounding only. T = double runs a scalar loop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#include "../../core/config.hpp"
#include "avx512.hpp"

namespace lrt {
inline namespace v0 {
namespace cpu {

namespace packed_detail {

inline float bf16_value(std::uint16_t h) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
/// 8 lanes summed in pairs (a fixed order).
inline float lane_sum(const float* v) noexcept {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

/// Sums of `width` lanes (16 with AVX-512, else 8) for R rows: acc[r] += w(r, i..i+width) *
/// x(i..i+width), the lanes kept apart. One type per instruction set; w is int8 (widen8) or bf16
/// (widen8 of the bits).
#if defined(__AVX512F__)
struct Lanes {
  static constexpr index_t width = 16;
  __m512 v = _mm512_setzero_ps();
  void fma(__m512 w, __m512 x) noexcept { v = _mm512_fmadd_ps(w, x, v); }
  void fma_scaled(const Lanes& p, float s) noexcept { v = _mm512_fmadd_ps(p.v, _mm512_set1_ps(s), v); }
  float sum() const noexcept {
    float l[16];
    _mm512_storeu_ps(l, v);
    return lane_sum(l) + lane_sum(l + 8);
  }
};
using X8 = __m512;
inline X8 load8(const float* x) noexcept { return _mm512_loadu_ps(x); }
inline X8 widen8(const std::int8_t* q) noexcept {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
}
inline X8 widen8(const std::uint16_t* h) noexcept {
  const __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}
#elif defined(__AVX2__) && defined(__FMA__)
struct Lanes {
  static constexpr index_t width = 8;
  __m256 v = _mm256_setzero_ps();
  void fma(__m256 w, __m256 x) noexcept { v = _mm256_fmadd_ps(w, x, v); }
  void fma_scaled(const Lanes& p, float s) noexcept { v = _mm256_fmadd_ps(p.v, _mm256_set1_ps(s), v); }
  float sum() const noexcept {
    float l[8];
    _mm256_storeu_ps(l, v);
    return lane_sum(l);
  }
};
using X8 = __m256;
inline X8 load8(const float* x) noexcept { return _mm256_loadu_ps(x); }
inline X8 widen8(const std::int8_t* q) noexcept {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}
inline X8 widen8(const std::uint16_t* h) noexcept {
  const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}
#elif defined(__SSE2__)
struct X8 {
  __m128 lo, hi;
};
struct Lanes {
  static constexpr index_t width = 8;
  __m128 lo = _mm_setzero_ps(), hi = _mm_setzero_ps();
  void fma(X8 w, X8 x) noexcept {
    lo = _mm_add_ps(lo, _mm_mul_ps(w.lo, x.lo)), hi = _mm_add_ps(hi, _mm_mul_ps(w.hi, x.hi));
  }
  void fma_scaled(const Lanes& p, float s) noexcept {
    const __m128 sv = _mm_set1_ps(s);
    lo = _mm_add_ps(lo, _mm_mul_ps(p.lo, sv)), hi = _mm_add_ps(hi, _mm_mul_ps(p.hi, sv));
  }
  float sum() const noexcept {
    float l[8];
    _mm_storeu_ps(l, lo), _mm_storeu_ps(l + 4, hi);
    return lane_sum(l);
  }
};
inline X8 load8(const float* x) noexcept { return {_mm_loadu_ps(x), _mm_loadu_ps(x + 4)}; }
inline X8 widen8(const std::int8_t* q) noexcept {  // sign extension by unpacking with itself and shifting
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  const __m128i w = _mm_srai_epi16(_mm_unpacklo_epi8(b, b), 8);
  return {_mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpacklo_epi16(w, w), 16)),
          _mm_cvtepi32_ps(_mm_srai_epi32(_mm_unpackhi_epi16(w, w), 16))};
}
inline X8 widen8(const std::uint16_t* h) noexcept {  // bf16 bits into the high half of each lane
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h)), z = _mm_setzero_si128();
  return {_mm_castsi128_ps(_mm_unpacklo_epi16(z, b)), _mm_castsi128_ps(_mm_unpackhi_epi16(z, b))};
}
#elif defined(__ARM_NEON)
struct X8 {
  float32x4_t lo, hi;
};
struct Lanes {
  static constexpr index_t width = 8;
  float32x4_t lo = vdupq_n_f32(0), hi = vdupq_n_f32(0);
  void fma(X8 w, X8 x) noexcept { lo = vfmaq_f32(lo, w.lo, x.lo), hi = vfmaq_f32(hi, w.hi, x.hi); }
  void fma_scaled(const Lanes& p, float s) noexcept { lo = vfmaq_n_f32(lo, p.lo, s), hi = vfmaq_n_f32(hi, p.hi, s); }
  float sum() const noexcept {
    float l[8];
    vst1q_f32(l, lo), vst1q_f32(l + 4, hi);
    return lane_sum(l);
  }
};
inline X8 load8(const float* x) noexcept { return {vld1q_f32(x), vld1q_f32(x + 4)}; }
inline X8 widen8(const std::int8_t* q) noexcept {
  const int16x8_t w = vmovl_s8(vld1_s8(q));
  return {vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), vcvtq_f32_s32(vmovl_s16(vget_high_s16(w)))};
}
inline X8 widen8(const std::uint16_t* h) noexcept {
  const uint16x8_t b = vld1q_u16(h);
  return {vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(b), 16)),
          vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(b), 16))};
}
#else
struct X8 {
  float v[8];
};
struct Lanes {
  static constexpr index_t width = 8;
  float v[8] = {};
  void fma(const X8& w, const X8& x) noexcept {
    for (int k = 0; k < 8; ++k) v[k] += w.v[k] * x.v[k];
  }
  void fma_scaled(const Lanes& p, float s) noexcept {
    for (int k = 0; k < 8; ++k) v[k] += p.v[k] * s;
  }
  float sum() const noexcept { return lane_sum(v); }
};
inline X8 load8(const float* x) noexcept {
  X8 r;
  std::memcpy(r.v, x, sizeof r.v);
  return r;
}
inline X8 widen8(const std::int8_t* q) noexcept {
  X8 r;
  for (int k = 0; k < 8; ++k) r.v[k] = static_cast<float>(q[k]);
  return r;
}
inline X8 widen8(const std::uint16_t* h) noexcept {
  X8 r;
  for (int k = 0; k < 8; ++k) r.v[k] = bf16_value(h[k]);
  return r;
}
#endif

/// out[i] = v[i].sum() for n = 8 or 16 sums at once where the instruction set allows (the same
/// pairwise order per output: neighbours, then pairs of those, then halves, shuffled so that each
/// level packs several outputs' sums into one register), else one by one.
inline void lane_sums(const Lanes* v, int n, float* out) noexcept {
#if defined(__AVX512F__)
  if (n == 8 || n == 16) {
    const auto pair = [](__m512 a, __m512 b, int level) {
      switch (level) {
        case 0:  // neighbouring lanes (within 128 bits)
        case 1:  // neighbouring pairs
          return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
        default:  // neighbouring 128-bit quarters
          return _mm512_add_ps(avx512::shuffle_f32x4<_MM_SHUFFLE(2, 0, 2, 0)>(a, b),
                               avx512::shuffle_f32x4<_MM_SHUFFLE(3, 1, 3, 1)>(a, b));
      }
    };
    __m512 t[16];
    for (int i = 0; i < n; ++i) t[i] = v[i].v;
    int m = n;
    for (int level = 0; level < 4; ++level) {  // 16 -> 8 -> 4 -> 2 -> 1 registers (8: -> 1 after 3)
      const int h = std::max(1, m / 2);
      for (int i = 0; i < h; ++i) t[i] = pair(t[2 * i], 2 * i + 1 < m ? t[2 * i + 1] : t[2 * i], level);
      m = h;
    }
    // Lane i holds output i's sum (n = 8: lanes 0-7).
    float l[16];
    _mm512_storeu_ps(l, t[0]);
    for (int i = 0; i < n; ++i) out[i] = l[i];
    return;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if (n == 8) {
    const auto pair = [](__m256 a, __m256 b, int level) {
      if (level < 2)
        return _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
      return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    };
    __m256 t[8];
    for (int i = 0; i < 8; ++i) t[i] = v[i].v;
    for (int i = 0; i < 4; ++i) t[i] = pair(t[2 * i], t[2 * i + 1], 0);
    for (int i = 0; i < 2; ++i) t[i] = pair(t[2 * i], t[2 * i + 1], 1);
    _mm256_storeu_ps(out, pair(t[0], t[1], 2));
    return;
  }
#endif
  for (int i = 0; i < n; ++i) out[i] = v[i].sum();
}

}  // namespace packed_detail

/// The instruction set the packed products were compiled for: "avx512", "avx2", "sse2", "neon" or
/// "plain".
inline constexpr const char* packed_isa =
#if defined(__AVX512F__)
    "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
    "avx2";
#elif defined(__SSE2__)
    "sse2";
#elif defined(__ARM_NEON)
    "neon";
#else
    "plain";
#endif

namespace packed_detail {
/// Asks for the cache line at p ahead of its use (the next block of rows: the hardware prefetcher
/// alone leaves a one-row product well short of the memory bandwidth).
inline void prefetch(const void* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 3);
#else
  (void)p;
#endif
}

/// R rows of an int8 matrix (row stride cols, scales of stride ng) times NX rows of x: y[a * ldy +
/// r] = row r times x[a]. Each weight vector is widened once for the NX rows, and every output's
/// arithmetic is its own (so the same whatever NX and R). `next`: rows to prefetch (or null).
template <int NX, int R>
inline void rows_int8(const float* const* x, const std::int8_t* q, const float* sc, index_t cols, index_t group,
                      index_t ng, const std::int8_t* next, float* y, index_t ldy) noexcept {
  Lanes acc[NX][R];
  float tail[NX][R] = {};
  for (index_t g = 0; g < ng; ++g) {
    const index_t lo = g * group, hi = std::min(cols, lo + group);
    if (next)
      for (int r = 0; r < R; ++r) prefetch(next + r * cols + lo);
    Lanes part[NX][R];
    float pt[NX][R] = {};
    index_t i = lo;
    for (; i + Lanes::width <= hi; i += Lanes::width) {
      X8 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = widen8(q + r * cols + i);
      for (int a = 0; a < NX; ++a) {
        const X8 xv = load8(x[a] + i);
        for (int r = 0; r < R; ++r) part[a][r].fma(wv[r], xv);
      }
    }
    for (; i < hi; ++i)
      for (int a = 0; a < NX; ++a)
        for (int r = 0; r < R; ++r) pt[a][r] += static_cast<float>(q[r * cols + i]) * x[a][i];
    for (int r = 0; r < R; ++r) {
      const float s = sc[r * ng + g];
      for (int a = 0; a < NX; ++a) {
        acc[a][r].fma_scaled(part[a][r], s);
        tail[a][r] += pt[a][r] * s;
      }
    }
  }
  float total[NX * R];
  lane_sums(&acc[0][0], NX * R, total);
  for (int a = 0; a < NX; ++a)
    for (int r = 0; r < R; ++r) y[a * ldy + r] = total[a * R + r] + tail[a][r];
}

/// R rows of a bf16 matrix (row stride cols) times NX rows of x; as rows_int8.
template <int NX, int R>
inline void rows_bf16(const float* const* x, const std::uint16_t* w, index_t cols, const std::uint16_t* next, float* y,
                      index_t ldy) noexcept {
  Lanes acc[NX][R];
  float tail[NX][R] = {};
  index_t i = 0;
  for (; i + Lanes::width <= cols; i += Lanes::width) {
    if (next && i % 32 == 0)  // one cache line of 32 bf16 values per row
      for (int r = 0; r < R; ++r) prefetch(next + r * cols + i);
    X8 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = widen8(w + r * cols + i);
    for (int a = 0; a < NX; ++a) {
      const X8 xv = load8(x[a] + i);
      for (int r = 0; r < R; ++r) acc[a][r].fma(wv[r], xv);
    }
  }
  for (; i < cols; ++i)
    for (int a = 0; a < NX; ++a)
      for (int r = 0; r < R; ++r) tail[a][r] += bf16_value(w[r * cols + i]) * x[a][i];
  float total[NX * R];
  lane_sums(&acc[0][0], NX * R, total);
  for (int a = 0; a < NX; ++a)
    for (int r = 0; r < R; ++r) y[a * ldy + r] = total[a * R + r] + tail[a][r];
}

/// The packed product of R rows of x in blocks of 8 weight rows: NX rows of x at a time against 2
/// weight rows at a time (the rows of x left over: one at a time, against the 8), each block read
/// from memory once. rows_of<NX, RW>(xs, first weight row, next, y, ldy) runs one call.
#if defined(__AVX512F__)
inline constexpr int packed_block_x = 4;
#else
inline constexpr int packed_block_x = 2;
#endif
template <class RowsOf>
inline void packed_rows(const float* x, index_t R, index_t ldx, index_t rows, float* y, index_t ldy,
                        RowsOf&& rows_of) noexcept {
  constexpr index_t B = 8;  // weight rows per block: eight accumulators share each load of x
  constexpr int NX = packed_block_x, RW = 2;
  index_t o = 0;
  for (; o + B <= rows; o += B) {
    const bool more = o + 2 * B <= rows;
    index_t a = 0;
    for (; a + NX <= R; a += NX) {
      const float* xs[NX];
      for (int i = 0; i < NX; ++i) xs[i] = x + (a + i) * ldx;
      for (index_t r = 0; r < B; r += RW)
        rows_of.template operator()<NX, RW>(xs, o + r, a == 0 && more ? o + B + r : index_t{-1}, y + a * ldy + o + r,
                                            ldy);
    }
    for (; a < R; ++a) {
      const float* xa = x + a * ldx;
      rows_of.template operator()<1, B>(&xa, o, a == 0 && more ? o + B : index_t{-1}, y + a * ldy + o, ldy);
    }
  }
  for (; o < rows; ++o)
    for (index_t a = 0; a < R; ++a) {
      const float* xa = x + a * ldx;
      rows_of.template operator()<1, 1>(&xa, o, index_t{-1}, y + a * ldy + o, ldy);
    }
}
}  // namespace packed_detail

/// Y (R, rows) = X W^T for R rows of x (stride ldx) and an int8 matrix W (rows, cols): q row-major,
/// scales (rows, ceil(cols / group)); Y's rows of stride ldy. Each row of Y is matvec_int8 of its
/// row of X, the same arithmetic whatever R (a row decoded in a batch gives its bits alone); a
/// block of W's rows is read from memory once for every row of X, and widened once for several.
template <class T>
void matmul_int8_rows(const T* x, index_t R, index_t ldx, const std::int8_t* q, const float* scales, index_t rows,
                      index_t cols, index_t group, T* y, index_t ldy) noexcept {
  const index_t ng = (cols + group - 1) / group;
  if constexpr (std::is_same_v<T, float>) {
    packed_detail::packed_rows(
        x, R, ldx, rows, y, ldy,
        [&]<int NX, int RW>(const float* const* xs, index_t o, index_t next, float* yo, index_t ldo) {
          packed_detail::rows_int8<NX, RW>(xs, q + o * cols, scales + o * ng, cols, group, ng,
                                           next >= 0 ? q + next * cols : nullptr, yo, ldo);
        });
  } else {
    for (index_t r = 0; r < R; ++r)
      for (index_t o = 0; o < rows; ++o) {
        const T* xr = x + r * ldx;
        T acc = 0;
        for (index_t g = 0; g < ng; ++g) {
          T part = 0;
          for (index_t i = g * group; i < std::min(cols, (g + 1) * group); ++i)
            part += static_cast<T>(q[o * cols + i]) * xr[i];
          acc += static_cast<T>(scales[o * ng + g]) * part;
        }
        y[r * ldy + o] = acc;
      }
  }
}

/// y (rows) = W x for an int8 matrix W (rows, cols): q row-major, scales (rows, ceil(cols / group)).
template <class T>
void matvec_int8(const T* x, const std::int8_t* q, const float* scales, index_t rows, index_t cols, index_t group,
                 T* y) noexcept {
  matmul_int8_rows<T>(x, 1, cols, q, scales, rows, cols, group, y, rows);
}

/// Y (R, rows) = X W^T for R rows of x and a bf16 matrix W (rows, cols), row-major bits; each row
/// of Y is matvec_bf16 of its row of X (see matmul_int8_rows).
template <class T>
void matmul_bf16_rows(const T* x, index_t R, index_t ldx, const std::uint16_t* w, index_t rows, index_t cols, T* y,
                      index_t ldy) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    packed_detail::packed_rows(
        x, R, ldx, rows, y, ldy,
        [&]<int NX, int RW>(const float* const* xs, index_t o, index_t next, float* yo, index_t ldo) {
          packed_detail::rows_bf16<NX, RW>(xs, w + o * cols, cols, next >= 0 ? w + next * cols : nullptr, yo, ldo);
        });
  } else {
    for (index_t r = 0; r < R; ++r)
      for (index_t o = 0; o < rows; ++o) {
        T acc = 0;
        for (index_t i = 0; i < cols; ++i)
          acc += static_cast<T>(packed_detail::bf16_value(w[o * cols + i])) * x[r * ldx + i];
        y[r * ldy + o] = acc;
      }
  }
}

/// y (rows) = W x for a bf16 matrix W (rows, cols), row-major bits.
template <class T>
void matvec_bf16(const T* x, const std::uint16_t* w, index_t rows, index_t cols, T* y) noexcept {
  matmul_bf16_rows<T>(x, 1, cols, w, rows, cols, y, rows);
}

}  // namespace cpu
}  // namespace v0
}  // namespace lrt
