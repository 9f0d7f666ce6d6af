// lrt/core/error.hpp: the one exception type lrt throws, and the check helper.
// Every message starts with the operation in brackets and names the shapes involved:
//   [matmul] inner dims differ: (2, 3) vs (4, 5)
// Host-only (no fmt here: CUDA translation units include this header too).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "config.hpp"

namespace lrt {
inline namespace v0 {

/// Raised for every runtime error in lrt: bad shapes, bad arguments, backend failures.
class Error : public std::runtime_error {
 public:
  Error(std::string op, const std::string& what) : std::runtime_error("[" + op + "] " + what), op_(std::move(op)) {}
  /// The operation that failed, e.g. "matmul".
  const std::string& op() const noexcept { return op_; }

 private:
  std::string op_;
};

namespace detail {
inline std::string str_cat() { return {}; }
template <class A, class... Rest>
std::string str_cat(const A& a, const Rest&... rest) {
  std::string s;
  if constexpr (std::is_convertible_v<const A&, std::string>) {
    s = std::string(a);
  } else if constexpr (std::is_convertible_v<const A&, std::string_view>) {
    s = std::string(std::string_view(a));
  } else if constexpr (std::is_same_v<A, char>) {
    s = std::string(1, a);
  } else if constexpr (std::is_arithmetic_v<A>) {
    s = std::to_string(a);
  } else {
    s = to_string(a);  // ADL: Shape, ...
  }
  return s + str_cat(rest...);
}
}  // namespace detail

namespace detail {
/// check's throwing half, out of line and cold: the inlined test stays one branch, and the
/// optimizer knows that the failing path ends there (in a large translation unit GCC may
/// otherwise leave check itself out of line and then warn about the indices it guards).
template <class... Parts>
[[noreturn]] LRT_COLD void fail_check(const char* op, const Parts&... parts) {
  throw Error(op, str_cat(parts...));
}
}  // namespace detail

/// Throws lrt::Error("[op] " + concatenated parts) unless cond holds.
template <class... Parts>
LRT_ALWAYS_INLINE void check(bool cond, const char* op, const Parts&... parts) {
  if (!cond) [[unlikely]]
    detail::fail_check(op, parts...);
}

}  // namespace v0
}  // namespace lrt
