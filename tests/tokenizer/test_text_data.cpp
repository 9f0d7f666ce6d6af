// The data pipeline with a BPE tokenizer (data/text_tokenizer.hpp, data/loader.hpp): rows of BPE
// ids start with the tokenizer's BOS and decode back to the documents, their byte accounting is
// exact; a budget in bytes scores the same text whatever the tokenizer; the checkpoint record of a
// tokenizer reads back and a damaged one is refused.
#include <doctest/doctest.h>

#include <lrt/data.hpp>
#include <lrt/io.hpp>
#include <lrt/tokenizer.hpp>

#include <random>
#include <string>
#include <vector>

namespace test_text_data {

using lrt::index_t;
using lrt::data::Document;
using lrt::data::TextTokenizer;
using lrt::data::token_t;

std::string text_of(unsigned seed, std::size_t n) {
  std::mt19937 rng(seed);
  const char* words[] = {"the ",   "cat ",   "sat ",  "on ",   "a ",    "mat, ", "and ",
                         "dog's ", "ran.\n", "café ", "über ", "中文 ", "1234 ", "  \n"};
  std::string s;
  while (s.size() < n) s += words[rng() % 14];
  return s;
}

TextTokenizer small_bpe() {
  const std::string corpus = text_of(1, 20000);
  const std::vector<std::string_view> docs{corpus};
  lrt::tok::BpeTrainOptions o;
  o.vocab_size = 300;
  return TextTokenizer(lrt::tok::train_bpe(docs, o));
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const lrt::Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("text data: BPE rows start with BOS, hold whole documents' ids, and count their bytes exactly") {
  const TextTokenizer tok = small_bpe();
  REQUIRE(!tok.is_bytes());
  CHECK(tok.vocab_size() == 300);
  CHECK(tok.bos() == 299);
  std::vector<Document> docs;
  for (unsigned i = 0; i < 6; ++i) docs.push_back({"d" + std::to_string(i), text_of(10 + i, 300 + 170 * i)});
  const int T = 24;
  const auto rows = lrt::data::TokenRows::build(docs, T, tok);
  REQUIRE(rows.rows() > 0);
  std::size_t bytes = 0, docs_bytes = 0;
  for (const auto& d : docs) docs_bytes += d.text.size();
  CHECK(rows.source_bytes() == docs_bytes);
  for (index_t i = 0; i < rows.rows(); ++i) {
    const auto r = rows.row(i);
    CHECK(r[0] == tok.bos());
    std::size_t tb = 0;
    for (std::size_t k = 1; k < r.size(); ++k) tb += static_cast<std::size_t>(tok.token_bytes(r[k]));
    CHECK(rows.target_bytes(i) == tb);
    bytes += tb;
  }
  CHECK(rows.total_bytes() == bytes);
  CHECK(rows.total_bytes() + rows.dropped_bytes() == rows.source_bytes());
  // The full pieces come first, in document order: document 5's first T ids, decoded, are its text's start.
  const auto ids5 = tok.encode(docs[5].text);
  std::size_t first_row_of_5 = 0;
  for (std::size_t d = 0; d < 5; ++d) first_row_of_5 += tok.encode(docs[d].text).size() / T;
  const auto r = rows.row(static_cast<index_t>(first_row_of_5));
  CHECK(std::vector<token_t>(r.begin() + 1, r.end()) == std::vector<token_t>(ids5.begin(), ids5.begin() + T));
  std::string back;
  for (std::size_t k = 1; k < r.size(); ++k) back += tok.token_text(r[k]);
  CHECK(docs[5].text.rfind(back, 0) == 0);
}

TEST_CASE("text data: a budget in bytes scores the same bytes of text with bytes and with BPE") {
  const TextTokenizer bpe = small_bpe(), bytes;
  std::vector<Document> docs{{"a", text_of(3, 700)}, {"b", text_of(4, 900)}, {"c", text_of(5, 800)}};
  for (std::size_t budget : {1u, 333u, 700u, 1234u, 2400u, 100000u}) {
    CAPTURE(budget);
    const auto cut = lrt::data::first_bytes(docs, budget);
    std::size_t n = 0;
    for (const auto& d : cut) n += d.text.size();
    CHECK(n <= budget);
    CHECK(n + 3 >= std::min<std::size_t>(budget, 2400));  // cut back at most to a UTF-8 boundary
    for (const TextTokenizer* t : {&bpe, &bytes}) {
      const auto tb = t->token_bytes_table();
      const auto batches = lrt::data::scoring_batches(docs, 16, 4, 1 << 30, *t, budget);
      std::size_t scored = 0;
      for (const auto& b : batches)
        for (index_t i = 0; i < b.targets.numel(); ++i) scored += static_cast<std::size_t>(tb(b.targets.data()[i]));
      CHECK(scored == n);
    }
  }
}

TEST_CASE("text data: the checkpoint record of a tokenizer reads back; a damaged or unknown one is refused") {
  const TextTokenizer bpe = small_bpe();
  auto round_trip = [](const std::vector<std::pair<std::string, std::string>>& meta) {
    lrt::st::Writer w;
    const float x = 1;
    w.add_f32("x", std::span<const float>(&x, 1), {1});
    for (const auto& [k, v] : meta) w.set_metadata(k, v);
    return lrt::st::Reader::from_bytes(w.serialize(), "ck.safetensors");
  };
  const auto back = TextTokenizer::from_metadata(round_trip(bpe.metadata()));
  CHECK(back == bpe);
  CHECK(back.bpe()->serialize() == bpe.bpe()->serialize());
  CHECK(back.name().rfind("bpe-", 0) == 0);
  CHECK(TextTokenizer::from_metadata(round_trip({})).is_bytes());
  CHECK(TextTokenizer::from_metadata(round_trip({{"tokenizer", "bytes257"}})).is_bytes());
  CHECK(error_of([&] {
          TextTokenizer::from_metadata(round_trip({{"tokenizer", "sentencepiece"}}));
        }).find("unknown tokenizer 'sentencepiece'") != std::string::npos);
  CHECK(error_of([&] {
          TextTokenizer::from_metadata(round_trip({{"tokenizer", bpe.name()}}));
        }).find("no 'tokenizer_file'") != std::string::npos);
  auto meta = bpe.metadata();
  meta[0].second = "bpe-0000000000000000";
  CHECK(error_of([&] { TextTokenizer::from_metadata(round_trip(meta)); }).find("not the recorded") !=
        std::string::npos);
}

}  // namespace test_text_data
