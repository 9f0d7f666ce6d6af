// lrt-bench-autodiff-linear: a linear layer's forward + backward through autodiff against the
// same three GEMMs called directly, measured in one run. Target: autodiff overhead < 10% at
// d_model >= 256.
//   y = x W^T (N, out); dx = dy W (N, in); dW = dy^T x (out, in)
// Usage: lrt-bench-autodiff-linear [--reps N] [--quick] [--json] [--version] [--help]
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <lrt/autodiff.hpp>

#include "bench_util.hpp"

using lrt::index_t;
using lrt::Shape;
using lrt::Tensor;
namespace ad = lrt::ad;

using lrt_bench::median_seconds;

int main(int argc, char** argv) {
  int reps = 7;
  bool json = false;
  tool::Args args("lrt-bench-autodiff-linear",
                  "a linear layer's forward + backward through autodiff against the same GEMMs called directly");
  args.option("reps", "N", "timed samples per size (median reported; --quick: 3)", "7")
      .flag("quick", "3 reps")
      .flag("json", "one JSON object per line on stdout");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    json = args.has("json");
    reps = args.has("quick") && !args.has("reps") ? 3 : static_cast<int>(args.integer("reps", 1, 1 << 30));
  });
  if (rc >= 0) return rc;
  if (!json)
    fmt::print(
        "linear forward+backward: autodiff vs the same 3 GEMMs, {} thread(s), median of {}\n"
        "{:>6} {:>5} {:>5} | {:>10} {:>10} | {:>9}\n",
        lrt::num_threads(), reps, "N", "in", "out", "gemm ms", "autodiff", "overhead");
  struct S {
    index_t N, in, out;
  };
  const S shapes[] = {{2048, 128, 128},  {2048, 256, 256}, {2048, 256, 1024},
                      {2048, 1024, 256}, {4096, 512, 512}, {4096, 512, 2048}};
  for (const S& s : shapes) {
    const Tensor<float, 2> x = lrt::uniform<float>(Shape<2>{s.N, s.in}, 1, 0, -1.f, 1.f);
    const Tensor<float, 2> dy = lrt::uniform<float>(Shape<2>{s.N, s.out}, 2, 0, -1.f, 1.f);
    ad::Param<float, 2> w(Tensor<float, 2>(lrt::uniform<float>(Shape<2>{s.out, s.in}, 3, 0, -0.1f, 0.1f)));
    Tensor<float, 2> y(Shape<2>{s.N, s.out}), dx(Shape<2>{s.N, s.in}), dw(Shape<2>{s.out, s.in});
    const double t_gemm = median_seconds(
        [&] {
          lrt::gemm(y, x, w.value().t());
          lrt::gemm(dx, dy, w.value());
          lrt::gemm(dw, dy.t(), x);
        },
        reps);
    ad::Graph g;
    const double t_ad = median_seconds(
        [&] {
          g.clear();
          w.zero_grad();
          auto xv = ad::variable(x);  // the input gets a gradient too, like an activation
          auto yv = ad::linear(xv, w.var());
          ad::backward(yv, dy);
        },
        reps);
    const double over = t_ad / t_gemm - 1;
    if (json)
      fmt::print(
          "{{\"name\":\"autodiff_linear\",\"N\":{},\"in\":{},\"out\":{},\"threads\":{},\"gemm_ms\":{:.4f},"
          "\"autodiff_ms\":{:.4f},\"overhead\":{:.4f}}}\n",
          s.N, s.in, s.out, lrt::num_threads(), t_gemm * 1e3, t_ad * 1e3, over);
    else
      fmt::print("{:>6} {:>5} {:>5} | {:>10.3f} {:>10.3f} | {:>8.1f}%\n", s.N, s.in, s.out, t_gemm * 1e3, t_ad * 1e3,
                 over * 100);
  }
  return 0;
}
