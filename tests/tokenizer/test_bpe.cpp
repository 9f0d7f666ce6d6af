// Tests of lrt/tokenizer/{bpe,rank_file,tokenizer,train}.hpp: identity with tiktoken 1.0.22 on
// tests/data/tokenizer/vectors*.tsv, round trips, hand-checked merges, the trainer, and every
// malformed rank / tokenizer file.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <lrt/tokenizer/bpe.hpp>
#include <lrt/tokenizer/rank_file.hpp>
#include <lrt/tokenizer/tokenizer.hpp>
#include <lrt/tokenizer/train.hpp>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace test_bpe {

using namespace lrt::tok;
using lrt::index_t;

std::string data(const std::string& rel) {
  std::ifstream f(std::string(LRT_TEST_DATA_DIR) + "/" + rel, std::ios::binary);
  REQUIRE_MESSAGE(static_cast<bool>(f), "missing test data ", rel);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> bytes_and(std::vector<std::string> extra) {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (auto& e : extra) t.push_back(std::move(e));
  return t;
}

Tokenizer make(std::vector<std::string> ranks, const std::string& pattern = "gpt2") {
  const auto n = static_cast<token_t>(ranks.size());
  return Tokenizer(std::move(ranks), pattern, {{"<|endoftext|>", n}}, n);
}

/// tiktoken's byte_pair_merge, written the plain way (the reference of both of lrt's paths).
std::vector<token_t> reference_bpe(const std::map<std::string, token_t>& ranks, const std::string& piece) {
  if (auto it = ranks.find(piece); it != ranks.end()) return {it->second};
  std::vector<std::string> parts;
  for (char c : piece) parts.push_back(std::string(1, c));
  for (;;) {
    std::size_t best_at = 0;
    token_t best = 0xffffffffu;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
      if (auto it = ranks.find(parts[i] + parts[i + 1]); it != ranks.end() && it->second < best)
        best = it->second, best_at = i;
    if (best == 0xffffffffu) break;
    parts[best_at] += parts[best_at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  std::vector<token_t> out;
  for (auto& p : parts) out.push_back(ranks.at(p));
  return out;
}

std::vector<token_t> piece_ids(const RankTable& t, std::string_view piece) {
  BpeScratch s;
  std::vector<token_t> out;
  encode_piece(t, piece, out, s);
  return out;
}

/// The error message of f (fails the test if f does not throw lrt::Error).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  FAIL("no lrt::Error");
  return {};
}

TEST_CASE("rank table: find, bytes, duplicates") {
  const RankTable t(bytes_and({"ab", "hello world, a long token!", std::string("\0\0", 2)}));
  CHECK(t.size() == 259);
  CHECK(t.find("ab") == 256);
  CHECK(t.find("hello world, a long token!") == 257);
  CHECK(t.find(std::string_view("\0\0", 2)) == 258);
  CHECK(t.find("abc") == RankTable::npos);
  CHECK(t.find("A") == 65);
  CHECK(t.bytes(257) == "hello world, a long token!");
  CHECK(t.has_all_bytes());
  CHECK_THROWS_AS(RankTable(bytes_and({"ab", "ab"})), lrt::Error);
  CHECK_THROWS_AS(RankTable(bytes_and({""})), lrt::Error);
}

TEST_CASE("bpe: hand-checked merges (lowest rank first, ties leftmost, whole piece)") {
  // "bc" < "ab" < "cd": "abcd" merges bc first, then nothing ("abc", "bcd" are no tokens).
  const RankTable t(bytes_and({"bc", "ab", "cd"}));
  CHECK(piece_ids(t, "abcd") == std::vector<token_t>{'a', 256, 'd'});
  CHECK(piece_ids(t, "abab") == std::vector<token_t>{257, 257});
  CHECK(piece_ids(t, "cdab") == std::vector<token_t>{258, 257});
  // ties: the leftmost pair
  const RankTable u(bytes_and({"aa", "aaaa", "xyz"}));
  CHECK(piece_ids(u, "aaa") == std::vector<token_t>{256, 'a'});
  CHECK(piece_ids(u, "aaaaa") == std::vector<token_t>{257, 'a'});
  CHECK(piece_ids(u, "aaaaaaa") == std::vector<token_t>{257, 256, 'a'});
  // a whole piece that is a token is that token, even when no merge leads there
  CHECK(piece_ids(u, "xyz") == std::vector<token_t>{258});
  CHECK(piece_ids(u, "xyzx") == std::vector<token_t>{'x', 'y', 'z', 'x'});
  CHECK(piece_ids(u, "q") == std::vector<token_t>{'q'});
}

TEST_CASE("bpe: both paths agree with the reference (cl100k_2k ranks, random pieces)") {
  const std::vector<std::string> ranks = read_ranks(data("tokenizer/cl100k_2k.tiktoken"), "cl100k_2k");
  const RankTable t(ranks);
  std::map<std::string, token_t> m;
  for (std::size_t r = 0; r < ranks.size(); ++r) m.emplace(ranks[r], static_cast<token_t>(r));
  std::mt19937 rng(7);
  const std::string alphabet = "  eetaoinshrdlu.,\n";
  for (int k = 0; k < 400; ++k) {
    const std::size_t n = 2 + rng() % (k % 4 == 0 ? 600 : 60);
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    INFO("piece ", s);
    CHECK(piece_ids(t, s) == reference_bpe(m, s));
  }
  const std::string spaces(2000, ' ');
  CHECK(piece_ids(t, spaces) == reference_bpe(m, spaces));
}

TEST_CASE("bpe: a 20,000-space piece encodes quickly and round-trips") {
  const Tokenizer tk = make(read_ranks(data("tokenizer/cl100k_2k.tiktoken"), "cl100k_2k"), "cl100k");
  const std::string spaces(20000, ' ');
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<token_t> ids = piece_ids(tk.rank_table(), spaces);
  const std::vector<token_t> all = tk.encode(spaces + "x" + spaces);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 0.5);
  CHECK(tk.decode(ids) == spaces);
  CHECK(tk.decode(all) == spaces + "x" + spaces);
  CHECK(ids.size() < 20000 / 4);
}

struct Vector {
  std::string pattern, text;
  std::vector<token_t> ids;
  std::size_t line;
};

std::vector<Vector> read_vectors(const std::string& rel) {
  std::vector<Vector> v;
  std::istringstream in(data(rel));
  std::string line;
  std::size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    REQUIRE(t2 != std::string::npos);
    Vector x;
    x.pattern = line.substr(0, t1);
    REQUIRE(lrt::tok::detail::base64_decode(line.substr(t1 + 1, t2 - t1 - 1), x.text).empty());
    std::istringstream ids(line.substr(t2 + 1));
    for (token_t id; ids >> id;) x.ids.push_back(id);
    x.line = no;
    v.push_back(std::move(x));
  }
  return v;
}

void check_vectors(const std::string& rel, const std::map<std::string, std::string>& rank_file_of) {
  std::map<std::string, std::unique_ptr<Tokenizer>> tks;
  const std::vector<Vector> vs = read_vectors(rel);
  CHECK(vs.size() > 300);
  std::size_t bad = 0;
  for (const Vector& v : vs) {
    auto& tk = tks[v.pattern];
    if (!tk) tk = std::make_unique<Tokenizer>(make(read_ranks(data(rank_file_of.at(v.pattern)), v.pattern), v.pattern));
    const std::vector<token_t> got = tk->encode(v.text);
    if (got != v.ids && ++bad <= 10) {
      std::string g, w;
      for (token_t id : got) g += std::to_string(id) + " ";
      for (token_t id : v.ids) w += std::to_string(id) + " ";
      FAIL_CHECK(rel << ":" << v.line << " (" << v.pattern << "): lrt " << g << "\n tiktoken " << w);
    }
    CHECK(tk->decode(got) == v.text);
  }
  CHECK(bad == 0);
}

TEST_CASE("tiktoken identity: vectors.tsv (gpt2, cl100k, o200k, nanochat)") {
  check_vectors("tokenizer/vectors.tsv", {{"gpt2", "tokenizer/gpt2_2k.tiktoken"},
                                          {"cl100k", "tokenizer/cl100k_2k.tiktoken"},
                                          {"o200k", "tokenizer/o200k_2k.tiktoken"},
                                          {"nanochat", "tokenizer/cl100k_2k.tiktoken"}});
}

TEST_CASE("tiktoken identity: vectors_lrt_1k.tsv (a rank file lrt trained)") {
  check_vectors("tokenizer/vectors_lrt_1k.tsv", {{"nanochat", "tokenizer/lrt_1k.tiktoken"}});
}

TEST_CASE("tokenizer: round trips, encode_documents, token_bytes") {
  for (const char* pat : {"gpt2", "cl100k", "o200k", "nanochat"}) {
    const std::string file = std::string(pat) == "nanochat" ? "cl100k" : pat;
    const Tokenizer tk = make(read_ranks(data("tokenizer/" + file + "_2k.tiktoken"), file), pat);
    CHECK(tk.pattern_name() == pat);
    CHECK(tk.pattern() == builtin_pattern(pat));
    std::mt19937 rng(42);
    std::vector<std::string> texts;
    for (int k = 0; k < 200; ++k) {
      std::string s(rng() % 300, '\0');
      for (char& c : s) c = static_cast<char>(k % 2 ? rng() % 256 : " \n\tab'1."[rng() % 8]);  // invalid UTF-8 too
      texts.push_back(s);
    }
    for (const Vector& v : read_vectors("tokenizer/vectors.tsv")) texts.push_back(v.text);
    std::vector<std::string_view> docs(texts.begin(), texts.end());
    const std::vector<index_t> table = tk.token_bytes_table();
    CHECK(table.size() == tk.vocab_size());
    std::vector<std::vector<token_t>> one;
    for (const std::string& s : texts) {
      const std::vector<token_t> ids = tk.encode(s);
      CHECK(tk.decode(ids) == s);
      index_t sum = 0;
      for (token_t id : ids) {
        sum += tk.token_bytes(id);
        CHECK(table[id] == tk.token_bytes(id));
      }
      CHECK(sum == static_cast<index_t>(s.size()));
      one.push_back(ids);
    }
    for (int threads : {1, 2, 3, 0}) CHECK(tk.encode_documents(docs, threads) == one);
    std::vector<token_t> appended = {7};
    tk.encode("ab", appended);
    CHECK(appended.size() >= 2);
    CHECK(appended[0] == 7);
  }
}

TEST_CASE("tokenizer: specials, decode errors, accessors") {
  const Tokenizer tk(bytes_and({"ab"}), "gpt2", {{"<|bos|>", 257}, {"<|eot|>", 260}}, 257);
  CHECK(tk.vocab_size() == 261);
  CHECK(tk.num_ranks() == 257);
  CHECK(tk.bos() == 257);
  CHECK(tk.token(260) == "<|eot|>");
  CHECK(tk.token(256) == "ab");
  CHECK(tk.token_bytes(257) == 0);
  CHECK(tk.token_bytes(256) == 2);
  CHECK(tk.token_bytes_table()[258] == 0);
  const std::vector<token_t> ids = {'x', 257, 256, 260};
  CHECK(tk.decode(ids) == "x<|bos|>ab<|eot|>");
  CHECK(tk.encode("<|bos|>") != std::vector<token_t>{257});  // ordinary text
  const std::vector<token_t> bad = {'x', 'y', 258};
  const std::string e = error_of([&] { (void)tk.decode(bad); });
  CHECK(e.find("258") != std::string::npos);
  CHECK(e.find("position 2") != std::string::npos);
  CHECK_THROWS_AS((void)tk.token(300), lrt::Error);
  CHECK_THROWS_AS((void)tk.token_bytes(259), lrt::Error);
  // constructor errors
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "gpt2", {{"<|bos|>", 255}}, 255), lrt::Error);        // id is a rank
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "gpt2", {{"<|bos|>", 256}}, 257), lrt::Error);        // bos
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "gpt2", {{"a", 256}, {"b", 256}}, 256), lrt::Error);  // same id
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "gpt2", {{"a", 256}, {"a", 257}}, 256), lrt::Error);  // same text
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "gpt2", {{"", 256}}, 256), lrt::Error);
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "((", {{"a", 256}}, 256), lrt::Error);    // bad regex
  CHECK_THROWS_AS(Tokenizer(bytes_and({}), "a\nb", {{"a", 256}}, 256), lrt::Error);  // raw line break
  std::vector<std::string> missing = bytes_and({});
  missing[10] = "ab";
  CHECK_THROWS_AS(Tokenizer(missing, "gpt2", {{"a", 256}}, 256), lrt::Error);
  const Tokenizer custom(bytes_and({}), "\\s+|\\S+", {{"a", 256}}, 256);
  CHECK(custom.pattern_name() == "custom");
  CHECK(custom.pattern() == "\\s+|\\S+");
}

TEST_CASE("trainer: merges worked out by hand, vocab_size exact, early stop") {
  // "aaabdaaabac": aa (4) -> 256; then (256,a) and (a,b) both 2: the smaller pair, ab -> 257;
  // then aa+ab (2) -> 258 "aaab"; then all pairs occur once: the smallest pair (a, c) -> 259, ...
  const std::vector<std::string_view> docs = {"aaabdaaabac"};
  BpeTrainOptions o;
  o.vocab_size = 260;
  const Tokenizer tk = train_bpe(docs, o);
  CHECK(tk.vocab_size() == 260);
  REQUIRE(tk.num_ranks() == 259);
  CHECK(tk.token(256) == "aa");
  CHECK(tk.token(257) == "ab");
  CHECK(tk.token(258) == "aaab");
  CHECK(tk.bos() == 259);
  CHECK(tk.token(259) == "<|bos|>");
  for (int b = 0; b < 256; ++b) CHECK(tk.token(static_cast<token_t>(b)) == std::string(1, static_cast<char>(b)));
  o.vocab_size = 400;
  o.specials = {"<|bos|>", "<|eot|>"};
  int calls = 0;
  o.progress = [&](token_t done, token_t total) {
    ++calls;
    CHECK(total == 400);
    CHECK(done <= total);
  };
  const Tokenizer all = train_bpe(docs, o);
  CHECK(all.num_ranks() == 263);  // 7 merges make the piece one token, then no pair is left
  CHECK(all.token(259) == "ac");
  CHECK(all.token(260) == "daaab");
  CHECK(all.token(261) == "aaabdaaab");
  CHECK(all.token(262) == "aaabdaaabac");
  CHECK(all.vocab_size() == 265);
  CHECK(all.specials()[1].id == 264);
  CHECK(calls == 7);
  CHECK(all.encode("aaabdaaabac") == std::vector<token_t>{262});
}

TEST_CASE("trainer: deterministic whatever the thread count; errors") {
  const std::string text = data("tokenizer/lrt_train.txt");
  std::vector<std::string_view> docs;
  for (std::size_t p = 0; p < text.size();) {
    std::size_t e = text.find('\n', p);
    e = e == std::string::npos ? text.size() : e + 1;
    docs.push_back(std::string_view(text).substr(p, e - p));
    p = e;
  }
  BpeTrainOptions o;
  o.vocab_size = 1025;
  std::string first;
  for (int threads : {1, 2, 0}) {
    o.threads = threads;
    const Tokenizer tk = train_bpe(docs, o);
    CHECK(tk.vocab_size() == 1025);
    CHECK(tk.num_ranks() == 1024);
    if (first.empty()) first = tk.serialize();
    CHECK(tk.serialize() == first);
    const std::vector<token_t> ids = tk.encode(text);
    CHECK(tk.decode(ids) == text);
    CHECK(ids.size() < text.size() / 2);
  }
  // lrt_1k.tiktoken is this tokenizer's rank file
  CHECK(read_ranks(data("tokenizer/lrt_1k.tiktoken"), "lrt_1k") == Tokenizer::parse(first, "t").tokens_by_rank());

  BpeTrainOptions e;
  e.vocab_size = 256;  // + 1 special does not fit
  CHECK(error_of([&] { (void)train_bpe(docs, e); }).find("vocab_size") != std::string::npos);
  e.vocab_size = 300;
  const std::vector<std::string_view> none, empty = {"", ""};
  CHECK(error_of([&] { (void)train_bpe(none, e); }).find("no bytes") != std::string::npos);
  CHECK(error_of([&] { (void)train_bpe(empty, e); }).find("no bytes") != std::string::npos);
  e.specials = {"<|a|>", "<|a|>"};
  CHECK(error_of([&] { (void)train_bpe(docs, e); }).find("twice") != std::string::npos);
  e.specials = {"<|a|>", ""};
  CHECK(error_of([&] { (void)train_bpe(docs, e); }).find("empty") != std::string::npos);
  e.specials = {};
  CHECK_THROWS_AS((void)train_bpe(docs, e), lrt::Error);
  e.specials = {"<|a|>"};
  e.pattern = "((";
  CHECK_THROWS_AS((void)train_bpe(docs, e), lrt::Error);
}

// A valid rank file: the 256 bytes then "ab" (lines 1..257), with line k's text replaced.
std::string rank_file_with(std::map<std::size_t, std::string> lines, std::size_t count = 257) {
  std::vector<std::string> t = bytes_and({"ab"});
  std::string out;
  for (std::size_t no = 1; no <= count; ++no) {
    if (auto it = lines.find(no); it != lines.end())
      out += it->second;
    else
      out += detail::base64_encode(t[no - 1]) + " " + std::to_string(no - 1);
    out += "\n";
  }
  return out;
}

TEST_CASE("rank file: round trip, line ends") {
  const std::vector<std::string> t = bytes_and({"ab", std::string("\0\xff\n\r ", 5), "xyz"});
  const std::string text = write_ranks(t);
  CHECK(read_ranks(text, "f") == t);
  CHECK(read_ranks(text.substr(0, text.size() - 1), "f") == t);  // no trailing newline
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  CHECK(read_ranks(crlf, "f") == t);
  CHECK(read_ranks("\n" + text + "\n\n", "f") == t);  // empty lines are skipped (as tiktoken does)
  // the ranks may come in any order
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string reversed;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) reversed += *it + "\n";
  CHECK(read_ranks(reversed, "f") == t);
  for (const char* f : {"gpt2_2k", "cl100k_2k", "o200k_2k"}) {
    const std::string file = data(std::string("tokenizer/") + f + ".tiktoken");
    const std::vector<std::string> r = read_ranks(file, f);
    CHECK(r.size() == 2048);
    CHECK(write_ranks(r) == file);
  }
  CHECK(detail::base64_encode("") == "");
  CHECK(detail::base64_encode("a") == "YQ==");
  CHECK(detail::base64_encode("ab") == "YWI=");
  CHECK(detail::base64_encode("abc") == "YWJj");
}

TEST_CASE("rank file: every malformed line is an error naming the file and line") {
  const auto expect = [](const std::string& text, const std::string& where, const std::string& what) {
    const std::string e = error_of([&] { (void)read_ranks(text, "bad.tiktoken"); });
    INFO(e);
    CHECK(e.find("[tokenizer] bad.tiktoken:" + where + ":") != std::string::npos);
    CHECK(e.find(what) != std::string::npos);
  };
  CHECK(read_ranks(rank_file_with({}), "ok").size() == 257);
  expect(rank_file_with({{3, "!!!! 2"}}), "3", "not base64");
  expect(rank_file_with({{3, "A\xff== 2"}}), "3", "not base64");
  expect(rank_file_with({{3, "Ag=A 2"}}), "3", "misplaced '='");
  expect(rank_file_with({{3, "A=== 2"}}), "3", "misplaced '='");
  expect(rank_file_with({{3, "Ag= 2"}}), "3", "multiple of 4");
  expect(rank_file_with({{3, "Ah== 2"}}), "3", "stray bits");
  expect(rank_file_with({{3, "AgN= 2"}}), "3", "stray bits");
  expect(rank_file_with({{3, "Ag=="}}), "3", "no rank");
  expect(rank_file_with({{3, "Ag== "}}), "3", "missing rank");
  expect(rank_file_with({{3, "Ag== x"}}), "3", "not a non-negative");
  expect(rank_file_with({{3, "Ag== 2x"}}), "3", "not a non-negative");
  expect(rank_file_with({{3, "Ag== -2"}}), "3", "negative");
  expect(rank_file_with({{3, "Ag== 99999999999999999999999"}}), "3", "not a non-negative");
  expect(rank_file_with({{3, "Ag== 4294967295"}}), "3", "too large");
  expect(rank_file_with({{3, "Ag== 2 7"}}), "3", "extra fields");
  expect(rank_file_with({{3, "Ag==\t2"}}), "3", "no rank");
  expect(rank_file_with({{3, " 2"}}), "3", "empty token");
  expect(rank_file_with({{257, "YWI= 256"}, {258, "YWI= 257"}}, 258), "258", "token of line 257 again");
  expect(rank_file_with({{258, "YWJj 256"}}, 258), "258", "rank 256 again (first at line 257)");
  expect(rank_file_with({{257, "YWI= 300"}}), "257", "no gaps");
  expect("", "1", "empty");
  expect("\n\n", "1", "empty");
  expect(rank_file_with({{1, "YWJj 0"}}), "257", "byte 0");
}

TEST_CASE("tokenizer file: round trip, save/load, fingerprint") {
  const Tokenizer tk(bytes_and({"ab", "\n\n"}), "nanochat", {{"<|bos|>", 258}, {"<|a b|>", 300}}, 300);
  const std::string text = tk.serialize();
  CHECK(text.rfind("lrt-tokenizer 1\npattern-name nanochat\npattern ", 0) == 0);
  CHECK(text.find("\nspecial 258 PHxib3N8Pg==\nspecial 300 PHxhIGJ8Pg==\nbos 300\nranks 258\n") != std::string::npos);
  const Tokenizer back = Tokenizer::parse(text, "t");
  CHECK(back.serialize() == text);
  CHECK(back.fingerprint() == tk.fingerprint());
  CHECK(back.vocab_size() == 301);
  CHECK(back.pattern_name() == "nanochat");
  const std::string fp = tk.fingerprint();
  CHECK(fp.size() == 16);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(fp != Tokenizer(bytes_and({"ab", "\n\n"}), "gpt2", {{"<|bos|>", 258}}, 258).fingerprint());
  CHECK(lrt::tok::detail::fnv1a64("a") == 0xaf63dc4c8601ec8cULL);  // FNV-1a 64's published value
  const Tokenizer custom(bytes_and({}), "\\s+|\\S+", {{"<|bos|>", 256}}, 256);
  CHECK(Tokenizer::parse(custom.serialize(), "c").pattern() == "\\s+|\\S+");
  const std::string path = (std::filesystem::temp_directory_path() / "lrt_test_bpe.tok").string();
  tk.save(path);
  CHECK(Tokenizer::load(path).serialize() == text);
  CHECK(!std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(
      (void)Tokenizer::load(path),
      doctest::Contains(("[tokenizer] '" + path + "': cannot open: No such file or directory").c_str()), lrt::Error);
  const std::string dir = std::filesystem::temp_directory_path().string();  // opens, then cannot be read
  CHECK_THROWS_WITH_AS((void)Tokenizer::load(dir), doctest::Contains("': cannot read: Is a directory"), lrt::Error);
}

TEST_CASE("tokenizer file: every malformed field is an error naming the file and line") {
  const Tokenizer tk(bytes_and({"ab"}), "gpt2", {{"<|bos|>", 257}}, 257);
  const std::string good = tk.serialize();
  std::vector<std::string> lines;
  {
    std::istringstream in(good);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const auto with = [&](std::size_t no, const std::string& repl) {  // line no (1-based) replaced
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) out += (i + 1 == no ? repl : lines[i]) + "\n";
    return out;
  };
  const auto expect = [](const std::string& text, const std::string& where, const std::string& what) {
    const std::string e = error_of([&] { (void)Tokenizer::parse(text, "x.tok"); });
    INFO(e);
    CHECK(e.find("x.tok:" + where + ":") != std::string::npos);
    CHECK(e.find(what) != std::string::npos);
  };
  CHECK(Tokenizer::parse(with(0, ""), "x").serialize() == good);
  std::string crlf;
  for (char c : good) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  CHECK(Tokenizer::parse(crlf, "x").serialize() == good);
  expect("", "1", "not an lrt tokenizer file");
  expect(with(1, "hello"), "1", "not an lrt tokenizer file");
  expect(with(1, "lrt-tokenizer 2"), "1", "unsupported version");
  expect(with(2, "pattern-nam gpt2"), "2", "expected 'pattern-name");
  expect(with(2, "pattern-name gpt3"), "2", "unknown pattern name");
  expect(with(3, "pattern x"), "3", "differs from built-in 'gpt2'");
  {
    std::string custom = with(2, "pattern-name custom");
    const std::size_t at = custom.find("\npattern ") + 9;
    custom.replace(at, custom.find('\n', at) - at, "((");
    expect(custom, "3", "bad custom pattern");
    CHECK(Tokenizer::parse(with(2, "pattern-name custom"), "x").pattern_name() == "custom");
  }
  expect(with(4, "special x PHxib3N8Pg=="), "4", "special id 'x'");
  expect(with(4, "special 257 PHxib3N8Pg"), "4", "bad base64");
  expect(with(4, "special 257"), "4", "expected 'special ID BASE64'");
  expect(with(4, "special 257 PHxib3N8Pg== x"), "4", "expected 'special ID BASE64'");
  {
    std::string t = with(4, "special 200 PHxib3N8Pg==");
    t.replace(t.find("bos 257"), 7, "bos 200");
    expect(t, "4", "is a rank");
  }
  expect(with(4, "special 257 PHxib3N8Pg==\nspecial 257 PHxhfD4="), "5", "special id 257 again");
  expect(with(4, "special 257 PHxib3N8Pg==\nspecial 258 PHxib3N8Pg=="), "5", "special text again");
  expect(with(5, "bos 258"), "5", "not a special's id");
  expect(with(5, "bos -1"), "5", "not a decimal");
  expect(with(5, "eos 257"), "5", "expected 'special ID BASE64' or 'bos ID'");
  expect(with(6, "ranks 258"), std::to_string(lines.size()), "expected 258 rank lines, found 257");
  expect(with(6, "ranks x"), "6", "not a positive decimal");
  expect(with(6, "ranks 0"), "6", "not a positive decimal");
  expect(with(7, "AAB= 0"), "7", "stray bits");
  expect(with(10, "AAA 0"), "10", "multiple of 4");
  expect(good.substr(0, good.find("\nbos")), "5", "ends before its 'bos' line");
  expect(good.substr(0, good.find("\nranks") + 1), "6", "ends before its 'ranks' line");
  expect(good + "YWJj 257\n", std::to_string(lines.size() + 1), "expected 257 rank lines, found 258");
}

}  // namespace test_bpe
