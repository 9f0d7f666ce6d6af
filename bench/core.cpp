// lrt-bench-core: CORE examples per second (lrt/eval/core.hpp) with the options sharing their
// prefix (lrt::eval::zero_memory_scorer and sequential_scorer: pooled decoders, the prefix fed
// once) against scoring every option's whole prompt (the reference forms score_zero_memory, one
// zero-memory forward of the padded rows, and score_sequential, a decoder stepping every row from
// position 0), in both modes, side by side in one process: the runs alternate, and the ratio of
// each pair is taken from the same repetition. The outcomes of the two forms are compared too.
// A byte-tokenizer checkpoint of variant lrt; threads: LRT_NUM_THREADS or --threads.
//   lrt-bench-core --checkpoint runs/lrt/model.safetensors [--core tests/data/core/bundle] [--reps 3]
#include <lrt/lrt.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "checkpoint_path.hpp"

namespace {

using lrt::index_t;
using Clock = std::chrono::steady_clock;
using V = lrt::variants::Lrt;
namespace ev = lrt::eval;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timed {
  ev::CoreReport report;
  double examples_per_second = 0;
};

Timed run(const ev::CoreBundle& bundle, const lrt::data::TextTokenizer& tok, const ev::CoreScorer& s) {
  const auto t0 = Clock::now();
  Timed t{ev::evaluate_core(bundle, {}, tok, s), 0};
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  index_t n = 0;
  for (const auto& task : t.report.tasks) n += task.examples;
  t.examples_per_second = static_cast<double>(n) / secs;
  return t;
}

/// The largest difference of two reports' option losses, and the examples whose outcome differs.
std::pair<double, index_t> compare(const ev::CoreReport& a, const ev::CoreReport& b) {
  double worst = 0;
  index_t differ = 0;
  for (std::size_t k = 0; k < a.tasks.size(); ++k)
    for (std::size_t i = 0; i < a.tasks[k].per_example.size(); ++i) {
      const auto &x = a.tasks[k].per_example[i], &y = b.tasks[k].per_example[i];
      differ += x.correct != y.correct || x.predicted != y.predicted ? 1 : 0;
      for (std::size_t j = 0; j < x.option_losses.size() && j < y.option_losses.size(); ++j)
        if (std::isfinite(x.option_losses[j]))
          worst = std::max(worst, std::abs(x.option_losses[j] - y.option_losses[j]));
    }
  return {worst, differ};
}

}  // namespace

int main(int argc, char** argv) {
  std::string ckpt, dir;
  int reps = 3;
  tool::Args args("lrt-bench-core",
                  "CORE examples per second with the options sharing their prefix against every option's whole "
                  "prompt, both modes, side by side (FILE: a byte-tokenizer lrt checkpoint).");
  args.option("checkpoint", "FILE", "the checkpoint (or the --out directory of lrt-train)", "", true)
      .option("core", "DIR", "the CORE bundle", std::string(LRT_SOURCE_DIR) + "/tests/data/core/bundle")
      .option("reps", "N", "runs of each form (the median and the median ratio are reported)", "3")
      .shared("threads");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    ckpt = args.str("checkpoint"), dir = args.str("core");
    reps = static_cast<int>(args.integer("reps", 1, 1 << 20));
    tool::apply_threads(args);
  });
  if (rc >= 0) return rc;
  try {
    const auto r = lrt::st::Reader::open(tool::checkpoint_file(ckpt));
    const lrt::CheckpointInfo info = lrt::read_checkpoint(r);
    lrt::check(info.run.structure == lrt::structure_of<V>(), "lrt-bench-core", "the checkpoint holds variant ",
               lrt::variant_label(info.run.structure), "; this benchmark measures ",
               lrt::variant_label(lrt::structure_of<V>()));
    lrt::check(info.config.vocab_size == 257, "lrt-bench-core", "the checkpoint's vocabulary has ",
               info.config.vocab_size, " ids: this benchmark tokenizes bytes (a byte-tokenizer model)");
    lrt::Model<V, float> model(info.config, 0);
    lrt::load_weights(model, r);
    const auto bundle = ev::CoreBundle::open(dir);
    const lrt::data::TextTokenizer bytes;
    std::printf("lrt-bench-core: %s (L=%lld d=%lld), bundle %s, %d thread(s), GEMM %s, %d runs of each form\n",
                ckpt.c_str(), static_cast<long long>(info.config.n_layer), static_cast<long long>(info.config.n_embd),
                dir.c_str(), lrt::num_threads(), lrt::cpu::gemm_library(), reps);
    std::printf("%-11s %16s %16s %8s %14s %8s\n", "mode", "shared (ex/s)", "unshared (ex/s)", "ratio", "max |dloss|",
                "differ");
    for (const bool seq : {false, true}) {
      const ev::CoreScorer shared = seq ? ev::sequential_scorer(model) : ev::zero_memory_scorer(model);
      const ev::CoreScorer unshared = [&model, seq](const ev::CoreSpans& s) {
        return seq ? ev::score_sequential(model, s) : ev::score_zero_memory(model, s);
      };
      (void)run(bundle, bytes, shared);  // warm-up: the pooled decoders, the caching allocator
      std::vector<double> a, b, ratio;
      std::pair<double, index_t> cmp{0, 0};
      for (int i = 0; i < reps; ++i) {
        const Timed x = run(bundle, bytes, shared), y = run(bundle, bytes, unshared);
        a.push_back(x.examples_per_second), b.push_back(y.examples_per_second);
        ratio.push_back(x.examples_per_second / y.examples_per_second);
        if (i == 0) cmp = compare(x.report, y.report);
      }
      std::printf("%-11s %16.1f %16.1f %7.2fx %14.2e %8lld\n", seq ? "sequential" : "parallel", median(a), median(b),
                  median(ratio), cmp.first, static_cast<long long>(cmp.second));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
