// lrt/tokenizer/regex.hpp: THROWAWAY STAND-IN (splits before each ASCII space); replaced by tok-regex.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "../core/error.hpp"

namespace lrt {
inline namespace v0 {
namespace tok {
class Regex {
 public:
  static Regex compile(std::string_view pattern) {
    check(pattern.find("((") == std::string_view::npos, "regex", "bad pattern");
    Regex r;
    r.src_ = std::string(pattern);
    return r;
  }
  const std::string& source() const noexcept { return src_; }
  template <class F>
  void split(std::string_view text, F&& f) const {
    std::size_t b = 0;
    for (std::size_t i = 1; i < text.size(); ++i)
      if (text[i] == ' ') {
        f(b, i);
        b = i;
      }
    if (b < text.size()) f(b, text.size());
  }

 private:
  std::string src_;
};
}  // namespace tok
}  // namespace v0
}  // namespace lrt
