// A decode-only program on the installed lrt::embedded (no exceptions, RTTI, fmt or threads):
// the checkpoint mapped and read by the one loader, greedy text after a prompt.
//   embedded_decode CHECKPOINT PROMPT N
// Built by examples/host_project (find_package(lrt)); lrt-embedded-generate (tools/embedded) is
// the full program (BPE prompts, --help, --version, allocation counting).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include <lrt/decode/lean_file.hpp>
#include <lrt/decode/lean_variants.hpp>
#include <lrt/decode/sampler.hpp>
#include <lrt/io/mapped_file.hpp>
#include <lrt/model/checkpoint_file.hpp>

namespace {
int fail(const lrt::Status& s) { return std::fprintf(stderr, "embedded_decode: %s\n", s.message()), 1; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return std::fputs("usage: embedded_decode CHECKPOINT PROMPT N\n", stderr), 2;
  auto file = std::make_shared<lrt::MappedFile>();
  if (lrt::Status s = file->open(argv[1]); !s.ok()) return fail(s);
  const lrt::st::Reader r = lrt::st::Reader::over(file, file->bytes(), argv[1]);
  lrt::CheckpointInfo info;
  if (lrt::Status s = lrt::read_checkpoint(r, info); !s.ok()) return fail(s);
  int rc = 1;
  const bool known = lrt::with_variant(lrt::LeanVariants{}, info.run.structure, [&](auto v) {
    using Decoder = lrt::LeanDecoder<decltype(v), float>;
    lrt::LeanWeights<float> w;
    std::vector<std::byte> spill;
    if (lrt::Status s = lrt::lean_file_weights<decltype(v)>(r, info.config, w, spill); !s.ok())
      return void(rc = fail(s));
    std::optional<Decoder> dec;
    if (lrt::Status s = Decoder::create(std::move(w), {0, 0}, dec); !s.ok()) return void(rc = fail(s));
    std::vector<lrt::index_t> prompt{info.config.bos()};
    std::vector<lrt::tok::token_t> ids;
    if (info.bpe)
      info.bpe->encode(argv[2], ids);
    else
      for (const char* c = argv[2]; *c; ++c) ids.push_back(static_cast<unsigned char>(*c));
    for (auto id : ids) prompt.push_back(static_cast<lrt::index_t>(id));
    std::fputs(argv[2], stdout);
    lrt::Status s = dec->try_prefill(prompt);
    for (long i = 0; s.ok() && i < std::atol(argv[3]); ++i) {
      const lrt::index_t tok =
          lrt::sample_token<float>(dec->logits(), {.temperature = 0}, lrt::sample_counter(0, dec->position()));
      if (tok == info.config.bos()) {
        std::fputs("\n\n", stdout);
      } else if (info.bpe && tok < static_cast<lrt::index_t>(info.bpe->vocab_size())) {
        const auto text = info.bpe->token(static_cast<lrt::tok::token_t>(tok));
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else if (!info.bpe && tok < 256) {
        std::putchar(static_cast<int>(tok));
      }
      s = dec->try_step(tok);
    }
    std::putchar('\n');
    rc = s.ok() ? 0 : fail(s);
  });
  if (!known)
    std::fprintf(stderr, "embedded_decode: variant %s is not one of lrt::LeanVariants\n",
                 lrt::variant_label(info.run.structure).c_str());
  return known ? rc : 1;
}
