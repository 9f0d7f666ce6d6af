// lrt-bench-elementwise: bandwidth of lrt's fused elementwise expressions against a hand-written
// STREAM triad on the same arrays, measured in one run.
//
//   lrt-bench-elementwise [--reps N] [--quick] [--json] [--threads N] [--min-ms X]
//
// lrt kernels (one fused pass each, on lrt's pool: LRT_NUM_THREADS, or --threads):
//   fused      d = a * b + c * 2.f           reads 3, writes 1 array    16 B/element
//   triad      d = a + s * b                 reads 2, writes 1          12 B/element
//   exp        d = exp(a) * b                reads 2, writes 1          12 B/element
//   bias       D = X + bias                  X (n/512, 512), bias (512) broadcast over rows
//                                                                        8 B/element
//   transpose  D = A.t() + B                 A, B, D (s, s), s = sqrt(n): a transposed source
//                                                                       12 B/element
// references (not lrt): the STREAM triad loop `for i: d[i] = a[i] + s * b[i]` on one thread
// (triad_ref_1t) and split in two halves over 2 std::threads that wait on a std::barrier between
// calls (triad_ref_2t). "vs best triad" divides a kernel's GB/s by the better of the two.
// Bytes are those read plus those written (STREAM's convention: write-allocate traffic not
// counted). Sizes n = 2^20 .. 2^24 floats per array (4 MB .. 64 MB).
//
// Each timed sample runs a kernel `iters` times (iters from the warm-up so that a sample lasts
// >= --min-ms); kernels are sampled in turn so that machine drift hits all alike; the table
// reports the median over --reps samples. Every lrt kernel's output is checked once against a
// scalar loop. The summary line of each size also gives the CPU time other processes (and the
// hypervisor: steal) took meanwhile, in CPUs (/proc/stat minus this process's rusage): above
// 0.25 the timings are suspect.
//
// Output: a table (stdout; stderr with --json), and with --json one JSON object per line on
// stdout: {"kind":"config",...}, one {"kind":"elementwise",...} per (size, kernel),
// {"kind":"summary",...} per size.
//
// Build by hand (the CMake target is lrt-bench-elementwise):
//   g++ -std=c++20 -O3 -DNDEBUG -Iinclude -I/usr/include/eigen3 bench/elementwise.cpp
//       -lfmt -lpthread
#include <lrt/tensor.hpp>

#include "bench_util.hpp"

#include <fmt/core.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using lrt_bench::median;
using lrt_bench::OtherLoad;

using lrt::index_t;
using Clock = std::chrono::steady_clock;

struct Options {
  int reps = 11;
  bool quick = false;
  bool json = false;
  double min_ms = 20.0;
};

Options parse(int argc, char** argv) {
  tool::Args args("lrt-bench-elementwise",
                  "bandwidth of lrt's fused elementwise expressions against a hand-written STREAM triad");
  args.option("reps", "N", "timed samples per kernel and size (median reported)", "11")
      .flag("quick", "sizes 2^20 and 2^24 only, 5 reps")
      .flag("json", "one JSON object per line on stdout (the table goes to stderr)")
      .shared("threads")
      .option("min-ms", "X", "least duration of one timed sample in ms", "20");
  Options o;
  const int rc = tool::parse_args(args, argc, argv, [&] {
    o.quick = args.has("quick"), o.json = args.has("json");
    o.reps = o.quick && !args.has("reps") ? 5 : static_cast<int>(args.integer("reps", 1, 1 << 30));
    tool::apply_threads(args);
    o.min_ms = args.number("min-ms", 0, 1e9);
  });
  if (rc >= 0) std::exit(rc);
  return o;
}

// The STREAM triad, as a plain loop the compiler vectorises (kept out of line so that every
// call runs the same code).
[[gnu::noinline]] void triad_loop(float* __restrict d, const float* __restrict a, const float* __restrict b, float s,
                                  index_t n) {
  for (index_t i = 0; i < n; ++i) d[i] = a[i] + s * b[i];
}

/// The triad split in two halves: the calling thread and one persistent std::thread, which
/// meet at a std::barrier before and after each call (no thread creation per call).
class TwoThreadTriad {
 public:
  TwoThreadTriad() : sync_(2), worker_([this] { loop(); }) {}
  ~TwoThreadTriad() {
    stop_ = true;
    sync_.arrive_and_wait();
    worker_.join();
  }
  void operator()(float* d, const float* a, const float* b, float s, index_t n) {
    d_ = d;
    a_ = a;
    b_ = b;
    s_ = s;
    n_ = n;
    sync_.arrive_and_wait();  // start
    const index_t h = half(n);
    triad_loop(d, a, b, s, h);
    sync_.arrive_and_wait();  // done
  }

 private:
  static index_t half(index_t n) { return (n / 2) & ~index_t{63}; }  // 256-byte aligned split
  void loop() {
    for (;;) {
      sync_.arrive_and_wait();
      if (stop_) return;
      const index_t h = half(n_);
      triad_loop(d_ + h, a_ + h, b_ + h, s_, n_ - h);
      sync_.arrive_and_wait();
    }
  }
  std::barrier<> sync_;
  float* d_ = nullptr;
  const float* a_ = nullptr;
  const float* b_ = nullptr;
  float s_ = 0;
  index_t n_ = 0;
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

struct Kernel {
  std::string name;
  std::string expr;
  double bytes_per_elem;
  bool lrt;  // false: a hand-written reference
  std::function<void()> run;
  std::function<double()> check;  // max abs error against a scalar loop (lrt kernels)
};

struct Row {
  index_t n;
  std::string name, expr;
  bool lrt;
  double bytes_per_elem;
  int iters;
  double gbs, gbs_best_sample, err;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::FILE* tab = o.json ? stderr : stdout;
  const int threads = lrt::num_threads();
#if defined(__AVX512F__)
  const char* simd = "avx512";
#elif defined(__AVX2__)
  const char* simd = "avx2";
#elif defined(__AVX__)
  const char* simd = "avx";
#else
  const char* simd = "sse2";
#endif

  const std::vector<int> log2n = o.quick ? std::vector<int>{20, 24} : std::vector<int>{20, 21, 22, 23, 24};
  fmt::print(tab,
             "lrt-bench-elementwise: lrt threads {} | build {} | {} reps (median), samples >= {} "
             "ms\nGB/s = (bytes read + bytes written) / time / 1e9; 'vs triad' = GB/s / best of "
             "triad_ref_1t and triad_ref_2t at that size;\n'vs same-thr' = GB/s / the triad_ref "
             "with lrt's thread count (1t for 1 thread, else 2t)\n\n",
             threads, simd, o.reps, o.min_ms);
  if (o.json) {
    fmt::print(
        "{{\"kind\":\"config\",\"bench\":\"elementwise\",\"threads\":{},\"simd\":\"{}\","
        "\"reps\":{},\"min_ms\":{},\"quick\":{}}}\n",
        threads, simd, o.reps, o.min_ms, o.quick);
    std::fflush(stdout);
  }
  fmt::print(tab, "{:>9} {:>8} {:<13} {:<26} {:>4} | {:>8} {:>8} {:>11} {:>8}\n", "n", "MB/array", "kernel",
             "expression", "B/el", "GB/s", "vs triad", "vs same-thr", "max err");
  fmt::print(tab, "{:-<100}\n", "");
  std::fflush(tab);

  TwoThreadTriad triad2;
  const float s = 3.f;
  const auto t_start = Clock::now();
  int failures = 0;

  for (int lg : log2n) {
    const index_t n = index_t{1} << lg;
    const index_t cols = 512, rows = n / cols;
    const index_t side = index_t{1} << (lg / 2);  // transpose: side x side' with side*side' = n
    const index_t side2 = n / side;
    lrt::Tensor<float, 1> a({n}), b({n}), c({n}), d({n});
    lrt::Tensor<float, 1> bias({cols});
    a = lrt::uniform<float>(a.shape(), 1, 0, -1.f, 1.f);
    b = lrt::uniform<float>(b.shape(), 2, 0, -1.f, 1.f);
    c = lrt::uniform<float>(c.shape(), 3, 0, -1.f, 1.f);
    bias = lrt::uniform<float>(bias.shape(), 4, 0, -1.f, 1.f);
    const auto x2 = a.reshape<2>(lrt::Shape<2>{rows, cols});
    auto d2 = d.reshape<2>(lrt::Shape<2>{rows, cols});
    const auto at = a.reshape<2>(lrt::Shape<2>{side, side2}).t();  // (side2, side), strided
    const auto bt = b.reshape<2>(lrt::Shape<2>{side2, side});
    auto dt = d.reshape<2>(lrt::Shape<2>{side2, side});
    const float* A = a.data();
    const float* B = b.data();
    const float* C = c.data();
    const float* BI = bias.data();
    float* D = d.data();

    auto max_err = [&](auto ref) {
      double e = 0;
      for (index_t i = 0; i < n; ++i) e = std::max(e, double(std::fabs(D[i] - ref(i))));
      return e;
    };
    std::vector<Kernel> ks;
    ks.push_back({"fused", "d = a * b + c * 2.f", 16, true, [&] { d = a * b + c * 2.f; },
                  [&] { return max_err([&](index_t i) { return A[i] * B[i] + C[i] * 2.f; }); }});
    ks.push_back({"triad", "d = a + s * b", 12, true, [&] { d = a + s * b; },
                  [&] { return max_err([&](index_t i) { return A[i] + s * B[i]; }); }});
    ks.push_back({"exp", "d = exp(a) * b", 12, true, [&] { d = lrt::exp(a) * b; },
                  [&] { return max_err([&](index_t i) { return std::exp(A[i]) * B[i]; }); }});
    ks.push_back({"bias", "D = X + bias (rows 512)", 8, true, [&] { d2 = x2 + bias; },
                  [&] { return max_err([&](index_t i) { return A[i] + BI[i % cols]; }); }});
    ks.push_back({"transpose", "D = A.t() + B", 12, true, [&] { dt = at + bt; },
                  [&] {
                    return max_err([&](index_t i) {
                      const index_t r = i / side, q = i % side;  // D (side2, side)
                      return A[q * side2 + r] + B[i];
                    });
                  }});
    ks.push_back({"triad_ref_1t", "d[i] = a[i] + s * b[i]", 12, false, [&] { triad_loop(D, A, B, s, n); }, nullptr});
    ks.push_back({"triad_ref_2t", "same, 2 std::threads", 12, false, [&] { triad2(D, A, B, s, n); }, nullptr});

    // Warm-up, correctness, calibration.
    const OtherLoad load;
    std::vector<int> iters(ks.size());
    std::vector<double> errs(ks.size(), 0);
    for (std::size_t k = 0; k < ks.size(); ++k) {
      ks[k].run();
      if (ks[k].check) errs[k] = ks[k].check();
      const auto t0 = Clock::now();
      ks[k].run();
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      iters[k] = std::clamp(static_cast<int>(std::ceil(o.min_ms * 1e-3 / std::max(t, 1e-9))), 1, 100000);
    }
    std::vector<std::vector<double>> ts(ks.size());
    for (int rep = 0; rep < o.reps; ++rep) {
      for (std::size_t k = 0; k < ks.size(); ++k) {
        const auto t0 = Clock::now();
        for (int i = 0; i < iters[k]; ++i) ks[k].run();
        ts[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count() / iters[k]);
      }
    }
    const double other = load.cpus();
    std::vector<Row> rows_out;
    double best_triad = 0, same_triad = 0;
    for (std::size_t k = 0; k < ks.size(); ++k) {
      const double bytes = ks[k].bytes_per_elem * double(n);
      const double gbs = bytes / median(ts[k]) * 1e-9;
      const double best = bytes / *std::min_element(ts[k].begin(), ts[k].end()) * 1e-9;
      rows_out.push_back({n, ks[k].name, ks[k].expr, ks[k].lrt, ks[k].bytes_per_elem, iters[k], gbs, best, errs[k]});
      if (!ks[k].lrt) best_triad = std::max(best_triad, gbs);
      if (ks[k].name == (threads == 1 ? "triad_ref_1t" : "triad_ref_2t")) same_triad = gbs;
    }
    double fused_ratio = 0, fused_same = 0;
    for (const Row& r : rows_out) {
      const double ratio = r.gbs / best_triad, same = r.gbs / same_triad;
      const bool bad = !(r.err <= 1e-5);
      if (bad) ++failures;
      if (r.name == "fused") {
        fused_ratio = ratio;
        fused_same = same;
      }
      fmt::print(tab, "{:>9} {:>8.0f} {:<13} {:<26} {:>4.0f} | {:>8.2f} {:>8.2f} {:>11.2f} {:>8}{}{}\n",
                 fmt::format("2^{}", lg), double(n) * 4 / (1 << 20), r.name, r.expr, r.bytes_per_elem, r.gbs, ratio,
                 same, r.lrt ? fmt::format("{:.1e}", r.err) : std::string("-"), r.lrt && ratio < 0.7 ? "  <0.70" : "",
                 bad ? "  MISMATCH" : "");
      if (o.json) {
        fmt::print(
            "{{\"kind\":\"elementwise\",\"n\":{},\"log2n\":{},\"kernel\":\"{}\",\"expr\":\"{}\","
            "\"lrt\":{},\"threads\":{},\"bytes_per_elem\":{},\"iters\":{},\"gbs\":{:.3f},"
            "\"gbs_best_sample\":{:.3f},\"ratio_vs_best_triad\":{:.4f},\"ratio_vs_same_thread_triad\":{:.4f},"
            "\"max_abs_err\":{}}}\n",
            n, lg, r.name, r.expr, r.lrt, threads, r.bytes_per_elem, r.iters, r.gbs, r.gbs_best_sample, ratio, same,
            r.lrt ? fmt::format("{:.3e}", r.err) : std::string("null"));
      }
    }
    fmt::print(tab,
               "{:>9} fused / best triad = {:.2f} (target >= 0.70: {}); fused / same-thread "
               "triad = {:.2f}; other processes used {:.2f} CPUs{}\n",
               "", fused_ratio, fused_ratio >= 0.7 ? "met" : "MISSED", fused_same, other,
               other > 0.25 ? " (timings suspect)" : "");
    fmt::print(tab, "{:-<100}\n", "");
    std::fflush(tab);
    if (o.json) {
      fmt::print(
          "{{\"kind\":\"summary\",\"bench\":\"elementwise\",\"n\":{},\"threads\":{},"
          "\"best_triad_gbs\":{:.3f},\"fused_ratio_vs_best_triad\":{:.4f},\"fused_ratio_vs_same_thread_triad\":{:.4f},"
          "\"target_met\":{},\"other_cpus\":{:.3f}}}\n",
          n, threads, best_triad, fused_ratio, fused_same, fused_ratio >= 0.7, other);
      std::fflush(stdout);
    }
  }
  fmt::print(tab, "total {:.1f} s\n", std::chrono::duration<double>(Clock::now() - t_start).count());
  return failures ? 1 : 0;
}
