// lrt-train: trains a baseline GPT on a text file, a folder of text files or the unpacked Brown
// Corpus; writes DIR/model.safetensors, DIR/optim.safetensors, DIR/log.csv and DIR/loss.svg.
//   lrt-train --preset tiny --data ~/.cache/lrt-data/brown/package --time 600 --out runs/tiny
#include <chrono>
#include <cstdio>

#include <lrt/lrt.hpp>
#include <lrt/train/trainer.hpp>

#include "tool_util.hpp"

#include <filesystem>

namespace {

/// Rows per optimizer step of the CPU presets (spec §8): tiny 32x128, small 16x256, medium 32x256.
lrt::index_t preset_batch_rows(const std::string& p) { return p == "small" ? 16 : 32; }
lrt::index_t preset_micro_rows(const std::string& p) { return p == "medium" ? 8 : 0; }

int train(const tool::Args& a) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  const auto now = [&] { return std::chrono::duration<double>(clock::now() - t_start).count(); };

  const std::string preset = a.str("preset"), out = a.str("out"), data_path = a.str("data");
  const bool resume = a.has("resume");
  tool::require_path(data_path, "--data");
  lrt::ModelConfig cfg;
  if (resume) {
    cfg = lrt::read_model_config(lrt::st::Reader::open(a.str("resume") + "/model.safetensors"));
  } else {
    try {
      cfg = lrt::preset(preset);
    } catch (const lrt::Error& e) {
      throw tool::UsageError(e.what());
    }
  }
  if (a.has("sequence-len")) cfg.sequence_len = a.integer("sequence-len", 1, 1 << 20);
  const int modes = int(a.has("steps")) + int(a.has("time"));
  if (modes > 1) throw tool::UsageError("give at most one of --steps and --time");

  lrt::TrainOptions o;
  o.seed = static_cast<std::uint64_t>(a.integer("seed", 0, (1LL << 62)));
  o.batch_rows = a.has("batch-rows") ? a.integer("batch-rows", 1, 1 << 20) : preset_batch_rows(preset);
  o.micro_rows = a.has("micro-rows") ? a.integer("micro-rows", 1, 1 << 20) : preset_micro_rows(preset);
  o.matrix_lr = static_cast<float>(a.number("matrix-lr", 0, 10));
  o.embedding_lr = static_cast<float>(a.number("embedding-lr", 0, 100));
  o.unembedding_lr = static_cast<float>(a.number("unembedding-lr", 0, 10));
  o.scalar_lr = static_cast<float>(a.number("scalar-lr", 0, 10));
  if (resume) {  // unless given again, the settings the checkpoint was trained with
    const auto orr = lrt::st::Reader::open(a.str("resume") + "/optim.safetensors");
    if (const auto j = orr.meta("train_options")) {
      const auto t = lrt::json::parse(*j, orr.label() + " train_options");
      if (!a.has("batch-rows")) o.batch_rows = t.at("batch_rows").as_int();
      if (!a.has("micro-rows")) o.micro_rows = t.at("micro_rows").as_int();
      if (!a.has("seed")) o.seed = static_cast<std::uint64_t>(t.at("seed").as_int());
      if (!a.has("matrix-lr")) o.matrix_lr = static_cast<float>(t.at("matrix_lr").as_number());
      if (!a.has("embedding-lr")) o.embedding_lr = static_cast<float>(t.at("embedding_lr").as_number());
      if (!a.has("unembedding-lr")) o.unembedding_lr = static_cast<float>(t.at("unembedding_lr").as_number());
      if (!a.has("scalar-lr")) o.scalar_lr = static_cast<float>(t.at("scalar_lr").as_number());
    }
  }
  const long long eval_tokens = a.integer("eval-tokens", 1, 1LL << 40);
  const long long eval_every_arg = a.integer("eval-every", 0, 1LL << 40);
  const long long steps_arg = a.has("steps") ? a.integer("steps", 1, 1LL << 40) : 0;
  const double time_arg = a.has("time") ? a.number("time", 1, 1e9) : 0;
  const double tpp = a.number("tokens-per-param", 1e-6, 1e9);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear in order with the progress on stderr
  fmt::print("lrt-train: {} threads (LRT_NUM_THREADS), GEMM via {}\n", lrt::num_threads(),
             LRT_HAS_OPENBLAS ? "OpenBLAS" : "Eigen");
  const auto corpus = lrt::data::load_corpus(data_path);
  const int T = static_cast<int>(cfg.sequence_len);
  const auto train_rows = lrt::data::TokenRows::build(corpus.train, T);
  const auto val_rows = lrt::data::TokenRows::build(corpus.val, T);
  fmt::print("data: {} ({}): train {} docs, {} bytes, {} rows; validation {} docs, {} rows\n", data_path,
             corpus.kind, corpus.train.size(), lrt::data::text_bytes(corpus.train), train_rows.rows(),
             corpus.val.size(), val_rows.rows());
  const auto val = lrt::data::validation_batches(val_rows, static_cast<int>(std::min<lrt::index_t>(o.batch_rows, 32)),
                                                 eval_tokens);

  lrt::GPT<float> model(cfg, o.seed);
  lrt::Trainer tr(model, train_rows, o);
  if (resume) {
    tr.resume(a.str("resume"));
    fmt::print("resumed from {} at step {} of {}\n", a.str("resume"), tr.step(), tr.horizon());
  }
  fmt::print("model: L={} d={} H={} T={} params {} (matmul {}), {:.3g} FLOP/token; {} tokens/step ({} x {} rows)\n",
             cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.sequence_len, model.num_params(), model.num_matmul_params(),
             model.flops_per_token(), tr.tokens_per_step(), tr.accumulation(), tr.options().micro_rows);

  // The horizon N of the schedules.
  if (!resume || a.has("steps") || a.has("time")) {
    if (steps_arg > 0) {
      tr.set_horizon(steps_arg);
    } else if (time_arg > 0) {
      // Time 10 warm-up steps (forward + backward, no update), then fix N (spec §8).
      double per_step = 0;
      const int warm = 10;
      for (int i = 0; i < warm; ++i) per_step += tr.time_step_without_update() / warm;
      // Evaluations cost ~1/3 of a step per step's worth of tokens; there are ~11 of them with the
      // default --eval-every (N/10), or about n / eval_every.
      const double eval_cost = per_step / 3 * double(eval_tokens) / double(tr.tokens_per_step());
      const double left = time_arg - now();
      const double n_real = eval_every_arg > 0 ? left / (per_step * 1.07 + eval_cost / double(eval_every_arg))
                                               : (left - 11 * eval_cost) / (per_step * 1.07);  // +7%: the optimizer step (measured)
      const auto n = static_cast<std::int64_t>(std::max(1.0, std::floor(n_real)));
      tr.set_horizon(tr.step() + n);
      fmt::print("time budget {}: {:.3f} s/step over {} warm-up steps -> {} steps\n", tool::duration(time_arg),
                 per_step, warm, n);
    } else {
      const double n_scal = static_cast<double>(model.num_matmul_params());
      tr.set_horizon(std::max<std::int64_t>(1, static_cast<std::int64_t>(tpp * n_scal / double(tr.tokens_per_step()))));
      fmt::print("horizon: {} tokens/param x {} params / {} tokens/step = {} steps\n", tpp, n_scal,
                 tr.tokens_per_step(), tr.horizon());
    }
  }
  const std::int64_t N = tr.horizon();
  const std::int64_t eval_every = eval_every_arg > 0 ? eval_every_arg : std::max<std::int64_t>(1, N / 10);

  lrt::ensure_directory(out);
  const std::string log_path = out + "/log.csv", svg_path = out + "/loss.svg";
  std::vector<tool::LogRow> log;
  if (resume) {
    for (const auto& r : tool::read_log(a.str("resume") + "/log.csv"))
      if (r.step < tr.step()) log.push_back(r);
  }
  std::FILE* csv = std::fopen(log_path.c_str(), "w");
  lrt::check(csv != nullptr, "lrt-train", "cannot write '", log_path, "'");
  std::fprintf(csv, "%s\n", tool::log_header);
  for (const auto& r : log) std::fprintf(csv, "%s\n", tool::log_line(r).c_str());
  std::fflush(csv);
  const std::string title = fmt::format("lrt {} (L={}, d={}), {} tokens/step", resume ? "resumed" : preset,
                                        cfg.n_layer, cfg.n_embd, tr.tokens_per_step());

  tool::Progress progress(10);
  double last_bpb = NAN;
  long long tokens = tr.step() * tr.tokens_per_step();
  double train_seconds = 0;
  std::int64_t timed_steps = 0;
  while (!tr.done()) {
    const lrt::StepStats s = tr.train_step();
    tokens += s.tokens;
    train_seconds += s.seconds;
    ++timed_steps;
    tool::LogRow row;
    row.step = s.step, row.tokens = tokens, row.train_loss = s.loss, row.lr = s.lr_multiplier, row.seconds = now();
    const bool last = tr.done();
    const bool eval_now = last || (s.step + 1) % eval_every == 0;
    if (eval_now) {
      const lrt::BpbResult r = lrt::evaluate_bpb(model, val);
      row.val_loss = r.loss(), row.val_bpb = last_bpb = r.bpb();
    }
    log.push_back(row);
    std::fprintf(csv, "%s\n", tool::log_line(row).c_str());
    std::fflush(csv);
    const double tps = double(timed_steps * tr.tokens_per_step()) / train_seconds;
    const double eta = double(N - tr.step()) * train_seconds / double(timed_steps);
    std::string line = fmt::format("step {}/{} loss {:.4f} lr x{:.2f} {:.0f} tok/s elapsed {} ETA {}", s.step + 1, N,
                                   s.loss, s.lr_multiplier, tps, tool::duration(now()), tool::duration(eta));
    if (eval_now) line += fmt::format(" | val loss {:.4f} bpb {:.4f}", row.val_loss, row.val_bpb);
    progress.update(line, now(), eval_now || s.step == 0);
    if (eval_now) {
      tr.save(out);
      lrt::write_file_atomic(svg_path, tool::loss_svg(log, title));
    }
  }
  std::fclose(csv);
  const double tps = timed_steps > 0 ? double(timed_steps * tr.tokens_per_step()) / train_seconds : 0;
  fmt::print("done: {} steps, {} tokens, {:.0f} tokens/s ({:.1f} GFLOP/s model), wall {}\n", tr.step(), tokens, tps,
             tps * model.flops_per_token() * 1e-9, tool::duration(now()));
  fmt::print("wrote {}/model.safetensors, {}/optim.safetensors, {}, {}\n", out, out, log_path, svg_path);
  fmt::print("val_bpb: {:.4f}\n", last_bpb);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tool::Args a("lrt-train", "Trains a baseline GPT (spec §2, §8) on bytes of text.");
  a.option("preset", "NAME", "model preset: tiny, small, medium", "tiny")
      .option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus", "", true)
      .option("out", "DIR", "checkpoint directory (model, optimizer state, log.csv, loss.svg)", "", true)
      .option("steps", "N", "optimizer steps (the schedules' horizon)")
      .option("time", "SECONDS", "time budget: the horizon is fixed after timing 10 warm-up steps")
      .option("tokens-per-param", "R", "horizon when neither --steps nor --time: R x matmul params tokens", "12")
      .option("batch-rows", "B", "rows of T tokens per optimizer step (preset: tiny 32, small 16, medium 32)")
      .option("micro-rows", "B", "rows per forward/backward; gradients accumulate (default: all)")
      .option("sequence-len", "T", "override the preset's sequence length")
      .option("matrix-lr", "LR", "Muon learning rate", "0.02")
      .option("embedding-lr", "LR", "AdamW lr of wte and value embeddings (times (d/768)^-0.5)", "0.3")
      .option("unembedding-lr", "LR", "AdamW lr of lm_head (times (d/768)^-0.5)", "0.004")
      .option("scalar-lr", "LR", "AdamW lr of the x0 lambdas", "0.5")
      .option("eval-every", "N", "steps between validation evaluations and checkpoints (0: N/10)", "0")
      .option("eval-tokens", "N", "validation target tokens per evaluation", "65536")
      .option("seed", "S", "seed of the initialisation and the data order", "0")
      .option("resume", "DIR", "continue from a checkpoint directory written by lrt-train");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    return train(a);
  });
}
