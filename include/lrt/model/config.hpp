// lrt/model/config.hpp: the runtime configuration of a model (sizes, window pattern, value-
// embedding layout, gate width) and the named presets of LRT-SPEC §10. Field names follow the
// official release's GPTConfig so that configs and checkpoints interchange with it.
// Not here: the structural (compile-time) variant choices (model/gpt.hpp) and JSON (model/checkpoint.hpp).
#pragma once

#include <array>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../core/status.hpp"

namespace lrt {
inline namespace v0 {

/// Which layers carry a value embedding in the None/Residual variants (spec §1, §11.4).
enum class VELayout { None, Every, Alternating };

inline std::string_view to_string(VELayout v) {
  switch (v) {
    case VELayout::None:
      return "none";
    case VELayout::Every:
      return "every";
    case VELayout::Alternating:
      return "alternating";
  }
  return "?";
}

struct ModelConfig {
  index_t sequence_len = 128;  // T: rows are T+1 tokens; windows are derived from it
  index_t vocab_size = 257;    // V: 256 bytes + BOS
  index_t bos_id = -1;         // the BOS/document-separator id; -1: the last id, vocab_size - 1 (256 for bytes)
  double logit_softcap = 15;   // logits are softcap * tanh(z / softcap) (spec §2.4)
  index_t n_layer = 4;         // L
  index_t n_head = 4;          // H
  index_t n_kv_head = 4;       // H_kv (H % H_kv == 0)
  index_t n_embd = 128;        // d
  std::string window_pattern = "SSSL";
  VELayout ve_layout = VELayout::Every;
  index_t ve_gate_channels = 0;   // c; 0 means d
  bool use_resid_lambdas = true;  // x = alpha_l x
  bool use_x0_residual = true;    // x += beta_l x0
  bool rope_bf16_tables = true;   // round the cos/sin tables to bf16 like the release
  // LRT runtime options (spec §1, §3.1); ignored by the baseline.
  index_t mem_offset = 1;     // k: position t reads the source state of t - k
  bool reset_at_bos = false;  // zero the memory when a BOS lies in tokens t-k+1..t

  /// The BOS id: bos_id, or vocab_size - 1 when bos_id is -1.
  index_t bos() const { return bos_id < 0 ? vocab_size - 1 : bos_id; }
  index_t head_dim() const { return n_embd / n_head; }
  index_t kv_dim() const { return n_kv_head * head_dim(); }  // D
  /// V_p: the vocabulary rounded up to a multiple of 64 (the release's padding).
  index_t padded_vocab() const { return (vocab_size + 63) / 64 * 64; }
  index_t gate_channels() const { return ve_gate_channels == 0 ? n_embd : ve_gate_channels; }
  /// Whether layer l is a long-window layer ('L'); the last layer always is.
  bool long_window(index_t l) const {
    if (l == n_layer - 1) return true;
    return window_pattern[static_cast<std::size_t>(l) % window_pattern.size()] == 'L';
  }
  /// w_l: a query at p may attend keys j with p - j <= w_l (spec §2.2), from the configured
  /// sequence_len, never from the current batch or prompt length.
  index_t window(index_t l) const { return long_window(l) ? sequence_len : sequence_len / 2; }
  /// Whether layer l has a value embedding (None/Residual variants).
  bool has_ve(index_t l) const {
    switch (ve_layout) {
      case VELayout::None:
        return false;
      case VELayout::Every:
        return true;
      case VELayout::Alternating:
        return l % 2 == (n_layer - 1) % 2;
    }
    return false;
  }
  index_t num_ve_layers() const {
    index_t n = 0;
    for (index_t l = 0; l < n_layer; ++l) n += has_ve(l);
    return n;
  }

  // The largest sizes status() accepts (spec §10's largest preset is 2,048 x 32,768 x 24 x 1,536).
  static constexpr index_t max_sequence_len = index_t{1} << 20;
  static constexpr index_t max_vocab_size = index_t{1} << 24;
  static constexpr index_t max_layers = index_t{1} << 12;
  static constexpr index_t max_embd = index_t{1} << 16;

  /// Why the configuration is inconsistent, or ok.
  Status status() const {
    const char* op = "config";
    if (!(sequence_len >= 1))
      return Status::error(StatusCode::invalid_argument, op, "sequence_len must be >= 1, got ", sequence_len);
    if (!(vocab_size >= 2))
      return Status::error(StatusCode::invalid_argument, op, "vocab_size must be >= 2, got ", vocab_size);
    if (!(n_layer >= 1)) return Status::error(StatusCode::invalid_argument, op, "n_layer must be >= 1, got ", n_layer);
    if (!(n_embd >= 1 && n_head >= 1 && n_kv_head >= 1))
      return Status::error(StatusCode::invalid_argument, op, "n_embd, n_head, n_kv_head must be >= 1, got ", n_embd,
                           ", ", n_head, ", ", n_kv_head);
    if (!(n_embd % n_head == 0))
      return Status::error(StatusCode::invalid_argument, op, "n_embd (", n_embd, ") must be a multiple of n_head (",
                           n_head, ")");
    if (!(n_head % n_kv_head == 0))
      return Status::error(StatusCode::invalid_argument, op, "n_head (", n_head, ") must be a multiple of n_kv_head (",
                           n_kv_head, ")");
    if (!(head_dim() % 2 == 0))
      return Status::error(StatusCode::invalid_argument, op, "the head dimension n_embd / n_head = ", head_dim(),
                           " must be even (RoPE pairs)");
    if (!(!window_pattern.empty()))
      return Status::error(StatusCode::invalid_argument, op, "window_pattern must not be empty");
    for (char c : window_pattern)
      if (!(c == 'S' || c == 'L'))
        return Status::error(StatusCode::invalid_argument, op, "window_pattern '", window_pattern,
                             "' may only contain 'S' and 'L'");
    if (!(bos_id >= -1 && bos_id < vocab_size))
      return Status::error(StatusCode::invalid_argument, op,
                           "bos_id must be -1 (the last id) or in [0, vocab_size = ", vocab_size, "), got ", bos_id);
    if (!(std::isfinite(logit_softcap) && logit_softcap > 0))
      return Status::error(StatusCode::invalid_argument, op, "logit_softcap must be a finite number > 0, got ",
                           logit_softcap);
    if (!(mem_offset >= 1))
      return Status::error(StatusCode::invalid_argument, op, "mem_offset (the memory offset k) must be >= 1, got ",
                           mem_offset);
    // Upper bounds: a value past them is a damaged file or a typo, and would overflow the sizes
    // derived from it (rows of T + 1 tokens, V_p x d tables) or ask for absurd memory.
    if (!(sequence_len <= max_sequence_len))
      return Status::error(StatusCode::invalid_argument, op, "sequence_len must be <= ", max_sequence_len, ", got ",
                           sequence_len);
    if (!(vocab_size <= max_vocab_size))
      return Status::error(StatusCode::invalid_argument, op, "vocab_size must be <= ", max_vocab_size, ", got ",
                           vocab_size);
    if (!(n_layer <= max_layers))
      return Status::error(StatusCode::invalid_argument, op, "n_layer must be <= ", max_layers, ", got ", n_layer);
    if (!(n_embd <= max_embd))
      return Status::error(StatusCode::invalid_argument, op, "n_embd must be <= ", max_embd, ", got ", n_embd);
    if (!(mem_offset <= sequence_len))
      return Status::error(StatusCode::invalid_argument, op,
                           "mem_offset (the memory offset k) must be <= sequence_len (", sequence_len,
                           "): position t reads the state of t - k, got ", mem_offset);
    if (!(ve_gate_channels >= 0 && ve_gate_channels <= n_embd))
      return Status::error(StatusCode::invalid_argument, op, "ve_gate_channels must be in [0, n_embd = ", n_embd,
                           "], got ", ve_gate_channels);
    return {};
  }
  /// Throws a clear error for an inconsistent configuration.
  void validate() const { throw_if_error(status()); }
};

namespace detail {
/// The presets of spec §10, one row each (n_kv_head = n_head): tiny, small, medium (CPU, bytes:
/// 256 + BOS ids) and d12, d20, d24 (GPU, a 32,768-id BPE tokenizer).
struct PresetSizes {
  std::string_view name;
  index_t n_layer, n_embd, n_head, sequence_len, vocab_size;
};
inline constexpr std::array<PresetSizes, 6> presets{{
    {"tiny", 4, 128, 4, 128, 257},
    {"small", 6, 256, 4, 256, 257},
    {"medium", 8, 512, 8, 256, 257},
    {"d12", 12, 768, 6, 2048, 32768},
    {"d20", 20, 1280, 10, 2048, 32768},
    {"d24", 24, 1536, 12, 2048, 32768},
}};
}  // namespace detail

/// The names preset() takes, in the order of spec §10: tiny, small, medium, d12, d20, d24.
inline std::vector<std::string_view> preset_names() {
  std::vector<std::string_view> names;
  for (const detail::PresetSizes& p : detail::presets) names.push_back(p.name);
  return names;
}

/// The preset `name` (one of preset_names()).
inline ModelConfig preset(std::string_view name) {
  for (const detail::PresetSizes& p : detail::presets)
    if (p.name == name) {
      ModelConfig c;
      c.n_layer = p.n_layer, c.n_embd = p.n_embd, c.n_head = c.n_kv_head = p.n_head;
      c.sequence_len = p.sequence_len, c.vocab_size = p.vocab_size;
      return c;
    }
  std::string known;
  for (const std::string_view n : preset_names()) known += (known.empty() ? "" : ", ") + std::string(n);
  ::lrt::throw_error("config", detail::str_cat("unknown preset '", name, "' (known: ", known, ")"));
}

}  // namespace v0
}  // namespace lrt
