// lrt/data/text_tokenizer.hpp: the tokenizer a model reads text through, as one type for the
// data pipeline, the tools and the checkpoint: the byte tokenizer (ids 0-255 the bytes, 256 BOS;
// data/tokenizer.hpp) or a byte-level BPE (lrt::tok::Tokenizer, tokenizer/tokenizer.hpp).
//
//   lrt::data::TextTokenizer bytes;                                    // the byte vocabulary
//   auto bpe = lrt::data::TextTokenizer::load("runs/tok/tokenizer.lrt"); // lrt's tokenizer file
//   auto rows = lrt::data::TokenRows::build(corpus.train, 256, bpe);    // BOS + BPE ids per document
//
// The checkpoint record (metadata(), from_metadata()): "tokenizer" names the tokenizer,
// "bytes257" or "bpe-<16 hex digits>" (tok::Tokenizer::fingerprint(), a hash of its file), and for
// a BPE "tokenizer_file" holds the whole tokenizer file, so that a checkpoint file alone can be
// evaluated and sampled. A checkpoint without the key (written before lrt had BPE) is bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../io/safetensors.hpp"
#include "../tokenizer/tokenizer.hpp"
#include "corpus.hpp"
#include "recorded_tokenizer.hpp"
#include "token_bytes.hpp"
#include "tokenizer.hpp"

namespace lrt {
inline namespace v0 {
namespace data {

using token_t = std::uint32_t;

class TextTokenizer {
 public:
  /// The byte tokenizer.
  TextTokenizer() = default;
  explicit TextTokenizer(tok::Tokenizer bpe) : bpe_(std::make_shared<const tok::Tokenizer>(std::move(bpe))) {}
  /// A BPE shared with its other users (nullptr: the byte tokenizer).
  explicit TextTokenizer(std::shared_ptr<const tok::Tokenizer> bpe) : bpe_(std::move(bpe)) {}

  /// An lrt tokenizer file (tok::Tokenizer::load).
  static TextTokenizer load(const std::string& path) { return TextTokenizer(tok::Tokenizer::load(path)); }

  bool is_bytes() const noexcept { return bpe_ == nullptr; }
  /// The BPE (nullptr for the byte tokenizer).
  const tok::Tokenizer* bpe() const noexcept { return bpe_.get(); }

  /// Ids the tokenizer gives: 257 for bytes; ranks + specials for a BPE.
  index_t vocab_size() const noexcept {
    return is_bytes() ? ByteTokenizer::vocab_size : static_cast<index_t>(bpe_->vocab_size());
  }
  token_t bos() const noexcept { return is_bytes() ? token_t{ByteTokenizer::bos} : bpe_->bos(); }

  /// Appends the ids of text (no BOS; a BPE encodes special-token text as ordinary text).
  void encode(std::string_view text, std::vector<token_t>& out) const {
    if (is_bytes()) {
      for (char c : text) out.push_back(static_cast<unsigned char>(c));
    } else {
      bpe_->encode(text, out);
    }
  }
  std::vector<token_t> encode(std::string_view text) const {
    std::vector<token_t> ids;
    encode(text, ids);
    return ids;
  }
  /// The ids of every document, documents in parallel on `threads` threads (0: the machine's).
  std::vector<std::vector<token_t>> encode_documents(const std::vector<Document>& docs, int threads = 0) const {
    if (is_bytes()) {
      std::vector<std::vector<token_t>> out(docs.size());
      for (std::size_t i = 0; i < docs.size(); ++i) encode(docs[i].text, out[i]);
      return out;
    }
    std::vector<std::string_view> views;
    views.reserve(docs.size());
    for (const Document& d : docs) views.push_back(d.text);
    return bpe_->encode_documents(views, threads);
  }

  /// The bytes of one id (a special's text for a BPE special, "" for the byte tokenizer's BOS).
  std::string token_text(token_t id) const {
    if (is_bytes()) return ByteTokenizer{}.decode_token(static_cast<int>(id));
    return std::string(bpe_->token(id));
  }
  /// Whether id is a special token (BOS, a BPE's specials): no bytes of text.
  bool is_special(token_t id) const { return token_bytes(id) == 0; }
  /// The raw bytes id stands for (0 for specials and ids past the vocabulary).
  index_t token_bytes(token_t id) const {
    if (static_cast<index_t>(id) >= vocab_size()) return 0;
    return is_bytes() ? ByteTokenizer::token_bytes(static_cast<int>(id)) : bpe_->token_bytes(id);
  }
  /// token_bytes of ids 0..ids-1 (ids >= vocab_size(): the padded rows have 0), as bits per
  /// byte take them.
  TokenBytes token_bytes_table(index_t ids = 0) const {
    if (ids < vocab_size()) ids = vocab_size();
    if (is_bytes()) return byte_vocab_token_bytes(ids);
    TokenBytes tb;
    tb.bytes = bpe_->token_bytes_table();
    tb.bytes.resize(static_cast<std::size_t>(ids), index_t{0});
    return tb;
  }

  /// "bytes257" or "bpe-<fingerprint>".
  std::string name() const { return is_bytes() ? std::string(ByteTokenizer::name) : "bpe-" + bpe_->fingerprint(); }
  /// One line for the tools: "bytes (257 ids)" or "BPE, 4096 ids (4095 ranks + 1 special), pattern nanochat, bpe-...".
  std::string describe() const {
    if (is_bytes()) return "bytes (257 ids, BOS 256)";
    return lrt::detail::str_cat("BPE, ", bpe_->vocab_size(), " ids (", bpe_->num_ranks(), " ranks + ",
                                bpe_->specials().size(), bpe_->specials().size() == 1 ? " special" : " specials",
                                ", BOS ", bpe_->bos(), "), pattern ", bpe_->pattern_name(), ", ", name());
  }

  /// The checkpoint's record of this tokenizer (see the header comment).
  std::vector<std::pair<std::string, std::string>> metadata() const {
    if (is_bytes()) return {{"tokenizer", name()}};
    return {{"tokenizer", name()}, {"tokenizer_file", bpe_->serialize()}};
  }
  /// The tokenizer a checkpoint records; errors name the checkpoint.
  static TextTokenizer from_metadata(const st::Reader& r) {
    TextTokenizer t;
    t.bpe_ = recorded_tokenizer(r);
    return t;
  }

  friend bool operator==(const TextTokenizer& a, const TextTokenizer& b) { return a.name() == b.name(); }

 private:
  std::shared_ptr<const tok::Tokenizer> bpe_;
};

}  // namespace data
}  // namespace v0
}  // namespace lrt
