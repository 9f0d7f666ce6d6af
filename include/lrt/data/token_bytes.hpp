// lrt/data/token_bytes.hpp: how many raw bytes each token id stands for (spec §7), the
// denominator of bits per byte. A tokenizer supplies the table (lrt::data::ByteTokenizer::
// token_bytes_table() for the byte vocabulary); the evaluation (train/eval.hpp) takes it.
//
//   lrt::TokenBytes tb{{1, 1, 2, 0}};   // ids 0, 1: one byte; id 2: two bytes; id 3: a special
//   tb(2) == 2, tb(3) == 0, tb(-1) == 0, tb(7) == 0
//
// Only the core headers are included, so that data/ (the tokenizers) and model/ can both use it.
#pragma once

#include <cstddef>
#include <vector>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {

/// Raw bytes per token id: bytes[id]; 0 for ids outside the table (negative ones such as the
/// ignored target -1 included). Specials (BOS, padding) have 0 in the table; they carry no nats.
struct TokenBytes {
  std::vector<index_t> bytes;

  index_t operator()(index_t id) const {
    return id >= 0 && id < size() ? bytes[static_cast<std::size_t>(id)] : index_t{0};
  }
  /// The number of ids the table covers.
  index_t size() const noexcept { return static_cast<index_t>(bytes.size()); }
};

/// The byte vocabulary's table for `vocab_size` ids (>= 257): 1 for ids 0..255 (the bytes), 0 for
/// BOS (256) and any id above (padding).
inline TokenBytes byte_vocab_token_bytes(index_t vocab_size = 257) {
  check(vocab_size >= 257, "token_bytes", "the byte vocabulary needs vocab_size >= 257 (256 bytes + BOS), got ",
        vocab_size);
  TokenBytes tb;
  tb.bytes.assign(static_cast<std::size_t>(vocab_size), index_t{0});
  for (std::size_t id = 0; id < 256; ++id) tb.bytes[id] = 1;
  return tb;
}

}  // namespace v0
}  // namespace lrt
