// lrt-bench-attention: fused causal attention forward and forward+backward on the CPU:
// GFLOP/s and peak extra memory for T = 128..1024 (B = 1, H = 4, Hkv = 4, Dh = 64, float),
// plus the memory an explicit (T x T) score matrix per head would need, for comparison.
// FLOPs counted for the causal half: forward 2 * 2 * H * Dh * T(T+1)/2, backward 2.5x that.
// Usage: lrt-bench-attention [--reps N] [--quick] [--json] [--version] [--help]
#include <algorithm>
#include <chrono>
#include <vector>

#include <lrt/autodiff.hpp>

#include "bench_util.hpp"

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;

using lrt_bench::median_seconds;

int main(int argc, char** argv) {
  int reps = 5;
  bool json = false;
  std::vector<index_t> Ts = {128, 256, 512, 1024};
  tool::Args args("lrt-bench-attention", "fused causal attention forward and forward+backward on the CPU");
  args.option("reps", "N", "timed samples per length (median reported; --quick: 3)", "5")
      .flag("quick", "T = 128 and 256 only, 3 reps")
      .flag("json", "one JSON object per line on stdout");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    json = args.has("json");
    if (args.has("quick")) Ts = {128, 256};
    reps = args.has("quick") && !args.has("reps") ? 3 : static_cast<int>(args.integer("reps", 1, 1 << 30));
  });
  if (rc >= 0) return rc;
  const index_t B = 1, H = 4, Dh = 64;
  if (!json)
    fmt::print(
        "fused causal attention (B={}, H={}, Dh={}, float), {} thread(s), median of {}\n"
        "{:>5} | {:>9} {:>9} | {:>9} {:>9} | {:>11} {:>13}\n",
        B, H, Dh, lrt::num_threads(), reps, "T", "fwd ms", "GFLOP/s", "f+b ms", "GFLOP/s", "peak MiB",
        "TxT scores MiB");
  for (const index_t T : Ts) {
    ad::Param<float, 4> q(Tensor<float, 4>(lrt::normal<float>(Shape<4>{B, T, H, Dh}, 1)));
    ad::Param<float, 4> k(Tensor<float, 4>(lrt::normal<float>(Shape<4>{B, T, H, Dh}, 2)));
    ad::Param<float, 4> v(Tensor<float, 4>(lrt::normal<float>(Shape<4>{B, T, H, Dh}, 3)));
    const Tensor<index_t, 1> pos = lrt::iota(Shape<1>{T}, index_t{0});
    const Tensor<float, 4> dy = lrt::normal<float>(Shape<4>{B, T, H, Dh}, 4);
    const double flops_f = 2.0 * 2.0 * double(B * H * Dh) * double(T) * double(T + 1) / 2.0;
    ad::Graph g;
    const double tf = median_seconds(
        [&] {
          ad::NoGrad ng;
          g.clear();
          (void)ad::attention(q.var(), k.var(), v.var(), pos, T);
        },
        reps);
    lrt::cpu::reset_peak_memory();
    const std::size_t base = lrt::cpu::memory_stats().in_use;
    const double tfb = median_seconds(
        [&] {
          g.clear();
          auto y = ad::attention(q.var(), k.var(), v.var(), pos, T);
          ad::backward(y, dy);
          q.zero_grad();
          k.zero_grad();
          v.zero_grad();
        },
        reps);
    const double peak = double(lrt::cpu::memory_stats().peak_in_use - base) / (1 << 20);
    const double scores = double(B * H * T * T * 4) / (1 << 20);
    if (json)
      fmt::print(
          "{{\"name\":\"attention\",\"T\":{},\"threads\":{},\"fwd_ms\":{:.3f},\"fwd_gflops\":{:.2f},"
          "\"fwdbwd_ms\":{:.3f},\"fwdbwd_gflops\":{:.2f},\"peak_mib\":{:.2f},\"score_matrix_mib\":{:.2f}}}\n",
          T, lrt::num_threads(), tf * 1e3, flops_f / tf * 1e-9, tfb * 1e3, 3.5 * flops_f / tfb * 1e-9, peak, scores);
    else
      fmt::print("{:>5} | {:>9.3f} {:>9.2f} | {:>9.3f} {:>9.2f} | {:>11.2f} {:>13.2f}\n", T, tf * 1e3,
                 flops_f / tf * 1e-9, tfb * 1e3, 3.5 * flops_f / tfb * 1e-9, peak, scores);
  }
  return 0;
}
