// tests/emu/fake/cublas_v2.h: the cuBLAS calls of lrt's CUDA backend (backend/cuda/gemm.cuh) for
// the CPU emulator of tests/emu (see cuda_runtime.h here). GEMMs are plain loops: column-major,
// one running sum per element of C in k order, then alpha sum + beta C (C not read when beta is
// 0, as in cuBLAS). Arguments are checked as cuBLAS does (CUBLAS_STATUS_INVALID_VALUE for bad
// sizes, leading dimensions or operations; CUBLAS_STATUS_NOT_INITIALIZED without a handle), and
// the matrices must lie in device memory (CUBLAS_STATUS_EXECUTION_FAILED otherwise: the GPU
// would fault). cublasGemmEx / cublasGemmStridedBatchedEx take float matrices with the compute
// types 32F (exact as Sgemm), 32F_FAST_16BF (every element of A and B rounded to bfloat16, to
// nearest even, before the products) and 32F_FAST_TF32 (rounded to TF32 likewise); other types
// give CUBLAS_STATUS_NOT_SUPPORTED, except bfloat16 A and B with compute type 32F (outside graph
// captures), which are widened to float and multiplied exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda_runtime.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasPointerMode_t { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };

// library_types.h / cublas_api.h values.
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
};
typedef struct cublasContext* cublasHandle_t;

inline const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown error";
}

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!lrt_cuda_emu::detail::valid_stream(s)) return CUBLAS_STATUS_INVALID_VALUE;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t* s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  *s = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}
/// cuBLAS's user workspace (needed so that calls captured into graphs allocate nothing).
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void* ws, std::size_t bytes) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !lrt_cuda_emu::detail::region_is(ws, bytes, true)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetPointerMode(cublasHandle_t h, cublasPointerMode_t m) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m != CUBLAS_POINTER_MODE_HOST && m != CUBLAS_POINTER_MODE_DEVICE) return CUBLAS_STATUS_INVALID_VALUE;
  h->mode = m;
  return CUBLAS_STATUS_SUCCESS;
}

namespace lrt_cuda_emu {

/// GEMM calls made (batched ones count once).
inline std::uint64_t gemm_calls = 0;
/// Of those, the calls that rounded their inputs (cublasGemmEx with a FAST_16BF / FAST_TF32 type).
inline std::uint64_t gemm_rounded_calls = 0;

namespace detail {

/// How an input element is rounded before the products (FAST_16BF, FAST_TF32 compute types).
enum class InputRounding { none, bf16, tf32 };

/// x rounded to nearest (ties to even) keeping the top `keep` bits of its float encoding.
inline float round_float_bits(float x, int keep) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN unchanged
  const int drop = 32 - keep;
  const std::uint32_t half = (std::uint32_t{1} << (drop - 1)) - 1, lsb = (u >> drop) & 1u;
  u = (u + half + lsb) & ~((std::uint32_t{1} << drop) - 1);
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}
template <class T>
T round_input(T x, InputRounding r) {
  if constexpr (std::is_same_v<T, float>) {
    if (r == InputRounding::bf16) return round_float_bits(x, 16);  // 8 exponent + 7 mantissa bits
    if (r == InputRounding::tf32) return round_float_bits(x, 19);  // 8 exponent + 10 mantissa bits
  }
  return x;
}

/// Bytes spanned by a column-major r x c matrix with leading dimension ld (0 if empty).
inline std::size_t matrix_span(long long r, long long c, long long ld, std::size_t elem) {
  if (r <= 0 || c <= 0) return 0;
  return static_cast<std::size_t>((c - 1) * ld + r) * elem;
}

template <class T>
cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const T* alpha,
                    const T* A, int lda, long long sa, const T* B, int ldb, long long sb, const T* beta, T* C, int ldc,
                    long long sc, int batch, InputRounding rounding = InputRounding::none) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto op_ok = [](cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T || o == CUBLAS_OP_C; };
  const int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;  // A as stored
  const int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
  auto at_least_1 = [](int v) { return v > 1 ? v : 1; };
  if (!op_ok(ta) || !op_ok(tb) || m < 0 || n < 0 || k < 0 || batch < 0 || lda < at_least_1(ar) ||
      ldb < at_least_1(br) || ldc < at_least_1(m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (h->mode != CUBLAS_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  ++gemm_calls;
  if (rounding != InputRounding::none) ++gemm_rounded_calls;
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  const T al = *alpha, be = *beta;  // host pointer mode: read when the call is made
  auto run = [=](bool& ok) {
    for (int b = 0; b < batch; ++b) {
      const T* Ab = A + b * sa;
      const T* Bb = B + b * sb;
      T* Cb = C + b * sc;
      const bool use_ab = k > 0 && al != T(0);
      if ((use_ab && (!region_is(Ab, matrix_span(ar, ac, lda, sizeof(T)), true) ||
                      !region_is(Bb, matrix_span(br, bc, ldb, sizeof(T)), true))) ||
          !region_is(Cb, matrix_span(m, n, ldc, sizeof(T)), true)) {
        ok = false;
        return;
      }
      // The operands packed with contiguous k, rounded once per element (not once per product):
      // the sums keep their order (l = 0..k-1, one rounding per step), so C is as before.
      std::vector<T> ap, bp;
      if (use_ab) {
        ap.resize(static_cast<std::size_t>(m) * k);
        bp.resize(static_cast<std::size_t>(n) * k);
        for (int i = 0; i < m; ++i)
          for (int l = 0; l < k; ++l)
            ap[static_cast<std::size_t>(i) * k + l] = round_input(
                ta == CUBLAS_OP_N ? Ab[i + static_cast<long long>(l) * lda] : Ab[l + static_cast<long long>(i) * lda],
                rounding);
        for (int j = 0; j < n; ++j)
          for (int l = 0; l < k; ++l)
            bp[static_cast<std::size_t>(j) * k + l] = round_input(
                tb == CUBLAS_OP_N ? Bb[l + static_cast<long long>(j) * ldb] : Bb[j + static_cast<long long>(l) * ldb],
                rounding);
      }
      auto store = [&](int i, int j, T acc) {
        T& c = Cb[i + static_cast<long long>(j) * ldc];
        c = be == T(0) ? al * acc : al * acc + be * c;
      };
      for (int j = 0; j < n; ++j) {
        const T* x = bp.data() + static_cast<std::size_t>(j) * k;
        int i = 0;
        if (use_ab)  // four sums side by side (each in its own order): the adds' latency overlaps
          for (; i + 4 <= m; i += 4) {
            const T* a = ap.data() + static_cast<std::size_t>(i) * k;
            T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
            for (int l = 0; l < k; ++l) {
              s0 += a[l] * x[l];
              s1 += a[k + l] * x[l];
              s2 += a[2 * k + l] * x[l];
              s3 += a[3 * k + l] * x[l];
            }
            store(i, j, s0), store(i + 1, j, s1), store(i + 2, j, s2), store(i + 3, j, s3);
          }
        for (; i < m; ++i) {
          T acc = T(0);
          if (use_ab) {
            const T* a = ap.data() + static_cast<std::size_t>(i) * k;
            for (int l = 0; l < k; ++l) acc += a[l] * x[l];
          }
          store(i, j, acc);
        }
      }
    }
  };
  if (h->stream && h->stream->capture) {  // recorded into the graph: checked again at each replay
    h->stream->capture->push_back([run] {
      bool ok = true;
      run(ok);
      if (!ok) fatal("a GEMM replayed from a graph uses memory that is no longer allocated");
    });
    ++stats.captured;
    return CUBLAS_STATUS_SUCCESS;
  }
  bool ok = true;
  run(ok);
  if (!ok) return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}

/// cublasGemmEx's checks for the types the emulator supports; sets the input rounding.
inline cublasStatus_t gemm_ex_types(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t comp,
                                    cublasGemmAlgo_t algo, InputRounding& r) {
  if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F || algo != CUBLAS_GEMM_DEFAULT)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (comp) {
    case CUBLAS_COMPUTE_32F:
      r = InputRounding::none;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_32F_FAST_16BF:
      r = InputRounding::bf16;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      r = InputRounding::tf32;
      return CUBLAS_STATUS_SUCCESS;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

}  // namespace detail
}  // namespace lrt_cuda_emu

inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  return lrt_cuda_emu::detail::gemm(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
inline cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const double* alpha, const double* A, int lda, const double* B, int ldb,
                                  const double* beta, double* C, int ldc) {
  return lrt_cuda_emu::detail::gemm(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float* alpha, const float* A, int lda, long long sa,
                                                const float* B, int ldb, long long sb, const float* beta, float* C,
                                                int ldc, long long sc, int batch) {
  return lrt_cuda_emu::detail::gemm(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
inline cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const double* alpha, const double* A, int lda,
                                                long long sa, const double* B, int ldb, long long sb,
                                                const double* beta, double* C, int ldc, long long sc, int batch) {
  return lrt_cuda_emu::detail::gemm(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

namespace lrt_cuda_emu::detail {
/// A bfloat16 matrix batch (column-major, leading dimension ld, batch stride s) widened to a
/// float copy in emulated device memory with the same layout; nullptr if the source is not wholly
/// device memory or the copy cannot be allocated.
inline float* widen_bf16(const void* p, int rows, int cols, int ld, long long s, int batch) {
  const std::size_t one = matrix_span(rows, cols, ld, 1);
  if (one == 0 || batch <= 0) return nullptr;
  const std::size_t n = static_cast<std::size_t>((batch - 1) * s) + one;
  if (!region_is(p, n * 2, true)) return nullptr;
  void* out = nullptr;
  if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return nullptr;
  const auto* src = static_cast<const std::uint16_t*>(p);
  auto* dst = static_cast<float*>(out);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u = std::uint32_t{src[i]} << 16;
    std::memcpy(&dst[i], &u, 4);
  }
  return dst;
}
}  // namespace lrt_cuda_emu::detail

inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void* alpha, const void* A, cudaDataType at,
                                                 int lda, long long sa, const void* B, cudaDataType bt, int ldb,
                                                 long long sb, const void* beta, void* C, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t comp,
                                                 cublasGemmAlgo_t algo) {
  if (at == CUDA_R_16BF && bt == CUDA_R_16BF && ct == CUDA_R_32F && comp == CUBLAS_COMPUTE_32F &&
      algo == CUBLAS_GEMM_DEFAULT) {  // bfloat16 storage (the benchmark's R_ref): widened, then 32F
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (h->stream && h->stream->capture) return CUBLAS_STATUS_NOT_SUPPORTED;  // not emulated
    if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
      return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, beta,
                                        C, ct, ldc, sc, batch, comp, algo);
    float* a =
        lrt_cuda_emu::detail::widen_bf16(A, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m, lda, sa, batch);
    float* b =
        lrt_cuda_emu::detail::widen_bf16(B, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k, ldb, sb, batch);
    cublasStatus_t st = CUBLAS_STATUS_EXECUTION_FAILED;
    if (a && b)
      st = cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, CUDA_R_32F, lda, sa, b, CUDA_R_32F, ldb, sb, beta,
                                      C, ct, ldc, sc, batch, comp, algo);
    if (a) (void)cudaFree(a);
    if (b) (void)cudaFree(b);
    return st;
  }
  lrt_cuda_emu::detail::InputRounding r{};
  if (const cublasStatus_t s = lrt_cuda_emu::detail::gemm_ex_types(at, bt, ct, comp, algo, r);
      s != CUBLAS_STATUS_SUCCESS)
    return s;
  return lrt_cuda_emu::detail::gemm(h, ta, tb, m, n, k, static_cast<const float*>(alpha), static_cast<const float*>(A),
                                    lda, sa, static_cast<const float*>(B), ldb, sb, static_cast<const float*>(beta),
                                    static_cast<float*>(C), ldc, sc, batch, r);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                   const void* alpha, const void* A, cudaDataType at, int lda, const void* B,
                                   cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                                   cublasComputeType_t comp, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                    comp, algo);
}
