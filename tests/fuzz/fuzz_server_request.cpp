// libFuzzer target for lrt-server's request parsing (examples/tools/server/api.hpp), what a
// client on the network controls: the input is read as an HTTP request (parse_head with small
// limits; a complete head's body is parsed as JSON and then as a completion and as a chat
// request), and its bytes go through the UTF-8 cleaner and the stop-string scan. An ApiError or
// lrt::Error is the clear answer to bad input; anything else escaping, a sanitizer report, or a
// broken invariant (std::abort) is a bug:
//   - parse_head never reads past the input and reports a body offset within it;
//   - append_utf8's output is well-formed UTF-8, is the same when the input is fed in two pieces
//     (the first held back at an incomplete sequence), and keeps well-formed input unchanged;
//   - StopScan::safe never holds back more than the longest stop string;
//   - the framing (server/framing.hpp) finds the same requests, in the same order, and ends in the
//     same state whether the bytes arrive at once or in pieces the input picks (as a kept-alive
//     connection receives pipelined requests); each request's body is its Content-Length; an
//     error stays an error.
// tests/fuzz/corpus_server: the seeds.
//   ./lrt_fuzz_server_request -max_len=4096 corpus_server/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <vector>

#include "server/api.hpp"
#include "server/framing.hpp"

namespace {
bool well_formed(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0; i < s.size();) {
    const int k = server::utf8_sequence(p + i, s.size() - i);
    if (k <= 0) return false;
    i += static_cast<std::size_t>(k);
  }
  return true;
}

/// The requests the framing takes from `bytes` fed in pieces (sizes from `cuts`, cycled; empty:
/// all at once), then how it ended (none or error) and, after an error, its status.
struct Framed {
  std::vector<std::string> requests;  // method, target, keep-alive and body of each
  server::RequestFramer::Event last = server::RequestFramer::Event::none;
  int status = 0;
};
Framed frame(std::string_view bytes, std::string_view cuts) {
  const server::HeadLimits lim{512, 1024};
  server::RequestFramer f(lim);
  Framed out;
  std::size_t at = 0, k = 0;
  while (at < bytes.size() || at == 0) {
    const std::size_t n = cuts.empty() ? bytes.size() : 1 + static_cast<unsigned char>(cuts[k++ % cuts.size()]) % 64;
    f.feed(bytes.substr(at, n));
    at += std::min(n, bytes.size() - at);
    for (;;) {
      server::HttpRequest req;
      server::ApiError err;
      const auto ev = f.next(req, err);
      if (ev == server::RequestFramer::Event::request) {
        if (req.body.size() != req.content_length || req.content_length > lim.max_body) std::abort();
        out.requests.push_back(req.method + " " + req.target + (server::wants_keep_alive(req) ? " keep " : " close ") +
                               req.body);
        continue;
      }
      out.last = ev;
      if (ev == server::RequestFramer::Event::error) {
        if (err.status < 400 || err.status > 505) std::abort();
        server::HttpRequest again;
        server::ApiError err2;
        if (f.next(again, err2) != server::RequestFramer::Event::error || err2.status != err.status) std::abort();
        out.status = err.status;
      }
      break;
    }
    if (out.last == server::RequestFramer::Event::error || bytes.empty()) break;
    (void)f.wants_continue();
  }
  if (f.buffered() > bytes.size()) std::abort();
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  server::HttpRequest req;
  server::ApiError err;
  std::size_t head = 0;
  const server::HeadLimits lim{1024, 2048};
  if (server::parse_head(bytes, lim, req, head, err) == server::HeadState::complete) {
    if (head > bytes.size() || req.path.empty() || req.path[0] != '/') std::abort();
    (void)server::query_value(req.query, "prompt");
    const std::string_view body = bytes.substr(head);
    try {
      const lrt::json::Value v = lrt::json::parse(body, "body");
      server::CompletionLimits cl;
      cl.vocab_size = 300;
      try {
        const server::Completion c = server::parse_completion(v, cl);
        if (c.max_tokens < 0 || c.stop.size() > cl.max_stop) std::abort();
      } catch (const server::ApiError& e) {
        if (e.status != 400 || e.message.empty()) std::abort();
        if (!well_formed(server::error_body(e))) std::abort();
      }
      try {
        const server::Completion c = server::parse_chat(v, cl);
        if (!c.chat || c.prompt_text.empty()) std::abort();
      } catch (const server::ApiError& e) {
        if (e.status != 400) std::abort();
      }
    } catch (const lrt::Error&) {
    }
  }
  // Framing: at once, and in pieces of sizes read from the input's first bytes.
  {
    const Framed whole = frame(bytes, {});
    const Framed pieces = frame(bytes, bytes.substr(0, std::min<std::size_t>(size, 8)));
    if (pieces.requests != whole.requests || pieces.last != whole.last || pieces.status != whole.status) std::abort();
  }
  // UTF-8: whole, and in two pieces at a point the input picks.
  const std::string whole = server::valid_utf8(bytes);
  if (!well_formed(whole)) std::abort();
  if (well_formed(bytes) && whole != bytes) std::abort();
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  std::string pieces;
  const std::size_t used = server::append_utf8(pieces, bytes.substr(0, cut), false);
  if (used > cut || cut - used > 3) std::abort();
  server::append_utf8(pieces, bytes.substr(used), true);
  if (pieces != whole) std::abort();
  // Stop strings: two taken from the input.
  server::StopScan scan;
  scan.stops = {std::string(bytes.substr(0, std::min<std::size_t>(size, 3))), "\nUser:"};
  if (scan.stops[0].empty()) scan.stops[0] = "x";
  const std::size_t safe = scan.safe(bytes);
  if (safe > size || size - safe > 5) std::abort();
  const std::size_t at = scan.scan(bytes);
  if (at != std::string_view::npos && at > size) std::abort();
  return 0;
}
