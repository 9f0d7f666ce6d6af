// lrt-bench-rows: decode throughput of the lean decoder's rows (decode/lean.hpp, Options::rows):
// tokens per second of a whole batch of R rows stepped together, against R separate one-row
// decoders stepped in turn, and against the same rows with the batched BLAS products
// (batch_invariant = false, whose rounding depends on the batch). The three forms run side by
// side in one process (alternating, R rows each, the same tokens), and each ratio is taken from
// the same repetition; the rows' logits are compared with the separate decoders' bit for bit.
// Random weights of a preset (the speed does not depend on them); one thread count per run
// (--threads or LRT_NUM_THREADS).
//   lrt-bench-rows [--presets tiny,small] [--rows 1,4,16] [--weights fp32] [--threads 2]
#include <lrt/lrt.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

using lrt::index_t;
using Clock = std::chrono::steady_clock;
using V = lrt::variants::Lrt;
using Lean = lrt::LeanDecoder<V, float>;

/// Row r's prompt: P distinct-looking bytes.
std::vector<index_t> prompt(index_t r, index_t P) {
  std::vector<index_t> p(static_cast<std::size_t>(P));
  for (index_t i = 0; i < P; ++i) p[static_cast<std::size_t>(i)] = 32 + (r * 37 + i * 11) % 90;
  return p;
}
/// The token row r is fed at step i (the same in every form).
index_t token(index_t r, index_t i) { return 32 + (r * 13 + i * 7) % 90; }

struct Result {
  double tokens_per_s = 0;
  std::vector<std::vector<float>> last;  // each row's logits after the last step
};

/// R separate one-row decoders, stepped in turn.
Result separate(std::vector<Lean>& decs, index_t P, index_t T) {
  const index_t R = static_cast<index_t>(decs.size());
  for (index_t r = 0; r < R; ++r) decs[static_cast<std::size_t>(r)].prefill(prompt(r, P));
  const auto t0 = Clock::now();
  for (index_t i = 0; i < T; ++i)
    for (index_t r = 0; r < R; ++r) decs[static_cast<std::size_t>(r)].step(token(r, i));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  Result out{double(R * T) / s, {}};
  for (auto& d : decs) out.last.emplace_back(d.logits().begin(), d.logits().end());
  return out;
}

/// One decoder of R rows, all stepped together.
Result together(Lean& dec, index_t P, index_t T) {
  const index_t R = dec.rows();
  dec.reset();
  for (index_t r = 0; r < R; ++r) (void)dec.join(prompt(r, P));
  std::vector<index_t> rows(static_cast<std::size_t>(R)), toks(rows.size());
  for (index_t r = 0; r < R; ++r) rows[static_cast<std::size_t>(r)] = r;
  const auto t0 = Clock::now();
  for (index_t i = 0; i < T; ++i) {
    for (index_t r = 0; r < R; ++r) toks[static_cast<std::size_t>(r)] = token(r, i);
    dec.step(rows, toks);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  Result out{double(R * T) / s, {}};
  for (index_t r = 0; r < R; ++r) out.last.emplace_back(dec.logits(r).begin(), dec.logits(r).end());
  return out;
}

bool same_bits(const Result& a, const Result& b) {
  for (std::size_t r = 0; r < a.last.size(); ++r)
    if (std::memcmp(a.last[r].data(), b.last[r].data(), a.last[r].size() * sizeof(float)) != 0) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> presets, weights;
  std::vector<index_t> rows;
  index_t P = 32, T = 64;
  int reps = 3;
  bool profile = false;
  tool::Args args("lrt-bench-rows",
                  "Decode tokens/s of the lean decoder's rows stepped together (batch-invariant row-wise products, "
                  "and the batched BLAS products) against as many separate one-row decoders, side by side.");
  args.option("presets", "LIST", "model presets (random weights of variant lrt)", "tiny,small")
      .option("rows", "LIST", "rows decoded at once", "1,4,16")
      .option("weights", "LIST", "fp32, int8 (groups of 64), bf16", "fp32")
      .option("prompt", "N", "prompt tokens per row (exact prefill, not timed)", "32")
      .option("tokens", "N", "timed decode steps per row", "64")
      .option("reps", "N", "repetitions of the three forms (medians reported)", "3")
      .shared("threads")
      .flag("profile", "also print the share of the rows' steps spent in the row-wise products");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    presets = lrt_bench::preset_list(args), weights = args.items("weights");
    for (const auto& s : args.items("rows")) {
      char* end = nullptr;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || v < 1 || v > 1024)
        throw tool::UsageError("--rows takes numbers in [1, 1024], got '" + s + "'");
      rows.push_back(static_cast<index_t>(v));
    }
    for (const auto& w : weights)
      if (w != "fp32" && w != "int8" && w != "bf16")
        throw tool::UsageError("--weights takes fp32, int8 and bf16, got '" + w + "'");
    P = static_cast<index_t>(args.integer("prompt", 1, 1 << 20));
    T = static_cast<index_t>(args.integer("tokens", 1, 1 << 20));
    reps = static_cast<int>(args.integer("reps", 1, 1 << 20));
    profile = args.has("profile");
    tool::apply_threads(args);
  });
  if (rc >= 0) return rc;
  try {
    std::printf(
        "lrt-bench-rows: %d thread(s), GEMM %s, float rows on %s (fused multiply-add: %s), packed products %s, "
        "prompt %lld, %lld steps, %d reps\n",
        lrt::num_threads(), lrt::cpu::gemm_library(),
        lrt::cpu::detail::rowwise_level() == lrt::cpu::SimdLevel::none
            ? "the plain loop"
            : lrt::cpu::simd_name(lrt::cpu::detail::rowwise_level()),
        lrt::cpu::detail::rowwise_fused() ? "yes" : "no", lrt::cpu::packed_isa, static_cast<long long>(P),
        static_cast<long long>(T), reps);
    std::printf("%-7s %-5s %5s %12s %12s %12s %9s %9s %9s %9s\n", "preset", "wts", "rows", "separate", "rows",
                "rows-blas", "rows/sep", "blas/sep", "rows/blas", "bitwise");
    for (const auto& name : presets) {
      lrt::ModelConfig c = lrt::preset(name);
      lrt::check(P + T <= c.sequence_len * 4, "lrt-bench-rows", "prompt + tokens = ", P + T, " is far past ", name,
                 "'s context ", c.sequence_len);
      lrt::Model<V, float> model(c, 1);
      for (const auto& wf : weights) {
        std::optional<lrt::PackedWeights> pw;
        if (wf != "fp32")
          pw = lrt::pack_weights(model, wf == "int8" ? lrt::WeightFormat::Int8 : lrt::WeightFormat::BF16, 64);
        const lrt::LeanWeights<float> w = lrt::lean_weights(model, pw ? &*pw : nullptr);
        for (const index_t R : rows) {
          std::vector<Lean> decs;
          for (index_t r = 0; r < R; ++r) decs.emplace_back(w, Lean::Options{0, 0});
          Lean::Options o{0, 0};
          o.rows = R;
          Lean inv(w, o);
          o.batch_invariant = false;
          Lean blas(w, o);
          (void)separate(decs, P, 4), (void)together(inv, P, 4), (void)together(blas, P, 4);  // warm-up
          lrt::cpu::GemmProfile prof;
          if (profile) {  // the share of a step in the row-wise products
            lrt::cpu::set_gemm_profile(&prof);
            const auto t0 = Clock::now();
            (void)together(inv, P, T);
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            lrt::cpu::set_gemm_profile(nullptr);
            std::printf("  profile: products %.0f%% of %.2f s (%.1f GFLOP/s in them, %lld calls)\n",
                        100.0 * double(prof.ns.load()) * 1e-9 / s, s,
                        double(prof.flops.load()) / double(prof.ns.load()), static_cast<long long>(prof.calls.load()));
          }
          std::vector<double> a, b, cc, ba, ca, bc;
          bool bitwise = true;
          for (int i = 0; i < reps; ++i) {
            const Result x = separate(decs, P, T), y = together(inv, P, T), z = together(blas, P, T);
            a.push_back(x.tokens_per_s), b.push_back(y.tokens_per_s), cc.push_back(z.tokens_per_s);
            ba.push_back(y.tokens_per_s / x.tokens_per_s), ca.push_back(z.tokens_per_s / x.tokens_per_s);
            bc.push_back(y.tokens_per_s / z.tokens_per_s);
            bitwise = bitwise && same_bits(x, y);
          }
          std::printf("%-7s %-5s %5lld %12.0f %12.0f %12.0f %8.2fx %8.2fx %8.2fx %9s\n", name.c_str(), wf.c_str(),
                      static_cast<long long>(R), lrt_bench::median(a), lrt_bench::median(b), lrt_bench::median(cc),
                      lrt_bench::median(ba), lrt_bench::median(ca), lrt_bench::median(bc), bitwise ? "same" : "DIFFER");
          std::fflush(stdout);
        }
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
