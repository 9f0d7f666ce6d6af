// lrt-generate: samples text from a checkpoint with the KV-cache decoder, streaming bytes as
// they are produced (spec §6: temperature 0 = greedy, top-k, top-p, counter-based draws).
//   lrt-generate --checkpoint runs/tiny/model.safetensors --prompt "The " --max-new-tokens 200
#include <cstdio>

#include <lrt/lrt.hpp>
#include <lrt/data.hpp>
#include <lrt/model/checkpoint.hpp>
#include <lrt/model/decode.hpp>

#include "tool_util.hpp"

int main(int argc, char** argv) {
  tool::Args a("lrt-generate", "Continues a prompt with a trained model, printing bytes as they come.");
  a.option("checkpoint", "FILE", "model.safetensors written by lrt-train (or release weights with --config)", "", true)
      .option("prompt", "TEXT", "text to continue (a BOS token is put in front)", "")
      .option("max-new-tokens", "N", "tokens to generate", "256")
      .option("temperature", "T", "0 = greedy", "0.8")
      .option("top-k", "K", "keep the K most likely tokens (0: all)", "0")
      .option("top-p", "P", "keep the smallest set with probability >= P", "1")
      .option("seed", "S", "sampling seed", "0")
      .option("config", "FILE", "model config JSON (the release's meta_XXXXXX.json or a bare GPTConfig)")
      .flag("stop-at-bos", "stop when the model starts a new document (BOS)");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    const long long n_new = a.integer("max-new-tokens", 0, 1LL << 30);
    lrt::SamplerOptions so;
    so.temperature = a.number("temperature", 0, 1e6);
    so.top_k = a.integer("top-k", 0, 1LL << 30);
    so.top_p = a.number("top-p", 1e-9, 1);
    so.seed = static_cast<std::uint64_t>(a.integer("seed", 0, 1LL << 62));
    const auto r = lrt::st::Reader::open(a.str("checkpoint"));
    lrt::ModelConfig cfg;
    if (a.has("config")) {
      const std::string text = lrt::read_file(a.str("config"), "lrt-generate");
      cfg = lrt::config_from_json(lrt::json::parse(text, a.str("config")), nullptr, "'" + a.str("config") + "'");
    } else {
      cfg = lrt::read_model_config(r);
    }
    lrt::GPT<float> model(cfg);
    lrt::load_weights(model, r);
    const lrt::data::ByteTokenizer tok;
    std::vector<lrt::index_t> prompt{lrt::data::ByteTokenizer::bos};
    for (auto id : tok.encode(a.str("prompt"))) prompt.push_back(id);
    const lrt::index_t P = static_cast<lrt::index_t>(prompt.size()), Tmax = cfg.sequence_len;
    lrt::check(P + n_new <= Tmax, "generate", "prompt (", P, ") + max-new-tokens (", n_new, ") exceeds context T_max (",
               Tmax, ")");
    lrt::Decoder dec(model, 1, Tmax);
    std::fputs(a.str("prompt").c_str(), stdout);
    std::fflush(stdout);
    const lrt::Tensor<float, 2>* logits = nullptr;
    for (lrt::index_t id : prompt) logits = &dec.step(std::span<const lrt::index_t>(&id, 1));  // exact prefill
    for (long long i = 0; i < n_new; ++i) {
      const lrt::index_t t = dec.position();
      const lrt::index_t next = lrt::sample_token<float>(
          std::span<const float>(logits->data(), static_cast<std::size_t>(cfg.vocab_size)), so,
          static_cast<std::uint64_t>(t));  // counter row * Tmax + t, row 0
      if (next == lrt::data::ByteTokenizer::bos) {
        if (a.has("stop-at-bos")) break;
        std::fputs("\n\n", stdout);
      } else {
        std::fputc(static_cast<int>(next), stdout);
      }
      std::fflush(stdout);
      if (i + 1 < n_new) logits = &dec.step(std::span<const lrt::index_t>(&next, 1));
    }
    std::fputc('\n', stdout);
    return 0;
  });
}
