// tests/embedded/headers.cpp: the embedded header set compiled the way lrt::embedded compiles it
// (-fno-exceptions -fno-rtti, LRT_SINGLE_THREAD): the decode-only headers, the sampler and lrt's
// BPE tokenizer reach no fmt and no <thread>, and throw nothing (test embedded.headers: building
// this program is the test; running it checks the byte tokenizer's ids and a BPE round trip).
#include <lrt/decode/lean.hpp>
#include <lrt/decode/lean_file.hpp>
#include <lrt/decode/lean_variants.hpp>
#include <lrt/decode/sampler.hpp>
#include <lrt/io/mapped_file.hpp>
#include <lrt/model/checkpoint_file.hpp>
#include <lrt/model/config_json.hpp>
#include <lrt/model/variant_structure.hpp>
#include <lrt/tokenizer/tokenizer.hpp>

#if LRT_EXCEPTIONS
#error "the embedded header set must be compiled without exceptions (lrt::embedded)"
#endif
#if defined(__GXX_RTTI)
#error "the embedded header set must be compiled without RTTI (lrt::embedded)"
#endif
#if defined(FMT_VERSION)
#error "fmt reached the embedded header set"
#endif
#if defined(_GLIBCXX_THREAD)
#error "<thread> reached the embedded header set (LRT_SINGLE_THREAD has no thread pool)"
#endif

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

template class lrt::LeanDecoder<lrt::variants::Lrt, float>;
template class lrt::LeanDecoder<lrt::variants::Baseline, float>;

int main() {
  int failures = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok) std::printf("FAIL: %s\n", what), ++failures;
  };
  // A BPE tokenizer trained by hand: ranks 0..255 are the bytes, 256 is "ab"; special 257 is BOS.
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  ranks.emplace_back("ab");
  const lrt::tok::Tokenizer tok(ranks, "gpt2", {{"<|bos|>", 257}}, 257);
  const std::vector<lrt::tok::token_t> ids = tok.encode("abc");
  expect(ids.size() == 2 && ids[0] == 256 && ids[1] == 'c', "BPE encode \"abc\" -> [256, 'c']");
  expect(tok.decode(ids) == "abc", "BPE decode");
  lrt::ModelConfig c;
  expect(c.status().ok(), "the default config is valid");
  c.n_head = 5;
  expect(c.status().code() == lrt::StatusCode::invalid_argument, "n_head 5 does not divide n_embd");
  lrt::LeanDecoder<lrt::variants::Lrt>::Options o;
  expect(lrt::LeanDecoder<lrt::variants::Lrt>::required_bytes(lrt::ModelConfig{}, o) > 0, "required_bytes");
  // The error handler: installing one returns the one before; null restores the default.
  const lrt::ErrorHandler mine = [](const char*, const char*) { std::_Exit(3); };
  const lrt::ErrorHandler first = lrt::set_error_handler(mine);
  expect(first != nullptr && first != mine, "the default handler is installed first");
  expect(lrt::set_error_handler(nullptr) == mine, "set_error_handler returns the previous handler");
  expect(lrt::set_error_handler(nullptr) == first, "null restores the default");
  std::printf(failures ? "embedded headers: %d failures\n" : "embedded headers: ok\n", failures);
  return failures ? 1 : 0;
}
