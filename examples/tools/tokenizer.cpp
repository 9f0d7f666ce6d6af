// lrt-tokenizer: trains, applies and inspects byte-level BPE tokenizers (include/lrt/tokenizer/).
//   lrt-tokenizer train --data ~/.cache/lrt-data/brown/package --vocab-size 4096 --out brown4k.lrt
//   echo "Hello world" | lrt-tokenizer encode --tokenizer brown4k.lrt          # ids, space-separated
//   lrt-tokenizer encode --ranks cl100k_base.tiktoken --pattern cl100k --file text.txt
//   lrt-tokenizer decode --tokenizer brown4k.lrt --file ids.txt                # bytes
//   lrt-tokenizer stats --tokenizer brown4k.lrt --data ~/.cache/lrt-data/brown/package
//   lrt-tokenizer convert --ranks tok.tiktoken --pattern nanochat --specials '<|bos|>' --out tok.lrt
//   lrt-tokenizer ranks --tokenizer brown4k.lrt --out brown4k.tiktoken        # tiktoken's rank file
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <lrt/data.hpp>
#include <lrt/io.hpp>
#include <lrt/tokenizer.hpp>
#include <lrt/tokenizer/rank_file.hpp>

#include "tool_util.hpp"

namespace {

using lrt::tok::token_t;
using lrt::tok::Tokenizer;

const char* commands = "train, encode, decode, stats, convert, ranks";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// "a,b,c" -> {"a", "b", "c"} (empty items are an error).
std::vector<std::string> split_list(const std::string& text, const char* option) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    out.push_back(text.substr(at, end - at));
    if (out.back().empty()) throw tool::UsageError(fmt::format("{}: empty item in '{}'", option, text));
    at = end + 1;
  }
  return out;
}

/// A tokenizer from a tiktoken rank file, a split pattern and specials (ids after the ranks, in
/// order; BOS: --bos, else the first).
Tokenizer from_ranks(const tool::Args& a) {
  tool::require_path(a.str("ranks"), "--ranks");
  auto ranks = lrt::tok::read_ranks(lrt::read_file(a.str("ranks"), "ranks"), a.str("ranks"));
  const auto names = split_list(a.str("specials"), "--specials");
  std::vector<lrt::tok::Special> specials;
  token_t bos = 0;
  bool found = false;
  const std::string bos_text = a.has("bos") ? a.str("bos") : names.front();
  for (const auto& n : names) {
    const auto id = static_cast<token_t>(ranks.size() + specials.size());
    if (n == bos_text) bos = id, found = true;
    specials.push_back({n, id});
  }
  if (!found)
    throw tool::UsageError(fmt::format("--bos '{}' is not one of --specials '{}'", bos_text, a.str("specials")));
  return Tokenizer(std::move(ranks), a.str("pattern"), std::move(specials), bos);
}

/// --tokenizer FILE, or --ranks FILE --pattern NAME.
Tokenizer tokenizer_of(const tool::Args& a) {
  if (a.has("tokenizer") == a.has("ranks"))
    throw tool::UsageError("give --tokenizer FILE or --ranks FILE, one of them");
  if (a.has("tokenizer")) {
    tool::require_path(a.str("tokenizer"), "--tokenizer");
    return Tokenizer::load(a.str("tokenizer"));
  }
  return from_ranks(a);
}

void source_options(tool::Args& a) {
  a.option("tokenizer", "FILE", "lrt's tokenizer file (lrt-tokenizer train / convert)")
      .option("ranks", "FILE", "a tiktoken rank file (one 'base64(token) rank' per line) instead")
      .option("pattern", "NAME", "with --ranks: nanochat, gpt2, cl100k, o200k or a regex", "nanochat")
      .option("specials", "A,B,..", "with --ranks: special tokens, ids after the ranks in this order", "<|bos|>")
      .option("bos", "TEXT", "with --ranks: which special is BOS (default: the first)");
}

std::string read_input(const tool::Args& a) {
  if (!a.has("file") || a.str("file") == "-") {
    std::string s((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    lrt::check(!std::cin.bad(), "lrt-tokenizer", "error while reading standard input");
    return s;
  }
  tool::require_path(a.str("file"), "--file");
  return lrt::read_file(a.str("file"), "input");
}

/// The documents of --data: its training split (what lrt-train trains a tokenizer on), its
/// validation split, or all of it.
std::vector<lrt::data::Document> documents(const tool::Args& a) {
  tool::require_path(a.str("data"), "--data");
  const std::string split = a.str("split");
  if (split == "all") return lrt::data::load_documents(a.str("data")).val;
  if (split != "train" && split != "val")
    throw tool::UsageError(fmt::format("--split must be train, val or all, got '{}'", split));
  try {
    auto c = lrt::data::load_corpus(a.str("data"));
    return split == "train" ? std::move(c.train) : std::move(c.val);
  } catch (const lrt::Error& e) {  // a text too small to split: say how to use all of it
    if (std::string(e.what()).find("too small to hold out") == std::string::npos) throw;
    throw lrt::Error("lrt-tokenizer", std::string(e.what()) + "; --split all reads all of it");
  }
}

int train(int argc, char** argv) {
  tool::Args a("lrt-tokenizer train", "Trains a byte-level BPE tokenizer on a corpus and writes lrt's tokenizer file.");
  a.option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus", "", true)
      .option("split", "SPLIT", "train (what lrt-train trains on), val or all", "train")
      .option("vocab-size", "N", "ids in all: ranks + specials (>= 256 + specials)", "", true)
      .option("pattern", "NAME", "split pattern: nanochat, gpt2, cl100k, o200k or a regex", "nanochat")
      .option("specials", "A,B,..", "special tokens (ids after the ranks; the first is BOS)", "<|bos|>")
      .option("threads", "N", "threads that split the documents (default: LRT_NUM_THREADS)")
      .option("out", "FILE", "the tokenizer file to write", "", true);
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    tool::apply_threads(a);
    lrt::tok::BpeTrainOptions o;
    o.vocab_size = static_cast<token_t>(a.integer("vocab-size", 1, 1LL << 24));
    o.pattern = a.str("pattern");
    o.specials = split_list(a.str("specials"), "--specials");
    lrt::ensure_writable_directory(std::filesystem::path(a.str("out")).parent_path().string().empty()
                                       ? "."
                                       : std::filesystem::path(a.str("out")).parent_path().string());
    const auto docs = documents(a);
    std::vector<std::string_view> views;
    for (const auto& d : docs) views.push_back(d.text);
    // train_bpe reports ids (ranks + specials) of vocab_size; ranks past the 256 bytes are merges.
    const auto fixed = static_cast<token_t>(256 + o.specials.size());
    tool::Progress progress(5);
    const auto t0 = std::chrono::steady_clock::now();
    const auto show = [&](token_t ids, bool last) {
      progress.update(fmt::format("merges {}/{} ({:.1f} s)", ids - fixed, o.vocab_size - fixed, seconds_since(t0)),
                      seconds_since(t0), last);
    };
    o.progress = [&](token_t done, token_t) { show(done, false); };
    Tokenizer tok = lrt::tok::train_bpe(views, o);
    const double dt = seconds_since(t0);
    show(tok.vocab_size(), true);
    tok.save(a.str("out"));
    if (tok.vocab_size() < o.vocab_size)
      fmt::print(
          "warning: every piece of the text is one token, nothing is left to merge: {} ids instead of "
          "--vocab-size {}\n",
          tok.vocab_size(), o.vocab_size);
    std::size_t tokens = 0, bytes = 0;
    for (const auto& ids : tok.encode_documents(views, 0)) tokens += ids.size();
    for (const auto& d : docs) bytes += d.text.size();
    fmt::print(
        "trained {} ranks (256 bytes + {} merges) + {} special{} = {} ids on {} docs, {} bytes in {:.2f} s; {:.3f} "
        "bytes/token on them\nwrote {} ({})\n",
        tok.num_ranks(), tok.num_ranks() - 256, tok.specials().size(), tok.specials().size() == 1 ? "" : "s",
        tok.vocab_size(), docs.size(), bytes, dt, tokens ? double(bytes) / double(tokens) : 0.0, a.str("out"),
        tok.fingerprint());
    return 0;
  });
}

int encode(int argc, char** argv) {
  tool::Args a("lrt-tokenizer encode",
               "Prints the ids of a text (tiktoken's encode_ordinary: special-token text is ordinary text), "
               "space-separated.");
  source_options(a);
  a.option("file", "FILE", "the text ('-' or none: standard input)");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    const Tokenizer tok = tokenizer_of(a);
    const auto ids = tok.encode(read_input(a));
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += ' ';
      out += std::to_string(ids[i]);
    }
    out += "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  });
}

int decode(int argc, char** argv) {
  tool::Args a("lrt-tokenizer decode", "Writes the bytes of whitespace-separated ids (a special: its text).");
  source_options(a);
  a.option("file", "FILE", "the ids ('-' or none: standard input)");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    const Tokenizer tok = tokenizer_of(a);
    const std::string text = read_input(a);
    std::vector<token_t> ids;
    std::size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      if (i == text.size()) break;
      const std::size_t start = i;
      unsigned long long v = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && v <= 0xFFFFFFFFull)
        v = v * 10 + static_cast<unsigned>(text[i++] - '0');
      if (i == start || (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) || v > 0xFFFFFFFFull) {
        std::size_t end = start;
        while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
        throw lrt::Error("lrt-tokenizer",
                         fmt::format("decode: '{}' (item {}) is not a token id",
                                     text.substr(start, std::min<std::size_t>(end - start, 40)), ids.size() + 1));
      }
      ids.push_back(static_cast<token_t>(v));
    }
    const std::string bytes = tok.decode(ids);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
  });
}

int stats(int argc, char** argv) {
  tool::Args a("lrt-tokenizer stats", "Bytes per token of a tokenizer on a corpus, and its encoding speed.");
  source_options(a);
  a.option("data", "PATH", "text file, folder of text files, or the unpacked Brown Corpus", "", true)
      .option("split", "SPLIT", "train, val or all", "all")
      .option("threads", "N", "threads that encode the documents (default: LRT_NUM_THREADS)");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    tool::apply_threads(a);
    const Tokenizer tok = tokenizer_of(a);
    const auto docs = documents(a);
    std::vector<std::string_view> views;
    std::size_t bytes = 0;
    for (const auto& d : docs) views.push_back(d.text), bytes += d.text.size();
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode_documents(views, 0);
    const double dt = seconds_since(t0);
    std::size_t tokens = 0;
    std::vector<char> used(tok.vocab_size(), 0);
    for (const auto& d : ids) {
      tokens += d.size();
      for (token_t id : d) used[id] = 1;
    }
    std::size_t distinct = 0;
    for (char u : used) distinct += u;
    fmt::print("tokenizer: {} ranks + {} specials, pattern {}, {}\n", tok.num_ranks(), tok.specials().size(),
               tok.pattern_name(), tok.fingerprint());
    fmt::print("data: {} ({} split): {} docs, {} bytes\n", a.str("data"), a.str("split"), docs.size(), bytes);
    fmt::print("tokens: {}, {:.4f} bytes/token; {} of {} ids used; encoded in {:.3f} s ({:.1f} MB/s, {} threads)\n",
               tokens, tokens ? double(bytes) / double(tokens) : 0.0, distinct, tok.vocab_size(), dt,
               double(bytes) / dt * 1e-6, lrt::num_threads());
    fmt::print("bytes_per_token: {:.6f}\n", tokens ? double(bytes) / double(tokens) : 0.0);
    return 0;
  });
}

int convert(int argc, char** argv) {
  tool::Args a("lrt-tokenizer convert",
               "Writes lrt's tokenizer file for a tiktoken rank file: the ranks, the split pattern and the specials.");
  a.option("ranks", "FILE", "the tiktoken rank file", "", true)
      .option("pattern", "NAME", "nanochat, gpt2, cl100k, o200k or a regex", "nanochat")
      .option("specials", "A,B,..", "special tokens, ids after the ranks in this order", "<|bos|>")
      .option("bos", "TEXT", "which special is BOS (default: the first)")
      .option("out", "FILE", "the tokenizer file to write", "", true);
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    const Tokenizer tok = from_ranks(a);
    tok.save(a.str("out"));
    fmt::print("wrote {}: {} ranks + {} specials (BOS {}), pattern {}, {}\n", a.str("out"), tok.num_ranks(),
               tok.specials().size(), tok.bos(), tok.pattern_name(), tok.fingerprint());
    return 0;
  });
}

int ranks(int argc, char** argv) {
  tool::Args a("lrt-tokenizer ranks", "Writes the ranks of lrt's tokenizer file as a tiktoken rank file.");
  a.option("tokenizer", "FILE", "lrt's tokenizer file", "", true)
      .option("out", "FILE", "the rank file to write", "", true);
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    tool::require_path(a.str("tokenizer"), "--tokenizer");
    const Tokenizer tok = Tokenizer::load(a.str("tokenizer"));
    std::vector<std::string> r;
    for (std::size_t i = 0; i < tok.num_ranks(); ++i) r.emplace_back(tok.token(static_cast<token_t>(i)));
    lrt::write_file_atomic(a.str("out"), lrt::tok::write_ranks(r));
    fmt::print("wrote {}: {} ranks (pattern {} and {} specials are not in a rank file)\n", a.str("out"), r.size(),
               tok.pattern_name(), tok.specials().size());
    return 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "train") return train(argc - 1, argv + 1);
  if (cmd == "encode") return encode(argc - 1, argv + 1);
  if (cmd == "decode") return decode(argc - 1, argv + 1);
  if (cmd == "stats") return stats(argc - 1, argv + 1);
  if (cmd == "convert") return convert(argc - 1, argv + 1);
  if (cmd == "ranks") return ranks(argc - 1, argv + 1);
  if (cmd == "--version") return lrt_print_version("lrt-tokenizer"), 0;
  if (cmd != "--help" && cmd != "-h") {  // a usage error: one line, as every program says it
    std::fprintf(stderr, "lrt-tokenizer: %s (known: %s); see --help\n",
                 cmd.empty() ? "no command" : ("unknown command '" + cmd + "'").c_str(), commands);
    return 2;
  }
  std::fputs(
      "usage: lrt-tokenizer COMMAND [options]   (COMMAND --help for its options)\n"
      "  train    train a byte-level BPE on a corpus, write lrt's tokenizer file\n"
      "  encode   print the ids of a text\n"
      "  decode   write the bytes of ids\n"
      "  stats    bytes per token on a corpus, encoding speed\n"
      "  convert  lrt's tokenizer file from a tiktoken rank file + pattern + specials\n"
      "  ranks    a tiktoken rank file from lrt's tokenizer file\n"
      "  --version  the program's name and the git description it was built from\n",
      stdout);
  return 0;
}
