// lrt-bench-lrt-cost: what the LRT additions cost against the baseline GPT, on the CPU, measured
// in one run so that the ratios survive a noisy machine (LRT-SPEC §4.2, §6, §10):
//   1. training step: forward + backward (+ zero_grad) of a fresh graph per step for
//      baseline/Standard, lrt/Interleaved<2> and lrt-release/Interleaved<2> (targets: lrt <= 2.2x;
//      the FLOP ratio 2 F_lrt / F_base of spec §10 is printed for reference);
//   2. decode at batch 1: one Decoder step per token over `--tokens` tokens (target: lrt <= 1.05x;
//      the FLOP ratio uses the decode FLOPs 2 N_mm + sum_l 4 H Dh min(ctx, w_l + 1), mean over ctx).
// Variants are measured interleaved (base, lrt, release, base, lrt, ...) after one warm-up round;
// each time is a median over the rounds. `ratio` is median(variant) / median(baseline);
// `paired_ratio` is the median over rounds of the per-round ratio (less sensitive to load drift).
// Usage: lrt-bench-lrt-cost [--reps N] [--batch B] [--preset NAME] [--tokens N] [--json]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <lrt/lrt.hpp>
#include <lrt/decode.hpp>
#include <lrt/model/training_schedule.hpp>

#include "bench_util.hpp"

using lrt::index_t;
namespace ad = lrt::ad;
using lrt_bench::Clock;
using lrt_bench::median;

namespace {

using Ids = lrt::Tensor<index_t, 2>;

Ids random_ids(index_t B, index_t T, index_t V, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<index_t> dist(0, V - 1);
  Ids x(lrt::Shape<2>{B, T});
  for (index_t b = 0; b < B; ++b)
    for (index_t t = 0; t < T; ++t) x(b, t) = dist(rng);
  return x;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// One measured configuration: its times over the rounds.
struct Row {
  std::string variant, schedule;
  std::vector<double> t;
  double flops = 0;  // per step (training, spec §10 x pass factor) or per token (decode)
  index_t params = 0;
};

/// Runs f[i]() for every configuration once as a warm-up, then `reps` interleaved rounds; each
/// time is divided by `per` (1 for a step, the token count for a decode loop).
template <class F>
void interleaved(std::vector<Row>& rows, std::vector<F>& f, int reps, double per) {
  for (auto& g : f) g();
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < f.size(); ++i) {
      const auto t0 = Clock::now();
      f[i]();
      rows[i].t.push_back(seconds_since(t0) / per);
    }
}

/// Decode FLOPs per token averaged over contexts 1..n (spec §10):
/// 2 N_mm + sum_l 4 H Dh min(ctx, w_l + 1).
template <class M>
double decode_flops(const M& m, index_t n) {
  const lrt::ModelConfig& c = m.config();
  double f = 0;
  for (index_t ctx = 1; ctx <= n; ++ctx) {
    f += 2.0 * static_cast<double>(m.num_matmul_params());
    for (index_t l = 0; l < c.n_layer; ++l)
      f += 4.0 * static_cast<double>(c.n_head * c.head_dim()) * static_cast<double>(std::min(ctx, c.window(l) + 1));
  }
  return f / static_cast<double>(n);
}

double paired_ratio(const Row& a, const Row& base) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.t.size() && i < base.t.size(); ++i) r.push_back(a.t[i] / base.t[i]);
  return r.empty() ? 0.0 : median(std::move(r));
}

void report(const char* name, const std::vector<Row>& rows, bool json, int reps, index_t batch,
            const std::string& preset, double load, double target, const char* unit_label, double unit) {
  const double base = median(rows[0].t);
  if (!json)
    fmt::print("{:<12} {:<12} | {:>12} {:>7} {:>8} | {:>11} {:>12}\n", "variant", "schedule", unit_label, "ratio",
               "paired", "FLOP ratio", "params");
  for (const Row& r : rows) {
    const double m = median(r.t);
    const double ratio = m / base, pr = paired_ratio(r, rows[0]);
    const double fr = r.flops / rows[0].flops;
    if (json)
      fmt::print(
          "{{\"name\":\"{}\",\"variant\":\"{}\",\"schedule\":\"{}\",\"threads\":{},\"seconds\":{:.6g},"
          "\"ratio\":{:.4f},\"paired_ratio\":{:.4f},\"flops\":{:.6g},\"flop_ratio\":{:.4f},"
          "\"target_ratio\":{},\"preset\":\"{}\",\"batch\":{},\"reps\":{},\"params\":{},"
          "\"other_load_cpus\":{:.2f}}}\n",
          name, r.variant, r.schedule, lrt::num_threads(), m, ratio, pr, r.flops, fr,
          &r == &rows[0] ? std::string("null") : fmt::format("{:.2f}", target), preset, batch, reps, r.params, load);
    else
      fmt::print("{:<12} {:<12} | {:>12.4f} {:>6.3f}x {:>7.3f}x | {:>10.3f}x {:>12}\n", r.variant, r.schedule, m * unit,
                 ratio, pr, fr, r.params);
  }
  if (!json) {
    const Row& lrt_row = rows[1];
    const double ratio = median(lrt_row.t) / base;
    fmt::print("lrt/baseline {:.3f}x vs target <= {:.2f}x: {}; other processes used {:.2f} CPUs\n\n", ratio, target,
               ratio <= target ? "met" : "NOT met", load);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  index_t batch = 16, tokens = 128;
  bool json = false;
  std::string preset_name = "small";
  tool::Args args("lrt-bench-lrt-cost",
                  "what the LRT additions cost against the baseline GPT on the CPU, training and decode");
  args.option("reps", "N", "interleaved timed rounds (median reported)", "5")
      .option("batch", "B", "training rows", "16")
      .option("preset", "NAME", "the model preset", "small")
      .option("tokens", "N", "decode tokens (at most the preset's sequence length)", "128")
      .flag("json", "one JSON object per line on stdout");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    reps = static_cast<int>(args.integer("reps", 1, 1 << 30));
    batch = args.integer("batch", 1, 1LL << 40);
    tokens = args.integer("tokens", 1, 1LL << 40);
    preset_name = args.str("preset");
    json = args.has("json");
  });
  if (rc >= 0) return rc;
  try {
    const lrt::ModelConfig cfg = lrt::preset(preset_name);
    const index_t T = cfg.sequence_len, V = cfg.vocab_size;
    tokens = std::min(tokens, T);
    lrt::GPT<float> base(cfg, 1);
    lrt::Model<lrt::variants::Lrt, float> lrt_m(cfg, 1);
    lrt::Model<lrt::variants::LrtRelease, float> rel(cfg, 1);
    if (!json)
      fmt::print(
          "LRT cost vs baseline: preset {} (L={}, d={}, H={}, T={}, V={}), float, {} thread(s), "
          "median of {} interleaved rounds after 1 warm-up\n\n",
          preset_name, cfg.n_layer, cfg.n_embd, cfg.n_head, T, V, lrt::num_threads(), reps);

    // ---- 1. training step: fresh graph, forward + backward, zero_grad
    {
      const Ids x = random_ids(batch, T, V, 11), y = random_ids(batch, T, V, 12);
      auto step = [&](const auto& m, auto sched) {
        using Sched = decltype(sched);
        return std::function<void()>([&m, &x, &y] {
          ad::Graph g;
          auto r = lrt::schedule_loss<Sched>(m, x, y);
          ad::backward(r.loss);
          m.zero_grad();
        });
      };
      const double n = static_cast<double>(batch * T);  // tokens per step; Interleaved: pass factor 2
      std::vector<Row> rows{{"baseline", "standard", {}, base.flops_per_token() * n, base.num_params()},
                            {"lrt", "interleaved2", {}, lrt_m.flops_per_token() * 2 * n, lrt_m.num_params()},
                            {"lrt-release", "interleaved2", {}, rel.flops_per_token() * 2 * n, rel.num_params()}};
      std::vector<std::function<void()>> f{step(base, lrt::Standard{}), step(lrt_m, lrt::Interleaved<2>{}),
                                           step(rel, lrt::Interleaved<2>{})};
      if (!json) fmt::print("1. training step (forward + backward), B={} x T={} tokens\n", batch, T);
      const lrt_bench::OtherLoad load;
      interleaved(rows, f, reps, 1.0);
      report("train_step", rows, json, reps, batch, preset_name, load.cpus(), 2.2, "s/step", 1.0);
    }

    // ---- 2. decode at batch 1: one step per token, per-token time
    {
      const Ids seq = random_ids(1, tokens, V, 13);
      lrt::Decoder dec_b(base, 1);
      lrt::Decoder dec_l(lrt_m, 1);
      lrt::Decoder dec_r(rel, 1);
      auto loop = [&](auto& dec) {
        return std::function<void()>([&dec, &seq, tokens] {
          dec.reset();
          for (index_t t = 0; t < tokens; ++t) {
            const index_t tok = seq(0, t);
            (void)dec.step(std::span<const index_t>(&tok, 1));
          }
        });
      };
      std::vector<Row> rows{{"baseline", "decode", {}, decode_flops(base, tokens), base.num_params()},
                            {"lrt", "decode", {}, decode_flops(lrt_m, tokens), lrt_m.num_params()},
                            {"lrt-release", "decode", {}, decode_flops(rel, tokens), rel.num_params()}};
      std::vector<std::function<void()>> f{loop(dec_b), loop(dec_l), loop(dec_r)};
      if (!json) fmt::print("2. decode, batch 1, {} tokens per round (time per token)\n", tokens);
      const lrt_bench::OtherLoad load;
      interleaved(rows, f, reps, static_cast<double>(tokens));
      report("decode_token", rows, json, reps, 1, preset_name, load.cpus(), 1.05, "ms/token", 1e3);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "lrt-bench-lrt-cost: {}\n", e.what());
    return 1;
  }
  return 0;
}
