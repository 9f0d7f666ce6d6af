// lrt/data/tokenizer.hpp: the byte tokenizer of the byte presets (spec §10): ids 0-255 are the
// bytes themselves, 256 is BOS; the embedding/logit tables are padded to 320 rows (logits are
// cropped to 257). bytes(id) (spec §7) is 1 for a byte and 0 for BOS; token_bytes_table() is the
// whole table that bits per byte take (lrt::evaluate_*).
//
//   lrt::data::ByteTokenizer tok;
//   auto ids = tok.encode("hi");        // {104, 105}; encode never adds BOS
//   std::string s = tok.decode(ids);    // "hi"; BOS ids are skipped
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "token_bytes.hpp"

namespace lrt {
inline namespace v0 {
namespace data {

/// Byte-level tokenizer: 256 byte ids plus BOS.
struct ByteTokenizer {
  static constexpr int vocab_size = 257;
  static constexpr int bos = 256;
  static constexpr int padded_vocab = 320;
  static constexpr std::string_view name = "bytes257";

  /// One id per byte of s (0..255), no BOS.
  std::vector<std::uint16_t> encode(std::string_view s) const {
    std::vector<std::uint16_t> ids(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) ids[i] = static_cast<unsigned char>(s[i]);
    return ids;
  }

  /// The bytes the ids stand for; BOS is skipped, any other id >= 256 is an error.
  std::string decode(std::span<const std::uint16_t> ids) const {
    std::string s;
    s.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const int id = ids[i];
      if (id == bos) continue;
      check(id < 256, "tokenizer", "decode: id ", id, " at position ", i,
            " is outside the byte vocabulary (0..256, 256 = BOS) of ", name.data());
      s.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    }
    return s;
  }

  /// The bytes of one id: one byte for 0..255, "" for BOS.
  std::string decode_token(int id) const {
    check_id(id, "decode_token");
    if (id == bos) return {};
    return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
  }

  /// Raw bytes the token stands for (spec §7): 1 for 0..255, 0 for BOS.
  static int token_bytes(int id) {
    check_id(id, "token_bytes");
    return id == bos ? 0 : 1;
  }

  /// token_bytes of every id as the table bits per byte take (lrt::TokenBytes): `ids` entries
  /// (>= 257; the padded 320 say), 1 for 0..255, 0 for BOS and the padding ids above it.
  static TokenBytes token_bytes_table(index_t ids = vocab_size) { return byte_vocab_token_bytes(ids); }

 private:
  static void check_id(int id, const char* what) {
    check(id >= 0 && id < vocab_size, "tokenizer", what, ": id ", id,
          " is outside the byte vocabulary (0..256, 256 = BOS) of ", name.data());
  }
};

}  // namespace data
}  // namespace v0
}  // namespace lrt
