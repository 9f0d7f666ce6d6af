// lrt/backend/cpu/gemm.hpp: CPU GEMM, on one of three paths, chosen once per process at
// the first GEMM (gemm_choice()):
//  - lrt's own fp32 kernels (backend/cpu/sgemm.hpp), AVX-512 or AVX2 + FMA as the CPU has them,
//    in every build, the portable one included;
//  - OpenBLAS's cblas, when lrt is built with LRT_USE_OPENBLAS, unless OpenBLAS runs kernels for
//    an older instruction set than the CPU's (Debian 12's OpenBLAS 0.3.21 takes a Xeon with AMX
//    for a "Prescott" and runs SSE3 code at a third of the speed: openblas_get_corename());
//  - Eigen, at the instruction set the build compiles for (SSE2 in a portable build).
// Where more than one is fit, the first in that order (OpenBLAS, lrt, Eigen): the choice depends on
// the machine and the build only, never on a timing, so two processes on one machine (ranks, a
// server and lrt-generate, a run and its resume) compute the same bits. LRT_GEMM=lrt|openblas|eigen
// (environment) forces one; LRT_GEMM=measure times the fit ones (~20 ms) and takes the fastest;
// defining LRT_PREFER_OPENBLAS makes OpenBLAS the default even where it is set aside.
// A single row (M = 1, decoding one token) bypasses all three: gemv_row streams the weights once.
// Every library runs single-threaded: lrt's own pool splits the work (over batches, else over rows
// of C, in fixed blocks so that results do not depend on the thread count), so no BLAS or OpenMP
// pool ever runs beside it. double-precision products (tests and checks) run on OpenBLAS where it
// is the fp32 path, else on Eigen.
// set_cpu_matmul(CpuMatmul::bf16) sends every float GEMM of the process instead to lrt's bf16
// kernels (backend/cpu/bf16_gemm.hpp: the operands rounded to bf16, fp32 accumulation) where the
// CPU has them: --precision bf16 on the CPU. The fused attention kernel and the decoders' row-wise
// products (rowwise_product, gemv) are not GEMMs and stay fp32.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "../../core/error.hpp"
#include "../../tensor/linalg.hpp"
#include "device.hpp"
#include "bf16_gemm.hpp"
#include "rowwise.hpp"
#include "sgemm.hpp"

#if defined(LRT_USE_OPENBLAS) && LRT_USE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#define LRT_HAS_OPENBLAS 1
#else
#define LRT_HAS_OPENBLAS 0
#endif

namespace lrt {
inline namespace v0 {
namespace cpu {

/// Counters for profiling: while installed with set_gemm_profile, every single-threaded GEMM
/// call (each row block of a split GEMM, each gemv) adds its time and flops. For benchmarks;
/// costs two clock reads per call when installed, one atomic load when not.
struct GemmProfile {
  std::atomic<std::int64_t> ns{0}, flops{0}, calls{0};
};

namespace detail {
LRT_API inline std::atomic<GemmProfile*>& gemm_profile_slot() noexcept {
  static std::atomic<GemmProfile*> slot{nullptr};
  return slot;
}
}  // namespace detail

/// Installs (or, with nullptr, removes) the GEMM profile counters; returns the previous ones.
inline GemmProfile* set_gemm_profile(GemmProfile* p) noexcept { return detail::gemm_profile_slot().exchange(p); }

/// The arithmetic of this process's float GEMMs on the CPU: fp32, or bf16 inputs with fp32
/// accumulation (lrt's bf16 kernels, on the path cpu_bf16_path() names).
enum class CpuMatmul : int { fp32 = 0, bf16 = 1 };

namespace detail {
LRT_API inline std::atomic<int>& cpu_matmul_slot() noexcept {
  static std::atomic<int> slot{0};
  return slot;
}
}  // namespace detail

inline CpuMatmul cpu_matmul() noexcept {
  return static_cast<CpuMatmul>(detail::cpu_matmul_slot().load(std::memory_order_relaxed));
}

/// Sets the arithmetic of the float GEMMs that follow (set it before the first, and keep it for a
/// run: a model trained in bf16 continues bit for bit only in bf16, on the same path). bf16 on a
/// CPU without a bf16 path throws lrt::Error naming what it lacks.
inline void set_cpu_matmul(CpuMatmul m) {
  check(m == CpuMatmul::fp32 || bf16_gemm_supported(), "cpu matmul",
        "bf16 matrix products need AVX512-BF16 (vdpbf16ps) or AMX: ", bf16_missing());
  detail::cpu_matmul_slot().store(static_cast<int>(m), std::memory_order_relaxed);
}

/// "fp32", or "bf16 (avx512_bf16)": the arithmetic of the float GEMMs and the path that runs it.
inline std::string cpu_matmul_name() {
  return cpu_matmul() == CpuMatmul::fp32 ? std::string("fp32")
                                         : std::string("bf16 (") + bf16_path_name(cpu_bf16_path()) + ")";
}

/// The libraries an fp32 GEMM can run on.
enum class GemmPath { lrt, openblas, eigen };

/// "lrt", "openblas", "eigen": the names LRT_GEMM takes.
inline const char* gemm_path_key(GemmPath p) noexcept {
  return p == GemmPath::lrt ? "lrt" : p == GemmPath::openblas ? "openblas" : "eigen";
}

/// The path this process's GEMMs take, and why (gemm_choice()).
struct GemmChoice {
  GemmPath path = GemmPath::eigen;
  SimdLevel level = SimdLevel::none;  ///< lrt's kernel (GemmPath::lrt), else the level the library runs
  std::string name;                   ///< "lrt AVX-512", "OpenBLAS (SkylakeX)", "Eigen (SSE2)"
  std::string why;                    ///< "OpenBLAS reports Prescott on a CPU with AVX-512", ...
};

}  // namespace cpu

namespace cpu::detail {

/// Once per process: make Eigen (if built with OpenMP) and OpenBLAS single-threaded.
inline void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    Eigen::setNbThreads(1);
#if LRT_HAS_OPENBLAS
    openblas_set_num_threads(1);
#endif
  });
}

/// One single-threaded GEMM through Eigen: C (M, N) = alpha * op(A) op(B) + beta * C.
template <class T>
void eigen_gemm(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b, T beta, T* C,
                index_t ldc) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using MMap = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  MMap c(C, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0) {
    if (beta == T(0))
      c.setZero();
    else
      c *= beta;
    return;
  }
  auto with_a = [&](auto&& f) {
    if (a.trans)
      f(CMap(a.p, K, M, Eigen::OuterStride<>(a.ld)).transpose());
    else
      f(CMap(a.p, M, K, Eigen::OuterStride<>(a.ld)));
  };
  auto with_b = [&](const auto& am, auto&& f) {
    if (b.trans)
      f(am, CMap(b.p, N, K, Eigen::OuterStride<>(b.ld)).transpose());
    else
      f(am, CMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
  };
  with_a([&](const auto& am) {
    with_b(am, [&](const auto& x, const auto& y) {
      if (beta == T(0)) {
        c.noalias() = alpha * x * y;
      } else {
        if (beta != T(1)) c *= beta;
        c.noalias() += alpha * x * y;
      }
    });
  });
}

/// C (1, N) = alpha x (1, K) op(B) + beta C for a contiguous row x: a single row streams the
/// weights once, which is bandwidth-bound; BLAS GEMMs pack B first and reach a third of the
/// bandwidth at M = 1 (OpenBLAS 0.3.21, lrt-bench's decode rows), sgemv about two thirds.
/// op(B) = B^T (B stored (N, K), the layout of every Linear weight): one dot product per row;
/// op(B) = B (stored (K, N)): rows of B accumulated into C in order of k.
template <class T>
void gemv_row(index_t N, index_t K, T alpha, const T* x, const MatRef<T>& b, T beta, T* C) {
  if (b.trans) {
    gemv_rows(1, 0, N, K, alpha, x, K, b.p, b.ld, beta, C, N);
    return;
  }
  // C[n] = beta C[n] (0 for beta = 0), then += (alpha x[k]) B[k, n] in order of k; in chunks of
  // 64 columns held in registers across k (a full chunk's loops have constant bounds).
  constexpr index_t NC = 64;
  const auto chunk = [&](index_t n0, auto nc) {
    T acc[NC];
    for (index_t i = 0; i < nc; ++i) acc[i] = beta == T(0) ? T(0) : beta == T(1) ? C[n0 + i] : C[n0 + i] * beta;
    for (index_t k = 0; k < K; ++k) {
      const T xk = alpha * x[k];
      const T* __restrict row = b.p + k * b.ld + n0;
      for (index_t i = 0; i < nc; ++i) acc[i] += xk * row[i];
    }
    for (index_t i = 0; i < nc; ++i) C[n0 + i] = acc[i];
  };
  index_t n0 = 0;
  for (; n0 + NC <= N; n0 += NC) chunk(n0, std::integral_constant<index_t, NC>{});
  if (n0 < N) chunk(n0, N - n0);
}

/// One single-threaded GEMM on `path` (lrt's kernels: `level`); a single row streams the weights.
template <class T>
void gemm1_on(GemmPath path, SimdLevel level, index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a,
              const MatRef<T>& b, T beta, T* C, index_t ldc) {
  if (M == 1 && K > 0 && !a.trans) {
    gemv_row(N, K, alpha, a.p, b, beta, C);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (path == GemmPath::lrt) {
      sgemm(level, M, N, K, alpha, SgemmOperand{a.p, a.ld, a.trans}, SgemmOperand{b.p, b.ld, b.trans}, beta, C, ldc);
      return;
    }
  }
#if LRT_HAS_OPENBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (path == GemmPath::openblas && K > 0) {
      const auto ta = a.trans ? CblasTrans : CblasNoTrans, tb = b.trans ? CblasTrans : CblasNoTrans;
      const auto m = static_cast<blasint>(M), n = static_cast<blasint>(N), k = static_cast<blasint>(K);
      if constexpr (std::is_same_v<T, float>) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.p, static_cast<blasint>(a.ld), b.p,
                    static_cast<blasint>(b.ld), beta, C, static_cast<blasint>(ldc));
      } else {
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a.p, static_cast<blasint>(a.ld), b.p,
                    static_cast<blasint>(b.ld), beta, C, static_cast<blasint>(ldc));
      }
      return;
    }
  }
#endif
  eigen_gemm(M, N, K, alpha, a, b, beta, C, ldc);
}

/// The instruction set an OpenBLAS core name stands for (openblas_get_corename(): "Prescott",
/// "Haswell", "SkylakeX", ...), or SimdLevel::none for a name this table does not know.
inline SimdLevel openblas_core_level(std::string_view core) noexcept {
  std::string c(core);
  for (auto& ch : c) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  for (const char* n : {"skylakex", "cooperlake", "sapphirerapids"})
    if (c == n) return SimdLevel::avx512;
  for (const char* n : {"haswell", "zen", "excavator"})
    if (c == n) return SimdLevel::avx2;
  for (const char* n : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
    if (c == n) return SimdLevel::avx;
  for (const char* n :
       {"katmai", "coppermine", "northwood", "prescott", "banias", "core2", "penryn", "dunnington", "nehalem", "atom",
        "amdk6", "athlon", "opteron", "opteron(sse3)", "barcelona", "nano", "bobcat", "generic"})
    if (c == n) return SimdLevel::sse2;
  return SimdLevel::none;
}

/// The instruction set Eigen's products are compiled for in this translation unit.
inline constexpr SimdLevel eigen_level() noexcept {
#if defined(EIGEN_VECTORIZE_AVX512)
  return SimdLevel::avx512;
#elif defined(EIGEN_VECTORIZE_AVX2) && defined(EIGEN_VECTORIZE_FMA)
  return SimdLevel::avx2;
#elif defined(EIGEN_VECTORIZE_AVX)
  return SimdLevel::avx;
#elif defined(EIGEN_VECTORIZE_SSE2)
  return SimdLevel::sse2;
#else
  return SimdLevel::none;
#endif
}

/// GFLOP/s of one path on the shapes of a training step's products (a block of 128 rows against
/// weights, forward (x W^T), backward (dY W) and a weight gradient (dY^T X)), best of three.
inline double measure_gemm_path(GemmPath path, SimdLevel level) {
  struct Shape {
    index_t M, N, K;
    bool ta, tb;
  };
  constexpr Shape shapes[] = {
      {128, 512, 512, false, true}, {128, 512, 512, false, false}, {512, 512, 128, true, false}};
  std::vector<float> A(512 * 512), B(512 * 512), C(512 * 512);
  for (std::size_t i = 0; i < A.size(); ++i) {  // any values away from zero and denormals
    A[i] = 0.25f + float(i % 7) * 0.125f;
    B[i] = 0.5f - float(i % 5) * 0.125f;
  }
  double seconds = 0, flops = 0;
  for (const Shape& sh : shapes) {
    const MatRef<float> a{A.data(), sh.ta ? sh.M : sh.K, sh.ta}, b{B.data(), sh.tb ? sh.K : sh.N, sh.tb};
    double best = 1e30;
    for (int rep = 0; rep < 4; ++rep) {  // the first warms caches and buffers
      const auto t0 = std::chrono::steady_clock::now();
      gemm1_on<float>(path, level, sh.M, sh.N, sh.K, 1.0f, a, b, 0.0f, C.data(), sh.N);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) best = std::min(best, t);
    }
    seconds += best;
    flops += 2.0 * double(sh.M) * double(sh.N) * double(sh.K);
  }
  return flops / seconds * 1e-9;
}

/// Why LRT_GEMM=`forced` cannot run here ("" where it can, or for "", "auto" and "measure").
inline std::string gemm_path_unavailable(std::string_view forced, SimdLevel cpu, const char* openblas_core) {
  const std::string f(forced);
  if (f.empty() || f == "auto" || f == "measure" || f == "eigen") return {};
  if (f == "lrt")
    return sgemm_has_kernel(SimdLevel::avx2) && cpu >= SimdLevel::avx2
               ? std::string()
               : "LRT_GEMM=lrt: lrt's kernels need AVX2 and FMA on x86-64; this CPU has " + std::string(simd_name(cpu));
  if (f == "openblas")
    return openblas_core ? std::string()
                         : "LRT_GEMM=openblas: this build has no OpenBLAS (configure with LRT_USE_OPENBLAS=ON and "
                           "libopenblas-dev)";
  return "LRT_GEMM='" + f + "': expected lrt, openblas, eigen, auto or measure";
}

/// sep + name + " " + GFLOP/s with one decimal.
inline std::string fmt_gflops(const char* sep, const std::string& name, double g) {
  char num[32];
  std::snprintf(num, sizeof num, "%.1f", g);
  return sep + name + " " + num;
}

/// The decision behind gemm_choice(), from the facts it rests on (separate, so that tests can give
/// any CPU and library). `forced`: LRT_GEMM's value ("" or "auto": none; "measure": time the fit
/// paths); `openblas_core`: null without OpenBLAS; `measure`: GFLOP/s of a path, asked only for
/// LRT_GEMM=measure where several are fit.
template <class Measure>
GemmChoice choose_gemm(std::string_view forced, SimdLevel cpu, const char* openblas_core, SimdLevel eigen,
                       Measure&& measure) {
  const SimdLevel own = sgemm_has_kernel(cpu) ? cpu : cpu >= SimdLevel::avx512 ? SimdLevel::avx2 : SimdLevel::none;
  const bool own_ok = own != SimdLevel::none && sgemm_has_kernel(own) && cpu >= own;
  const SimdLevel blas = openblas_core ? openblas_core_level(openblas_core) : SimdLevel::none;
  const auto named = [&](GemmPath p) {
    GemmChoice c;
    c.path = p;
    if (p == GemmPath::lrt) {
      c.level = own;
      c.name = std::string("lrt ") + simd_name(own);
    } else if (p == GemmPath::openblas) {
      c.level = blas;
      c.name = std::string("OpenBLAS (") + openblas_core + ")";
    } else {
      c.level = eigen;
      c.name = std::string("Eigen (") + simd_name(eigen) + ")";
    }
    return c;
  };
  if (!forced.empty() && forced != "auto" && forced != "measure") {
    const std::string no = gemm_path_unavailable(forced, cpu, openblas_core);
    if (!no.empty()) throw_error("gemm", no);
    GemmChoice c = named(forced == "lrt" ? GemmPath::lrt : forced == "openblas" ? GemmPath::openblas : GemmPath::eigen);
    c.why = "forced (LRT_GEMM)";
    return c;
  }
  // The fit paths, in the order of preference: OpenBLAS unless it runs code for an older instruction
  // set than the CPU's; lrt's kernels where the CPU has AVX2 or AVX-512; Eigen where it is compiled
  // for the CPU's (a native build), or where nothing else is.
  std::vector<GemmPath> fit;
  std::string unfit;
  const auto note = [&](const std::string& s) { unfit += (unfit.empty() ? "" : "; ") + s; };
  if (openblas_core) {
    if (blas != SimdLevel::none && cpu != SimdLevel::none && blas < cpu)
      note(std::string("OpenBLAS reports ") + openblas_core + " on a CPU with " + simd_name(cpu));
    else
      fit.push_back(GemmPath::openblas);
  }
  if (own_ok) fit.push_back(GemmPath::lrt);
  if (eigen >= cpu || fit.empty())
    fit.push_back(GemmPath::eigen);
  else
    note(std::string("Eigen is compiled for ") + simd_name(eigen));
  if (fit.size() == 1 || forced != "measure") {
    GemmChoice c = named(fit[0]);
    if (fit.size() == 1) {
      c.why = unfit.empty() ? std::string("the only one fit") : unfit;
      return c;
    }
    c.why = "the first fit of OpenBLAS, lrt, Eigen; also fit: ";
    for (std::size_t i = 1; i < fit.size(); ++i) c.why += (i == 1 ? "" : ", ") + named(fit[i]).name;
    c.why += " (LRT_GEMM=measure times them)";
    if (!unfit.empty()) c.why += "; " + unfit;
    return c;
  }
  std::vector<double> g;
  for (GemmPath p : fit) g.push_back(measure(named(p)));
  std::size_t best = 0;
  for (std::size_t i = 1; i < fit.size(); ++i)
    if (g[i] > g[best]) best = i;
  if (g[0] * 1.05 >= g[best]) best = 0;  // within 5%: the first fit stays (a choice noise does not flip)
  GemmChoice c = named(fit[best]);
  c.why = "measured";
  for (std::size_t i = 0; i < fit.size(); ++i) c.why += fmt_gflops(i == 0 ? " " : ", ", named(fit[i]).name, g[i]);
  c.why += " GFLOP/s";
  if (!unfit.empty()) c.why += "; " + unfit;
  return c;
}

}  // namespace cpu::detail

namespace cpu {

namespace detail {
/// The path asked for by prefer_gemm_path (a key of gemm_path_key, and why), and whether
/// gemm_choice() has decided already; guarded by gemm_state().m.
struct GemmState {
  std::mutex m;
  std::string preferred, why;
  bool decided = false;
};
LRT_API inline GemmState& gemm_state() {
  static GemmState s;
  return s;
}
}  // namespace detail

/// The path of this process's GEMMs, decided at the first call (the first GEMM) from LRT_GEMM
/// (else prefer_gemm_path's request), the CPU, the OpenBLAS core and the build (with
/// LRT_GEMM=measure, where several paths are fit, a measurement of ~20 ms). Throws lrt::Error ("[gemm] ...") for a
/// LRT_GEMM this machine cannot run.
LRT_API inline const GemmChoice& gemm_choice() {
  static const GemmChoice choice = [] {
    detail::single_threaded_blas();
    detail::GemmState& st = detail::gemm_state();
    std::lock_guard<std::mutex> lock(st.m);
    st.decided = true;
    const char* env = std::getenv("LRT_GEMM");
    std::string forced = env ? env : "";
#if defined(LRT_PREFER_OPENBLAS) && LRT_HAS_OPENBLAS
    if (forced.empty()) forced = "openblas";
#endif
#if LRT_HAS_OPENBLAS
    const char* core = openblas_get_corename();
    if (!core) core = "unknown";
#else
    const char* core = nullptr;
#endif
    const auto measure = [](const GemmChoice& c) { return detail::measure_gemm_path(c.path, c.level); };
    if (forced.empty() && !st.preferred.empty()) {
      const std::string no = detail::gemm_path_unavailable(st.preferred, cpu_simd_level(), core);
      if (no.empty()) {
        GemmChoice c = detail::choose_gemm(st.preferred, cpu_simd_level(), core, detail::eigen_level(), measure);
        c.why = st.why;
        return c;
      }
      // Not on this machine: the usual choice, and why.
      GemmChoice c = detail::choose_gemm("", cpu_simd_level(), core, detail::eigen_level(), measure);
      c.why += "; not " + st.preferred + " (" + st.why + "): " + no;
      return c;
    }
    return detail::choose_gemm(forced, cpu_simd_level(), core, detail::eigen_level(), measure);
  }();
  return choice;
}

/// Asks, before the first GEMM, for the path `key` ("lrt", "openblas" or "eigen": gemm_path_key)
/// for the reason `why`, unless LRT_GEMM names one: lrt-train --resume takes the path the run
/// was trained on, so that it continues bit for bit on a machine or build that would choose another
/// (or where LRT_GEMM=measure could).
/// A path this machine cannot run gives the usual choice, with the reason. Returns false (and
/// changes nothing) once the choice is made.
inline bool prefer_gemm_path(const std::string& key, const std::string& why) {
  detail::GemmState& st = detail::gemm_state();
  std::lock_guard<std::mutex> lock(st.m);
  if (st.decided) return false;
  st.preferred = key, st.why = why;
  return true;
}

/// The library behind this process's fp32 GEMMs: "lrt AVX-512", "OpenBLAS (SkylakeX)", "Eigen (SSE2)".
inline const char* gemm_library() { return gemm_choice().name.c_str(); }

/// gemm_library() and why: "lrt AVX-512 (OpenBLAS reports Prescott on a CPU with AVX-512)".
inline std::string gemm_summary() {
  const GemmChoice& c = gemm_choice();
  return c.name + " (" + c.why + ")";
}

}  // namespace cpu

namespace cpu::detail {

/// gemm1_on on this process's path, counted in the GemmProfile when one is installed.
template <class T>
void gemm1(index_t M, index_t N, index_t K, T alpha, const MatRef<T>& a, const MatRef<T>& b, T beta, T* C,
           index_t ldc) {
  // A single row needs no library, nor the choice of one (decoding never measures).
  const bool row = M == 1 && K > 0 && !a.trans;
  const GemmChoice* ch = row ? nullptr : &gemm_choice();
  const GemmPath path = row                                                     ? GemmPath::eigen
                        : std::is_same_v<T, float> || ch->path != GemmPath::lrt ? ch->path
                                                                                : GemmPath::eigen;
  const SimdLevel level = row ? SimdLevel::none : ch->level;
  GemmProfile* prof = gemm_profile_slot().load(std::memory_order_relaxed);
  if (!prof) return gemm1_on(path, level, M, N, K, alpha, a, b, beta, C, ldc);
  const auto t0 = std::chrono::steady_clock::now();
  gemm1_on(path, level, M, N, K, alpha, a, b, beta, C, ldc);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  prof->ns.fetch_add(static_cast<std::int64_t>(ns), std::memory_order_relaxed);
  prof->flops.fetch_add(2 * std::int64_t(M) * std::int64_t(N) * std::int64_t(K), std::memory_order_relaxed);
  prof->calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace cpu::detail

template <>
struct GemmBackend<cpu::Device> {
  /// Below this many flops per GEMM the work stays on the calling thread.
  static constexpr double parallel_flops = 4.0e6;
  /// A GEMM with at least 2 * block_rows rows of C runs as blocks of block_rows rows, in parallel.
  /// (A single-row product, M = 1, always runs on the calling thread: splitting its columns over
  /// the pool was measured slower, 0.6 -> 1.0 ms per small-preset token: waking the second
  /// thread costs more than the ~40 us of a layer's weights.)
  static constexpr index_t block_rows = 128;

  /// lrt's kernels over all M rows: each panel of op(B) packed once (by the pool), then the
  /// blocks of rows on the pool (within a task of the pool, on its thread). Counted in the
  /// GemmProfile as the thread-time of its parts.
  /// bf16 (cpu_matmul()): the same on lrt's bf16 kernels, whatever M.
  static void run_lrt(cpu::SimdLevel level, index_t M, index_t N, index_t K, float alpha, const MatRef<float>& a,
                      const MatRef<float>& b, float beta, float* C, index_t ldc, bool bf16 = false) {
    cpu::GemmProfile* prof = cpu::detail::gemm_profile_slot().load(std::memory_order_relaxed);
    const auto par = [prof](index_t n, auto&& f) {
      parallel_for(n, 1, [&](index_t b0, index_t b1) {
        if (!prof) return f(b0, b1);
        const auto t0 = std::chrono::steady_clock::now();
        f(b0, b1);
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
        prof->ns.fetch_add(static_cast<std::int64_t>(ns), std::memory_order_relaxed);
      });
    };
    if (bf16)
      cpu::gemm_bf16(M, N, K, alpha, cpu::SgemmOperand{a.p, a.ld, a.trans}, cpu::SgemmOperand{b.p, b.ld, b.trans}, beta,
                     C, ldc, par);
    else
      cpu::sgemm(level, M, N, K, alpha, cpu::SgemmOperand{a.p, a.ld, a.trans}, cpu::SgemmOperand{b.p, b.ld, b.trans},
                 beta, C, ldc, par);
    if (prof) {
      prof->flops.fetch_add(2 * std::int64_t(M) * std::int64_t(N) * std::int64_t(K), std::memory_order_relaxed);
      prof->calls.fetch_add(1, std::memory_order_relaxed);
    }
  }

  template <class T>
  static void run(index_t batch, index_t M, index_t N, index_t K, T alpha, MatRef<T> a, index_t sa, MatRef<T> b,
                  index_t sb, T beta, T* C, index_t ldc, index_t sc) {
    cpu::detail::single_threaded_blas();
    const double flops = 2.0 * double(M) * double(N) * double(K);
    const int threads = num_threads();
    auto one = [&](index_t i) {
      const MatRef<T> ai{a.p + i * sa, a.ld, a.trans}, bi{b.p + i * sb, b.ld, b.trans};
      T* ci = C + i * sc;
      if constexpr (std::is_same_v<T, float>) {
        if (cpu::cpu_matmul() == cpu::CpuMatmul::bf16) {  // every float GEMM, whatever its shape
          run_lrt(cpu::SimdLevel::none, M, N, K, alpha, ai, bi, beta, ci, ldc, true);
          return;
        }
      }
      if (M < 2 * block_rows) {
        cpu::detail::gemm1(M, N, K, alpha, ai, bi, beta, ci, ldc);
        return;
      }
      if constexpr (std::is_same_v<T, float>) {
        const cpu::GemmChoice& ch = cpu::gemm_choice();
        if (ch.path == cpu::GemmPath::lrt) {  // its panels of op(B) packed once, its row blocks on the pool
          run_lrt(ch.level, M, N, K, alpha, ai, bi, beta, ci, ldc);
          return;
        }
      }
      // Fixed blocks of rows of C (and of op(A)), whatever the thread count: the calls, and so
      // the rounding, are the same with 1 thread or many (BLAS libraries pick kernels by size).
      const index_t blocks = (M + block_rows - 1) / block_rows;
      parallel_for(blocks, 1, [&](index_t b0, index_t b1) {
        for (index_t blk = b0; blk < b1; ++blk) {
          const index_t r0 = blk * block_rows, r1 = std::min(M, r0 + block_rows);
          const MatRef<T> ar{ai.trans ? ai.p + r0 : ai.p + r0 * ai.ld, ai.ld, ai.trans};
          cpu::detail::gemm1(r1 - r0, N, K, alpha, ar, bi, beta, ci + r0 * ldc, ldc);
        }
      });
    };
    if (batch > 1 && threads > 1 && flops * double(batch) >= parallel_flops) {
      parallel_for(batch, 1, [&](index_t b0, index_t b1) {
        for (index_t i = b0; i < b1; ++i) one(i);
      });
    } else {
      for (index_t i = 0; i < batch; ++i) one(i);
    }
  }
};

namespace cpu {

/// y (R, N) = x (R, K) w^T for a weight matrix w (N, K), row-major with row strides ldx, ldw, ldy:
/// the rows of a decode step. Every y[r, n] is the single-row product's (dot_lanes, the arithmetic
/// of lrt::gemm at M = 1), so a row's results do not depend on the other rows, on R or on the
/// thread count: decoding a row in a batch gives its bits alone (N = 1: the sum in order of k,
/// as lrt::gemm computes a one-column product). The weights are read once for all
/// R rows (blocks of gemv_rows_block rows at a time, kept in cache against every row of x); from
/// 2 rows and parallel_flops flops on, the blocks are spread over lrt's pool. Counted in the
/// GemmProfile when one is installed.
template <class T>
void rowwise_product(index_t R, index_t N, index_t K, const T* x, index_t ldx, const T* w, index_t ldw, T* y,
                     index_t ldy) {
  if (R <= 0 || N <= 0) return;
  if (N == 1) {  // lrt::gemm reads a one-column w^T as a plain column: gemv_row's sum in order of k
    for (index_t r = 0; r < R; ++r) {
      T s = T(0);
      for (index_t k = 0; k < K; ++k) s += x[r * ldx + k] * w[k];
      y[r * ldy] = s;
    }
    return;
  }
  GemmProfile* prof = detail::gemm_profile_slot().load(std::memory_order_relaxed);
  const auto t0 = prof ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const double flops = 2.0 * double(R) * double(N) * double(K);
  const index_t nb = detail::gemv_rows_block<T>(K), blocks = (N + nb - 1) / nb;
  if (R >= 2 && blocks >= 2 && num_threads() > 1 && flops >= GemmBackend<Device>::parallel_flops) {
    parallel_for(blocks, 1, [&](index_t b0, index_t b1) {
      detail::gemv_rows(R, b0 * nb, std::min(N, b1 * nb), K, T(1), x, ldx, w, ldw, T(0), y, ldy);
    });
  } else {
    detail::gemv_rows(R, 0, N, K, T(1), x, ldx, w, ldw, T(0), y, ldy);
  }
  if (prof) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    prof->ns.fetch_add(static_cast<std::int64_t>(ns), std::memory_order_relaxed);
    prof->flops.fetch_add(static_cast<std::int64_t>(flops), std::memory_order_relaxed);
    prof->calls.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace cpu

}  // namespace v0
}  // namespace lrt
