// lrt/data/recorded_tokenizer.hpp: the tokenizer a checkpoint records in its metadata, read
// without the data pipeline (so that the embedded build and the C API read it too): "tokenizer" is
// "bytes257" (or absent: a checkpoint from before lrt had BPE) or "bpe-<fingerprint>", and for a
// BPE "tokenizer_file" holds the whole lrt tokenizer file (tok::Tokenizer::serialize).
// data::TextTokenizer::from_metadata wraps this.
#pragma once

#include <memory>
#include <string>

#include "../core/error.hpp"
#include "../io/safetensors.hpp"
#include "../tokenizer/tokenizer.hpp"
#include "tokenizer.hpp"

namespace lrt {
inline namespace v0 {
namespace data {

/// The BPE a checkpoint records, or nullptr for bytes (also when it records none); an unknown
/// name, a missing tokenizer_file or one whose fingerprint is not the recorded name is an error
/// naming the file (op "tokenizer").
inline std::shared_ptr<const tok::Tokenizer> recorded_tokenizer(const st::Reader& r) {
  const auto n = r.meta("tokenizer");
  if (!n || *n == ByteTokenizer::name) return nullptr;
  check(n->rfind("bpe-", 0) == 0, "tokenizer", "'", r.label(), "': unknown tokenizer '", *n,
        "' in __metadata__ (known: bytes257, bpe-<fingerprint>)");
  const auto file = r.meta("tokenizer_file");
  check(file.has_value(), "tokenizer", "'", r.label(), "': records tokenizer '", *n,
        "' but holds no 'tokenizer_file' in __metadata__");
  auto t = std::make_shared<const tok::Tokenizer>(tok::Tokenizer::parse(*file, r.label() + " tokenizer_file"));
  check("bpe-" + t->fingerprint() == *n, "tokenizer", "'", r.label(), "': its tokenizer_file has fingerprint bpe-",
        t->fingerprint(), ", not the recorded ", *n, " (a damaged checkpoint?)");
  return t;
}

}  // namespace data
}  // namespace v0
}  // namespace lrt
