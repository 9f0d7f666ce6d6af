// A host of the installed runtime library that also includes lrt's templates: built twice by
// tests/package/find_package (portable, and -march=native where the compiler takes it) against
// the same installed library. The lines the runtime prints must be the same in both builds: the
// library's own inline code (kernels, Eigen's products) is local to it (cmake/runtime_library.cmake),
// so a native host's copies of the same functions cannot replace it. The templates' own line may
// differ between the builds (their instruction sets do).
#include <cstdio>
#include <string>
#include <vector>

#include <lrt/lrt.hpp>
#include <lrt/runtime/training.hpp>

int main() try {
  // The templates, compiled with the host's flags.
  lrt::Tensor<float, 2> a({64, 48}), b({48, 32});
  for (lrt::index_t i = 0; i < a.numel(); ++i) a.data()[i] = 0.01f * static_cast<float>(i % 97) - 0.3f;
  for (lrt::index_t i = 0; i < b.numel(); ++i) b.data()[i] = 0.02f * static_cast<float>(i % 89) - 0.7f;
  const auto c = lrt::matmul(a, b);
  std::printf("templates: sum %.9g\n", static_cast<double>(lrt::sum(c)));

  // The runtime library, compiled with its own.
  lrt::ModelConfig cfg = lrt::preset("tiny");
  cfg.sequence_len = 32;
  auto model = lrt::runtime::make_model("lrt", cfg, /*seed=*/3);
  std::string text;
  for (int i = 0; i < 60; ++i) text += "a host links the runtime; ";
  const std::vector<std::string> texts{text};
  lrt::TrainOptions opt;
  opt.batch_rows = 4, opt.steps = 6;
  auto training = model->train(texts, opt);
  while (!training->done()) {
    const lrt::runtime::StepReport s = training->step();
    std::printf("runtime: step %lld loss %.17g\n", static_cast<long long>(s.step), s.loss);
  }
  std::printf("runtime: bits per byte %.17g\n",
              model->evaluate(texts, lrt::runtime::Evaluation::sequential).bits_per_byte());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "runtime_host: %s\n", e.what());
  return 1;
}
