// lrt-bench-prefill: the lean decoder's whole-prompt prefill modes (decode/lean.hpp) against
// token-by-token (exact) prefill, on prompts from a corpus's validation split and a trained LRT
// checkpoint (variant lrt, byte tokenizer):
//   - passes: fixed-point passes needed until the source states are bit-stable, against the bound
//     ceil(P / k), and the positions they recomputed;
//   - logit difference: max |logit - exact| after the prompt, for fixed-point (rounding only: it is
//     the exact recurrence) and each approximate:TOL;
//   - speed-up: exact prefill time / the mode's time, the same prompt, one process, in turn.
// One thread by default (LRT_NUM_THREADS). Medians over the prompts of each length.
//   lrt-bench-prefill --checkpoint runs/lrt/model.safetensors --data ~/.cache/lrt-data/brown/package
//                     [--lengths 16,32,64,128,256] [--prompts 8] [--tolerances 1e-2,1e-3,1e-4] [--reps 3] [--json]
#include <lrt/lrt.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

using lrt::index_t;
using Clock = std::chrono::steady_clock;
using V = lrt::variants::Lrt;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string ckpt, data;
  std::vector<index_t> lengths;
  std::vector<double> tols;
  index_t prompts = 8;
  int reps = 3;
  bool json = false;
  tool::Args args("lrt-bench-prefill",
                  "The lean decoder's fixed-point and approximate prefill against exact (token-by-token) prefill\n"
                  "on prompts from DIR's validation split; FILE: a byte-tokenizer lrt checkpoint (lrt-train --variant "
                  "lrt).");
  args.option("checkpoint", "FILE", "the checkpoint", "", true)
      .option("data", "DIR", "the corpus (its validation split)", "", true)
      .option("lengths", "LIST", "prompt lengths", "16,32,64,128,256")
      .option("prompts", "N", "prompts per length", "8")
      .option("tolerances", "LIST", "the approximate modes' tolerances", "1e-2,1e-3,1e-4")
      .option("reps", "N", "timings per prompt and mode (median reported)", "3")
      .flag("json", "one JSON object per line on stdout (the table goes to stderr)");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    ckpt = args.str("checkpoint"), data = args.str("data");
    for (long long n : args.integers("lengths", 1, 1LL << 40)) lengths.push_back(n);
    tols = args.numbers("tolerances", std::numeric_limits<double>::min(), 1e300);
    prompts = args.integer("prompts", 1, 1LL << 40);
    reps = static_cast<int>(args.integer("reps", 1, 1 << 30));
    json = args.has("json");
  });
  if (rc >= 0) return rc;
  try {
    const auto r = lrt::st::Reader::open(ckpt);
    const lrt::CheckpointInfo info = lrt::read_checkpoint(r);  // the one loader's checks
    lrt::check(info.run.structure == lrt::structure_of<V>(), "lrt-bench-prefill", "the checkpoint holds variant ",
               lrt::variant_label(info.run.structure), "; this benchmark measures ",
               lrt::variant_label(lrt::structure_of<V>()));
    const lrt::ModelConfig& cfg = info.config;
    lrt::check(cfg.vocab_size == 257, "lrt-bench-prefill", "the checkpoint's vocabulary has ", cfg.vocab_size,
               " ids: this benchmark feeds bytes (a byte-tokenizer model, vocabulary 257)");
    lrt::Model<V, float> model(cfg, 0);
    lrt::load_weights(model, r);
    const auto corpus = lrt::data::load_corpus(data);
    std::string text;
    for (const auto& d : corpus.val) text += d.text;
    const index_t longest = *std::max_element(lengths.begin(), lengths.end());
    lrt::check(static_cast<index_t>(text.size()) >= longest * prompts, "lrt-bench-prefill", "the validation split has ",
               text.size(), " bytes: too few for ", prompts, " prompts of ", longest);
    auto dec = lrt::make_lean_decoder(model, {0, longest});
    const double k = static_cast<double>(cfg.mem_offset);
    std::FILE* tab = json ? stderr : stdout;
    std::fprintf(tab,
                 "lrt-bench-prefill: %s, k = %lld, %d thread(s), %lld prompts per length from the validation split, "
                 "median of %d timings each\n",
                 ckpt.c_str(), static_cast<long long>(cfg.mem_offset), lrt::num_threads(),
                 static_cast<long long>(prompts), reps);
    std::fprintf(tab, "%6s %8s %6s %9s %11s %10s %9s", "P", "bound", "passes", "positions", "fp_maxdiff", "exact_ms",
                 "fp_speedup");
    for (double t : tols)
      std::fprintf(tab, "  %-8s %6s %9s %7s", ("tol " + lrt_bench::json_number(t)).c_str(), "passes", "maxdiff",
                   "speedup");
    std::fprintf(tab, "\n");
    for (const index_t P : lengths) {
      std::vector<double> passes, positions, fp_diff, t_exact, fp_speed;
      std::vector<std::vector<double>> ap_passes(tols.size()), ap_diff(tols.size()), ap_speed(tols.size());
      for (index_t j = 0; j < prompts; ++j) {
        const std::size_t at = static_cast<std::size_t>(j) * (text.size() - static_cast<std::size_t>(P)) /
                               static_cast<std::size_t>(std::max<index_t>(prompts, 1));
        std::vector<index_t> prompt{cfg.bos()};
        for (index_t i = 1; i < P; ++i)
          prompt.push_back(static_cast<unsigned char>(text[at + static_cast<std::size_t>(i)]));
        const auto timed = [&](lrt::PrefillMode mode, std::vector<float>* logits) {
          std::vector<double> ts;
          for (int rep = 0; rep < reps; ++rep) {
            const auto t0 = Clock::now();
            const auto lg = dec.prefill(prompt, mode);
            ts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            if (logits) logits->assign(lg.begin(), lg.end());
          }
          return median(ts);
        };
        const auto diff = [](const std::vector<float>& a, const std::vector<float>& b) {
          double w = 0;
          for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(double(a[i]) - double(b[i])));
          return w;
        };
        std::vector<float> exact, other;
        const double te = timed(lrt::PrefillMode::exact(), &exact);
        t_exact.push_back(te * 1e3);
        const double tf = timed(lrt::PrefillMode::fixed_point(), &other);
        passes.push_back(double(dec.prefill_stats().passes)),
            positions.push_back(double(dec.prefill_stats().positions));
        fp_diff.push_back(diff(other, exact)), fp_speed.push_back(te / tf);
        for (std::size_t i = 0; i < tols.size(); ++i) {
          const double ta = timed(lrt::PrefillMode::approximate(tols[i]), &other);
          ap_passes[i].push_back(double(dec.prefill_stats().passes));
          ap_diff[i].push_back(diff(other, exact)), ap_speed[i].push_back(te / ta);
        }
      }
      const double bound = std::ceil(double(P) / k);
      std::fprintf(tab, "%6lld %8.0f %6.1f %9.0f %11.2e %10.2f %9.2fx", static_cast<long long>(P), bound,
                   median(passes), median(positions), *std::max_element(fp_diff.begin(), fp_diff.end()),
                   median(t_exact), median(fp_speed));
      for (std::size_t i = 0; i < tols.size(); ++i)
        std::fprintf(tab, "  %-8s %6.1f %9.2e %6.2fx", "", median(ap_passes[i]),
                     *std::max_element(ap_diff[i].begin(), ap_diff[i].end()), median(ap_speed[i]));
      std::fprintf(tab, "\n");
      if (json) {
        std::string ap;
        for (std::size_t i = 0; i < tols.size(); ++i)
          ap += (i ? "," : "") + std::string("{\"tolerance\":") + lrt_bench::json_number(tols[i]) +
                ",\"passes\":" + lrt_bench::json_number(median(ap_passes[i])) + ",\"max_logit_diff\":" +
                lrt_bench::json_number(*std::max_element(ap_diff[i].begin(), ap_diff[i].end())) +
                ",\"speedup\":" + lrt_bench::json_number(median(ap_speed[i])) + "}";
        std::printf(
            "{\"name\":\"prefill\",\"prompt_len\":%lld,\"bound\":%s,\"fixed_point_passes\":%s,\"positions\":%s,"
            "\"fixed_point_max_logit_diff\":%s,\"exact_ms\":%s,\"fixed_point_speedup\":%s,\"approximate\":[%s]}\n",
            static_cast<long long>(P), lrt_bench::json_number(bound).c_str(),
            lrt_bench::json_number(median(passes)).c_str(), lrt_bench::json_number(median(positions)).c_str(),
            lrt_bench::json_number(*std::max_element(fp_diff.begin(), fp_diff.end())).c_str(),
            lrt_bench::json_number(median(t_exact)).c_str(), lrt_bench::json_number(median(fp_speed)).c_str(),
            ap.c_str());
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lrt-bench-prefill: %s\n", e.what());
    return 1;
  }
}
