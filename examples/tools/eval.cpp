// lrt-eval: validation bits per byte of a checkpoint (spec §7); the last line is `val_bpb: X`.
// With --core DIR: CORE, the in-context-learning accuracy of a bundle's tasks as the release
// computes it (lrt/eval/core.hpp); the last line is `core_metric: X`. Under mpirun -np N the
// examples are spread over the ranks (rank 0 reports).
// LRT checkpoints also print val_bpb_parallel (with per-pass values) and val_bpb_sequential. The
// parallel mode runs the schedule the checkpoint records, with its options: lrt's metadata, or a
// release config's use_interleaved (+ interleaved_kv_refresh) / use_multi_refine (+ its weights).
//   lrt-eval --checkpoint runs/tiny/model.safetensors --data ~/.cache/lrt-data/brown/package
#include "programs.hpp"

int main(int argc, char** argv) {
  tool::Args a("lrt-eval",
               "Bits per byte of a checkpoint on the validation split of PATH (--split all: on all of it), or with "
               "--core DIR its CORE score on a bundle of in-context-learning tasks.");
  a.shared("checkpoint")
      .option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus (bits per byte)")
      .option("core", "DIR",
              "score CORE on this bundle instead (core.yaml, eval_meta_data.csv, eval_data/: nanochat's "
              "eval_bundle.zip unpacked), example for example as the release computes it")
      .option("max-per-task", "N", "with --core: the first N items of each task after the shuffle (-1: all)", "-1")
      .option("tasks", "A,B", "with --core: only these tasks (their labels in core.yaml)")
      .option("examples", "FILE", "with --core: write each example's outcome to FILE (tab-separated)")
      .shared("config")
      .option("tokenizer", "FILE",
              "the BPE tokenizer file the model was trained with (checked against the checkpoint's record; needed "
              "for release weights with --config)")
      .option("mode", "MODE",
              "sequential (the exact recurrence; LRT default) or parallel (the schedule's passes); with --core: "
              "parallel (the memory at zero, as the release scores; the default there), sequential or both")
      .option("split", "SPLIT",
              "val (the validation split lrt-train holds out), tune (the tuning slice lrt-train --tune-split holds "
              "out of its training split), train (the bytes the checkpoint trained on: with val, the train - "
              "validation gap) or all (every byte of PATH)",
              "val")
      .flag("json",
            "print one JSON object (checkpoint, variant, schedule, targets, bytes, val_loss, val_bpb, ...; with "
            "--core: tasks (accuracy, centered, examples, ...), results, centered_results, core_metric) instead of "
            "the text lines")
      .option("eval-tokens", "N", "target tokens to score at most", "65536")
      .option("eval-bytes", "N",
              "score every token of the split's first N bytes of text instead: the same bytes for any tokenizer (0: "
              "off)",
              "0")
      .option("context", "N",
              "targets per row (0: the model's sequence_len); longer rows also print bits per byte by position", "0")
      .option("sinks", "N",
              "attention sinks for the by-position numbers: queries also see each row's first N "
              "positions (0: none)",
              "0")
      .option("batch-rows", "B", "rows per forward", "16")
      .shared("threads")
      .shared("device")
      .shared("precision");
  // Under mpirun: --core's examples spread over the ranks.
  if (const int rc = tool::join_mpi("lrt-eval"); rc != 0) return rc;
  const int rc = tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    tool::apply_threads(a);
    tool::check_device(a);  // a bad --device or --precision fails before any work
    return tool::eval_program(a);
  });
  // A usage error stops every rank alike; any other, the others could wait for this one.
  if (rc != 2) tool::end_job("lrt-eval", rc);
  return rc;
}
