// lrt-eval: validation bits per byte of a checkpoint (spec §7); the last line is `val_bpb: X`.
//   lrt-eval --checkpoint runs/tiny/model.safetensors --data ~/.cache/lrt-data/brown/package
#include <lrt/lrt.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/model/eval.hpp>
#include <lrt/data.hpp>

#include "tool_util.hpp"

#include <filesystem>

namespace {
lrt::ModelConfig config_for(const tool::Args& a, const lrt::st::Reader& r) {
  if (!a.has("config")) return lrt::read_model_config(r);
  const std::string text = lrt::read_file(a.str("config"), "lrt-eval");
  return lrt::config_from_json(lrt::json::parse(text, a.str("config")), nullptr, "'" + a.str("config") + "'");
}
}  // namespace

int main(int argc, char** argv) {
  tool::Args a("lrt-eval", "Validation bits per byte of a checkpoint on the validation split of PATH.");
  a.option("checkpoint", "FILE", "model.safetensors written by lrt-train (or release weights with --config)", "", true)
      .option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus", "", true)
      .option("config", "FILE", "model config JSON (the release's meta_XXXXXX.json or a bare GPTConfig)")
      .option("eval-tokens", "N", "validation target tokens", "65536")
      .option("batch-rows", "B", "rows per forward", "16");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    const long long eval_tokens = a.integer("eval-tokens", 1, 1LL << 40);
    const int B = static_cast<int>(a.integer("batch-rows", 1, 1 << 16));
    tool::require_path(a.str("data"), "--data");
    const auto r = lrt::st::Reader::open(a.str("checkpoint"));
    const lrt::ModelConfig cfg = config_for(a, r);
    lrt::GPT<float> model(cfg);
    lrt::load_weights(model, r);
    const auto corpus = lrt::data::load_corpus(a.str("data"));
    const auto rows = lrt::data::TokenRows::build(corpus.val, static_cast<int>(cfg.sequence_len));
    const auto batches = lrt::data::validation_batches(rows, B, eval_tokens);
    fmt::print("checkpoint {} (step {}): L={} d={} T={}; validation: {} docs, {} rows available\n",
               a.str("checkpoint"), lrt::read_step(r), cfg.n_layer, cfg.n_embd, cfg.sequence_len, corpus.val.size(),
               rows.rows());
    const lrt::BpbResult res = lrt::evaluate_bpb(model, batches);
    fmt::print("targets scored: {} ({} bytes), val loss {:.4f} nats/token\n", res.tokens, res.bytes, res.loss());
    fmt::print("val_bpb: {:.4f}\n", res.bpb());
    return 0;
  });
}
