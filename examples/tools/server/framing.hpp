// lrt-server's HTTP/1.1 framing without I/O: the bytes a connection receives go in, whole
// requests (line, headers, body of Content-Length bytes) come out one at a time, in order. The
// transport (http.hpp) feeds it what it reads and asks for the next request when the previous
// one has been answered, so that pipelined requests are served in order; the fuzzer
// (tests/fuzz/fuzz_server_request.cpp) feeds it arbitrary bytes in arbitrary pieces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "api.hpp"

namespace server {

/// Whether a request leaves its connection open for the next one: HTTP/1.1 unless it sends
/// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
inline bool wants_keep_alive(const HttpRequest& req) {
  bool close = false, keep = false;
  if (const std::string* c = req.header("connection")) {
    const std::string v = detail::lower(*c);
    for (std::size_t at = 0; at <= v.size();) {
      std::size_t comma = v.find(',', at);
      if (comma == std::string::npos) comma = v.size();
      const std::string_view token = detail::trim(std::string_view(v).substr(at, comma - at));
      close = close || token == "close";
      keep = keep || token == "keep-alive";
      at = comma + 1;
    }
  }
  if (close) return false;
  return req.version == "HTTP/1.1" || keep;
}

class RequestFramer {
 public:
  enum class Event { none, request, error };

  explicit RequestFramer(const HeadLimits& lim = {}) : lim_(lim) {}

  /// Appends received bytes.
  void feed(std::string_view bytes) { buf_.append(bytes); }

  /// The next whole request at the front of what was fed:
  ///  - request: `req` holds it, its bytes are consumed (bytes after it stay for the next call);
  ///  - none: more bytes are needed;
  ///  - error: `error` says what to answer (400, 413, 431, 501, 505); the stream cannot be
  ///    resynchronised, so the connection closes after the answer, and every later call says the
  ///    same.
  Event next(HttpRequest& req, ApiError& error) {
    if (failed_) return error = error_, Event::error;
    if (!head_done_) {
      // Empty lines between requests (RFC 9112 2.2) are dropped here, so that a client that ends
      // a body with an extra CRLF does not look like the start of a request.
      std::size_t skip = 0;
      while (skip < buf_.size() && (buf_[skip] == '\r' || buf_[skip] == '\n')) ++skip;
      if (skip > 0) buf_.erase(0, skip);
      if (buf_.empty()) return Event::none;
      switch (parse_head(buf_, lim_, head_, head_bytes_, error)) {
        case HeadState::incomplete:
          return Event::none;
        case HeadState::bad:
          failed_ = true, error_ = error;
          return Event::error;
        case HeadState::complete:
          head_done_ = true;
          break;
      }
    }
    if (buf_.size() - head_bytes_ < head_.content_length) return Event::none;
    req = std::move(head_);
    req.body = buf_.substr(head_bytes_, req.content_length);
    buf_.erase(0, head_bytes_ + req.content_length);
    head_ = HttpRequest{};
    head_done_ = false, continued_ = false;
    return Event::request;
  }

  /// Whether a byte of a request not yet taken by next() has arrived.
  bool started() const {
    for (char c : buf_)
      if (c != '\r' && c != '\n') return true;
    return false;
  }
  /// Whether the client waits for `100 Continue` before it sends the body: the head is complete,
  /// it asked (Expect: 100-continue), the body is not all here, and nobody answered yet. Once.
  bool wants_continue() {
    if (!head_done_ || continued_ || buf_.size() - head_bytes_ >= head_.content_length) return false;
    const std::string* e = head_.header("expect");
    if (!e || detail::lower(*e) != "100-continue") return false;
    return continued_ = true;
  }
  /// Whether the head of the request being received is complete (its body is not).
  bool in_body() const { return head_done_; }
  /// Bytes fed and not yet taken.
  std::size_t buffered() const { return buf_.size(); }

 private:
  HeadLimits lim_;
  std::string buf_;
  HttpRequest head_;  // parsed head of the request being received
  std::size_t head_bytes_ = 0;
  bool head_done_ = false, continued_ = false, failed_ = false;
  ApiError error_;
};

}  // namespace server
