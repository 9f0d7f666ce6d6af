// The quick start on the runtime library: the same model as quickstart.cpp, trained, evaluated,
// saved and sampled through lrt's light runtime headers only (no template is compiled here: the
// pair "lrt" is the runtime's, compiled once). Usage: lrt-runtime-quickstart [OUT_DIR]
// (default: runs/runtime-quickstart).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/text.hpp>
#include <lrt/runtime/training.hpp>

int main(int argc, char** argv) try {
  if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {  // no options: an output folder at most
    const bool help = argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h");
    std::fprintf(help ? stdout : stderr, "usage: %s [OUT_DIR]\n", argv[0]);
    return help ? 0 : 2;
  }
  const std::string out = argc > 1 ? argv[1] : "runs/runtime-quickstart";
  lrt::ModelConfig cfg = lrt::preset("tiny");  // sizes are runtime values
  cfg.sequence_len = 32;
  auto model = lrt::runtime::make_model("lrt", cfg, /*seed=*/1);  // the paper's schedule, interleaved:2
  std::string text;
  for (int i = 0; i < 100; ++i) text += "the cat sat on the mat. ";
  const std::vector<std::string> texts{text};
  lrt::TrainOptions opt;
  opt.batch_rows = 8, opt.steps = 40;
  auto training = model->train(texts, opt);  // BOS + 32 bytes per row
  while (!training->done()) {
    const lrt::runtime::StepReport s = training->step();
    if (s.step % 10 == 0) std::printf("step %lld loss %.3f\n", static_cast<long long>(s.step), s.loss);
  }
  const std::string step_dir = training->save(out);
  for (const auto how : {lrt::runtime::Evaluation::parallel, lrt::runtime::Evaluation::sequential})
    std::printf("%s bits per byte %.4f\n", how == lrt::runtime::Evaluation::parallel ? "parallel" : "sequential",
                model->evaluate(texts, how).bits_per_byte());
  std::printf("saved %s\n", step_dir.c_str());

  // Decoding the saved run: one forward per token, the KV cache plus the recurrent memory.
  lrt::runtime::DecodingModel d = lrt::runtime::open_decoding(out);
  const lrt::runtime::Text tok(d.bpe);
  std::vector<lrt::index_t> prompt{d.config.bos()};
  tok.encode("the cat", prompt);
  const lrt::index_t row = d.decoding->join(prompt);
  std::string sample = "the cat";
  for (int t = 0; t < 24; ++t) {
    const lrt::index_t next =
        lrt::runtime::sample(d.decoding->logits(row), {.temperature = 0}, d.decoding->position(row));
    sample += tok.token_text(next);
    d.decoding->step({&row, 1}, {&next, 1});
  }
  std::printf("%s\n", sample.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "lrt-runtime-quickstart: %s\n", e.what());
  return 1;
}
