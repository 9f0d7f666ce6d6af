// lrt/tokenizer/patterns.hpp: THROWAWAY STAND-IN; replaced by tok-regex.
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {
inline std::span<const std::string_view> builtin_pattern_names() {
  static constexpr std::array<std::string_view, 4> names{"gpt2", "cl100k", "o200k", "nanochat"};
  return names;
}
inline std::string_view builtin_pattern(std::string_view name) {
  if (name == "gpt2") return "gpt2-stand-in";
  if (name == "cl100k") return "cl100k-stand-in";
  if (name == "o200k") return "o200k-stand-in";
  if (name == "nanochat") return "nanochat-stand-in";
  throw Error("tokenizer", "unknown pattern " + std::string(name));
}
}  // namespace tok
}  // namespace v0
}  // namespace lrt
