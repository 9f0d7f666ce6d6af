// lrt-generate: samples text from a checkpoint with the KV-cache decoder (and the recurrent
// memory for LRT models), streaming bytes as they are produced (spec §6): on the CPU the lean
// decoder (decode/lean.hpp; the Decoder with --sinks), on a GPU the Decoder. --prefill chooses how
// the prompt is fed: exact (default), zero, interleaved:S, fixed-point or approximate:TOL.
//   lrt-generate --checkpoint runs/tiny/model.safetensors --prompt "The " --max-new-tokens 200
#include "programs.hpp"

int main(int argc, char** argv) {
  tool::Args a("lrt-generate", "Continues a prompt with a trained model, printing bytes as they come.");
  a.shared("checkpoint")
      .option("prompt", "TEXT", "text to continue (a BOS token is put in front)", "")
      .option("prompt-file", "FILE", "read the prompt from FILE ('-': standard input) instead of --prompt")
      .option("max-new-tokens", "N",
              "tokens to generate (generation may run past the training context); auto: sequence_len tokens", "auto")
      .shared("threads")
      .option("temperature", "T", "0 = greedy", "0.8")
      .option("top-k", "K", "keep the K most likely tokens (0: all)", "0")
      .option("top-p", "P", "keep the smallest set with probability >= P", "1")
      .option("seed", "S", "sampling seed", "0")
      .shared("device")
      .shared("precision")
      .option("prefill", "MODE",
              "how the prompt is fed: exact (token by token), zero (no memory, prompt and generation), "
              "interleaved:S (pass 0 + S refinement passes, then exact decoding; exact iff S >= prompt length), "
              "fixed-point (the exact recurrence by whole-prompt passes until the memory is bit-stable: up to "
              "ceil(P / k) passes, slower than exact on one CPU core; CPU) or approximate:TOL (those passes, a state "
              "that moves by at most TOL counts as settled; CPU)",
              "exact")
      .option("sinks", "N",
              "attention sinks: queries also see the first N positions once they leave the window "
              "(exact prefill past the shortest window)",
              "0")
      .shared("config")
      .option("tokenizer", "FILE",
              "the BPE tokenizer file the model was trained with (checked against the checkpoint's record; needed "
              "for release weights with --config)")
      .flag("stop-at-bos", "stop when the model starts a new document (BOS)");
  a.alias("-m", "checkpoint").alias("-p", "prompt").alias("-f", "prompt-file").alias("-n", "max-new-tokens");
  a.alias("--temp", "temperature").alias("-s", "seed").alias("-t", "threads");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    tool::check_device(a);  // a bad --device or --precision fails before any work
    if (a.str("max-new-tokens") != "auto") a.integer("max-new-tokens", 0, 1LL << 30);
    a.number("temperature", 0, 1e6), a.number("top-p", 1e-9, 1), a.integer("sinks", 0, 1LL << 20);
    if (a.has("prompt") && a.has("prompt-file")) throw tool::UsageError("give --prompt or --prompt-file, not both");
    tool::apply_threads(a);
    return tool::generate_program(a);
  });
}
