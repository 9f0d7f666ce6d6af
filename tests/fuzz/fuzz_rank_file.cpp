// libFuzzer target for the tokenizer's untrusted-input parsers: the input is read as a tiktoken
// rank file (read_ranks; a file it accepts must write and re-read to itself and build a
// Tokenizer that round-trips a few strings) and as lrt's tokenizer file (Tokenizer::parse; a file
// it accepts must serialize and re-parse to itself). Anything but lrt::Error escaping, or a
// sanitizer report, is a bug. tests/fuzz/corpus_rank_file: the seeds.
//   ./lrt_fuzz_rank_file -max_len=65536 corpus_rank_file/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <lrt/tokenizer/rank_file.hpp>
#include <lrt/tokenizer/tokenizer.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace {
/// Runs f; an lrt::Error is the parser's clear answer to bad input, anything else escapes.
template <class F>
void rejects_cleanly(F&& f) {
  try {
    f();
  } catch (const lrt::Error&) {
  }
}

void round_trips(const lrt::tok::Tokenizer& tk, std::string_view bytes) {
  for (std::string_view s : {bytes.substr(0, 64), std::string_view("Hello, world!  \n x")}) {
    const std::vector<lrt::tok::token_t> ids = tk.encode(s);
    if (tk.decode(ids) != s) std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  rejects_cleanly([&] {
    const std::vector<std::string> ranks = lrt::tok::read_ranks(bytes, "fuzz");
    if (lrt::tok::read_ranks(lrt::tok::write_ranks(ranks), "again") != ranks) std::abort();
    const auto n = static_cast<lrt::tok::token_t>(ranks.size());
    const lrt::tok::Tokenizer tk(ranks, "nanochat", {{"<|bos|>", n}}, n);
    round_trips(tk, bytes);
  });
  rejects_cleanly([&] {
    const lrt::tok::Tokenizer tk = lrt::tok::Tokenizer::parse(bytes, "fuzz");
    const std::string text = tk.serialize();
    if (lrt::tok::Tokenizer::parse(text, "again").serialize() != text) std::abort();
    round_trips(tk, bytes);
  });
  return 0;
}
