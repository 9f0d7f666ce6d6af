// lrt-train: trains an LRT variant (default `lrt`, Interleaved<2>) or the baseline on a text file,
// a folder of text files or the unpacked Brown Corpus; writes DIR/model.safetensors,
// DIR/optim.safetensors, DIR/log.csv and DIR/loss.svg.
//   lrt-train --preset tiny --data ~/.cache/lrt-data/brown/package --time 600 --out runs/tiny
//   lrt-train --variant baseline --budget-forwards 5e6 ...   (matched compute)
#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include <fmt/ranges.h>
#include <lrt/model/config.hpp>

#include "programs.hpp"

/// The variants of this build's (variant, schedule) pairs, in the registry's order: "baseline, lrt, ...".
static std::string variant_names() {
  std::vector<std::string> names;
  for (const auto& [variant, schedule] : tool::registered_pairs())
    if (std::find(names.begin(), names.end(), variant) == names.end()) names.push_back(variant);
  return fmt::format("{}", fmt::join(names, ", "));
}

int main(int argc, char** argv) {
  tool::Args a("lrt-train", "Trains an LRT or the baseline GPT on text, as bytes or BPE tokens (docs/model.md).");
  a.option("preset", "NAME", fmt::format("model preset: {}", fmt::join(lrt::preset_names(), ", ")), "tiny")
      .option("variant", "NAME", fmt::format("{} (--list-variants: with their schedules)", variant_names()), "lrt")
      .option("schedule", "SPEC",
              "standard, interleaved:S, multirefine:K, chunked:C, exact (default: the variant's first)")
      .flag("kv-refresh",
            "interleaved:S on kv/both variants: patch the stale buffered K/V between passes (docs/model.md §4.2)")
      .option("loss-weights", "W0,W1,..", "multirefine:K: one loss weight per pass, K + 1 (default: all 1)")
      .flag("detach", "multirefine:K: no gradient through the previous pass's states")
      .flag("list-variants", "print the (variant, schedule) pairs of this build and exit")
      .option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus", "", true)
      .option("out", "DIR", "checkpoint directory (model, optimizer state, log.csv, loss.svg)", "", true)
      .flag("force", "--out may hold another run: replace its files (each one named) instead of refusing")
      .option("steps", "N", "optimizer steps (the schedules' horizon)")
      .option("time", "SECONDS",
              "wall-time budget of the whole run: the horizon and the evaluations are planned after timing a few "
              "warm-up steps and one evaluation, and the horizon is shortened when the steps slow down")
      .option("budget-forwards", "F", "compute budget in token-forwards: N = F / (tokens per step x pass factor)")
      .option("tokens-per-param", "R", "horizon otherwise: R x matmul params tokens", "12")
      .option("batch-rows", "B", "rows of T tokens per optimizer step (preset: tiny 32, small 16, medium 32)")
      .option("micro-rows", "B",
              "rows per forward/backward; gradients accumulate (default: all; --preset medium: the largest that "
              "divides --batch-rows up to 8)")
      .option("sequence-len", "T", "override the preset's sequence length")
      .option("matrix-lr", "LR", "Muon learning rate", "0.02")
      .option("embedding-lr", "LR", "AdamW lr of wte and value embeddings (times (d/768)^-0.5)", "0.3")
      .option("unembedding-lr", "LR", "AdamW lr of lm_head (times (d/768)^-0.5)", "0.004")
      .option("scalar-lr", "LR", "AdamW lr of the x0 lambdas and gamma", "0.5")
      .option("gamma-lr", "LR", "AdamW lr of gamma alone (the LRT's memory gains; default: --scalar-lr's)")
      .option("eval-every", "N", "steps between validation evaluations and checkpoints (0: N/10)", "0")
      .option("eval-tokens", "N", "validation target tokens per evaluation", "65536")
      .flag("tune-split",
            "hold out a tuning slice of the training split (every 20th training document, or the last 5% of "
            "each), not trained on, for choosing rates: lrt-eval --split tune scores it")
      .option("eval-bytes", "N",
              "validation rows per evaluation up to N bytes of text instead (compares vocabularies; 0: off)", "0")
      .option("tokenizer", "FILE",
              "read the text through this BPE tokenizer file (lrt-tokenizer train; default: bytes)")
      .option("vocab-size", "N",
              "train a BPE tokenizer of N ids (ranks + BOS) on the training split first; written to DIR/tokenizer.lrt")
      .option("pattern", "NAME",
              "with --vocab-size: the split pattern, nanochat (default), gpt2, cl100k, o200k or a regex")
      .option("n-layer", "L", "layers (default: the preset's)")
      .option("n-embd", "D", "model width (default: the preset's)")
      .option("n-head", "H", "attention heads (default: the preset's; also sets --n-kv-head unless given)")
      .option("n-kv-head", "H", "key/value heads (a divisor of --n-head)")
      .option("window-pattern", "P",
              "short (S, half the context) and long (L) attention windows per layer, repeated; "
              "the last layer is long",
              "SSSL")
      .option("ve-layout", "L",
              "value embeddings of the baseline and residual variants: every, alternating, none "
              "(kv/both variants: every)",
              "every")
      .option("gate-channels", "C", "channels the value-embedding and memory gates read (0: all)", "0")
      .option("mem-offset", "K", "LRT memory offset: position t reads the source state of t - K", "1")
      .flag("reset-at-bos", "LRT: zero the memory when a BOS lies between the source and the reader")
      .option("lr-scale", "F", "multiply the four learning rates (and --gamma-lr) by F (learning-rate sweeps)", "1")
      .option("weight-decay", "W", "Muon weight decay at step 0 (decays linearly to 0)", "0.1")
      .option("batch-lr-rule", "RULE",
              "lrt (rates as given) or release (every rate times sqrt(tokens per step / 2^19))", "lrt")
      .option("warmup-frac", "F", "linear LR warm-up over this fraction of the steps", "0")
      .option("warmdown-frac", "F", "linear LR warm-down over this fraction of the steps", "0.5")
      .option("final-lr-frac", "F", "the LR at the end of the warm-down, as a fraction of the peak", "0")
      .option("seq-eval-every", "N",
              "LRT: also score the validation tokens in sequential mode (the exact recurrence) every N steps "
              "(0: only at the end)",
              "0")
      .option("core", "DIR", "also score CORE on this bundle (lrt-eval --core) into log.csv's core columns")
      .option("core-every", "N", "with --core: every N steps and at the end (0: at each evaluation)", "0")
      .option("core-max-per-task", "K", "with --core: the first K items of each task after its shuffle (-1: all)", "-1")
      .option("core-mode", "M",
              "with --core: parallel (the memory at zero, as the release scores), sequential (LRT: the exact "
              "recurrence) or both",
              "parallel")
      .option("seed", "S", "seed of the initialisation and the data order", "0")
      .shared("threads")
      .shared("device")
      .shared("precision")
      .option("resume", "DIR", "continue from a checkpoint directory written by lrt-train");
  if (const int rc = tool::join_mpi("lrt-train"); rc != 0) return rc;
  tool::set_program_arguments(argc, argv);
  const int rc = tool::run_main(a, [&] {
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "--list-variants") {
        for (const auto& [variant, schedule] : tool::registered_pairs())
          fmt::print("--variant {} --schedule {}\n", variant, schedule);
        // The pairs --device cuda reaches (none in a build without CUDA).
        std::string cuda = tool::cuda_pairs_text();
        for (std::size_t at = 0; (at = cuda.find("\n  ", at)) != std::string::npos;)
          cuda.replace(at, 3, "\n--device cuda ");
        if (!cuda.empty()) fmt::print("{}\n", cuda.substr(1));
        return 0;
      }
    if (!a.parse(argc, argv)) return 0;
    tool::apply_threads(a);
    tool::check_device(a);  // a bad --device or --precision fails before any work
    return tool::train_program(a);
  });
  // A stop by SIGINT/SIGTERM (exit 128 + the signal) is agreed on by every rank: no abort.
  if (rc != 128 + SIGINT && rc != 128 + SIGTERM) tool::end_job("lrt-train", rc);
  return rc;
}
