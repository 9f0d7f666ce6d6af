// examples/tools/embedded/generate.cpp: lrt-embedded-generate, greedy decoding for small deployments
// built from lrt's decode-only headers with -fno-exceptions -fno-rtti, without fmt and without
// threads (LRT_SINGLE_THREAD): the checkpoint is mapped, not read (its weights are used where
// they lie), the decoder's state is one arena laid out before the first token, and no call after
// that allocates. Prints what lrt-c-generate prints for the same arguments.
//   lrt-embedded-generate CHECKPOINT PROMPT N [--stats]      (--help, --version)
// CHECKPOINT: a .safetensors file, or a run's directory (its model.safetensors).
// --stats: the memory it used, on stderr: file bytes mapped, the arena, weights copied because they
// were not aligned in the file, the peak resident set, and (in the allocation-counting build,
// count_allocations.cpp linked in) the heap allocations made after loading (must be 0).
// Decodes the variants of lrt::LeanVariants (baseline, lrt, lrt-release) with the tokenizer the
// checkpoint records (bytes or its BPE); a file the one loader refuses is one error line, exit 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <lrt/decode/lean_file.hpp>
#include <lrt/decode/lean_variants.hpp>
#include <lrt/decode/sampler.hpp>
#include <lrt/model/checkpoint_file.hpp>

#include "lrt_version.h"

// The allocation counter (count_allocations.cpp): linked into lrt_embedded_alloc_check only, the
// same object code otherwise; weak, so that in lrt-embedded-generate these are null.
extern "C" {
void lrt_embedded_count_allocations(int on) __attribute__((weak));
long lrt_embedded_allocations_counted() __attribute__((weak));
}

namespace {

const char* const usage =
    "usage: lrt-embedded-generate CHECKPOINT PROMPT N [--stats]\n"
    "Greedy decoding of N tokens after PROMPT (a BOS in front; the checkpoint's tokenizer: bytes or its\n"
    "BPE) from a mapped checkpoint, without exceptions, threads or allocation after load. Decodes the\n"
    "variants baseline, lrt and lrt-release.\n"
    "  CHECKPOINT  a .safetensors file (f32, int8 or bf16), or a run's directory (its model.safetensors)\n"
    "  N           new tokens, in [0, 1000000]\n"
    "  --stats     the memory it used, on stderr (mapped, arena, spill bytes, peak resident set)\n"
    "  --help      this text\n"
    "  --version   the program's name and the git description it was built from\n";

/// The peak resident set (VmHWM) in KiB, or -1.
long peak_rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kib;
}

int fail(const lrt::Status& s) {
  std::fprintf(stderr, "lrt-embedded-generate: %s\n", s.message());
  return 1;
}

/// Greedy decoding of n tokens after text with the checkpoint's V weights (info: read_checkpoint's).
template <class V>
int generate(const lrt::st::Reader& r, std::size_t mapped, const lrt::CheckpointInfo& info, const char* text, long n,
             bool stats) {
  const lrt::ModelConfig& c = info.config;
  lrt::LeanWeights<float> w;
  std::vector<std::byte> spill;
  if (lrt::Status s = lrt::lean_file_weights<V>(r, c, w, spill); !s.ok()) return fail(s);
  using Decoder = lrt::LeanDecoder<V, float>;
  typename Decoder::Options o;
  o.max_prompt = 0;  // exact prefill only: the smallest state
  const std::size_t need = Decoder::required_bytes(c, o);
  void* arena = std::malloc(need);
  if (!arena) return fail(lrt::Status::error(lrt::StatusCode::out_of_memory, "arena", need, " bytes"));
  o.arena = arena, o.arena_bytes = need;
  std::optional<Decoder> dec;
  if (lrt::Status s = Decoder::create(std::move(w), o, dec); !s.ok()) return std::free(arena), fail(s);
  // The prompt through the checkpoint's tokenizer: its bytes, or the BPE it records.
  const std::size_t len = std::strlen(text);
  std::vector<lrt::index_t> prompt{c.bos()};
  if (info.bpe) {
    std::vector<lrt::tok::token_t> ids;
    info.bpe->encode(std::string_view(text, len), ids);
    for (const lrt::tok::token_t id : ids) prompt.push_back(static_cast<lrt::index_t>(id));
  } else {
    for (std::size_t i = 0; i < len; ++i) prompt.push_back(static_cast<unsigned char>(text[i]));
  }
  // Ids with text: the byte tokenizer's 256 bytes, or the BPE's ranks and specials.
  const lrt::index_t text_ids = info.bpe ? static_cast<lrt::index_t>(info.bpe->vocab_size()) : 256;
  lrt::SamplerOptions greedy;
  greedy.temperature = 0;  // the first largest logit
  static char out[4096];   // stdout's buffer, so that stdio allocates none
  std::setvbuf(stdout, out, _IOFBF, sizeof out);
  const bool counting = lrt_embedded_count_allocations != nullptr && lrt_embedded_allocations_counted != nullptr;
  if (counting) lrt_embedded_count_allocations(1);
  // From here on nothing allocates: the prompt is read, the state is laid out.
  std::fputs(text, stdout);
  lrt::Status s = dec->try_prefill(prompt);
  for (long i = 0; s.ok() && i < n; ++i) {
    const lrt::index_t tok = lrt::sample_token<float>(dec->logits(), greedy, lrt::sample_counter(0, dec->position()));
    if (tok == c.bos()) {
      std::fputs("\n\n", stdout);
    } else if (tok < text_ids) {  // as lrt-generate: a token's bytes (a special's text); padding prints nothing
      if (info.bpe) {
        const std::string_view bytes = info.bpe->token(static_cast<lrt::tok::token_t>(tok));
        std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      } else {
        std::putchar(static_cast<int>(tok));
      }
    }
    if (i + 1 < n) s = dec->try_step(tok);
  }
  std::putchar('\n');
  std::fflush(stdout);
  const long allocations = counting ? (lrt_embedded_count_allocations(0), lrt_embedded_allocations_counted()) : 0;
  if (stats) {
    std::fprintf(stderr, "mapped_bytes %zu\narena_bytes %zu\nspill_bytes %zu\npeak_rss_kib %ld\n", mapped, need,
                 spill.size(), peak_rss_kib());
    if (counting) std::fprintf(stderr, "allocations_after_load %ld\n", allocations);
  }
  dec.reset();
  std::free(arena);
  if (!s.ok()) return fail(s);
  if (allocations != 0)
    return std::fprintf(stderr, "lrt-embedded-generate: %ld allocations after load\n", allocations), 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0))
    return std::fputs(usage, stdout), 0;
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) return lrt_print_version("lrt-embedded-generate"), 0;
  const bool stats = argc == 5 && std::strcmp(argv[4], "--stats") == 0;
  if (argc != 4 && !stats) return std::fputs(usage, stderr), 2;
  char* end = nullptr;
  const long n = std::strtol(argv[3], &end, 10);
  if (*argv[3] == '\0' || *end != '\0' || n < 0 || n > 1000000) {
    std::fprintf(stderr, "lrt-embedded-generate: N must be an integer in [0, 1000000], got '%s'\n", argv[3]);
    return 2;
  }
  // A run's --out directory stands for its model.safetensors (as lrt-generate's --checkpoint).
  std::string path = argv[1];
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/model.safetensors";
  auto file = std::make_shared<lrt::MappedFile>();
  if (lrt::Status s = file->open(path.c_str()); !s.ok()) return fail(s);
  // A damaged header or config is reported by the error handler (this build has no exceptions;
  // README, "The embedded build"): this one prints the message and exits with status 1.
  lrt::set_error_handler([](const char* op, const char* message) {
    std::fprintf(stderr, "lrt-embedded-generate: [%s] %s\n", op, message);
    std::fflush(stdout);
    std::_Exit(1);
  });
  const lrt::st::Reader r = lrt::st::Reader::over(file, file->bytes(), path);
  // The one loader (lrt/model/checkpoint_file.hpp): the config, the metadata against it, the
  // tensors and their values, and the tokenizer, checked as every other program checks them.
  lrt::CheckpointInfo info;
  if (lrt::Status s = lrt::read_checkpoint(r, info); !s.ok()) return fail(s);
  const std::size_t mapped = file->size();
  int rc = 1;
  if (lrt::with_variant(lrt::LeanVariants{}, info.run.structure,
                        [&](auto v) { rc = generate<decltype(v)>(r, mapped, info, argv[2], n, stats); }))
    return rc;
  std::fprintf(stderr, "lrt-embedded-generate: '%s' holds variant %s; this program decodes %s\n", path.c_str(),
               lrt::variant_label(info.run.structure).c_str(), lrt::variant_names(lrt::LeanVariants{}).c_str());
  return 1;
}
