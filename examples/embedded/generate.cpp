// examples/embedded/generate.cpp: lrt-embedded-generate, greedy decoding for small deployments
// built from lrt's decode-only headers with -fno-exceptions -fno-rtti, without fmt and without
// threads (LRT_SINGLE_THREAD): the checkpoint is mapped, not read (its weights are used where
// they lie), the decoder's state is one arena laid out before the first token, and no call after
// that allocates. Prints what lrt-c-generate prints for the same arguments.
//   lrt-embedded-generate CHECKPOINT PROMPT N [--stats]      (--help, --version)
// CHECKPOINT: a .safetensors file, or a run's directory (its model.safetensors).
// --stats: the memory it used, on stderr: file bytes mapped, the arena, weights copied because they
// were not aligned in the file, the peak resident set, and (in the allocation-counting build,
// LRT_EMBEDDED_COUNT_ALLOCATIONS) the heap allocations made after loading (must be 0).
// Decodes the variants baseline, lrt and lrt-release (the file's "variant" metadata names it).
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
#include <lrt/decode/sampler.hpp>
#include <lrt/model/config_json.hpp>
#include <lrt/model/variant_structure.hpp>

#include "lrt_version.h"

#if defined(LRT_EMBEDDED_COUNT_ALLOCATIONS)
// Every heap allocation of the process passes through these (glibc's allocator underneath).
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}
namespace {
bool g_counting = false;
long g_allocations = 0;
void note() {
  if (g_counting) ++g_allocations;
}
}  // namespace
extern "C" {
void* malloc(std::size_t n) { return note(), __libc_malloc(n); }
void* calloc(std::size_t a, std::size_t b) { return note(), __libc_calloc(a, b); }
void* realloc(void* p, std::size_t n) { return note(), __libc_realloc(p, n); }
void* aligned_alloc(std::size_t al, std::size_t n) { return note(), __libc_memalign(al, n); }
void* memalign(std::size_t al, std::size_t n) { return note(), __libc_memalign(al, n); }
int posix_memalign(void** out, std::size_t al, std::size_t n) {
  note();
  *out = __libc_memalign(al, n);
  return *out ? 0 : 12;  // ENOMEM
}
}
#endif

namespace {

const char* const usage =
    "usage: lrt-embedded-generate CHECKPOINT PROMPT N [--stats]\n"
    "Greedy decoding of N tokens after PROMPT (bytes; a BOS in front) from a mapped checkpoint, without\n"
    "exceptions, threads or allocation after load. Decodes the variants baseline, lrt and lrt-release.\n"
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

template <class V>
int generate(const lrt::st::Reader& r, std::size_t mapped, const lrt::ModelConfig& c, const char* text, long n,
             bool stats) {
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
  const std::size_t len = std::strlen(text);
  std::vector<lrt::index_t> prompt(len + 1);
  prompt[0] = c.bos();
  for (std::size_t i = 0; i < len; ++i) prompt[i + 1] = static_cast<unsigned char>(text[i]);
  lrt::SamplerOptions greedy;
  greedy.temperature = 0;  // the first largest logit
  static char out[4096];   // stdout's buffer, so that stdio allocates none
  std::setvbuf(stdout, out, _IOFBF, sizeof out);
#if defined(LRT_EMBEDDED_COUNT_ALLOCATIONS)
  g_counting = true;
#endif
  // From here on nothing allocates: the prompt is read, the state is laid out.
  std::fputs(text, stdout);
  lrt::Status s = dec->try_prefill(prompt);
  for (long i = 0; s.ok() && i < n; ++i) {
    const lrt::index_t tok = lrt::sample_token<float>(dec->logits(), greedy, lrt::sample_counter(0, dec->position()));
    if (tok == c.bos())
      std::fputs("\n\n", stdout);
    else if (tok < 256)
      std::putchar(static_cast<int>(tok));
    if (i + 1 < n) s = dec->try_step(tok);
  }
  std::putchar('\n');
  std::fflush(stdout);
#if defined(LRT_EMBEDDED_COUNT_ALLOCATIONS)
  g_counting = false;
#endif
  if (stats) {
    std::fprintf(stderr, "mapped_bytes %zu\narena_bytes %zu\nspill_bytes %zu\npeak_rss_kib %ld\n", mapped, need,
                 spill.size(), peak_rss_kib());
#if defined(LRT_EMBEDDED_COUNT_ALLOCATIONS)
    std::fprintf(stderr, "allocations_after_load %ld\n", g_allocations);
#endif
  }
  dec.reset();
  std::free(arena);
  if (!s.ok()) return fail(s);
#if defined(LRT_EMBEDDED_COUNT_ALLOCATIONS)
  if (g_allocations != 0)
    return std::fprintf(stderr, "lrt-embedded-generate: %ld allocations after load\n", g_allocations), 1;
#endif
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
  const lrt::ModelConfig c = lrt::read_model_config(r);
  const auto v = r.meta("variant");
  const auto structure = v ? lrt::parse_variant(*v) : std::nullopt;
  const auto is = [&](auto variant) { return structure && *structure == lrt::structure_of<decltype(variant)>(); };
  const std::size_t mapped = file->size();
  if (is(lrt::variants::Baseline{})) return generate<lrt::variants::Baseline>(r, mapped, c, argv[2], n, stats);
  if (is(lrt::variants::Lrt{})) return generate<lrt::variants::Lrt>(r, mapped, c, argv[2], n, stats);
  if (is(lrt::variants::LrtRelease{})) return generate<lrt::variants::LrtRelease>(r, mapped, c, argv[2], n, stats);
  std::fprintf(stderr,
               "lrt-embedded-generate: '%s' holds variant '%s'; this program decodes baseline, lrt and lrt-release\n",
               path.c_str(), v ? v->c_str() : "(none recorded)");
  return 1;
}
