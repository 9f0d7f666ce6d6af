// lrt/core/status.hpp: Status, the result of an lrt call that reports its errors as a value
// instead of throwing (the decode-only entry points, for builds without exceptions; see
// core/error.hpp). A Status holds a code and the same "[op] message" text an lrt::Error would
// have, in a fixed buffer: making one allocates nothing.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "config.hpp"
#include "error.hpp"
#include "shape.hpp"

namespace lrt {
inline namespace v0 {

enum class StatusCode {
  ok = 0,
  invalid_argument,  // a bad value from the caller: a token id, a size, a mode, an option
  bad_file,          // a file that cannot be read or mapped, or does not hold what it must
  state,             // a call in the wrong state: the context is full, no prefill yet
  out_of_memory,     // an allocation failed, or a caller's arena is too small
};

inline constexpr const char* to_string(StatusCode c) noexcept {
  switch (c) {
    case StatusCode::ok:
      return "ok";
    case StatusCode::invalid_argument:
      return "invalid argument";
    case StatusCode::bad_file:
      return "bad file";
    case StatusCode::state:
      return "state";
    case StatusCode::out_of_memory:
      return "out of memory";
  }
  return "unknown";
}

/// A code and a message ("[op] what", truncated to the buffer, NUL-terminated).
class Status {
 public:
  static constexpr std::size_t capacity = 256;

  Status() noexcept = default;
  bool ok() const noexcept { return code_ == StatusCode::ok; }
  explicit operator bool() const noexcept { return ok(); }
  StatusCode code() const noexcept { return code_; }
  const char* message() const noexcept { return text_; }
  /// The operation that failed ("" when ok).
  const char* op() const noexcept { return op_; }
  /// The message after "[op] ".
  const char* what() const noexcept { return text_ + (ok() ? 0 : std::strlen(op_) + 3); }

  /// A failure: "[op] " followed by the parts (strings, numbers, shapes), as check() words it.
  template <class... Parts>
  static Status error(StatusCode code, const char* op, const Parts&... parts) noexcept {
    Status s;
    s.code_ = code;
    s.op_ = op ? op : "";
    s.put("[");
    s.put(op);
    s.put("] ");
    (s.put(parts), ...);
    return s;
  }

 private:
  void put_text(const char* p, std::size_t n) noexcept {
    const std::size_t room = capacity - 1 - len_;
    n = n < room ? n : room;
    std::memcpy(text_ + len_, p, n);
    len_ += n;
    text_[len_] = '\0';
  }
  void put(std::string_view s) noexcept { put_text(s.data(), s.size()); }
  void put(const char* s) noexcept { put(std::string_view(s ? s : "(null)")); }
  void put(char c) noexcept { put_text(&c, 1); }
  void put(bool b) noexcept { put(b ? "true" : "false"); }
  template <class A>
  requires std::is_arithmetic_v<A>
  void put(A a) noexcept {
    char buf[48];
    const auto r = std::to_chars(buf, buf + sizeof buf, a);
    put_text(buf, r.ec == std::errc() ? static_cast<std::size_t>(r.ptr - buf) : 0);
  }
  template <int R>
  void put(const Shape<R>& s) noexcept {
    put("(");
    for (int i = 0; i < R; ++i) {
      if (i) put(", ");
      put(s[i]);
    }
    put(")");
  }

  StatusCode code_ = StatusCode::ok;
  const char* op_ = "";  // a string literal
  std::size_t len_ = 0;
  char text_[capacity] = {};
};

/// Throws lrt::Error(op, what) unless the status is ok (the throwing API over a status one; without
/// exceptions: the error handler, core/error.hpp).
inline void throw_if_error(const Status& s) {
  if (!s.ok()) [[unlikely]]
    throw_error(s.op(), s.what());
}

}  // namespace v0
}  // namespace lrt
