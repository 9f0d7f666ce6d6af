// The README's quick start (tests check that the README shows this file verbatim and run it).
#include <lrt/lrt.hpp>  // the whole library on the CPU

int main() {
  using V = lrt::Variant<lrt::Injection::Both, lrt::Projection::Shared>;  // = lrt::variants::Lrt
  lrt::ModelConfig cfg = lrt::preset("tiny");                             // sizes are runtime values
  cfg.sequence_len = 32;
  lrt::Model<V> model(cfg, /*seed=*/1);
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the cat sat on the mat. ";
  const auto rows = lrt::data::TokenRows::build({{"doc", text}}, 32);  // BOS + 32 bytes per row
  lrt::TrainOptions opt;
  opt.batch_rows = 8, opt.steps = 40;
  lrt::Trainer<V, lrt::Interleaved<2>> trainer(model, rows, opt);  // the paper's schedule
  while (!trainer.done()) {
    const auto s = trainer.train_step();
    if (s.step % 10 == 0) fmt::print("step {} loss {:.3f}\n", s.step, s.loss);
  }
  lrt::Decoder dec(model);  // one forward per token: KV cache + the recurrent memory
  lrt::index_t tok = lrt::data::ByteTokenizer::bos;
  for (int t = 0; t < 24; ++t) {
    const auto& logits = dec.step({&tok, 1});
    tok = lrt::sample_token<float>({logits.data(), 257}, {.temperature = 0}, t);  // greedy
    fmt::print("{}", static_cast<char>(tok));
  }
  fmt::print("\n");
}
