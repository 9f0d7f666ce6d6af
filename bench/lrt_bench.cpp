// lrt-bench: CPU performance of lrt's models in one table (LRT-SPEC §10): training tokens/s and
// MFU of one full optimizer step, decode tokens/s against the memory-bandwidth bound, at 1 and 2
// threads, with the peak memory of each configuration. The references are measured in the same run:
//   R_ref  the faster of Eigen's own and OpenBLAS's single-thread fp32 GEMM on 1024^3 (median
//          GFLOP/s of interleaved samples; OpenBLAS only in builds with cblas);
//   triad  a STREAM triad a = b + s c over 3 x 64 MiB float arrays on N std::threads (best of the
//          samples, STREAM's convention; bytes = 3 x 4 x n), one figure per thread count.
//
// Training (name "train"): presets x {baseline/Standard, lrt/Interleaved<2>} x threads. One step is
// lrt::Trainer::train_step() on random byte rows (forward + backward + AdamW + Muon + zero_grad) at
// lrt-train's batch for the preset: tiny 32 x 128, small 16 x 256, medium 32 x 256 rows per
// optimizer step, medium in micro-batches of 8 rows (4 forward/backward passes per update), as
// lrt-train trains (--batch-tokens N instead: N / T rows in one micro-batch).
//   tokens_per_s = rows T / step time (median);  mfu = F x pass_factor x tokens_per_s / R_ref,
//   with F = Model::flops_per_token() and pass_factor<Sched, V>() (1 baseline, 2 Interleaved).
// opt_s = StepStats::optimizer_seconds (AdamW + Muon, whose cost does not shrink with the batch);
// fwd_bwd_s = step - opt_s.
// Decode (name "decode"): presets x variants x batch {1, 8} x threads, one Decoder session per
// configuration with capacity max(--contexts) (beyond the preset's sequence_len when larger: the
// windowed attention then reads min(ctx, w_l + 1) keys, so ctx 1024 on T = 256 presets attends
// as much as ctx 257). Every step is timed; "at context c" is the median over the c/4 steps that
// end with c keys in the cache; tokens_per_s = B / that median.
//   bound = triad(threads) / bytes per token, bytes per step = 4 N_mm (every matmul weight,
//   lm_head's padded rows included) + 4 B d (wte + value-embedding rows) + 4 B sum_l 2 D
//   min(ctx, w_l + 1) (K and V read); bandwidth_fraction = tokens_per_s / bound (it may exceed 1
//   when the weights stay in cache, as tiny's 3.3 MB could). mfu = decode FLOPs per token
//   (2 N_mm + sum_l 4 H Dh min(ctx, w_l + 1)) x tokens_per_s / R_ref.
//
// Threads and memory: every configuration runs in a child process (this program re-executed from
// /proc/self/exe with LRT_NUM_THREADS set), because lrt's pool is sized once per process; the
// child reports its VmHWM (peak resident set of its own address space after exec: model,
// optimizer state or KV cache, activations, the allocator's cache and the libraries) and lrt's
// tensor-allocator peak over the timed part. OpenBLAS stays single-threaded: lrt's GEMM calls
// openblas_set_num_threads(1) before its first call, and R_ref's reference calls do the same.
// GEMM share: the child installs lrt's GEMM profile counters (lrt::cpu::set_gemm_profile), so
// gemm_share is the fraction of the pool's thread-time spent inside lrt's GEMM calls (OpenBLAS or
// Eigen, whichever the build uses; gemv rows included) over the timed steps, and
// gemm_gflops_per_thread the rate those calls reached.
//
// Usage: lrt-bench [--quick] [--json] [--presets tiny,small,medium] [--variants baseline,lrt]
//                  [--threads 1,2] [--contexts 64,256,1024] [--decode-batches 1,8]
//                  [--batch-tokens 2048] [--reps 3] [--config-budget-s 40] [--no-train]
//                  [--no-decode]
// Noise: other processes share the CPUs (the "other" column), and on 2 vCPUs that share one core
// the speed of one thread moves by 2x within minutes. So R_ref (3 samples of the faster library)
// and the triad are also measured right before and right after each configuration's child:
// MFU* = mfu_local and bw* = bandwidth_fraction_local use the mean of the two, and follow the
// machine's load through the run (the spec's mfu uses the run's R_ref).
// --json: one JSON object per line on stdout (the table goes to stderr). Every line has name,
// preset, variant, threads, tokens_per_s, mfu (and bandwidth_fraction for decode; reference lines
// carry null where a field does not apply).
//
// Build by hand: g++ -std=c++20 -O3 -DNDEBUG -Iinclude -I/usr/include/eigen3 -DLRT_USE_OPENBLAS=1
//   -I/usr/include/x86_64-linux-gnu/openblas-pthread bench/lrt_bench.cpp -lfmt -lopenblas -lpthread
#include "bench_util.hpp"

#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if (defined(LRT_USE_OPENBLAS) && LRT_USE_OPENBLAS) || (defined(LRT_BENCH_HAVE_CBLAS) && LRT_BENCH_HAVE_CBLAS)
#define BENCH_CBLAS 1
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
#else
#define BENCH_CBLAS 0
#endif

#include <lrt/lrt.hpp>
#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>
#include <lrt/runtime/training.hpp>

#include <Eigen/Core>
#include <fmt/core.h>

extern char** environ;

namespace {

using lrt::index_t;
using lrt_bench::Clock;
using lrt_bench::json_number;
using lrt_bench::median;

constexpr const char* kResultPrefix = "LRTBENCH ";

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ------------------------------------------------------------------ options

struct Options {
  bool quick = false, json = false, train = true, decode = true;
  std::vector<std::string> presets{"tiny", "small", "medium"};
  std::vector<std::string> variants{"baseline", "lrt"};
  std::vector<int> threads{1, 2};
  std::vector<index_t> contexts{64, 256, 1024};
  std::vector<index_t> batches{1, 8};
  // Decoder; LeanDecoder (batch 1 here; its rows: lrt-bench-rows) on fp32 weights, on int8 ones (groups of 64), on bf16
  // ones
  std::vector<std::string> decoders{"graph", "lean", "lean-int8"};
  index_t batch_tokens = 0;  // 0: lrt-train's rows per step for the preset
  int reps = 3;
  double config_budget_s = 40;
  // worker mode (hidden): one configuration, printed as one kResultPrefix line per result
  std::vector<std::string> precisions{"fp32"};  // training rows: fp32 and/or bf16 (lrt::cpu::set_cpu_matmul)
  std::string worker;                           // "", "train", "decode"
  std::string preset, variant, precision = "fp32";
  index_t batch = 1;
  std::string decoder = "graph";
  double r_ref = 0, triad = 0;  // GFLOP/s, GB/s
};

template <class T>
std::vector<T> to(const std::vector<long long>& v) {
  return std::vector<T>(v.begin(), v.end());
}

Options parse(int argc, char** argv) {
  tool::Args args("lrt-bench",
                  "CPU performance of lrt's models in one table: training tokens/s and MFU, decode tokens/s against "
                  "the memory-bandwidth bound, at 1 and 2 threads");
  args.flag("quick", "tiny only, 1 timed step, 1024 tokens per step (< 60 s)")
      .flag("json", "one JSON object per line on stdout (the table goes to stderr)")
      .option("presets", "LIST", "comma-separated presets", "tiny,small,medium")
      .option("variants", "LIST", "baseline (Standard) and/or lrt (Interleaved<2>)", "baseline,lrt")
      .option("threads", "LIST", "LRT_NUM_THREADS of the runs", "1,2")
      .option("contexts", "LIST", "decode contexts", "64,256,1024")
      .option("decode-batches", "LIST", "decode batch sizes", "1,8")
      .option("decoders", "LIST",
              "graph (lrt::Decoder), lean (lrt::LeanDecoder at batch 1; its rows: lrt-bench-rows), lean-int8, "
              "lean-bf16 (the lean "
              "decoder on int8 weights in groups of 64, or on bf16 weights: the rows' \"weights\" field)",
              "graph,lean,lean-int8")
      .option("batch-tokens", "N",
              "training tokens per step, rows = N / T in one micro-batch (default: lrt-train's batch: tiny 32 x "
              "128, small 16 x 256, medium 32 x 256 in 4)")
      .option("reps", "N",
              "timed training steps per configuration (fewer when one step would take the configuration past "
              "--config-budget-s, at least 2; --quick: 1)",
              "3")
      .option("config-budget-s", "X", "seconds a training configuration should take", "40")
      .option("precision", "LIST",
              "the training rows' matrix products: fp32 and/or bf16 (bf16 inputs, fp32 accumulation, on lrt's bf16 "
              "kernels: AVX512-BF16; each a row of its own)",
              "fp32")
      .flag("no-train", "skip the training part")
      .flag("no-decode", "skip the decode part")
      // The child processes' options (one configuration each, re-executed from /proc/self/exe).
      .hidden("worker")
      .hidden("preset")
      .hidden("variant")
      .hidden("batch")
      .hidden("decoder")
      .hidden("r-ref")
      .hidden("triad");
  Options o;
  const int rc = tool::parse_args(args, argc, argv, [&] {
    constexpr double positive = std::numeric_limits<double>::min();
    constexpr long long most = std::numeric_limits<int>::max();
    o.quick = args.has("quick"), o.json = args.has("json");
    o.train = !args.has("no-train"), o.decode = !args.has("no-decode");
    o.presets = args.items("presets");
    o.variants = args.items("variants");
    o.threads = to<int>(args.integers("threads", 1, most));
    o.contexts = to<index_t>(args.integers("contexts", 1, most));
    o.batches = to<index_t>(args.integers("decode-batches", 1, most));
    o.decoders = args.items("decoders");
    if (args.has("batch-tokens")) o.batch_tokens = args.integer("batch-tokens", 1, most);
    o.reps = static_cast<int>(args.integer("reps", 1, most));
    o.config_budget_s = args.number("config-budget-s", positive, 1e12);
    o.worker = args.str("worker"), o.preset = args.str("preset"), o.variant = args.str("variant");
    o.precisions = args.items("precision");
    for (const auto& p : o.precisions) {
      if (p != "fp32" && p != "bf16") throw tool::UsageError("--precision: unknown '" + p + "' (known: fp32, bf16)");
      if (p == "bf16" && !lrt::cpu::bf16_gemm_supported())
        throw tool::UsageError(std::string("--precision bf16 needs AVX512-BF16 (vdpbf16ps) or AMX: ") +
                               lrt::cpu::bf16_missing());
    }
    o.precision = o.precisions.front();  // a worker's (one item)
    if (args.has("batch")) o.batch = args.integer("batch", 1, most);
    if (args.has("decoder")) o.decoder = args.str("decoder");
    if (args.has("r-ref")) o.r_ref = args.number("r-ref", positive, 1e300);
    if (args.has("triad")) o.triad = args.number("triad", positive, 1e300);
    if (o.quick) {
      if (!args.has("presets")) o.presets = {"tiny"};
      if (!args.has("reps")) o.reps = 1;
      if (!args.has("batch-tokens")) o.batch_tokens = 1024;
    }
    for (const auto& v : o.variants)
      if (v != "baseline" && v != "lrt") throw tool::UsageError("unknown variant '" + v + "' (known: baseline, lrt)");
    for (const auto& d : o.decoders)
      if (d != "graph" && d != "lean" && d != "lean-int8" && d != "lean-bf16")
        throw tool::UsageError("unknown decoder '" + d + "' (known: graph, lean, lean-int8, lean-bf16)");
    for (const auto& p : o.presets) {
      try {
        (void)lrt::preset(p);
      } catch (const std::exception& e) {
        throw tool::UsageError(e.what());
      }
    }
  });
  if (rc >= 0) std::exit(rc);
  std::sort(o.contexts.begin(), o.contexts.end());
  return o;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ',';
    s += x;
  }
  return s;
}
template <class T>
std::string join_num(const std::vector<T>& v) {
  std::string s;
  for (const auto& x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// ------------------------------------------------------------------ references (parent)

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct GemmRef {
  double eigen = 0, blas = 0, own = 0;  // median GFLOP/s, 1024^3, one thread (own: lrt's kernels)
  double best() const { return std::max({eigen, blas, own}); }
  /// Which of the three is fastest, as measure_gemm_ref's flags.
  int fastest() const { return own >= best() ? 4 : blas >= best() ? 2 : 1; }
};

/// GFLOP/s of a 1024^3 fp32 GEMM on one thread: `which` = 1 Eigen | 2 OpenBLAS | 4 lrt's own
/// kernels at the CPU's widest instruction set (backend/cpu/sgemm.hpp), where it has them.
GemmRef measure_gemm_ref(int reps, int which = 7) {
  const bool with_eigen = which & 1, with_blas = which & 2;
  const lrt::cpu::SimdLevel own_level = lrt::cpu::cpu_simd_level() >= lrt::cpu::SimdLevel::avx512
                                            ? lrt::cpu::SimdLevel::avx512
                                            : lrt::cpu::SimdLevel::avx2;
  const bool with_own = (which & 4) && lrt::cpu::sgemm_has_kernel(own_level) && lrt::cpu::cpu_simd_level() >= own_level;
  constexpr index_t n = 1024;
  Eigen::setNbThreads(1);
#if BENCH_CBLAS
  openblas_set_num_threads(1);
#endif
  RowMat A = RowMat::Random(n, n), B = RowMat::Random(n, n), C(n, n), C2(n, n);
  auto eig = [&] { C.noalias() = A * B; };
  (void)with_blas;
#if BENCH_CBLAS
  auto blas = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C2.data(), n);
  };
  // Warm-up: at least 0.2 s per library (buffers, page faults, clock ramp-up).
  for (const auto w0 = Clock::now(); with_blas && seconds_since(w0) < 0.2;) blas();
#endif
  for (const auto w0 = Clock::now(); with_eigen && seconds_since(w0) < 0.2;) eig();
  RowMat C3(n, n);
  auto own = [&] {
    lrt::cpu::sgemm(own_level, n, n, n, 1.f, {A.data(), n, false}, {B.data(), n, false}, 0.f, C3.data(), n);
  };
  for (const auto w0 = Clock::now(); with_own && seconds_since(w0) < 0.2;) own();
  std::vector<double> te, tb, to;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    if (with_own) {
      own();
      to.push_back(seconds_since(t0));
      t0 = Clock::now();
    }
    if (with_eigen) {
      eig();
      te.push_back(seconds_since(t0));
    }
#if BENCH_CBLAS
    if (with_blas) {
      t0 = Clock::now();
      blas();
      tb.push_back(seconds_since(t0));
    }
#endif
  }
  const double flops = 2.0 * double(n) * double(n) * double(n);
  GemmRef g;
  if (!te.empty()) g.eigen = flops / median(te) * 1e-9;
  if (!tb.empty()) g.blas = flops / median(tb) * 1e-9;
  if (!to.empty()) g.own = flops / median(to) * 1e-9;
  return g;
}

/// STREAM triad a = b + s c over three arrays of n floats (kept by the parent between
/// measurements; a child's VmHWM starts afresh at exec). measure(threads, reps): `threads`
/// std::threads on contiguous slices, best GB/s over reps after one warm-up, bytes = 3 x 4 x n.
class Triad {
 public:
  explicit Triad(std::size_t n) : n_(n), a_(new float[n]), b_(new float[n]), c_(new float[n]) {
    for (std::size_t i = 0; i < n_; ++i) a_[i] = 0.f, b_[i] = 1.f, c_[i] = 2.f;
  }
  std::size_t size() const { return n_; }
  double measure(int threads, int reps) {
    const float s = 3.f;
    double best = 1e300;
    for (int r = 0; r < reps + 1; ++r) {  // the first is a warm-up
      const auto t0 = Clock::now();
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
          const std::size_t lo = n_ * std::size_t(t) / std::size_t(threads);
          const std::size_t hi = n_ * std::size_t(t + 1) / std::size_t(threads);
          float* __restrict pa = a_.get();
          const float* __restrict pb = b_.get();
          const float* __restrict pc = c_.get();
          for (std::size_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
        });
      for (auto& th : ts) th.join();
      if (r > 0) best = std::min(best, seconds_since(t0));
    }
    volatile float sink = a_[n_ / 2];
    (void)sink;
    return 3.0 * 4.0 * double(n_) / best * 1e-9;
  }

 private:
  std::size_t n_;
  std::unique_ptr<float[]> a_, b_, c_;
};

// ------------------------------------------------------------------ workers (children)

using Ids = lrt::Tensor<index_t, 2>;

Ids random_ids(index_t B, index_t T, index_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<index_t> dist(0, V - 1);
  Ids x(lrt::Shape<2>{B, T});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t) x(b, t) = dist(rng);
  return x;
}

/// lrt's GEMM profile counters (lrt::cpu::set_gemm_profile), installed for the whole child.
lrt::cpu::GemmProfile& gemm_profile() {
  static lrt::cpu::GemmProfile p;
  static const bool installed = (lrt::cpu::set_gemm_profile(&p), true);
  (void)installed;
  return p;
}

struct GemmCounter {
  std::int64_t ns = 0, flops = 0;
  static GemmCounter now() {
    GemmCounter c;
    c.ns = gemm_profile().ns.load();
    c.flops = gemm_profile().flops.load();
    return c;
  }
};
constexpr bool kGemmTimer = true;

/// rows per optimizer step of lrt-train for a preset (examples/tools/runner.hpp preset_batch_rows).
index_t train_batch_rows(const std::string& p) { return p == "small" ? 16 : 32; }
/// micro-batch rows of lrt-train for a preset (examples/tools/runner.hpp preset_micro_rows; 0 = one).
index_t train_micro_rows(const std::string& p) { return p == "medium" ? 8 : 0; }

/// The training step of a pair of the build (the runtime's table, lrt/runtime/training.hpp: any
/// pair lrt-train trains, by its name), on random bytes.
int train_worker(const Options& o) {
  const lrt::ModelConfig cfg = lrt::preset(o.preset);
  const index_t T = cfg.sequence_len;
  const index_t B = o.batch_tokens > 0 ? std::max<index_t>(1, o.batch_tokens / T) : train_batch_rows(o.preset);
  const index_t micro = o.batch_tokens > 0 ? 0 : train_micro_rows(o.preset);
  if (o.precision == "bf16") lrt::cpu::set_cpu_matmul(lrt::cpu::CpuMatmul::bf16);  // before the first product
  const std::unique_ptr<lrt::runtime::Model> model = lrt::runtime::make_model(o.variant, cfg, 1);
  std::vector<std::string> docs;  // B + 1 documents of T random bytes: one row each
  std::mt19937_64 rng(5);
  for (index_t i = 0; i < B + 1; ++i) {
    std::string text(static_cast<std::size_t>(T), ' ');
    for (char& ch : text) ch = static_cast<char>(rng() & 0xff);
    docs.push_back(std::move(text));
  }
  lrt::TrainOptions to;
  to.batch_rows = B;
  to.micro_rows = micro;
  to.steps = 1000000;  // horizon: keeps the LR multiplier at 1
  const std::unique_ptr<lrt::runtime::Training> trainer = model->train(docs, to);

  auto t0 = Clock::now();
  (void)trainer->step();  // warm-up: allocations, page faults, the pool
  const double warm = seconds_since(t0);
  int reps = o.reps;
  if (!o.quick)  // fewer timed steps when they would take the configuration past its budget, but >= 2
    reps = std::max(std::min(2, reps), std::min(reps, static_cast<int>(o.config_budget_s / warm)));

  lrt::cpu::reset_peak_memory();
  const lrt_bench::OtherLoad load;
  std::vector<double> ts, topt;
  GemmCounter g_sum;
  double t_sum = 0, loss = 0;
  for (int r = 0; r < reps; ++r) {
    const GemmCounter g0 = GemmCounter::now();
    const lrt::runtime::StepReport s = trainer->step();
    ts.push_back(s.seconds);
    topt.push_back(s.optimizer_seconds);
    const GemmCounter g1 = GemmCounter::now();
    g_sum.ns += g1.ns - g0.ns, g_sum.flops += g1.flops - g0.flops, t_sum += ts.back();
    loss = s.loss;
  }
  const double other = load.cpus();
  const double tensor_peak = double(lrt::cpu::memory_stats().peak_in_use) / (1 << 20);

  const int threads = lrt::num_threads();
  const double step = median(ts), opt = median(topt), fb = std::max(1e-9, step - opt);
  const double tokens = double(B * T);
  const double F = model->flops_per_token(), pf = model->pass_factor();
  const double tps = tokens / step, tps_fb = tokens / fb;
  const double r_ref = o.r_ref * 1e9;
  const std::string sched = model->schedule();
  fmt::print(
      "{}{{\"name\":\"train\",\"preset\":\"{}\",\"variant\":\"{}\",\"schedule\":\"{}\",\"threads\":{},"
      "\"tokens_per_s\":{},\"mfu\":{},\"batch_rows\":{},\"micro_rows\":{},\"seq_len\":{},\"tokens_per_step\":{},"
      "\"step_s\":{},\"fwd_bwd_s\":{},\"opt_s\":{},\"flops_per_token\":{},\"pass_factor\":{},\"r_ref_gflops\":{},"
      "\"tokens_per_s_fwd_bwd\":{},\"mfu_fwd_bwd\":{},\"gemm_share\":{},\"gemm_gflops_per_thread\":{},\"tensor_peak_"
      "mib\":{},"
      "\"peak_rss_mib\":{},\"os_threads\":{},\"warmup_s\":{},\"reps\":{},\"loss\":{},\"other_load_cpus\":{},"
      "\"precision\":\"{}\",\"cpu_matmul\":\"{}\"}}\n",
      kResultPrefix, o.preset, o.variant, sched, threads, json_number(tps), json_number(F * pf * tps / r_ref), B,
      micro > 0 ? micro : B, T, B * T, json_number(step), json_number(fb), json_number(opt), json_number(F), pf,
      json_number(o.r_ref), json_number(tps_fb), json_number(F * pf * tps_fb / r_ref),
      kGemmTimer ? json_number(double(g_sum.ns) * 1e-9 / (t_sum * threads), 4) : std::string("null"),
      kGemmTimer && g_sum.ns > 0 ? json_number(double(g_sum.flops) / double(g_sum.ns), 4) : std::string("null"),
      json_number(tensor_peak, 5), json_number(lrt_bench::proc_status_mib("VmHWM"), 5),
      json_number(lrt_bench::proc_status_value("Threads")), json_number(warm), reps, json_number(loss),
      json_number(other, 3), o.precision, lrt::cpu::cpu_matmul_name());
  std::fflush(stdout);
  return 0;
}

template <class V>
int decode_worker(const Options& o) {
  const lrt::ModelConfig cfg = lrt::preset(o.preset);
  const index_t Bd = o.batch, cap = o.contexts.back();
  const bool lean = o.decoder.starts_with("lean");
  const std::string weights = o.decoder == "lean-int8" ? "int8" : o.decoder == "lean-bf16" ? "bf16" : "fp32";
  if (o.decoder != "graph" && o.decoder != "lean" && weights == "fp32")
    throw lrt::Error("lrt-bench", "--decoder is graph, lean, lean-int8 or lean-bf16, got '" + o.decoder + "'");
  if (lean && Bd != 1)
    throw lrt::Error("lrt-bench", "lrt-bench runs the lean decoder at batch 1 (its rows, batch > 1: lrt-bench-rows)");
  lrt::Model<V, float> model(cfg, 1);
  const lrt::PackedWeights packed = lrt::pack_weights(model, lrt::weight_format_from_string(weights), 64);
  std::optional<lrt::Decoder<V, float>> graph;
  std::optional<lrt::LeanDecoder<V, float>> lean_dec;
  if (lean)
    lean_dec.emplace(lrt::lean_weights(model, &packed), typename lrt::LeanDecoder<V, float>::Options{cap, 0});
  else
    graph.emplace(model, Bd, cap);
  const Ids toks = random_ids(cap, Bd, cfg.vocab_size, 21);  // (position, row)

  lrt::cpu::reset_peak_memory();
  const lrt_bench::OtherLoad load;
  std::vector<double> t(static_cast<std::size_t>(cap));
  std::vector<std::int64_t> gns(static_cast<std::size_t>(cap)), gfl(static_cast<std::size_t>(cap));
  for (index_t p = 0; p < cap; ++p) {
    const GemmCounter g0 = GemmCounter::now();
    const auto t0 = Clock::now();
    if (lean)
      (void)lean_dec->step(toks(p, 0));
    else
      (void)graph->step(std::span<const index_t>(&toks(p, 0), static_cast<std::size_t>(Bd)));
    t[std::size_t(p)] = seconds_since(t0);
    const GemmCounter g1 = GemmCounter::now();
    gns[std::size_t(p)] = g1.ns - g0.ns, gfl[std::size_t(p)] = g1.flops - g0.flops;
  }
  const double other = load.cpus();
  const double tensor_peak = double(lrt::cpu::memory_stats().peak_in_use) / (1 << 20);
  const double hwm = lrt_bench::proc_status_mib("VmHWM");

  const int threads = lrt::num_threads();
  const double nmm = double(model.num_matmul_params());
  double emb_row = 0;  // floats gathered per row: the roster's embedding tables (wte + value embeddings)
  model.for_each_param_role([&](auto& p, lrt::ParamRole r) {
    if constexpr (std::remove_cvref_t<decltype(p.shape())>::rank == 2)
      if (r == lrt::ParamRole::Embedding || r == lrt::ParamRole::ValueEmbedding) emb_row += double(p.shape()[1]);
  });
  double packed_values = 0;  // the matrices read packed, and the bytes they take
  for (const auto& [name, m] : packed.matrices) packed_values += double(m.rows * m.cols);
  const double weight_bytes = 4.0 * (nmm - packed_values) + double(packed.bytes());
  for (const index_t c : o.contexts) {
    const index_t n = std::max<index_t>(1, c / 4);
    std::vector<double> w;
    double bytes = 0, flops = 0, sg = 0, st = 0, sf = 0;
    for (index_t p = c - n; p < c; ++p) {
      w.push_back(t[std::size_t(p)]);
      st += t[std::size_t(p)], sg += double(gns[std::size_t(p)]) * 1e-9, sf += double(gfl[std::size_t(p)]);
      const index_t ctx = p + 1;
      double kv = 0, att = 0;
      for (index_t l = 0; l < cfg.n_layer; ++l) {
        const double keys = double(std::min(ctx, cfg.window(l) + 1));
        kv += 4.0 * double(Bd) * 2.0 * double(cfg.kv_dim()) * keys;
        att += 4.0 * double(cfg.n_head * cfg.head_dim()) * keys;
      }
      bytes += weight_bytes + 4.0 * double(Bd) * emb_row + kv;
      flops += 2.0 * nmm + att;
    }
    bytes /= double(n), flops /= double(n);
    const double step = median(w);
    const double tps = double(Bd) / step;
    const double bytes_tok = bytes / double(Bd);
    const double bound = o.triad * 1e9 / bytes_tok;
    fmt::print(
        "{}{{\"name\":\"decode\",\"preset\":\"{}\",\"variant\":\"{}\",\"decoder\":\"{}\",\"weights\":\"{}\","
        "\"threads\":{},\"tokens_per_s\":{},"
        "\"mfu\":{},\"bandwidth_fraction\":{},\"batch\":{},\"context\":{},\"window_steps\":{},\"ms_per_step\":{},"
        "\"bound_tokens_per_s\":{},\"bytes_per_token\":{},\"weight_bytes\":{},\"triad_gbps\":{},"
        "\"decode_flops_per_token\":{},\"r_ref_gflops\":{},\"gemm_share\":{},\"gemm_gflops_per_thread\":{},"
        "\"capacity\":{},\"beyond_seq_len\":{},\"tensor_peak_mib\":{},\"peak_rss_mib\":{},\"other_load_cpus\":{}}}\n",
        kResultPrefix, o.preset, o.variant, lean ? "lean" : "graph", weights, threads, json_number(tps),
        json_number(flops * tps / (o.r_ref * 1e9)), json_number(tps / bound, 4), Bd, c, n, json_number(step * 1e3),
        json_number(bound), json_number(bytes_tok), json_number(weight_bytes), json_number(o.triad), json_number(flops),
        json_number(o.r_ref), kGemmTimer ? json_number(sg / (st * threads), 4) : std::string("null"),
        kGemmTimer && sg > 0 ? json_number(sf / sg * 1e-9, 4) : std::string("null"), cap,
        c > cfg.sequence_len ? "true" : "false", json_number(tensor_peak, 5), json_number(hwm, 5),
        json_number(other, 3));
  }
  std::fflush(stdout);
  return 0;
}

int run_worker(const Options& o) {
  try {
    if (o.worker == "train") {
      return train_worker(o);
    } else if (o.worker == "decode") {
      if (o.variant == "baseline") return decode_worker<lrt::variants::Baseline>(o);
      if (o.variant == "lrt") return decode_worker<lrt::variants::Lrt>(o);
    }
    fmt::print(stderr, "lrt-bench: bad worker '{}' / variant '{}'\n", o.worker, o.variant);
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "lrt-bench worker ({} {} {}): {}\n", o.worker, o.preset, o.variant, e.what());
    return 1;
  }
}

// ------------------------------------------------------------------ parent: children, table

struct Child {
  int status = -1;  // exit status, or -signal
  std::vector<std::string> results;
};

Child spawn(const std::vector<std::string>& args, int threads) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid < 0) return {};
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    setenv("LRT_NUM_THREADS", std::to_string(threads).c_str(), 1);
    // OpenBLAS (linked for R_ref, and lrt's GEMM in non-AVX-512 builds) otherwise starts an idle
    // pool of nproc - 1 threads when it loads; lrt calls it single-threaded either way.
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::perror("lrt-bench: execv /proc/self/exe");
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t k = read(fd[0], buf, sizeof buf);
    if (k > 0)
      out.append(buf, static_cast<std::size_t>(k));
    else if (k == 0 || errno != EINTR)
      break;
  }
  close(fd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  Child c;
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  std::size_t i = 0;
  while (i < out.size()) {
    const std::size_t j = std::min(out.find('\n', i), out.size());
    const std::string line = out.substr(i, j - i);
    if (line.rfind(kResultPrefix, 0) == 0)
      c.results.push_back(line.substr(std::strlen(kResultPrefix)));
    else if (!line.empty())
      fmt::print(stderr, "{}\n", line);
    i = j + 1;
  }
  return c;
}

/// A number field of a flat JSON object written by a worker (NaN when missing or null).
double field(const std::string& json, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  const std::size_t i = json.find(k);
  if (i == std::string::npos) return std::nan("");
  const char* p = json.c_str() + i + k.size();
  char* end = nullptr;
  const double x = std::strtod(p, &end);
  return end == p ? std::nan("") : x;
}
std::string sfield(const std::string& json, const char* key) {
  const std::string k = std::string("\"") + key + "\":\"";
  const std::size_t i = json.find(k);
  if (i == std::string::npos) return "?";
  const std::size_t j = json.find('"', i + k.size());
  return json.substr(i + k.size(), j - i - k.size());
}

std::string fmt_or_dash(double x, const char* f) {
  return std::isnan(x) ? std::string("-") : fmt::format(fmt::runtime(f), x);
}

struct Report {
  std::FILE* tab;
  bool json;
  std::vector<std::string> rows;  // JSON of every result
  int failures = 0;

  void header() {
    fmt::print(tab,
               "{:<6} {:<7} {:<8} {:>3} {:<13} {:>9} {:>9} {:>5} {:>5} {:>7} {:>5} {:>4} {:>5} {:>7} {:>8} {:>5}\n",
               "kind", "preset", "variant", "thr", "shape", "tokens/s", "ms/step", "MFU", "MFU*", "bw-frac", "bw*",
               "opt%", "GEMM%", "GEMM GF", "peak MiB", "other");
    fmt::print(tab, "{:-<128}\n", "");
  }
  void row(const std::string& j) {
    rows.push_back(j);
    if (json) {
      fmt::print("{}\n", j);
      std::fflush(stdout);  // whole lines: the table goes to stderr meanwhile
    }
    const bool train = sfield(j, "name") == "train";
    std::string shape, opt = "-";
    double ms;
    if (train) {
      shape = field(j, "micro_rows") < field(j, "batch_rows")
                  ? fmt::format("{}({})x{}", field(j, "batch_rows"), field(j, "micro_rows"), field(j, "seq_len"))
                  : fmt::format("{}x{}", field(j, "batch_rows"), field(j, "seq_len"));
      if (sfield(j, "precision") == "bf16") shape += " bf16";
      ms = field(j, "step_s") * 1e3;
      opt = fmt_or_dash(100 * field(j, "opt_s") / field(j, "step_s"), "{:.0f}");
    } else {
      shape = fmt::format("B{} ctx{}{}{}{}", field(j, "batch"), field(j, "context"),
                          j.find("\"beyond_seq_len\":true") != std::string::npos ? "*" : "",
                          sfield(j, "decoder") == "lean" ? " lean" : "",
                          sfield(j, "weights") == "fp32" ? "" : " " + sfield(j, "weights"));
      ms = field(j, "ms_per_step");
    }
    fmt::print(tab,
               "{:<6} {:<7} {:<8} {:>3} {:<13} {:>9.0f} {:>9.3f} {:>5} {:>5} {:>7} {:>5} {:>4} {:>5} {:>7} {:>8.1f} "
               "{:>5.2f}\n",
               train ? "train" : "decode", sfield(j, "preset"), sfield(j, "variant"), field(j, "threads"), shape,
               field(j, "tokens_per_s"), ms, fmt_or_dash(field(j, "mfu"), "{:.2f}"),
               fmt_or_dash(field(j, "mfu_local"), "{:.2f}"),
               train ? std::string("-") : fmt_or_dash(field(j, "bandwidth_fraction"), "{:.2f}"),
               train ? std::string("-") : fmt_or_dash(field(j, "bandwidth_fraction_local"), "{:.2f}"), opt,
               fmt_or_dash(100 * field(j, "gemm_share"), "{:.0f}"),
               fmt_or_dash(field(j, "gemm_gflops_per_thread"), "{:.1f}"), field(j, "peak_rss_mib"),
               field(j, "other_load_cpus"));
    std::fflush(tab);
  }
  void fail(const std::string& what, const Child& c) {
    ++failures;
    fmt::print(tab, "FAILED: {} (exit status {})\n", what, c.status);
  }
  /// The result matching kind/preset/variant/threads (and batch/context for decode).
  const std::string* find(const std::string& kind, const std::string& p, const std::string& v, int thr,
                          double batch = 0, double ctx = 0, const std::string& decoder = "graph",
                          const std::string& weights = "fp32") const {
    for (const auto& j : rows)
      if (sfield(j, "name") == kind && sfield(j, "preset") == p && sfield(j, "variant") == v &&
          field(j, "threads") == thr &&
          (kind == "train" ? sfield(j, "precision") == weights
                           : (field(j, "batch") == batch && field(j, "context") == ctx &&
                              sfield(j, "decoder") == decoder && sfield(j, "weights") == weights)))
        return &j;
    return nullptr;
  }
};

/// s as the body of a JSON string (quotes, backslashes and control characters escaped).
std::string json_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    else
      out += c;
  }
  return out;
}

int run_parent(const Options& o) {
  const auto t_start = Clock::now();
  std::FILE* tab = o.json ? stderr : stdout;
  const int gemm_reps = o.quick ? 3 : 7, triad_reps = o.quick ? 3 : 5;
  const std::size_t triad_n = o.quick ? (std::size_t(1) << 23) : (std::size_t(1) << 24);

  const GemmRef g0 = measure_gemm_ref(gemm_reps);
  Triad triad_arrays(triad_n);
  std::map<int, double> triad;
  for (int t : o.threads) triad[t] = triad_arrays.measure(t, triad_reps);
  const double r_ref = g0.best();

#if BENCH_CBLAS
  const std::string blas = fmt::format("{:.1f} (OpenBLAS core {})", g0.blas, openblas_get_corename());
#else
  const std::string blas = "not built in";
#endif
  const std::string backend = lrt::cpu::gemm_summary();
  fmt::print(
      tab,
      "lrt-bench: CPU performance (docs/performance.md). lrt GEMM backend {} (LRT_GEMM; Eigen's SIMD {}); presets "
      "{}; variants {}; threads {}\n"
      "R_ref (1024^3 fp32 GEMM, 1 thread, median of {}): Eigen {:.1f}, OpenBLAS {}, lrt's kernels {:.1f} GFLOP/s "
      "-> R_ref {:.1f}\n",
      backend, Eigen::SimdInstructionSetsInUse(), join(o.presets), join(o.variants), join_num(o.threads), gemm_reps,
      g0.eigen, blas, g0.own, r_ref);
  for (int t : o.threads)
    fmt::print(tab, "STREAM triad, {} thread(s), 3 x {} MiB: {:.1f} GB/s (best of {})\n", t, triad_n * 4 >> 20,
               triad[t], triad_reps);
  fmt::print(
      tab,
      "train: Trainer::train_step (fwd + bwd + AdamW + Muon) at lrt-train's batch, rows(micro-batch rows) x T, median; "
      "MFU = F x pass factor x tokens/s / R_ref; "
      "opt% = optimizer share of the step\n"
      "decode: median over the c/4 steps ending at context c (* = beyond the preset's sequence_len); "
      "bw-frac = tokens/s / (triad / bytes per token)\n"
      "MFU*, bw* = the same against R_ref and triad measured around that configuration (mean of before and "
      "after: the machine's speed drifts)\n"
      "GEMM% = share of the pool's thread-time inside lrt's GEMM calls, GEMM GF = its GFLOP/s per thread; peak MiB = "
      "VmHWM of the configuration's process; other = CPUs used by other processes\n\n");
  Report rep{tab, o.json, {}, 0};
  if (o.json) {
    fmt::print(
        "{{\"name\":\"reference\",\"preset\":null,\"variant\":null,\"threads\":1,\"tokens_per_s\":null,"
        "\"mfu\":null,\"r_ref_gflops\":{},\"eigen_gflops\":{},\"openblas_gflops\":{},\"lrt_kernels_gflops\":{},"
        "\"lrt_gemm_backend\":\"{}\",\"lrt_gemm_path\":\"{}\"}}\n",
        json_number(r_ref), json_number(g0.eigen), BENCH_CBLAS ? json_number(g0.blas) : std::string("null"),
        g0.own > 0 ? json_number(g0.own) : std::string("null"), json_escape(backend),
        lrt::cpu::gemm_path_key(lrt::cpu::gemm_choice().path));
    for (int t : o.threads)
      fmt::print(
          "{{\"name\":\"triad\",\"preset\":null,\"variant\":null,\"threads\":{},\"tokens_per_s\":null,"
          "\"bandwidth_fraction\":null,\"bandwidth_gbps\":{}}}\n",
          t, json_number(triad[t]));
    std::fflush(stdout);
  }
  rep.header();

  // Local references around each configuration: 3 samples of the faster library's 1024^3 GEMM
  // and a triad at the configuration's thread count, before and after its child; appended to its
  // results as r_ref_local_gflops / mfu_local and triad_local_gbps / bandwidth_fraction_local.
  const int fastest = g0.fastest();
  struct Local {
    double gemm, triad;
  };
  auto local_ref = [&](int t) { return Local{measure_gemm_ref(3, fastest).best(), triad_arrays.measure(t, 2)}; };
  auto run_child = [&](const std::vector<std::string>& args, int t, const std::string& what) {
    const Local before = local_ref(t);
    const Child c = spawn(args, t);
    const Local after = local_ref(t);
    const Local l{0.5 * (before.gemm + after.gemm), 0.5 * (before.triad + after.triad)};
    if (c.status != 0 || c.results.empty()) rep.fail(what, c);
    for (const auto& j : c.results) {
      std::string add = fmt::format(",\"r_ref_local_gflops\":{},\"mfu_local\":{}", json_number(l.gemm),
                                    json_number(field(j, "mfu") * r_ref / l.gemm));
      if (sfield(j, "name") == "decode")
        add += fmt::format(",\"triad_local_gbps\":{},\"bandwidth_fraction_local\":{}", json_number(l.triad),
                           json_number(field(j, "bandwidth_fraction") * triad[t] / l.triad, 4));
      rep.row(j.substr(0, j.size() - 1) + add + "}");
    }
  };
  auto common = [&](const std::string& worker, const std::string& p, const std::string& v, int t) {
    std::vector<std::string> a{"lrt-bench",
                               "--worker",
                               worker,
                               "--preset",
                               p,
                               "--variant",
                               v,
                               "--r-ref",
                               fmt::format("{:.6g}", r_ref),
                               "--triad",
                               fmt::format("{:.6g}", triad[t]),
                               "--reps",
                               std::to_string(o.reps),
                               "--config-budget-s",
                               fmt::format("{}", o.config_budget_s),
                               "--contexts",
                               join_num(o.contexts)};
    if (o.batch_tokens > 0) a.insert(a.end(), {"--batch-tokens", std::to_string(o.batch_tokens)});
    return a;
  };
  if (o.train)
    for (const auto& p : o.presets)
      for (const auto& v : o.variants)
        for (int t : o.threads)
          for (const auto& prec : o.precisions) {  // side by side: the precisions of a configuration in turn
            auto args = common("train", p, v, t);
            args.insert(args.end(), {"--precision", prec});
            if (o.quick) args.push_back("--quick");
            run_child(args, t, fmt::format("train {} {} threads {} {}", p, v, t, prec));
          }
  if (o.decode)
    for (const auto& p : o.presets)
      for (const auto& v : o.variants)
        for (index_t b : o.batches)
          for (const auto& dk : o.decoders)
            for (int t : o.threads) {
              if (dk.starts_with("lean") && (b != 1 || t != o.threads.front())) continue;  // one row, one thread's work
              auto args = common("decode", p, v, t);
              args.insert(args.end(), {"--batch", std::to_string(b), "--decoder", dk});
              run_child(args, t, fmt::format("decode {} {} batch {} {} threads {}", p, v, b, dk, t));
            }
  fmt::print(tab, "{:-<128}\n", "");

  // Summary: ratios measured in this run.
  const GemmRef g1 = measure_gemm_ref(gemm_reps);
  const double triad_end = triad_arrays.measure(o.threads.front(), triad_reps);
  fmt::print(tab, "drift: R_ref at the end {:.1f} GFLOP/s ({:+.0f}%), triad {} thread(s) {:.1f} GB/s ({:+.0f}%)\n",
             g1.best(), 100 * (g1.best() / r_ref - 1), o.threads.front(), triad_end,
             100 * (triad_end / triad[o.threads.front()] - 1));
  // One pool at a time: a training child's OS threads are lrt's pool (LRT_NUM_THREADS, the
  // calling thread included) plus whatever a BLAS started (children run with
  // OPENBLAS_NUM_THREADS=1; lrt calls any BLAS single-threaded).
  if (o.train) {
    std::string seen;
    for (int t : o.threads) {
      double lo = 1e9, hi = -1;
      for (const auto& j : rep.rows)
        if (sfield(j, "name") == "train" && field(j, "threads") == t && field(j, "os_threads") > 0)
          lo = std::min(lo, field(j, "os_threads")), hi = std::max(hi, field(j, "os_threads"));
      if (hi > 0)
        seen += fmt::format("{}LRT_NUM_THREADS={}: {}", seen.empty() ? "" : ", ", t,
                            lo == hi ? fmt::format("{:.0f}", lo) : fmt::format("{:.0f}-{:.0f}", lo, hi));
    }
    if (!seen.empty())
      fmt::print(tab, "OS threads per training process ({} GEMM, single-threaded inside lrt's pool): {}\n",
                 lrt::cpu::gemm_library(), seen);
  }
  if (o.train) {
    for (const auto& p : o.presets) {
      std::string line;
      for (int t : o.threads) {
        const auto* b = rep.find("train", p, "baseline", t);
        const auto* l = rep.find("train", p, "lrt", t);
        if (b && l)
          line +=
              fmt::format(" | {}T lrt/baseline step time {:.2f}x (fwd+bwd {:.2f}x, FLOP ratio {:.2f}x)", t,
                          field(*l, "step_s") / field(*b, "step_s"), field(*l, "fwd_bwd_s") / field(*b, "fwd_bwd_s"),
                          field(*l, "flops_per_token") * field(*l, "pass_factor") / field(*b, "flops_per_token"));
      }
      if (!line.empty()) fmt::print(tab, "train {:<6}{}\n", p, line);
      for (const auto& v : o.variants)  // bf16 against fp32, with the share of the step in GEMMs
        for (int t : o.threads) {
          const auto* f = rep.find("train", p, v, t, 0, 0, "graph", "fp32");
          const auto* h = rep.find("train", p, v, t, 0, 0, "graph", "bf16");
          if (f && h)
            fmt::print(tab,
                       "train {:<6} {:<8} {}T: bf16/fp32 tokens/s {:.2f}x (GEMM share of a step: fp32 {:.0f}%, {} "
                       "{:.0f}%; GEMM GFLOP/s per thread {:.1f} -> {:.1f}); loss after the steps {:.4f} / {:.4f}\n",
                       p, v, t, field(*h, "tokens_per_s") / field(*f, "tokens_per_s"), 100 * field(*f, "gemm_share"),
                       sfield(*h, "cpu_matmul"), 100 * field(*h, "gemm_share"), field(*f, "gemm_gflops_per_thread"),
                       field(*h, "gemm_gflops_per_thread"), field(*f, "loss"), field(*h, "loss"));
        }
      if (o.threads.size() >= 2)
        for (const auto& v : o.variants) {
          const auto* a = rep.find("train", p, v, o.threads[0]);
          const auto* c = rep.find("train", p, v, o.threads[1]);
          if (a && c)
            fmt::print(tab, "train {:<6} {:<8}: {}T/{}T tokens/s {:.2f}x; fwd+bwd alone MFU {:.3f} ({}T)\n", p, v,
                       o.threads[1], o.threads[0], field(*c, "tokens_per_s") / field(*a, "tokens_per_s"),
                       field(*a, "mfu_fwd_bwd"), o.threads[0]);
        }
    }
  }
  if (o.decode && o.threads.size() >= 2) {
    double lg = 0;
    int n = 0;
    for (const auto& j : rep.rows)
      if (sfield(j, "name") == "decode" && field(j, "threads") == o.threads[1]) {
        const auto* a = rep.find("decode", sfield(j, "preset"), sfield(j, "variant"), o.threads[0], field(j, "batch"),
                                 field(j, "context"));
        if (a) lg += std::log(field(j, "tokens_per_s") / field(*a, "tokens_per_s")), ++n;
      }
    if (n)
      fmt::print(tab, "decode: {}T/{}T tokens/s geomean {:.2f}x over {} configurations\n", o.threads[1], o.threads[0],
                 std::exp(lg / n), n);
  }
  if (o.decode) {
    double lg = 0;
    int n = 0;
    for (const auto& j : rep.rows)
      if (sfield(j, "name") == "decode" && sfield(j, "variant") == "lrt") {
        const auto* b = rep.find("decode", sfield(j, "preset"), "baseline", int(field(j, "threads")), field(j, "batch"),
                                 field(j, "context"), sfield(j, "decoder"), sfield(j, "weights"));
        if (b) lg += std::log(field(*b, "tokens_per_s") / field(j, "tokens_per_s")), ++n;
      }
    if (n)
      fmt::print(tab, "decode: lrt/baseline time per token geomean {:.3f}x over {} configurations\n", std::exp(lg / n),
                 n);
    lg = 0, n = 0;  // the lean decoder against the Decoder on the same configuration
    for (const auto& j : rep.rows)
      if (sfield(j, "name") == "decode" && sfield(j, "decoder") == "lean" && sfield(j, "weights") == "fp32") {
        const auto* b = rep.find("decode", sfield(j, "preset"), sfield(j, "variant"), int(field(j, "threads")),
                                 field(j, "batch"), field(j, "context"), "graph");
        if (b) {
          lg += std::log(field(j, "tokens_per_s") / field(*b, "tokens_per_s")), ++n;
          fmt::print(tab, "decode: lean/graph tokens/s {} {} ctx {}: {:.2f}x\n", sfield(j, "preset"),
                     sfield(j, "variant"), field(j, "context"), field(j, "tokens_per_s") / field(*b, "tokens_per_s"));
        }
      }
    if (n) fmt::print(tab, "decode: lean/graph tokens/s geomean {:.2f}x over {} configurations\n", std::exp(lg / n), n);
    for (const char* wf : {"int8", "bf16"}) {  // packed weights against fp32 ones, both lean
      lg = 0, n = 0;
      for (const auto& j : rep.rows)
        if (sfield(j, "name") == "decode" && sfield(j, "decoder") == "lean" && sfield(j, "weights") == wf) {
          const auto* b = rep.find("decode", sfield(j, "preset"), sfield(j, "variant"), int(field(j, "threads")),
                                   field(j, "batch"), field(j, "context"), "lean", "fp32");
          if (b) {
            lg += std::log(field(j, "tokens_per_s") / field(*b, "tokens_per_s")), ++n;
            fmt::print(tab, "decode: lean {}/fp32 tokens/s {} {} ctx {}: {:.2f}x (bytes per token {:.2f}x fewer)\n", wf,
                       sfield(j, "preset"), sfield(j, "variant"), field(j, "context"),
                       field(j, "tokens_per_s") / field(*b, "tokens_per_s"),
                       field(*b, "bytes_per_token") / field(j, "bytes_per_token"));
          }
        }
      if (n)
        fmt::print(tab, "decode: lean {}/fp32 tokens/s geomean {:.2f}x over {} configurations\n", wf, std::exp(lg / n),
                   n);
    }
  }
  fmt::print(tab, "total {:.1f} s{}\n", seconds_since(t_start),
             rep.failures ? fmt::format(", {} configuration(s) FAILED", rep.failures) : std::string());
  return rep.failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.worker.empty()) return run_worker(o);
  return run_parent(o);
}
