// lrt/runtime/text.hpp: the text side of a checkpoint opened for decoding (runtime/decoding.hpp):
// its tokenizer, bytes or the BPE it records (DecodingModel::bpe), and the draw of a row's next
// token from its logits. Light, as decoding.hpp is (no Eigen, fmt, model, tensor or tokenizer
// header); defined once, in the runtime library (include/lrt/runtime/runtime.cpp), with the
// library's tokenizer (data::TextTokenizer) and sampler (decode/sampler.hpp's sample_token), so a
// program on it reads and samples text as lrt-generate does.
//
//   lrt::runtime::DecodingModel m = lrt::runtime::open_decoding("runs/tiny");
//   const lrt::runtime::Text text(m.bpe);
//   std::vector<lrt::index_t> prompt{m.config.bos()};
//   text.encode("The cat", prompt);
//   lrt::index_t row = m.decoding->join(prompt);
//   lrt::index_t next = lrt::runtime::sample(m.decoding->logits(row), {.temperature = 0.8, .seed = 1},
//                                            m.decoding->position(row));
//   std::string_view bytes = text.token_text(next);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {
class Tokenizer;
}

namespace runtime {

/// The tokenizer a checkpoint records: bytes (ids 0-255 the bytes, 256 BOS) or its BPE.
class LRT_API Text {
 public:
  /// nullptr: bytes.
  explicit Text(std::shared_ptr<const tok::Tokenizer> bpe = nullptr) : bpe_(std::move(bpe)) {}
  bool is_bytes() const noexcept { return bpe_ == nullptr; }
  /// The ids with a meaning: 257 for bytes (BOS included), a BPE's ranks and specials. A model's
  /// vocabulary may be larger (padding ids, which have no text).
  index_t vocab_size() const noexcept;
  /// Appends the ids of `text` (no BOS; a BPE encodes special-token text as ordinary text).
  void encode(std::string_view text, std::vector<index_t>& out) const;
  /// The bytes of id `id`: a byte, a BPE rank's bytes, a BPE special's text; none for the byte BOS
  /// and for ids outside [0, vocab_size()). Valid while this Text (or a copy) lives.
  std::string_view token_text(index_t id) const noexcept;

 private:
  std::shared_ptr<const tok::Tokenizer> bpe_;
};

/// How the next token is drawn (decode/sampler.hpp's SamplerOptions).
struct Sampling {
  double temperature = 1.0;  // 0: greedy (argmax, ties to the lowest id)
  index_t top_k = 0;         // > 0: keep the k largest logits (ties at the k-th kept)
  double top_p = 1.0;        // < 1: keep the shortest most-probable prefix with mass >= p
  std::uint64_t seed = 0;
};

/// The token drawn from `logits` for the position `position` (the row's Decoding::position): the
/// Philox draw lrt-generate makes there with the same seed, so a row's text is that of its seed
/// whatever rows step beside it. Errors: lrt::Error (empty logits, options out of range).
LRT_API index_t sample(std::span<const float> logits, const Sampling& sampling, index_t position);

}  // namespace runtime
}  // namespace v0
}  // namespace lrt
