// libFuzzer target for lrt-server's request parsing (examples/tools/server/api.hpp), what a
// client on the network controls: the input is read as an HTTP request (parse_head with small
// limits; a complete head's body is parsed as JSON and then as a completion and as a chat
// request), and its bytes go through the UTF-8 cleaner and the stop-string scan. An ApiError or
// lrt::Error is the clear answer to bad input; anything else escaping, a sanitizer report, or a
// broken invariant (std::abort) is a bug:
//   - parse_head never reads past the input and reports a body offset within it;
//   - append_utf8's output is well-formed UTF-8, is the same when the input is fed in two pieces
//     (the first held back at an incomplete sequence), and keeps well-formed input unchanged;
//   - StopScan::safe never holds back more than the longest stop string.
// tests/fuzz/corpus_server: the seeds.
//   ./lrt_fuzz_server_request -max_len=4096 corpus_server/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/api.hpp"

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
