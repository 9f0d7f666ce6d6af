// lrt-bench-tokenizer: encode throughput of lrt's BPE tokenizer (include/lrt/tokenizer/) on one
// thread, for bench/tokenizer_vs_tiktoken.sh, which runs the tiktoken package from npm on the same
// ranks, pattern and text in the same run (bench/tiktoken_bench.mjs) and compares.
//   lrt-bench-tokenizer --write-texts DIR [--brown PATH]    DIR/brown.txt (Brown, tags stripped) and
//                                                          DIR/mixed.txt (many scripts, code, numbers)
//   lrt-bench-tokenizer --ranks FILE --pattern NAME --text FILE [--runs 3]
//   lrt-bench-tokenizer --tokenizer FILE --text FILE [--threads N]
//   lrt-bench-tokenizer --version | --help
// Prints one JSON line: {"impl":"lrt","text":...,"bytes":...,"ids":...,"hash":...,"mb_per_s":...}
// (hash: 32-bit FNV-1a over the ids, the same function as tiktoken_bench.mjs's; mb_per_s: the
// best of --runs encodings of the whole text, one encode call). --threads N > 1 encodes the text's
// lines as documents in parallel instead (what training does) and reports that throughput.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <lrt/data.hpp>
#include <lrt/io.hpp>
#include <lrt/tokenizer.hpp>
#include <lrt/tokenizer/rank_file.hpp>

#include "cli/args.hpp"

namespace {

/// DIR/brown.txt: the Brown Corpus without its tags, documents joined by newlines; DIR/mixed.txt:
/// the curated texts of tests/data/tokenizer/vectors.tsv (English, code, numbers, whitespace,
/// accented and non-Latin scripts, emoji) in a fixed pseudo-random order, ~2 MB.
int write_texts(const std::string& dir, const std::string& brown, const std::string& vectors) {
  std::string b;
  for (const auto& d : lrt::data::load_documents(brown).val) b += d.text + "\n";
  lrt::write_file_atomic(dir + "/brown.txt", b);
  std::vector<std::string> pool;
  std::ifstream in(vectors);
  std::string line;
  while (std::getline(in, line) && pool.size() < 27) {
    if (line.rfind("gpt2\t", 0) != 0) continue;
    const auto t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    std::string text;
    lrt::tok::detail::base64_decode(line.substr(t1 + 1, t2 - t1 - 1), text);
    if (!text.empty()) pool.push_back(text);
  }
  lrt::check(!pool.empty(), "bench", "no curated texts in ", vectors);
  std::string m;
  std::uint64_t s = 1;
  while (m.size() < 2'000'000) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    m += pool[(s >> 33) % pool.size()];
    m += (s >> 20) % 3 == 0 ? "\n" : " ";
  }
  lrt::write_file_atomic(dir + "/mixed.txt", m);
  std::printf("wrote %s/brown.txt (%zu bytes) and %s/mixed.txt (%zu bytes)\n", dir.c_str(), b.size(), dir.c_str(),
              m.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tool::Args args("lrt-bench-tokenizer",
                  "encode throughput of lrt's BPE tokenizer on one thread: one JSON line\n"
                  "  lrt-bench-tokenizer --write-texts DIR [--brown PATH]\n"
                  "  lrt-bench-tokenizer (--ranks FILE --pattern NAME | --tokenizer FILE) --text FILE [--runs N] "
                  "[--threads N]");
  args.option("write-texts", "DIR", "write DIR/brown.txt (Brown, tags stripped) and DIR/mixed.txt, and stop")
      .option("brown", "PATH", "the Brown corpus of --write-texts (default: ~/.cache/lrt-data/brown)")
      .option("vectors", "FILE", "the curated texts of --write-texts",
              LRT_SOURCE_DIR "/tests/data/tokenizer/vectors.tsv")
      .option("text", "FILE", "the text to encode")
      .option("ranks", "FILE", "a tiktoken rank file")
      .option("pattern", "NAME", "the pre-tokenizer pattern of --ranks", "nanochat")
      .option("tokenizer", "FILE", "an lrt tokenizer file (instead of --ranks)")
      .option("runs", "N", "encodings of the whole text (the best is reported)", "3")
      .option("threads", "N", "encode the text's lines as documents on N threads", "1");
  int runs = 3, threads = 1;
  const int rc = tool::parse_args(args, argc, argv, [&] {
    runs = static_cast<int>(args.integer("runs", 1, 1 << 30));
    threads = static_cast<int>(args.integer("threads", 1, 1 << 20));
    if (!args.has("write-texts") && !args.has("text"))
      throw tool::UsageError("give --text FILE (or --write-texts DIR)");
  });
  if (rc >= 0) return rc;
  try {
    if (args.has("write-texts")) {
      const char* home = std::getenv("HOME");
      return write_texts(
          args.str("write-texts"),
          args.has("brown") ? args.str("brown") : std::string(home ? home : "") + "/.cache/lrt-data/brown",
          args.str("vectors"));
    }
    const std::string text_path = args.str("text");
    const std::string text = lrt::read_file(text_path, "text");
    const lrt::tok::Tokenizer tok = args.has("tokenizer") ? lrt::tok::Tokenizer::load(args.str("tokenizer")) : [&] {
      auto ranks = lrt::tok::read_ranks(lrt::read_file(args.str("ranks"), "ranks"), args.str("ranks"));
      const auto n = static_cast<lrt::tok::token_t>(ranks.size());
      return lrt::tok::Tokenizer(std::move(ranks), args.str("pattern"), {{"<|bos|>", n}}, n);
    }();
    std::vector<std::string_view> lines;  // for --threads: the text's lines as documents
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t nl = std::min(text.find('\n', at), text.size() - 1);
      lines.push_back(std::string_view(text).substr(at, nl + 1 - at));
      at = nl + 1;
    }
    std::vector<lrt::tok::token_t> ids;
    double best = 1e300;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      if (threads == 1) {
        ids.clear();
        tok.encode(text, ids);
      } else {
        const auto docs = tok.encode_documents(lines, threads);
        ids.clear();
        for (const auto& d : docs) ids.insert(ids.end(), d.begin(), d.end());
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::uint32_t h = 2166136261u;
    for (auto id : ids) h = (h ^ id) * 16777619u;
    std::printf(
        "{\"impl\":\"lrt\",\"text\":\"%s\",\"bytes\":%zu,\"ids\":%zu,\"hash\":\"%08x\",\"threads\":%d,\"mb_per_s\":%."
        "3f}\n",
        text_path.c_str(), text.size(), ids.size(), h, threads, double(text.size()) / best * 1e-6);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
