// lrt/core/error.hpp: the one exception type lrt throws, and the check helper.
// Every message starts with the operation in brackets and names the shapes involved:
//   [matmul] inner dims differ: (2, 3) vs (4, 5)
// Host-only (no fmt here: CUDA translation units include this header too).
//
// Without exceptions (-fno-exceptions: LRT_EXCEPTIONS is 0) nothing can be thrown: an error ends
// in the error handler instead, which gets the operation and the message and must not return
// (the default writes "lrt: [op] message" to stderr and aborts). The decode-only entry points
// (decode/lean.hpp's try_ functions, the C API) check their inputs first and return a Status
// (core/status.hpp), so that in such a build only an internal inconsistency reaches the handler.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "config.hpp"

namespace lrt {
inline namespace v0 {

/// Raised for every runtime error in lrt: bad shapes, bad arguments, backend failures.
class LRT_API Error : public std::runtime_error {
 public:
  Error(std::string op, const std::string& what) : std::runtime_error("[" + op + "] " + what), op_(std::move(op)) {}
  /// The operation that failed, e.g. "matmul".
  const std::string& op() const noexcept { return op_; }

 private:
  std::string op_;
};

namespace detail {
/// A message part as what it prints, in few types: text as a string_view, a character, integers
/// as (unsigned) long long, floating point as double, anything else (Shape, ...) as it is. Every
/// call site of check passes its own mix of literal lengths and integer types; normalised, those
/// mixes share one fail_check and one str_cat instead of instantiating (and compiling) each.
template <class A>
decltype(auto) msg_part(const A& a) {
  if constexpr (std::is_same_v<A, char>) {
    return a;
  } else if constexpr (std::is_convertible_v<const A&, const char*>) {  // literals, char arrays, pointers
    const char* p = a;
    return std::string_view(p != nullptr ? p : "(null)");
  } else if constexpr (std::is_convertible_v<const A&, std::string_view>) {
    return std::string_view(a);
  } else if constexpr (std::is_convertible_v<const A&, std::string>) {
    return std::string(a);
  } else if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    return static_cast<long long>(a);
  } else if constexpr (std::is_integral_v<A>) {  // unsigned, bool ("1", "0" as std::to_string)
    return static_cast<unsigned long long>(a);
  } else if constexpr (std::is_same_v<A, float> || std::is_same_v<A, double>) {
    return static_cast<double>(a);
  } else {
    return a;  // by reference: printed by append_part's ADL to_string
  }
}
inline void append_part(std::string& s, std::string_view v) { s.append(v); }
inline void append_part(std::string& s, char c) { s.push_back(c); }
inline void append_part(std::string& s, long long v) { s += std::to_string(v); }
inline void append_part(std::string& s, unsigned long long v) { s += std::to_string(v); }
inline void append_part(std::string& s, double v) { s += std::to_string(v); }
inline void append_part(std::string& s, long double v) { s += std::to_string(v); }
template <class A>
void append_part(std::string& s, const A& a) {
  s += to_string(a);  // ADL: Shape, ...
}
/// The parts (already msg_part's) one after another.
template <class... Parts>
std::string cat_parts(const Parts&... parts) {
  std::string s;
  (append_part(s, parts), ...);
  return s;
}
/// The parts one after another: text as it is, numbers as std::to_string writes them, and other
/// types through to_string (found by ADL).
template <class... Parts>
std::string str_cat(const Parts&... parts) {
  return cat_parts(msg_part(parts)...);
}
}  // namespace detail

/// What an error does in a build without exceptions: called with the operation and the message,
/// it must not return (it may log, reset the device, longjmp out of C code that holds no C++
/// objects, ...); when it does, lrt aborts.
using ErrorHandler = void (*)(const char* op, const char* message);

namespace detail {
inline void default_error_handler(const char* op, const char* message) {
  std::fprintf(stderr, "lrt: [%s] %s\n", op, message);
  std::fflush(stderr);
}
LRT_API inline ErrorHandler& error_handler_slot() noexcept {
  static ErrorHandler h = &default_error_handler;
  return h;
}
}  // namespace detail

/// Installs the handler a build without exceptions calls on an error (nullptr: the default);
/// returns the one before. Has no effect where lrt throws (LRT_EXCEPTIONS).
inline ErrorHandler set_error_handler(ErrorHandler h) noexcept {
  return std::exchange(detail::error_handler_slot(), h ? h : &detail::default_error_handler);
}

/// Throws lrt::Error(op, what); without exceptions, calls the error handler and aborts.
[[noreturn]] LRT_COLD inline void throw_error(std::string op, const std::string& what) {
#if LRT_EXCEPTIONS
  throw Error(std::move(op), what);
#else
  detail::error_handler_slot()(op.c_str(), what.c_str());
  std::abort();
#endif
}

namespace detail {
/// check's throwing half, out of line and cold: the inlined test stays one branch, and the
/// optimizer knows that the failing path ends there (in a large translation unit GCC may
/// otherwise leave check itself out of line and then warn about the indices it guards).
/// Its parts are msg_part's (check normalises them), so call sites share its instantiations.
template <class... Parts>
[[noreturn]] LRT_COLD void fail_check(const char* op, const Parts&... parts) {
  throw_error(op, cat_parts(parts...));
}
}  // namespace detail

/// Throws lrt::Error("[op] " + concatenated parts) unless cond holds (see throw_error).
template <class... Parts>
LRT_ALWAYS_INLINE void check(bool cond, const char* op, const Parts&... parts) {
  if (!cond) [[unlikely]]
    detail::fail_check(op, detail::msg_part(parts)...);
}

}  // namespace v0
}  // namespace lrt
