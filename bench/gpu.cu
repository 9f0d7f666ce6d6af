// lrt-bench-gpu: training and decoding throughput of lrt on one NVIDIA GPU (LRT-SPEC §10).
//   1. R_ref: cuBLAS bf16 GEMM (fp32 accumulate) on 8192^3, and fp32 SGEMM on the same shape (the
//      ceiling of lrt's fp32 path); the HBM bandwidth of a large device-to-device copy.
//   2. training: lrt::Trainer steps (forward + backward + the AdamW/Muon update, or without the
//      update with --no-optim) of preset d12 (or --preset) at batch --batch, random tokens,
//      float32 weights and activations, matmuls in each
//      precision of --precision (default bf16; a list like fp32,bf16 runs each):
//      baseline/Standard and lrt/Interleaved<2>.
//      MFU = F x pass factor x tokens/s / R_ref (and / 989 TFLOP/s, the vendor's dense bf16 peak).
//      Attention: --attention auto (default: cuBLAS GEMMs around a masked softmax when matmuls
//      are bf16/tf32, else one warp per query), warp or gemm.
//   3. decode: one Decoder step per token at batch 1 and --decode-batch (matmuls in the first
//      precision of the list), eager and replayed from a CUDA graph (Decoder::use_graphs), the
//      time per step against the time to read the matmul weights once at the measured bandwidth.
// One table on stdout. Usage: lrt-bench-gpu [--preset d12] [--batch 8] [--steps 4]
//   [--decode-tokens 64] [--decode-batch 64] [--seq T] [--precision bf16[,fp32,tf32]]
//   [--attention auto|warp|gemm] [--profile N] [--quick] [--no-optim] [--ref-n 8192] [--copy-mib 2048]
//   [--version] [--help]
//   --profile N: after each training row, one more step under lrt::cuda::Profiler; prints the N
//   operations with the most device time (GEMMs with their TFLOP/s) and the time per category.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <lrt/cuda.hpp>
#include <lrt/train/trainer.hpp>

#include "cli/args.hpp"

using lrt::index_t;
namespace ad = lrt::ad;
using G = lrt::cuda::Device;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::string preset = "d12";
  index_t batch = 8, steps = 4, decode_tokens = 64, decode_batch = 64, seq = 0;
  bool quick = false, optim = true;
  index_t profile = 0;                    // rows of the per-operation profiles (--profile N)
  index_t ref_n = 8192, copy_mib = 2048;  // R_ref GEMM size, copy-bandwidth buffer (small: smoke tests)
  std::vector<lrt::cuda::MatmulPrecision> precisions{lrt::cuda::MatmulPrecision::bf16};
};

Options parse(int argc, char** argv) {
  tool::Args args("lrt-bench-gpu", "training and decoding throughput of lrt on one NVIDIA GPU");
  args.option("preset", "NAME", "the model preset", "d12")
      .option("batch", "N", "training rows per step", "8")
      .option("steps", "N", "timed training steps per row", "4")
      .option("decode-tokens", "N", "decode steps per row (at least 3)", "64")
      .option("decode-batch", "N", "the larger decode batch", "64")
      .option("seq", "T", "sequence length (default: the preset's)")
      .option("precision", "LIST", "matmul precisions of the training rows: bf16, fp32, tf32 (comma-separated)", "bf16")
      .option("attention", "KIND", "auto, warp or gemm", "auto")
      .option("profile", "N",
              "after each training row, one more step under lrt::cuda::Profiler: its N costliest "
              "operations and the time per category",
              "0")
      .flag("quick", "the baseline only (no lrt rows)")
      .flag("no-optim", "training steps without the optimizer update")
      .option("ref-n", "N", "the R_ref GEMM size", "8192")
      .option("copy-mib", "N", "the copy-bandwidth buffer in MiB", "2048");
  Options o;
  const int rc = tool::parse_args(args, argc, argv, [&] {
    constexpr long long most = 1LL << 40;
    o.preset = args.str("preset");
    o.batch = args.integer("batch", 1, most);
    o.steps = args.integer("steps", 1, most);
    o.decode_tokens = args.integer("decode-tokens", 3, most);
    o.decode_batch = args.integer("decode-batch", 1, most);
    if (args.has("seq")) o.seq = args.integer("seq", 1, most);
    o.precisions.clear();
    for (const std::string& p : args.items("precision")) {
      try {
        o.precisions.push_back(lrt::cuda::parse_matmul_precision(p));
      } catch (const lrt::Error& e) {
        throw tool::UsageError(std::string("--precision: ") + e.what());
      }
    }
    const std::string k = args.str("attention");
    if (k == "auto")
      lrt::cuda::set_attention_kernel(lrt::cuda::AttentionKernel::automatic);
    else if (k == "warp")
      lrt::cuda::set_attention_kernel(lrt::cuda::AttentionKernel::warp);
    else if (k == "gemm")
      lrt::cuda::set_attention_kernel(lrt::cuda::AttentionKernel::gemm);
    else
      throw tool::UsageError("--attention takes auto, warp or gemm, got '" + k + "'");
    o.profile = args.integer("profile", 0, most);
    o.ref_n = args.integer("ref-n", 1, most);
    o.copy_mib = args.integer("copy-mib", 1, most);
    o.quick = args.has("quick"), o.optim = !args.has("no-optim");
  });
  if (rc >= 0) std::exit(rc);
  return o;
}

/// Seconds per call of f (after `warm` calls), timed with CUDA events over `reps` calls.
template <class F>
double time_gpu(F&& f, int warm, int reps) {
  for (int i = 0; i < warm; ++i) f();
  cudaEvent_t a, b;
  LRT_CUDA_CHECK(cudaEventCreate(&a));
  LRT_CUDA_CHECK(cudaEventCreate(&b));
  LRT_CUDA_CHECK(cudaEventRecord(a, lrt::cuda::stream()));
  for (int i = 0; i < reps; ++i) f();
  LRT_CUDA_CHECK(cudaEventRecord(b, lrt::cuda::stream()));
  LRT_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  LRT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  LRT_CUDA_CHECK(cudaEventDestroy(a));
  LRT_CUDA_CHECK(cudaEventDestroy(b));
  return ms / 1e3 / reps;
}

/// TFLOP/s of a cuBLAS GEMM n^3: bf16 inputs with fp32 accumulation, or fp32 throughout.
double gemm_tflops(index_t n, bool bf16) {
  const std::size_t elems = static_cast<std::size_t>(n * n), es = bf16 ? 2 : 4;
  void *A = nullptr, *B = nullptr, *Cm = nullptr;
  LRT_CUDA_CHECK(cudaMalloc(&A, elems * es));
  LRT_CUDA_CHECK(cudaMalloc(&B, elems * es));
  LRT_CUDA_CHECK(cudaMalloc(&Cm, elems * 4));
  LRT_CUDA_CHECK(cudaMemset(A, 0x3c, elems * es));  // small finite values
  LRT_CUDA_CHECK(cudaMemset(B, 0x3c, elems * es));
  const float one = 1.f, zero = 0.f;
  const int m = static_cast<int>(n);
  auto run = [&] {
    if (bf16) {
      LRT_CUBLAS_CHECK(cublasGemmEx(lrt::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, A, CUDA_R_16BF,
                                    m, B, CUDA_R_16BF, m, &zero, Cm, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    } else {
      LRT_CUBLAS_CHECK(cublasSgemm(lrt::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one,
                                   static_cast<float*>(A), m, static_cast<float*>(B), m, &zero, static_cast<float*>(Cm),
                                   m));
    }
  };
  const double s = time_gpu(run, 3, 10);
  LRT_CUDA_CHECK(cudaFree(A));
  LRT_CUDA_CHECK(cudaFree(B));
  LRT_CUDA_CHECK(cudaFree(Cm));
  return 2.0 * double(n) * double(n) * double(n) / s / 1e12;
}

/// Device-to-device copy bandwidth (bytes read + written per second) of a copy of `mib` MiB.
double copy_bandwidth(index_t mib) {
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  void *a = nullptr, *b = nullptr;
  LRT_CUDA_CHECK(cudaMalloc(&a, bytes));
  LRT_CUDA_CHECK(cudaMalloc(&b, bytes));
  LRT_CUDA_CHECK(cudaMemset(a, 0, bytes));
  const double s = time_gpu(
      [&] { LRT_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, lrt::cuda::stream())); }, 2, 5);
  LRT_CUDA_CHECK(cudaFree(a));
  LRT_CUDA_CHECK(cudaFree(b));
  return 2.0 * double(bytes) / s;
}

/// n rows of T + 1 uniform random token ids in [0, V) (V <= 65536).
lrt::data::TokenRows random_rows(index_t n, index_t T, index_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<index_t> dist(0, V - 1);
  std::vector<lrt::data::token_t> tok(static_cast<std::size_t>(n * (T + 1)));
  for (auto& t : tok) t = static_cast<lrt::data::token_t>(dist(rng));
  return lrt::data::TokenRows::from_tokens(std::move(tok), static_cast<int>(T));
}

/// Prints the `top` slowest operations of one profiled step and the time per category.
void print_profile(const std::string& name, const std::vector<lrt::cuda::ProfileRow>& rows, double span_ms,
                   double step_s, index_t top) {
  double sum = 0;
  for (const auto& r : rows) sum += r.ms;
  std::printf(
      "  profile of one step of %s: device span %.2f ms, operations %.2f ms (%.0f%% of the span), "
      "wall step %.2f ms\n",
      name.c_str(), span_ms, sum, span_ms > 0 ? 100 * sum / span_ms : 0.0, 1e3 * step_s);
  std::printf("  %-44s %7s %10s %7s %9s\n", "operation", "calls", "ms", "% ops", "TFLOP/s");
  for (std::size_t i = 0; i < rows.size() && static_cast<index_t>(i) < top; ++i) {
    const auto& r = rows[i];
    std::printf("  %-44s %7lld %10.3f %6.1f%% ", r.name.c_str(), static_cast<long long>(r.calls), r.ms,
                sum > 0 ? 100 * r.ms / sum : 0.0);
    if (r.flops > 0 && r.ms > 0)
      std::printf("%9.1f\n", r.flops / (r.ms * 1e9));
    else
      std::printf("%9s\n", "-");
  }
  const char* cats[] = {"gemm", "attention", "elementwise", "reduction", "rmsnorm",
                        "xent", "optimizer", "copy/memset", "other"};
  constexpr int ncat = 9;
  double ms[ncat] = {}, fl = 0;
  for (const auto& r : rows) {
    const std::string& n = r.name;
    int c = ncat - 1;
    if (n.rfind("gemm ", 0) == 0)
      c = 0, fl += r.flops;
    else if (n.find("attention") != std::string::npos)
      c = 1;
    else if (n.rfind("elementwise", 0) == 0)
      c = 2;
    else if (n.rfind("reduction", 0) == 0)
      c = 3;
    else if (n.rfind("rmsnorm", 0) == 0)
      c = 4;
    else if (n.find("xent") != std::string::npos)
      c = 5;
    else if (n.rfind("Muon", 0) == 0 || n.rfind("AdamW", 0) == 0)
      c = 6;
    else if (n.rfind("copy", 0) == 0 || n == "memset")
      c = 7;
    ms[c] += r.ms;
  }
  std::printf("  by category:");
  const char* sep = " ";
  for (int c = 0; c < ncat; ++c)
    if (ms[c] > 0) {
      std::printf("%s%s %.2f ms (%.0f%%)", sep, cats[c], ms[c], sum > 0 ? 100 * ms[c] / sum : 0.0);
      sep = "; ";
    }
  if (ms[0] > 0) std::printf(" [GEMMs at %.1f TFLOP/s]", fl / (ms[0] * 1e9));
  std::printf("\n");
  std::fflush(stdout);
}

struct TrainRow {
  std::string name;
  double step_s = 0, tokens_per_s = 0, flops_per_step = 0, tflops = 0;
  std::function<void()> profile;  // prints the profile (with --profile), after the table row
};

/// Training steps of schedule Sched on variant V through lrt::Trainer (fp32 weights, AdamW and
/// Muon as the Trainer builds them from the parameter roster): seconds per step (median of steps).
/// Without the optimizer (--no-optim): forward + backward of the step's batch only.
template <class V, class Sched>
TrainRow train_row(const std::string& name, const lrt::ModelConfig& c, index_t B, index_t steps, bool with_optim,
                   index_t profile = 0) {
  lrt::check(c.vocab_size <= 65536, "lrt-bench-gpu", "vocab_size ", c.vocab_size, " does not fit 16-bit token ids");
  lrt::Model<V, float, G> m(c, 1);
  const index_t T = c.sequence_len, total = steps + 2;  // + warm-up, + the profiled step
  lrt::TrainOptions topts;
  topts.batch_rows = B;
  topts.steps = total;
  const auto rows = random_rows(B * total, T, c.vocab_size, 7);  // the Trainer reads them in place
  lrt::Trainer<V, Sched, float, G> tr(m, rows, topts);
  auto step = [&] {
    if (with_optim)
      (void)tr.train_step();
    else
      (void)tr.time_step_without_update();
  };
  step();  // warm-up: allocator cache, cuBLAS heuristics
  lrt::cuda::synchronize();
  std::vector<double> t;
  for (index_t i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    lrt::cuda::synchronize();
    t.push_back(since(t0));
  }
  std::sort(t.begin(), t.end());
  TrainRow r;
  r.name = name;
  r.step_s = t[t.size() / 2];
  r.tokens_per_s = double(B * T) / r.step_s;
  r.flops_per_step = m.flops_per_token() * lrt::pass_factor<Sched, V>() * double(B * T);
  r.tflops = r.flops_per_step / r.step_s / 1e12;
  if (profile > 0) {
    lrt::cuda::Profiler prof;
    step();
    const auto prof_rows = prof.stop();
    r.profile = [name, rows = prof_rows, span = prof.span_ms(), step_s = r.step_s, profile] {
      print_profile(name, rows, span, step_s, profile);
    };
  }
  return r;
}

struct DecodeRow {
  index_t batch = 0;
  bool graphs = false;
  double step_s = 0, bound_s = 0;
};

template <class V>
DecodeRow decode_row(const lrt::ModelConfig& c, index_t B, index_t tokens, double bandwidth, bool graphs) {
  lrt::Model<V, float, G> m(c, 1);
  lrt::Decoder<V, float, G> dec(m, B, tokens + 1);
  dec.use_graphs(graphs);
  std::vector<index_t> tok(static_cast<std::size_t>(B), 1);
  for (int i = 0; i < 2; ++i) dec.step(tok);  // warm-up (with graphs: eager, then recorded)
  lrt::cuda::synchronize();
  const auto t0 = Clock::now();
  for (index_t t = 2; t < tokens; ++t) {
    const auto& lg = dec.step(tok);
    (void)lg;
  }
  lrt::cuda::synchronize();
  DecodeRow r;
  r.batch = B;
  r.graphs = graphs;
  r.step_s = since(t0) / double(tokens - 2);
  r.bound_s = double(m.num_matmul_params()) * sizeof(float) / bandwidth;
  return r;
}

/// With --profile: one eager decode step of variant V at batch B after `tokens` steps, profiled.
template <class V>
void decode_profile(const char* variant, const lrt::ModelConfig& c, index_t B, index_t tokens, index_t top) {
  lrt::Model<V, float, G> m(c, 1);
  lrt::Decoder<V, float, G> dec(m, B, tokens + 1);
  std::vector<index_t> tok(static_cast<std::size_t>(B), 1);
  for (index_t t = 0; t + 1 < tokens; ++t) dec.step(tok);
  lrt::cuda::synchronize();
  const auto t0 = Clock::now();
  lrt::cuda::Profiler prof;
  (void)dec.step(tok);
  const auto rows = prof.stop();
  print_profile(std::string(variant) + " decode, batch " + std::to_string(B) + ", eager", rows, prof.span_ms(),
                since(t0), top);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (lrt::cuda::device_count() == 0) {
    std::printf("lrt-bench-gpu: no GPU found, nothing measured\n");
    return 0;
  }
  try {
    cudaDeviceProp prop{};
    LRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
                double(prop.totalGlobalMem) / (1 << 30));
    const double r_bf16 = gemm_tflops(o.ref_n, true), r_f32 = gemm_tflops(o.ref_n, false);
    const double bw = copy_bandwidth(o.copy_mib);
    std::printf(
        "R_ref cuBLAS bf16 GEMM %lld^3: %.1f TFLOP/s; fp32 SGEMM %lld^3: %.1f TFLOP/s; copy bandwidth %.2f TB/s\n",
        static_cast<long long>(o.ref_n), r_bf16, static_cast<long long>(o.ref_n), r_f32, bw / 1e12);

    lrt::ModelConfig c = lrt::preset(o.preset);
    if (o.seq > 0) c.sequence_len = o.seq;
    std::printf(
        "\ntraining (fp32 weights and activations, matmuls as the row says; forward + backward%s, %s, batch %lld x T "
        "%lld, median of %lld steps)\n",
        o.optim ? " + AdamW/Muon step" : "", o.preset.c_str(), static_cast<long long>(o.batch),
        static_cast<long long>(c.sequence_len), static_cast<long long>(o.steps));
    std::printf("%-28s %10s %12s %10s %9s %9s %9s\n", "variant/schedule", "step s", "tokens/s", "TFLOP/s", "MFU bf16",
                "MFU 989", "of fp32");
    for (const auto prec : o.precisions) {
      const lrt::cuda::MatmulPrecisionScope scope(prec);
      const std::string tag = std::string(" [") + lrt::cuda::to_string(prec) + "]";
      std::vector<TrainRow> rows;
      rows.push_back(train_row<lrt::variants::Baseline, lrt::Standard>("baseline/standard" + tag, c, o.batch, o.steps,
                                                                       o.optim, o.profile));
      if (!o.quick)
        rows.push_back(train_row<lrt::variants::Lrt, lrt::Interleaved<2>>("lrt/interleaved:2" + tag, c, o.batch,
                                                                          o.steps, o.optim, o.profile));
      for (const auto& r : rows) {
        std::printf("%-28s %10.4f %12.0f %10.2f %8.1f%% %8.1f%% %8.1f%%\n", r.name.c_str(), r.step_s, r.tokens_per_s,
                    r.tflops, 100 * r.tflops / r_bf16, 100 * r.tflops / 989.0, 100 * r.tflops / r_f32);
        std::fflush(stdout);
      }
      for (const auto& r : rows)
        if (r.profile) r.profile();
      if (rows.size() == 2)
        std::printf("lrt/interleaved:2 step time / baseline%s: %.2fx (FLOP ratio %.2fx)\n", tag.c_str(),
                    rows[1].step_s / rows[0].step_s, rows[1].flops_per_step / rows[0].flops_per_step);
    }
    const lrt::cuda::MatmulPrecisionScope decode_scope(o.precisions.front());

    std::printf(
        "\ndecode (fp32 weights, %s matmuls, one Decoder step per token, %lld tokens; bound = matmul weights read once "
        "at %.2f TB/s)\n",
        lrt::cuda::to_string(o.precisions.front()), static_cast<long long>(o.decode_tokens), bw / 1e12);
    std::printf("%-9s %-8s %-7s %12s %12s %10s %14s\n", "variant", "batch", "graphs", "ms/step", "bound ms", "x bound",
                "tokens/s");
    auto decode_line = [&](const char* variant, const DecodeRow& r) {
      std::printf("%-9s %-8lld %-7s %12.3f %12.3f %10.2f %14.0f\n", variant, static_cast<long long>(r.batch),
                  r.graphs ? "yes" : "no", 1e3 * r.step_s, 1e3 * r.bound_s, r.step_s / r.bound_s,
                  double(r.batch) / r.step_s);
      std::fflush(stdout);
    };
    for (index_t B : {index_t{1}, o.decode_batch})
      for (bool graphs : {false, true})
        decode_line("baseline", decode_row<lrt::variants::Baseline>(c, B, o.decode_tokens, bw, graphs));
    if (!o.quick)  // LRT with its memory, graphed (bound: its own matmul weights, projections included)
      for (index_t B : {index_t{1}, o.decode_batch})
        decode_line("lrt", decode_row<lrt::variants::Lrt>(c, B, o.decode_tokens, bw, true));
    if (o.profile > 0) decode_profile<lrt::variants::Baseline>("baseline", c, 1, o.decode_tokens, o.profile);
    const auto s = lrt::cuda::allocator_stats();
    std::printf("\nallocator: peak reserved %.2f GiB, %llu device mallocs\n", double(s.peak_reserved) / (1 << 30),
                static_cast<unsigned long long>(s.device_mallocs));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lrt-bench-gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
