// lrt/data/loader.hpp: documents -> rows of T+1 byte tokens -> shuffled [B, T] batches, with a
// cursor (seed, epoch, position) that a checkpoint can save and restore exactly.
//
//   auto corpus = lrt::data::load_corpus(path);
//   auto train = lrt::data::TokenRows::build(corpus.train, /*T=*/256);
//   lrt::data::Loader loader(train, /*B=*/32, /*seed=*/1);
//   lrt::data::Batch b = loader.next();            // b.inputs, b.targets: [32, 256] index_t
//   auto val = lrt::data::validation_batches(lrt::data::TokenRows::build(corpus.val, 256), 32,
//                                            65536);
//
// Rows (spec §8 "rows of T+1 tokens, BOS-aligned best-fit packing, no padding"), our byte-level
// interpretation [O]:
// 1. Each document with n > 0 bytes is tokenized as BOS + bytes and cut into pieces that each
//    start with BOS and carry the next (up to) T bytes: BOS b[0..T), BOS b[T..2T), ... (empty
//    documents give nothing). Every piece carrying exactly T bytes is a row (T+1 tokens); these
//    rows come first, in document order.
// 2. The shorter last pieces ("tails", BOS + r bytes, 0 < r < T, one per document at most) are
//    packed best-fit, like nanochat's BOS-aligned best-fit packer, over all tails at once: rows
//    are filled one after another; while the row has room left, the longest pending tail that
//    fits entirely is appended (ties: the earliest document); when none fits, the shortest pending
//    tail (ties: the earliest) is cropped to exactly the room left and the rest of it is DROPPED.
//    When tails run out before the last row is full, that partial row is DROPPED. Packed rows
//    follow the full rows, in the order they were filled.
// So every row has exactly T+1 tokens, starts with BOS and has no padding; a BOS inside a row
// starts a new document segment (no attention masking across segments: spec §8 follows nanochat).
// Bytes are dropped only from tails (crop remainders and the last partial row): dropped_bytes()
// < T per document, and total_bytes() + dropped_bytes() == source_bytes(). Deterministic.
//
// Loader [O]: epoch e visits every row exactly once in the order of a Fisher-Yates shuffle
// (written here, not std::shuffle: portable) driven by a splitmix64 stream seeded with
// splitmix64(splitmix64(seed) ^ e); a bounded draw uses rejection sampling (no modulo bias).
// A batch takes the next B rows of that order and continues into epoch e + 1's order when the
// epoch ends. state() = (seed, epoch, position of the next row in the epoch's order), always
// position < rows(); set_state(state()) on any loader over the same rows resumes exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "../backend/cpu/device.hpp"
#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "corpus.hpp"
#include "text_tokenizer.hpp"
#include "tokenizer.hpp"

namespace lrt {
inline namespace v0 {
namespace data {

/// Rows of T+1 token ids (uint32, one contiguous buffer), built from documents as described above.
class TokenRows {
 public:
  TokenRows() = default;

  /// The rows of docs read through tok (default: the byte tokenizer); documents are encoded in
  /// parallel on `threads` threads (0: the machine's).
  static TokenRows build(const std::vector<Document>& docs, int T, const TextTokenizer& tok = {}, int threads = 0) {
    check(T >= 1, "data", "TokenRows::build: T must be >= 1, got ", T);
    return build_tokens(tok.encode_documents(docs, threads), T, tok.bos(), tok.token_bytes_table());
  }

  /// The rows of already tokenized documents (no BOS in them): each becomes BOS + its ids, cut
  /// and packed as described above; token_bytes gives the bytes each id stands for.
  static TokenRows build_tokens(const std::vector<std::vector<token_t>>& docs, int T, token_t bos,
                                const TokenBytes& token_bytes) {
    check(T >= 1, "data", "TokenRows::build: T must be >= 1, got ", T);
    const std::size_t Tz = static_cast<std::size_t>(T);
    const auto bytes_of = [&](token_t id) { return static_cast<std::size_t>(token_bytes(static_cast<index_t>(id))); };
    TokenRows r;
    r.len_ = T + 1;
    std::size_t full = 0;
    for (const auto& d : docs) {
      for (token_t id : d) r.source_bytes_ += bytes_of(id);
      full += d.size() / Tz;
    }
    r.tokens_.reserve((full + docs.size()) * static_cast<std::size_t>(r.len_));

    // 1. full pieces -> rows; remember the tails (document index, token offset, token count)
    struct Tail {
      std::size_t doc, off, n;
    };
    std::vector<Tail> tails;
    auto put = [&](const std::vector<token_t>& d, std::size_t off, std::size_t n) {
      r.tokens_.push_back(bos);
      r.tokens_.insert(r.tokens_.end(), d.begin() + static_cast<std::ptrdiff_t>(off),
                       d.begin() + static_cast<std::ptrdiff_t>(off + n));
    };
    for (std::size_t di = 0; di < docs.size(); ++di) {
      const auto& d = docs[di];
      std::size_t off = 0;
      for (; off + Tz <= d.size(); off += Tz) put(d, off, Tz);
      if (off < d.size()) tails.push_back({di, off, d.size() - off});
    }

    // 2. best-fit packing of the tails; key = piece length in tokens (BOS + ids), and equal
    // keys keep insertion (= document) order in a multimap
    std::multimap<std::size_t, std::size_t> pending;
    for (std::size_t i = 0; i < tails.size(); ++i) pending.emplace(tails[i].n + 1, i);
    const std::size_t L = static_cast<std::size_t>(r.len_);
    while (!pending.empty()) {
      const std::size_t row_start = r.tokens_.size();
      std::size_t room = L;
      while (room > 0 && !pending.empty()) {
        auto it = pending.upper_bound(room);
        if (it != pending.begin()) {
          it = pending.lower_bound(std::prev(it)->first);  // longest that fits, earliest
          const Tail& t = tails[it->second];
          put(docs[t.doc], t.off, t.n);
          room -= t.n + 1;
        } else {  // nothing fits: crop the shortest (earliest among equals), drop its rest
          it = pending.begin();
          const Tail& t = tails[it->second];
          put(docs[t.doc], t.off, room - 1);
          for (std::size_t k = t.off + room - 1; k < t.off + t.n; ++k) r.dropped_bytes_ += bytes_of(docs[t.doc][k]);
          room = 0;
        }
        pending.erase(it);
      }
      if (room > 0) {  // tails ran out: drop the partial last row
        for (std::size_t k = row_start; k < r.tokens_.size(); ++k) r.dropped_bytes_ += bytes_of(r.tokens_[k]);
        r.tokens_.resize(row_start);
      }
    }
    r.rows_ = static_cast<index_t>(r.tokens_.size() / L);
    r.total_bytes_ = r.source_bytes_ - r.dropped_bytes_;
    r.target_bytes_.resize(static_cast<std::size_t>(r.rows_));
    for (std::size_t i = 0; i < r.target_bytes_.size(); ++i)
      for (std::size_t k = 1; k < L; ++k) r.target_bytes_[i] += bytes_of(r.tokens_[i * L + k]);
    return r;
  }

  /// Rows of T + 1 tokens cut from `tokens` in order (ids already tokenized, e.g. synthetic ones
  /// for a benchmark); a partial last row is dropped. Byte counts are those of the kept tokens.
  static TokenRows from_tokens(std::vector<token_t> tokens, int T) {
    check(T >= 1, "data", "TokenRows::from_tokens: T must be >= 1, got ", T);
    const std::size_t L = static_cast<std::size_t>(T) + 1;
    check(tokens.size() >= L, "data", "TokenRows::from_tokens: ", tokens.size(), " tokens, fewer than one row of ", L);
    TokenRows r;
    r.len_ = T + 1;
    r.source_bytes_ = tokens.size();
    tokens.resize(tokens.size() / L * L);
    r.tokens_ = std::move(tokens);
    r.rows_ = static_cast<index_t>(r.tokens_.size() / L);
    r.total_bytes_ = r.tokens_.size();
    r.dropped_bytes_ = r.source_bytes_ - r.total_bytes_;
    r.target_bytes_.assign(static_cast<std::size_t>(r.rows_), static_cast<std::size_t>(T));
    return r;
  }

  /// Number of rows.
  index_t rows() const noexcept { return rows_; }
  /// Tokens per row, T + 1.
  int row_len() const noexcept { return len_; }
  /// T, the number of inputs (and targets) a row gives.
  int seq_len() const noexcept { return len_ - 1; }
  /// Row i (0 <= i < rows()).
  std::span<const token_t> row(index_t i) const {
    check(i >= 0 && i < rows_, "data", "TokenRows::row: index ", i, " out of range [0, ", rows_, ")");
    return {tokens_.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(len_),
            static_cast<std::size_t>(len_)};
  }
  /// All tokens, rows() * row_len() of them.
  std::span<const token_t> tokens() const noexcept { return tokens_; }
  /// Bytes of text the targets of row i stand for (tokens 1..T; BOS counts 0).
  std::size_t target_bytes(index_t i) const {
    check(i >= 0 && i < rows_, "data", "TokenRows::target_bytes: index ", i, " out of range [0, ", rows_, ")");
    return target_bytes_[static_cast<std::size_t>(i)];
  }
  /// Bytes of text the rows' tokens stand for (BOS counts 0).
  std::size_t total_bytes() const noexcept { return total_bytes_; }
  /// Bytes of the documents the rows were built from.
  std::size_t source_bytes() const noexcept { return source_bytes_; }
  /// Bytes of the documents left out by packing (crop remainders, the partial last row).
  std::size_t dropped_bytes() const noexcept { return dropped_bytes_; }

 private:
  std::vector<token_t> tokens_;
  std::vector<std::size_t> target_bytes_;
  index_t rows_ = 0;
  int len_ = 1;
  std::size_t total_bytes_ = 0, source_bytes_ = 0, dropped_bytes_ = 0;
};

/// One batch: inputs = rows[:, :-1], targets = rows[:, 1:], both [B, T].
struct Batch {
  Tensor<index_t, 2, cpu::Device> inputs, targets;
};

/// Where a Loader stands: the next batch starts at row `position` of epoch `epoch`'s order.
struct LoaderState {
  std::uint64_t seed = 0, epoch = 0, position = 0;
  friend bool operator==(const LoaderState&, const LoaderState&) = default;
};

namespace detail {

/// splitmix64 (Steele, Lea, Flood 2014): the reference constants, one output per call.
struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() noexcept {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, bound), bound >= 1, by rejection (unbiased).
  std::uint64_t below(std::uint64_t bound) noexcept {
    const std::uint64_t threshold = (std::uint64_t{0} - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const std::uint64_t x = next();
      if (x >= threshold) return x % bound;
    }
  }
};

/// Fills batch row b of inputs/targets from a token row.
inline void put_row(Batch& batch, index_t b, std::span<const token_t> row) {
  const std::size_t T = row.size() - 1;
  index_t* in = batch.inputs.data() + static_cast<std::size_t>(b) * T;
  index_t* tg = batch.targets.data() + static_cast<std::size_t>(b) * T;
  for (std::size_t t = 0; t < T; ++t) {
    in[t] = row[t];
    tg[t] = row[t + 1];
  }
}

inline Batch make_batch(index_t B, int T) {
  return {Tensor<index_t, 2, cpu::Device>(Shape<2>{B, T}, uninitialized),
          Tensor<index_t, 2, cpu::Device>(Shape<2>{B, T}, uninitialized)};
}

}  // namespace detail

/// The row order of epoch `epoch`: a permutation of 0..n-1 (see the header comment).
inline std::vector<index_t> epoch_order(index_t n, std::uint64_t seed, std::uint64_t epoch) {
  check(n >= 0, "data", "epoch_order: negative row count ", n);
  std::vector<index_t> order(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  detail::SplitMix64 g{detail::SplitMix64{detail::SplitMix64{seed}.next() ^ epoch}.next()};
  for (std::size_t i = order.size(); i-- > 1;) {
    std::swap(order[i], order[static_cast<std::size_t>(g.below(i + 1))]);
  }
  return order;
}

/// Shuffled training batches over TokenRows (which must outlive the loader).
class Loader {
 public:
  Loader(const TokenRows& rows, int B, std::uint64_t seed) : rows_(&rows), B_(B), seed_(seed) {
    check(B >= 1, "data", "Loader: batch size must be >= 1, got ", B);
    check(rows.rows() >= B, "data", "Loader: ", rows.rows(), " rows of T+1 = ", rows.row_len(),
          " tokens, fewer than the batch size ", B, " (more text or a smaller B or T needed)");
    order_ = epoch_order(rows.rows(), seed_, epoch_);
  }
  Loader(TokenRows&&, int, std::uint64_t) = delete;  // would dangle

  /// Moves the cursor past the next n rows without reading them (as n / B calls of next() would
  /// for n a multiple of B): a data-parallel rank skips the rows of the other ranks.
  void skip(index_t n) {
    check(n >= 0, "data", "Loader::skip: n must be >= 0, got ", n);
    for (index_t i = 0; i < n; ++i)
      if (++pos_ == rows_->rows()) {
        pos_ = 0;
        ++epoch_;
        order_ = epoch_order(rows_->rows(), seed_, epoch_);
      }
  }

  /// The next B rows as inputs/targets [B, T].
  Batch next() {
    const int T = rows_->seq_len();
    Batch batch = detail::make_batch(B_, T);
    for (index_t b = 0; b < B_; ++b) {
      detail::put_row(batch, b, rows_->row(order_[static_cast<std::size_t>(pos_)]));
      if (++pos_ == rows_->rows()) {
        pos_ = 0;
        ++epoch_;
        order_ = epoch_order(rows_->rows(), seed_, epoch_);
      }
    }
    return batch;
  }

  LoaderState state() const noexcept { return {seed_, epoch_, static_cast<std::uint64_t>(pos_)}; }

  /// Resumes at s (from state() of a loader over the same rows); position must be < rows().
  void set_state(const LoaderState& s) {
    check(s.position < static_cast<std::uint64_t>(rows_->rows()), "data", "Loader::set_state: position ", s.position,
          " out of range for ", rows_->rows(), " rows (a state saved over different data?)");
    const bool reshuffle = s.seed != seed_ || s.epoch != epoch_;
    seed_ = s.seed;
    epoch_ = s.epoch;
    pos_ = static_cast<index_t>(s.position);
    if (reshuffle) order_ = epoch_order(rows_->rows(), seed_, epoch_);
  }

  /// The epoch of the next row.
  std::uint64_t epoch() const noexcept { return epoch_; }
  int batch_size() const noexcept { return B_; }
  /// Number of rows per epoch.
  index_t rows() const noexcept { return rows_->rows(); }

 private:
  const TokenRows* rows_;
  int B_;
  std::uint64_t seed_, epoch_ = 0;
  index_t pos_ = 0;
  std::vector<index_t> order_;
};

/// Validation batches: rows in order (no shuffle), whole rows up to max_target_tokens targets
/// (T per row) and, with max_bytes > 0, up to the row whose targets reach max_bytes bytes of text;
/// every batch has B rows except possibly the last.
inline std::vector<Batch> validation_batches(const TokenRows& rows, int B, index_t max_target_tokens,
                                             std::size_t max_bytes = 0) {
  const int T = rows.seq_len();
  check(B >= 1, "data", "validation_batches: batch size must be >= 1, got ", B);
  check(rows.rows() >= 1, "data", "validation_batches: no validation rows of T+1 = ", rows.row_len(), " tokens (",
        rows.source_bytes(), " bytes of text)");
  check(max_target_tokens >= T, "data", "validation_batches: max_target_tokens ", max_target_tokens,
        " is less than one row (T = ", T, ")");
  index_t n = std::min(rows.rows(), max_target_tokens / T);
  if (max_bytes > 0) {
    std::size_t bytes = 0;
    for (index_t i = 0; i < n; ++i)
      if ((bytes += rows.target_bytes(i)) >= max_bytes) {
        n = i + 1;
        break;
      }
  }
  std::vector<Batch> out;
  for (index_t first = 0; first < n; first += B) {
    const index_t nb = std::min<index_t>(B, n - first);
    Batch batch = detail::make_batch(nb, T);
    for (index_t b = 0; b < nb; ++b) detail::put_row(batch, b, rows.row(first + b));
    out.push_back(std::move(batch));
  }
  return out;
}

/// The first max_bytes bytes of docs' text, in document order (the document that crosses the
/// budget is cut, at a UTF-8 character boundary: never inside a multi-byte sequence; the ones after
/// it are left out); all of it for max_bytes 0. The same text whatever the tokenizer, so that
/// models with different vocabularies are scored on the same bytes.
inline std::vector<Document> first_bytes(const std::vector<Document>& docs, std::size_t max_bytes) {
  if (max_bytes == 0) return docs;
  std::vector<Document> out;
  std::size_t left = max_bytes;
  for (const Document& d : docs) {
    if (left == 0) break;
    if (d.text.size() <= left) {
      out.push_back(d);
      left -= d.text.size();
      continue;
    }
    std::size_t cut = left;
    for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(d.text[cut]) & 0xC0) == 0x80; ++k) --cut;
    if (cut > 0) out.push_back({d.name + "@0+" + std::to_string(cut), d.text.substr(0, cut)});
    left = 0;
  }
  return out;
}

/// Batches that score every token of docs exactly once, for evaluating a given text: each
/// document (BOS + its ids through tok, default the byte tokenizer) is cut into pieces of T
/// targets, BOS x[0..T), BOS x[T..2T), ... (as TokenRows cuts full rows), and the last, shorter
/// piece is padded with BOS inputs whose targets are -1 (ignored), so that nothing is dropped and
/// a text shorter than one row is one padded row. Rows in document order, B per batch; stops
/// before the row that would take the targets past max_target_tokens (but always scores at least
/// one row). With max_bytes > 0 only first_bytes(docs, max_bytes) is scored.
inline std::vector<Batch> scoring_batches(const std::vector<Document>& docs, int T, int B, index_t max_target_tokens,
                                          const TextTokenizer& tok = {}, std::size_t max_bytes = 0) {
  check(T >= 1 && B >= 1, "data", "scoring_batches: need T >= 1 and B >= 1, got T = ", T, ", B = ", B);
  check(max_target_tokens >= 1, "data", "scoring_batches: max_target_tokens must be >= 1, got ", max_target_tokens);
  const auto bos = static_cast<index_t>(tok.bos());
  const auto ids = tok.encode_documents(first_bytes(docs, max_bytes));
  std::vector<std::vector<index_t>> rows;  // each 2T: inputs then targets
  index_t targets = 0;
  for (const auto& x : ids) {
    for (std::size_t start = 0; start < x.size(); start += static_cast<std::size_t>(T)) {
      const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(T), x.size() - start);
      if (!rows.empty() && targets + static_cast<index_t>(n) > max_target_tokens) break;
      std::vector<index_t> r(static_cast<std::size_t>(2 * T), bos);
      for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
        if (t < n) {
          r[static_cast<std::size_t>(T) + t] = static_cast<index_t>(x[start + t]);
          if (t + 1 < static_cast<std::size_t>(T)) r[t + 1] = static_cast<index_t>(x[start + t]);
        } else {
          r[static_cast<std::size_t>(T) + t] = -1;
        }
      }
      rows.push_back(std::move(r));
      targets += static_cast<index_t>(n);
    }
    if (targets >= max_target_tokens) break;
  }
  check(!rows.empty(), "data", "scoring_batches: no text to score");
  std::vector<Batch> out;
  for (std::size_t first = 0; first < rows.size(); first += static_cast<std::size_t>(B)) {
    const index_t nb = static_cast<index_t>(std::min<std::size_t>(static_cast<std::size_t>(B), rows.size() - first));
    Batch batch = detail::make_batch(nb, T);
    for (index_t b = 0; b < nb; ++b) {
      const auto& r = rows[first + static_cast<std::size_t>(b)];
      std::copy(r.begin(), r.begin() + T, batch.inputs.data() + static_cast<std::size_t>(b) * T);
      std::copy(r.begin() + T, r.end(), batch.targets.data() + static_cast<std::size_t>(b) * T);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

}  // namespace data
}  // namespace v0
}  // namespace lrt
