// lrt-bench-gemm: single-precision GEMM throughput of lrt::gemm on transformer shapes, measured
// in one run beside the two libraries it can sit on: Eigen's own GEMM (Map + noalias product,
// single thread) and OpenBLAS's cblas_sgemm (openblas_set_num_threads(1)), when available.
//
//   lrt-bench-gemm [--reps N] [--quick] [--json] [--threads N] [--min-ms X]
//
// Shapes: tokens M = B*T in {256, 1024, 4096} times d_model in {128, 256, 384, 512}, for the
// four weight matrices of a transformer block, each in its three GEMMs:
//   proj     (d -> d)    Q, K, V or output projection       W (d, d)
//   qkv      (d -> 3d)   fused QKV projection               W (d, 3d)
//   mlp_up   (d -> 4d)   MLP up-projection                  W (d, 4d)
//   mlp_down (4d -> d)   MLP down-projection                W (4d, d)
//   fwd  Y  = X W       (M, K) x (K, N)      "NN"
//   dX   dX = dY W^T    (M, N) x (N, K)      "NT"  (W^T is a transposed view)
//   dW   dW = X^T dY    (K, M) x (M, N)      "TN"  (X^T is a transposed view; inner dim = tokens)
// plus a square 1024^3 GEMM.
//
// bf16: where the CPU has a bf16 path (lrt/backend/cpu/bf16_gemm.hpp: AVX512-BF16; LRT_CPU_MASK
// hides it), lrt's bf16 GEMM (bf16 inputs rounded as they are packed, fp32 accumulation) runs on
// the same operands and pool in the same rotation: the "bf16" column and "bf16/lrt" (its median
// GFLOP/s over lrt::gemm's fp32). Its error against Eigen's fp32 product is reported apart ("bf16
// err", max |C - C_eigen| / max |C_eigen|; bf16 keeps 8 bits of each input).
//
// Each timed sample runs a shape `iters` times (iters chosen in the warm-up so that a sample
// lasts >= --min-ms); the three implementations are sampled in turn (lrt, Eigen, cblas, lrt,
// ...) so that machine drift hits all three alike. The table reports medians over the samples
// (--reps; 3 for shapes whose single run takes over 40 ms unless --reps is given) and two
// ratios: "lrt/best" = lrt's median GFLOP/s over the better median of Eigen and cblas, and
// "(max)" = the same with each implementation's fastest sample, which is the steadier figure
// when other processes share the CPUs. lrt runs on lrt's pool (LRT_NUM_THREADS, or --threads);
// Eigen and cblas always run on one thread.
// "other" is the CPU time other processes (and the hypervisor: steal) took during the shape,
// in CPUs (from /proc/stat minus this process's own rusage); '*' marks shapes above 0.25 CPU,
// whose timings are suspect.
//
// Output: a table (stdout; stderr with --json), and with --json one JSON object per line on
// stdout: {"kind":"config",...}, one {"kind":"gemm",...} per shape, {"kind":"summary",...}.
//
// Build by hand (the CMake target is lrt-bench-gemm):
//   g++ -std=c++20 -O3 -DNDEBUG -Iinclude -I/usr/include/eigen3 -DLRT_USE_OPENBLAS=1
//       bench/gemm.cpp -lfmt -lopenblas -lpthread
// Without -DLRT_USE_OPENBLAS=1 lrt uses Eigen; add -DLRT_BENCH_HAVE_CBLAS=1 -lopenblas to keep
// the cblas column.
#include <lrt/backend/cpu/bf16_gemm.hpp>
#include <lrt/tensor.hpp>

#include "bench_util.hpp"

#include <Eigen/Core>
#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if LRT_HAS_OPENBLAS || (defined(LRT_BENCH_HAVE_CBLAS) && LRT_BENCH_HAVE_CBLAS)
#define BENCH_CBLAS 1
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
#else
#define BENCH_CBLAS 0
#endif

namespace {

using lrt_bench::median;
using lrt_bench::OtherLoad;

using lrt::index_t;
using Clock = std::chrono::steady_clock;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Options {
  int reps = 5;
  bool reps_given = false;
  bool quick = false;
  bool json = false;
  double min_ms = 3.0;
};

Options parse(int argc, char** argv) {
  tool::Args args("lrt-bench-gemm",
                  "single-precision GEMM throughput of lrt::gemm on transformer shapes, beside Eigen's and OpenBLAS's");
  args.option("reps", "N",
              "timed samples per shape and implementation (3 for shapes whose one run takes > 40 ms; median reported)",
              "5")
      .flag("quick", "fewer shapes (tokens 256 and 1024, d_model 128 and 512), 3 reps")
      .flag("json", "one JSON object per line on stdout (the table goes to stderr)")
      .shared("threads")
      .option("min-ms", "X", "least duration of one timed sample in ms", "3");
  Options o;
  const int rc = tool::parse_args(args, argc, argv, [&] {
    o.quick = args.has("quick"), o.json = args.has("json");
    o.reps_given = args.has("reps");
    o.reps = o.quick && !args.has("reps") ? 3 : static_cast<int>(args.integer("reps", 1, 1 << 30));
    tool::apply_threads(args);
    o.min_ms = args.number("min-ms", 0, 1e9);
  });
  if (rc >= 0) std::exit(rc);
  return o;
}

/// One GEMM problem as BLAS sees it: C (m, n) = op(A) op(B), op(A) (m, k), op(B) (k, n).
struct Problem {
  std::string name;  // e.g. "mlp_up"
  std::string pass;  // fwd, dX, dW
  index_t d = 0, tokens = 0;
  index_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
};

struct Result {
  Problem p;
  int iters = 0, reps = 0;
  double lrt = 0, eig = 0, blas = 0, bf16 = 0;                  // median GFLOP/s (bf16: 0 without a path)
  double lrt_max = 0, eig_max = 0, blas_max = 0, bf16_max = 0;  // fastest sample, GFLOP/s
  double err = 0;                                               // max |C - C_eigen| / max |C_eigen|
  double bf16_err = 0;                                          // the same for the bf16 product
  double other = 0;                                             // other processes' load, CPUs
  double ratio() const { return lrt / std::max(eig, blas); }
  double ratio_max() const { return lrt_max / std::max(eig_max, blas_max); }
};

/// Stored operand: (rows, cols) row-major; op() reads it transposed when trans.
lrt::Tensor<float, 2> operand(index_t rows, index_t cols, bool trans, std::uint64_t seed) {
  lrt::Tensor<float, 2> t(trans ? lrt::Shape<2>{cols, rows} : lrt::Shape<2>{rows, cols}, lrt::uninitialized);
  t = lrt::uniform<float>(t.shape(), seed, 0, -1.f, 1.f);
  return t;
}

template <class F>
double time_sample(int iters, F&& f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / iters;
}

Result run_problem(const Problem& p, const Options& o) {
  const auto A = operand(p.m, p.k, p.ta, 1), B = operand(p.k, p.n, p.tb, 2);
  lrt::Tensor<float, 2> C_lrt({p.m, p.n}), C_eig({p.m, p.n}), C_blas({p.m, p.n}), C_bf16({p.m, p.n});
  const OtherLoad load;

  // lrt: op(A), op(B) as (transposed) views.
  auto run_lrt = [&] {
    if (p.ta && p.tb)
      lrt::gemm(C_lrt, A.t(), B.t());
    else if (p.ta)
      lrt::gemm(C_lrt, A.t(), B);
    else if (p.tb)
      lrt::gemm(C_lrt, A, B.t());
    else
      lrt::gemm(C_lrt, A, B);
  };
  // bf16 on lrt's pool, from the same stored operands (op(A)[i][k] = A[k][i] when transposed).
  const bool bf16 = lrt::cpu::bf16_gemm_supported();
  auto run_bf16 = [&] {
    lrt::cpu::gemm_bf16(p.m, p.n, p.k, 1.f, lrt::cpu::SgemmOperand{A.data(), A.shape()[1], p.ta},
                        lrt::cpu::SgemmOperand{B.data(), B.shape()[1], p.tb}, 0.f, C_bf16.data(), p.n,
                        [](index_t n, auto&& f) { lrt::parallel_for(n, 1, f); });
  };
  // Eigen: Map + noalias product (single thread: no OpenMP in this build).
  const Eigen::Map<const RowMat> Am(A.data(), A.shape()[0], A.shape()[1]), Bm(B.data(), B.shape()[0], B.shape()[1]);
  Eigen::Map<RowMat> Cm(C_eig.data(), p.m, p.n);
  auto run_eig = [&] {
    if (p.ta && p.tb)
      Cm.noalias() = Am.transpose() * Bm.transpose();
    else if (p.ta)
      Cm.noalias() = Am.transpose() * Bm;
    else if (p.tb)
      Cm.noalias() = Am * Bm.transpose();
    else
      Cm.noalias() = Am * Bm;
  };
#if BENCH_CBLAS
  auto run_blas = [&] {
    cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(p.m), static_cast<blasint>(p.n), static_cast<blasint>(p.k), 1.f, A.data(),
                static_cast<blasint>(A.shape()[1]), B.data(), static_cast<blasint>(B.shape()[1]), 0.f, C_blas.data(),
                static_cast<blasint>(p.n));
  };
#endif

  // Warm-up (also pages in C) and calibration of iterations per sample.
  const double flops = 2.0 * double(p.m) * double(p.n) * double(p.k);
  double t_lrt = time_sample(1, run_lrt), t_slowest = time_sample(1, run_eig);
#if BENCH_CBLAS
  t_slowest = std::max(t_slowest, time_sample(1, run_blas));
#endif
  if (bf16) t_slowest = std::max(t_slowest, time_sample(1, run_bf16));
  t_lrt = std::min(t_lrt, time_sample(1, run_lrt));
  t_slowest = std::max(t_slowest, t_lrt);
  const int iters = std::clamp(static_cast<int>(std::ceil(o.min_ms * 1e-3 / std::max(t_lrt, 1e-9))), 1, 100000);
  const int reps = (!o.reps_given && t_slowest > 0.040) ? std::min(o.reps, 3) : o.reps;

  Result r;
  r.p = p;
  r.iters = iters;
  r.reps = reps;
  std::vector<double> tl, te, tbv, th;
  for (int rep = 0; rep < reps; ++rep) {
    tl.push_back(time_sample(iters, run_lrt));
    if (bf16) th.push_back(time_sample(iters, run_bf16));
    te.push_back(time_sample(iters, run_eig));
#if BENCH_CBLAS
    tbv.push_back(time_sample(iters, run_blas));
#endif
  }
  r.other = load.cpus();
  auto gf = [&](double t) { return flops / t * 1e-9; };
  r.lrt = gf(median(tl));
  r.eig = gf(median(te));
  r.lrt_max = gf(*std::min_element(tl.begin(), tl.end()));
  r.eig_max = gf(*std::min_element(te.begin(), te.end()));
  if (!th.empty()) {
    r.bf16 = gf(median(th));
    r.bf16_max = gf(*std::min_element(th.begin(), th.end()));
  }
  if (!tbv.empty()) {
    r.blas = gf(median(tbv));
    r.blas_max = gf(*std::min_element(tbv.begin(), tbv.end()));
  }

  // lrt against Eigen (and cblas against Eigen: the two references must agree too).
  double dmax = 0, cmax = 0, hmax = 0;
  for (index_t i = 0; i < p.m * p.n; ++i) {
    const float ref = C_eig.data()[i];
    cmax = std::max(cmax, double(std::fabs(ref)));
    if (bf16) hmax = std::max(hmax, double(std::fabs(C_bf16.data()[i] - ref)));
    dmax = std::max(dmax, double(std::fabs(C_lrt.data()[i] - ref)));
#if BENCH_CBLAS
    dmax = std::max(dmax, double(std::fabs(C_blas.data()[i] - ref)));
#endif
  }
  r.err = dmax / std::max(cmax, 1e-30);
  r.bf16_err = hmax / std::max(cmax, 1e-30);
  return r;
}

std::vector<Problem> problems(const Options& o) {
  const std::vector<index_t> tokens = o.quick ? std::vector<index_t>{256, 1024} : std::vector<index_t>{256, 1024, 4096};
  const std::vector<index_t> dims = o.quick ? std::vector<index_t>{128, 512} : std::vector<index_t>{128, 256, 384, 512};
  struct Layer {
    const char* name;
    int kin, nout;  // multiples of d
  };
  const Layer layers[] = {{"proj", 1, 1}, {"qkv", 1, 3}, {"mlp_up", 1, 4}, {"mlp_down", 4, 1}};
  std::vector<Problem> ps;
  for (index_t M : tokens)
    for (index_t d : dims)
      for (const Layer& l : layers) {
        const index_t K = l.kin * d, N = l.nout * d;
        ps.push_back({l.name, "fwd", d, M, M, N, K, false, false});  // Y = X W
        ps.push_back({l.name, "dX", d, M, M, K, N, false, true});    // dX = dY W^T
        ps.push_back({l.name, "dW", d, M, K, N, M, true, false});    // dW = X^T dY
      }
  ps.push_back({"square", "fwd", 1024, 1024, 1024, 1024, 1024, false, false});
  return ps;
}

std::string op_code(const Problem& p) { return std::string(p.ta ? "T" : "N") + (p.tb ? "T" : "N"); }

/// Geometric mean, minimum and count below a threshold of a list of ratios.
struct Stats {
  double lg = 0, min = 1e300;
  int n = 0, below = 0;
  void add(double x, double threshold = 0.9) {
    lg += std::log(x);
    min = std::min(min, x);
    ++n;
    below += x < threshold;
  }
  double geomean() const { return n ? std::exp(lg / n) : 0; }
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::FILE* tab = o.json ? stderr : stdout;

  const int threads = lrt::num_threads();
  Eigen::setNbThreads(1);
#if BENCH_CBLAS
  openblas_set_num_threads(1);
  const std::string blas_core = openblas_get_corename();
  std::string blas_config = openblas_get_config();
  while (!blas_config.empty() && blas_config.back() == ' ') blas_config.pop_back();
#else
  const std::string blas_core = "none", blas_config = "none";
#endif
  const std::string backend = lrt::cpu::gemm_summary();
  const auto gemm_path = lrt::cpu::gemm_choice().path;
  const bool lrt_on_blas = gemm_path == lrt::cpu::GemmPath::openblas;
#if defined(__AVX512F__)
  const char* simd = "avx512";
#elif defined(__AVX2__)
  const char* simd = "avx2";
#elif defined(__AVX__)
  const char* simd = "avx";
#else
  const char* simd = "sse2";
#endif

  const auto ps = problems(o);
  fmt::print(tab,
             "lrt-bench-gemm: lrt::gemm backend {} | lrt threads {} | Eigen {}.{}.{} ({}, 1 "
             "thread) | cblas: {} (core {}, 1 thread)\n"
             "{} shapes, {} reps (median), samples >= {} ms; GFLOP/s = 2*M*N*K / time; "
             "lrt/best: medians, (max): fastest samples; other: CPUs used by other processes\n"
             "bf16 path: {}{}\n\n",
             backend, threads, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, simd,
             BENCH_CBLAS ? blas_config : std::string("not built in"), blas_core, ps.size(), o.reps, o.min_ms,
             lrt::cpu::bf16_path_name(lrt::cpu::cpu_bf16_path()),
             lrt::cpu::bf16_gemm_supported() ? "" : std::string(" (") + lrt::cpu::bf16_missing() + ": no bf16 column)");
  if (o.json) {
    fmt::print(
        "{{\"kind\":\"config\",\"bench\":\"gemm\",\"backend\":\"{}\",\"threads\":{},"
        "\"eigen_simd\":\"{}\",\"cblas\":{},\"cblas_core\":\"{}\",\"reps\":{},\"min_ms\":{},"
        "\"quick\":{},\"bf16_path\":\"{}\"}}\n",
        backend, threads, simd, BENCH_CBLAS ? "true" : "false", blas_core, o.reps, o.min_ms, o.quick,
        lrt::cpu::bf16_path_name(lrt::cpu::cpu_bf16_path()));
    std::fflush(stdout);
  }
  fmt::print(tab,
             "{:<9} {:<4} {:>4} {:>4} | {:>4} {:>4} {:>4} {:<2} | {:>6} {:>6} {:>6} | {:>8} "
             "{:>5} {:>9} | {:>6} {:>8} {:>8} | {:>5}\n",
             "layer", "pass", "tok", "d", "M", "N", "K", "op", "lrt", "eigen", "cblas", "lrt/best", "(max)",
             "cblas/eig", "bf16", "bf16/lrt", "bf16 err", "other");
  fmt::print(tab, "{:-<124}\n", "");
  std::fflush(tab);

  const OtherLoad total_load;
  const auto t_start = Clock::now();
  std::vector<Result> rs;
  for (const Problem& p : ps) {
    const Result r = run_problem(p, o);
    rs.push_back(r);
    const bool bad = !(r.err < 1e-4);
    fmt::print(tab,
               "{:<9} {:<4} {:>4} {:>4} | {:>4} {:>4} {:>4} {:<2} | {:>6.1f} {:>6.1f} {:>6} | "
               "{:>8.2f} {:>5.2f} {:>9} | {:>6} {:>8} {:>8} | {:>4.2f}{}{}{}\n",
               p.name, p.pass, p.tokens, p.d, p.m, p.n, p.k, op_code(p), r.lrt, r.eig,
               BENCH_CBLAS ? fmt::format("{:.1f}", r.blas) : std::string("-"), r.ratio(), r.ratio_max(),
               BENCH_CBLAS ? fmt::format("{:.2f}", r.blas / r.eig) : std::string("-"),
               r.bf16 > 0 ? fmt::format("{:.1f}", r.bf16) : std::string("-"),
               r.bf16 > 0 ? fmt::format("{:.2f}", r.bf16 / r.lrt) : std::string("-"),
               r.bf16 > 0 ? fmt::format("{:.1e}", r.bf16_err) : std::string("-"), r.other, r.other > 0.25 ? "*" : " ",
               r.ratio() < 0.9 ? "  <0.9" : "", bad ? fmt::format("  MISMATCH rel err {:.2e}", r.err) : "");
    std::fflush(tab);
    if (o.json) {
      fmt::print(
          "{{\"kind\":\"gemm\",\"layer\":\"{}\",\"pass\":\"{}\",\"tokens\":{},\"d_model\":{},"
          "\"M\":{},\"N\":{},\"K\":{},\"op\":\"{}\",\"backend\":\"{}\",\"threads\":{},"
          "\"iters\":{},\"reps\":{},\"gflops_lrt\":{:.3f},\"gflops_eigen\":{:.3f},"
          "\"gflops_cblas\":{},\"gflops_lrt_max\":{:.3f},\"gflops_eigen_max\":{:.3f},"
          "\"gflops_cblas_max\":{},\"ratio_lrt_vs_best\":{:.4f},\"ratio_lrt_vs_best_max\":{:.4f},"
          "\"other_cpus\":{:.3f},\"rel_err\":{:.3e},\"gflops_bf16\":{},\"bf16_rel_err\":{}}}\n",
          p.name, p.pass, p.tokens, p.d, p.m, p.n, p.k, op_code(p), backend, threads, r.iters, r.reps, r.lrt, r.eig,
          BENCH_CBLAS ? fmt::format("{:.3f}", r.blas) : std::string("null"), r.lrt_max, r.eig_max,
          BENCH_CBLAS ? fmt::format("{:.3f}", r.blas_max) : std::string("null"), r.ratio(), r.ratio_max(), r.other,
          r.err, r.bf16 > 0 ? fmt::format("{:.3f}", r.bf16) : std::string("null"),
          r.bf16 > 0 ? fmt::format("{:.3e}", r.bf16_err) : std::string("null"));
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t_start).count();
  const double other = total_load.cpus();

  // Summary over the transformer shapes (the square one excluded).
  Stats best, best_max, own, own_max, be, be_max, half, half_max;
  int mismatches = 0, suspect = 0;
  const Result* worst = nullptr;
  for (const Result& r : rs) {
    if (!(r.err < 1e-4)) ++mismatches;
    if (r.p.name == "square") continue;
    if (r.other > 0.25) ++suspect;
    best.add(r.ratio());
    best_max.add(r.ratio_max());
    // lrt over the library it calls: its own overhead (row splitting, dispatch).
    own.add(r.lrt / (lrt_on_blas ? r.blas : r.eig));
    own_max.add(r.lrt_max / (lrt_on_blas ? r.blas_max : r.eig_max));
    if (BENCH_CBLAS) {
      be.add(r.blas / r.eig);
      be_max.add(r.blas_max / r.eig_max);
    }
    if (r.bf16 > 0) {
      half.add(r.bf16 / r.lrt, 1.6);
      half_max.add(r.bf16_max / r.lrt_max, 1.6);
    }
    if (!worst || r.ratio() < worst->ratio()) worst = &r;
  }
  fmt::print(tab, "{:-<124}\n", "");
  fmt::print(tab,
             "{} transformer shapes; medians (fastest samples):\n"
             "  lrt / best of Eigen, cblas:  geomean {:.3f} ({:.3f}), min {:.3f} ({:.3f}), "
             "below 0.90: {} ({})\n"
             "  lrt / {} called directly: geomean {:.3f} ({:.3f}), min {:.3f} ({:.3f}), below "
             "0.90: {} ({})\n",
             best.n, best.geomean(), best_max.geomean(), best.min, best_max.min, best.below, best_max.below,
             lrt_on_blas ? "cblas" : "Eigen", own.geomean(), own_max.geomean(), own.min, own_max.min, own.below,
             own_max.below);
  fmt::print(tab, "  worst lrt/best: {} {} tok {} d {} ({:.3f})\n", worst->p.name, worst->p.pass, worst->p.tokens,
             worst->p.d, worst->ratio());
  if (BENCH_CBLAS)
    fmt::print(tab, "  cblas / Eigen:               geomean {:.3f} ({:.3f}), min {:.3f} ({:.3f})\n", be.geomean(),
               be_max.geomean(), be.min, be_max.min);
  if (half.n)
    fmt::print(tab, "  bf16 / lrt fp32 ({}):     geomean {:.3f} ({:.3f}), min {:.3f} ({:.3f}), below 1.6: {} ({})\n",
               lrt::cpu::bf16_path_name(lrt::cpu::cpu_bf16_path()), half.geomean(), half_max.geomean(), half.min,
               half_max.min, half.below, half_max.below);
  fmt::print(tab, "  other processes used {:.2f} CPUs on average; {} shapes above 0.25 (*)\n", other, suspect);
  if (mismatches) fmt::print(tab, "{} shapes MISMATCH (rel err >= 1e-4)\n", mismatches);
  fmt::print(tab, "total {:.1f} s\n", secs);
  if (o.json) {
    fmt::print(
        "{{\"kind\":\"summary\",\"bench\":\"gemm\",\"backend\":\"{}\",\"threads\":{},"
        "\"shapes\":{},\"geomean_ratio_lrt_vs_best\":{:.4f},\"min_ratio_lrt_vs_best\":{:.4f},"
        "\"below_0_9\":{},\"geomean_ratio_lrt_vs_best_max\":{:.4f},"
        "\"min_ratio_lrt_vs_best_max\":{:.4f},\"below_0_9_max\":{},"
        "\"geomean_ratio_lrt_vs_own_backend\":{:.4f},\"min_ratio_lrt_vs_own_backend\":{:.4f},"
        "\"geomean_cblas_over_eigen\":{},\"other_cpus\":{:.3f},\"suspect_shapes\":{},"
        "\"mismatches\":{},\"seconds\":{:.1f},\"geomean_ratio_bf16_vs_lrt\":{}}}\n",
        backend, threads, best.n, best.geomean(), best.min, best.below, best_max.geomean(), best_max.min,
        best_max.below, own.geomean(), own.min, BENCH_CBLAS ? fmt::format("{:.4f}", be.geomean()) : std::string("null"),
        other, suspect, mismatches, secs, half.n ? fmt::format("{:.4f}", half.geomean()) : std::string("null"));
  }
  return mismatches ? 1 : 0;
}
