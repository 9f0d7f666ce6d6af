// lrt/tokenizer/patterns.hpp: the built-in split patterns of the pre-tokenizer, by name.
//   auto re = lrt::tok::Regex::compile(lrt::tok::builtin_pattern("nanochat"));  // the library's default
//   for (std::string_view name : lrt::tok::builtin_pattern_names()) ...          // gpt2 cl100k o200k nanochat
// Rules:
// - gpt2, cl100k and o200k are tiktoken's patterns of gpt2, cl100k_base and o200k_base (tiktoken 1.0.22);
//   nanochat is nanochat's (cl100k's with \p{N}{1,2}, possessive quantifiers and single newlines).
//   The strings are copied exactly from scripts/tokenizer_vectors.mjs, which checks them against
//   tiktoken's own when it writes the test vectors.
// - nanochat is the default (kDefaultPattern).
// - An unknown name throws lrt::Error (op "tokenizer") listing the known ones; pattern_source()
//   reads a user's argument: a name (letters, digits, '-', '_' only) must be a built-in's, anything
//   else is a custom regex.
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {

namespace detail {
struct NamedPattern {
  std::string_view name;
  std::string_view pattern;
};
// clang-format off
inline constexpr std::array<NamedPattern, 4> kBuiltinPatterns{{
    {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"},
    {"cl100k", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"o200k", R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"nanochat", R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"},
}};
// clang-format on
inline constexpr std::array<std::string_view, 4> kBuiltinPatternNames{"gpt2", "cl100k", "o200k", "nanochat"};
}  // namespace detail

/// The name of the library's default split pattern.
inline constexpr std::string_view kDefaultPattern = "nanochat";

/// The built-in pattern names: gpt2, cl100k, o200k, nanochat.
inline std::span<const std::string_view> builtin_pattern_names() noexcept { return detail::kBuiltinPatternNames; }

/// The regex of a built-in pattern; throws lrt::Error (op "tokenizer") for an unknown name.
inline std::string_view builtin_pattern(std::string_view name) {
  for (const auto& p : detail::kBuiltinPatterns)
    if (p.name == name) return p.pattern;
  ::lrt::throw_error("tokenizer",
                     ::lrt::detail::str_cat("unknown pattern '", name, "' (known: gpt2, cl100k, o200k, nanochat)"));
}

/// Whether a pattern argument is a name rather than a regex: non-empty and only ASCII letters,
/// digits, '-' and '_' (no regex worth splitting text with is spelled that way).
inline bool is_pattern_name(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
  return true;
}

/// The regex a pattern argument stands for: a built-in's for its name, else the argument itself
/// (a custom regex). A name (is_pattern_name) that is no built-in is an lrt::Error, so that a
/// typo such as "nanochatt" is not taken for a regex matching that word.
inline std::string_view pattern_source(std::string_view name_or_regex) {
  if (is_pattern_name(name_or_regex)) return builtin_pattern(name_or_regex);
  return name_or_regex;
}

}  // namespace tok
}  // namespace v0
}  // namespace lrt
