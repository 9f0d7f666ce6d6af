// lrt/backend/rope_table.hpp: the rotary embedding's table rows (spec §2.2), computed on the host
// for any device: cos and sin of pos * 10000^(-2j/Dh), j < Dh/2, in fp32 as the release computes
// them, optionally rounded to bf16 (the release's tables are bf16). One row at a time, into the
// caller's memory, so that a decoder fills its row in place; autodiff/nn.hpp's rope_tables builds
// whole tables from it. Shapes: Dh head dim (even).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "../core/config.hpp"

namespace lrt {
inline namespace v0 {

/// Rounds a float to the nearest bfloat16 (ties to even) and back.
inline float round_to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, nan
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  return std::bit_cast<float>(u);
}

/// The table row of position pos >= 0: cos[j], sin[j] for j < Dh / 2 (Dh even; not checked here).
template <class T>
void rope_row(index_t pos, index_t Dh, bool bf16_tables, T* cos, T* sin) noexcept {
  for (index_t j = 0; j < Dh / 2; ++j) {
    const float inv = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(Dh));
    const float th = static_cast<float>(pos) * inv;
    float c = std::cos(th), s = std::sin(th);
    if (bf16_tables) {
      c = round_to_bf16(c);
      s = round_to_bf16(s);
    }
    cos[j] = static_cast<T>(c);
    sin[j] = static_cast<T>(s);
  }
}

}  // namespace v0
}  // namespace lrt
