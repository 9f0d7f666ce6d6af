// lrt-server's protocol layer, free of sockets and of the model (so that the fuzz target
// tests/fuzz/fuzz_server_request.cpp and the benchmark use it as the server does):
//   - parse_head: an HTTP/1.1 request line and headers, with the limits the server enforces;
//   - parse_completion / parse_chat: a JSON body into a Completion (OpenAI's schema), every bad
//     value an ApiError naming the parameter;
//   - Utf8Text: the bytes of generated tokens as valid UTF-8 (ill-formed sequences become U+FFFD,
//     one per maximal subpart, as WHATWG's TextDecoder does), incomplete tails held back;
//   - StopScan: where a stop string ends the text, and how much of the text may be sent while a
//     stop string could still begin in it;
//   - error_body: OpenAI's error object.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <lrt/io/json.hpp>

namespace server {

/// An answer that is an error: an HTTP status and OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

/// OpenAI's error object: {"error": {"message", "type", "param", "code"}}.
inline std::string error_body(const ApiError& e) {
  lrt::json::Value err = lrt::json::Value::object();
  err["message"] = e.message;
  err["type"] = e.type;
  err["param"] = e.param.empty() ? lrt::json::Value() : lrt::json::Value(e.param);
  err["code"] = e.code.empty() ? lrt::json::Value() : lrt::json::Value(e.code);
  lrt::json::Value v = lrt::json::Value::object();
  v["error"] = std::move(err);
  return v.dump();
}

/// The reason phrase of the statuses the server sends.
inline const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

// ------------------------------------------------------------------------------------------ HTTP

/// A request's line and headers (names lower-cased) and, once read, its body.
struct HttpRequest {
  std::string method, target, path, query, version;
  std::vector<std::pair<std::string, std::string>> headers;
  std::size_t content_length = 0;
  std::string body;
  /// The value of header `name` (lower case), or nullptr.
  const std::string* header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return &v;
    return nullptr;
  }
};

/// What parse_head found in the bytes read so far.
enum class HeadState { incomplete, complete, bad };

struct HeadLimits {
  std::size_t max_head = 16 * 1024;        // request line and headers
  std::size_t max_body = 1 * 1024 * 1024;  // Content-Length
};

namespace detail {
inline bool is_tchar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace detail

/// Parses the request line and headers at the front of `buf` (the bytes read so far). complete:
/// `out` is filled and `head_bytes` is where the body starts; incomplete: read more (unless buf
/// is already past max_head, then bad with 431); bad: `error` says why (400, 411, 413, 431,
/// 501, 505). Lines end in CRLF (a bare LF is taken too).
inline HeadState parse_head(std::string_view buf, const HeadLimits& lim, HttpRequest& out, std::size_t& head_bytes,
                            ApiError& error) {
  const auto bad = [&](int status, std::string msg) {
    error = ApiError{status, std::move(msg), "invalid_request_error", "", ""};
    return HeadState::bad;
  };
  // The end of the head: an empty line.
  std::size_t end = std::string_view::npos, body = 0;
  for (std::size_t i = 0; i < buf.size() && i <= lim.max_head; ++i) {
    if (buf[i] != '\n') continue;
    if (i + 1 < buf.size() && buf[i + 1] == '\n') {
      end = i + 1, body = i + 2;
      break;
    }
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
      end = i + 1, body = i + 3;
      break;
    }
  }
  if (end == std::string_view::npos) {
    // An end that starts at max_head is seen with two bytes more; before them, the answer would
    // depend on how the bytes arrived (found by fuzzing the framing in pieces).
    if (buf.size() > lim.max_head + 2)
      return bad(431, "the request line and headers are longer than " + std::to_string(lim.max_head) + " bytes");
    return HeadState::incomplete;
  }
  if (end > lim.max_head)
    return bad(431, "the request line and headers are longer than " + std::to_string(lim.max_head) + " bytes");
  out = HttpRequest{};
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < end;) {
    std::size_t nl = buf.find('\n', at);
    std::string_view line = buf.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    at = nl + 1;
  }
  while (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());  // RFC 9112 2.2: leading empty lines
  if (lines.empty()) return bad(400, "empty request");
  // METHOD SP TARGET SP VERSION
  const std::string_view rl = lines[0];
  const std::size_t s1 = rl.find(' '), s2 = s1 == std::string_view::npos ? s1 : rl.find(' ', s1 + 1);
  if (s1 == std::string_view::npos || s2 == std::string_view::npos || rl.find(' ', s2 + 1) != std::string_view::npos)
    return bad(400, "malformed request line");
  const std::string_view method = rl.substr(0, s1), target = rl.substr(s1 + 1, s2 - s1 - 1),
                         version = rl.substr(s2 + 1);
  if (method.empty() || !std::all_of(method.begin(), method.end(), detail::is_tchar))
    return bad(400, "malformed request method");
  if (target.empty() || target.front() != '/') return bad(400, "the request target must be a path starting with '/'");
  for (char c : target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return bad(400, "the request target has a control or non-ASCII character");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.substr(0, 5) == "HTTP/") return bad(505, "HTTP/1.1 or HTTP/1.0 only");
    return bad(400, "malformed HTTP version");
  }
  out.method = method, out.target = target, out.version = version;
  const std::size_t q = target.find('?');
  out.path = target.substr(0, q);
  if (q != std::string_view::npos) out.query = target.substr(q + 1);
  bool have_length = false;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') return bad(400, "obsolete header line folding");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad(400, "malformed header line");
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), detail::is_tchar)) return bad(400, "malformed header name");
    const std::string_view value = detail::trim(line.substr(colon + 1));
    for (char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
        return bad(400, "a control character in header " + std::string(name));
    std::string key = detail::lower(name);
    if (key == "content-length") {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return bad(400, "malformed Content-Length");
      const std::size_t n = std::stoull(std::string(value));
      if (have_length && n != out.content_length) return bad(400, "two different Content-Length headers");
      have_length = true, out.content_length = n;
    } else if (key == "transfer-encoding") {
      return bad(501, "Transfer-Encoding is not supported: send the body with a Content-Length");
    }
    out.headers.emplace_back(std::move(key), std::string(value));
  }
  if (out.content_length > lim.max_body)
    return bad(413, "the body has " + std::to_string(out.content_length) + " bytes; the limit is " +
                        std::to_string(lim.max_body) + " (--max-body)");
  head_bytes = body;
  return HeadState::complete;
}

/// The value of `key` in a query string (a=1&b=2), percent-decoded ('+' is a space), or nullopt.
inline std::optional<std::string> query_value(std::string_view query, std::string_view key) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key) continue;
    std::string out;
    const std::string_view v = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '+') {
        out += ' ';
      } else if (v[i] == '%' && i + 2 < v.size() + 0 && hex(v[i + 1]) >= 0 && hex(v[i + 2]) >= 0) {
        out += static_cast<char>(hex(v[i + 1]) * 16 + hex(v[i + 2]));
        i += 2;
      } else {
        out += v[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

// ----------------------------------------------------------------------------------------- UTF-8

/// The length of the well-formed UTF-8 sequence at p[0..n) (1-4), 0 if it is a valid but
/// incomplete prefix of one (more bytes needed), or -k if its first k bytes are a maximal subpart
/// of an ill-formed sequence (k >= 1: replaced by one U+FFFD). Unicode 15, table 3-7.
inline int utf8_sequence(const unsigned char* p, std::size_t n) {
  const unsigned char b = p[0];
  if (b < 0x80) return 1;
  int len;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b >= 0xC2 && b <= 0xDF)
    len = 2;
  else if (b >= 0xE0 && b <= 0xEF)
    len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4)
    len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else
    return -1;
  for (int i = 1; i < len; ++i) {
    if (static_cast<std::size_t>(i) >= n) return 0;
    const unsigned char c = p[i];
    const bool ok = i == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return -i;
  }
  return len;
}

/// Appends bytes [0, n) of p to out as UTF-8, each maximal subpart of an ill-formed sequence as
/// U+FFFD; stops before an incomplete sequence at the end unless `final` (then it is one U+FFFD).
/// Returns the bytes consumed.
inline std::size_t append_utf8(std::string& out, std::string_view in, bool final) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t i = 0;
  while (i < in.size()) {
    const int k = utf8_sequence(p + i, in.size() - i);
    if (k > 0) {
      out.append(in.data() + i, static_cast<std::size_t>(k));
      i += static_cast<std::size_t>(k);
    } else if (k < 0) {
      out += "\xEF\xBF\xBD";
      i += static_cast<std::size_t>(-k);
    } else {
      if (!final) break;
      out += "\xEF\xBF\xBD";
      i = in.size();
    }
  }
  return i;
}

/// A token's bytes as a JSON key or string: the bytes when they are well-formed UTF-8, else
/// "bytes:" and each byte as \\xNN (so that distinct tokens stay distinct).
inline std::string token_display(std::string_view bytes) {
  std::string out;
  if (append_utf8(out, bytes, false) == bytes.size() && out == bytes) return out;
  out = "bytes:";
  static const char* hex = "0123456789abcdef";
  for (unsigned char b : bytes) out += "\\x", out += hex[b >> 4], out += hex[b & 15];
  return out;
}

/// Text as valid UTF-8 (append_utf8 with final = true).
inline std::string valid_utf8(std::string_view in) {
  std::string out;
  append_utf8(out, in, true);
  return out;
}

// ------------------------------------------------------------------------------------ generation

/// The decoding a request asks for: what the engine needs, parsed and checked.
struct Completion {
  bool chat = false;
  std::string prompt_text;                                 // the prompt as text (for a token prompt: empty)
  std::optional<std::vector<std::int64_t>> prompt_tokens;  // a prompt given as token ids
  std::int64_t max_tokens = 16;
  double temperature = 1.0, top_p = 1.0;
  std::int64_t top_k = 0;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false, include_usage = false;
  bool ignore_eos = false;   // a BOS (a new document) is "\n\n" in the text instead of the end
  int logprobs = -1;         // >= 0: each token's log-probability and the `logprobs` most likely
  bool cache_prompt = true;  // start from the longest cached prefix of the prompt (the same bits either way)
  std::string model;
};

/// The limits parse_completion checks against.
struct CompletionLimits {
  std::int64_t vocab_size = 0;        // token ids of a prompt: [0, vocab_size)
  std::int64_t max_tokens = 1 << 30;  // the largest max_tokens taken
  std::size_t max_stop = 4;           // stop strings (OpenAI: up to 4)
};

namespace detail {
inline ApiError bad_param(const std::string& param, std::string msg) {
  return ApiError{400, std::move(msg), "invalid_request_error", param, "invalid_value"};
}
inline const char* kind_text(const lrt::json::Value& v) {
  switch (v.kind()) {
    case lrt::json::Value::Kind::Null:
      return "null";
    case lrt::json::Value::Kind::Bool:
      return "a boolean";
    case lrt::json::Value::Kind::Number:
      return "a number";
    case lrt::json::Value::Kind::String:
      return "a string";
    case lrt::json::Value::Kind::Array:
      return "an array";
    default:
      return "an object";
  }
}
/// The member `key` unless absent or null.
inline const lrt::json::Value* member(const lrt::json::Value& body, std::string_view key) {
  const lrt::json::Value* v = body.find(key);
  return v && !v->is_null() ? v : nullptr;
}
inline double number(const lrt::json::Value& body, const char* key, double def, double lo, double hi,
                     bool lo_open = false) {
  const lrt::json::Value* v = member(body, key);
  if (!v) return def;
  if (!v->is_number()) throw bad_param(key, std::string(key) + " must be a number, got " + kind_text(*v));
  const double x = v->as_number();
  if (!(x >= lo && x <= hi) || (lo_open && x == lo))
    throw bad_param(key, std::string(key) + " must be in " + (lo_open ? "(" : "[") + lrt::json::Value(lo).dump() +
                             ", " + lrt::json::Value(hi).dump() + "], got " + v->dump());
  return x;
}
/// An integer parameter in [lo, hi]: a JSON number with an integral value (3 or 3.0, as clients
/// that hold every number as a double send it). A fraction is "must be an integer"; an integer
/// outside the range (2^70 included) is "must be in [lo, hi]".
inline std::int64_t integral(const lrt::json::Value& v, const char* key, std::int64_t lo, std::int64_t hi) {
  const auto range = [&] {
    return bad_param(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                              "], got " + v.dump());
  };
  if (!v.is_number()) throw bad_param(key, std::string(key) + " must be an integer, got " + kind_text(v));
  if (!v.is_integer()) {
    const double x = v.as_number();
    if (!std::isfinite(x) || x != std::trunc(x))
      throw bad_param(key, std::string(key) + " must be an integer, got " + v.dump());
    // -2^63 <= x < 2^63: within int64 (as_int's test); beyond it, out of any range we take.
    if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) throw range();
  }
  const std::int64_t x = v.as_int();
  if (x < lo || x > hi) throw range();
  return x;
}
inline std::int64_t integer(const lrt::json::Value& body, const char* key, std::int64_t def, std::int64_t lo,
                            std::int64_t hi) {
  const lrt::json::Value* v = member(body, key);
  return v ? integral(*v, key, lo, hi) : def;
}
inline bool boolean(const lrt::json::Value& body, const char* key, bool def) {
  const lrt::json::Value* v = member(body, key);
  if (!v) return def;
  if (!v->is_bool()) throw bad_param(key, std::string(key) + " must be true or false, got " + kind_text(*v));
  return v->as_bool();
}
/// A parameter this server does not implement: a 400 naming it unless it has its neutral value.
inline void unsupported(const lrt::json::Value& body, const char* key,
                        const std::function<bool(const lrt::json::Value&)>& neutral, const char* why) {
  const lrt::json::Value* v = member(body, key);
  if (v && !neutral(*v))
    throw ApiError{400, std::string(key) + " is not supported by lrt-server (" + why + ")", "invalid_request_error",
                   key, "unsupported_parameter"};
}
}  // namespace detail

/// The sampling and stopping parameters shared by completions and chat completions.
inline void parse_sampling(const lrt::json::Value& body, const CompletionLimits& lim, Completion& c) {
  using namespace detail;
  unsupported(
      body, "n", [](const lrt::json::Value& v) { return v.is_integer() && v.as_int() == 1; },
      "one choice per request: send n = 1 or leave it out");
  unsupported(
      body, "best_of", [](const lrt::json::Value& v) { return v.is_integer() && v.as_int() == 1; },
      "one choice per request");
  unsupported(
      body, "logit_bias", [](const lrt::json::Value& v) { return v.is_object() && v.members().empty(); },
      "no logit biases");
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    unsupported(
        body, k, [](const lrt::json::Value& v) { return v.is_number() && v.as_number() == 0; },
        "no repetition penalties");
  if (c.chat) {
    for (const char* k : {"logprobs", "top_logprobs"})
      unsupported(
          body, k, [](const lrt::json::Value& v) { return v.is_bool() && !v.as_bool(); },
          "log-probabilities come with /v1/completions");
  } else {
    c.logprobs = static_cast<int>(integer(body, "logprobs", -1, 0, 5));
  }
  if (const lrt::json::Value* m = member(body, "model")) {
    if (!m->is_string()) throw bad_param("model", std::string("model must be a string, got ") + kind_text(*m));
    c.model = m->as_string();
  }
  const char* max_key = c.chat && member(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  c.max_tokens = integer(body, max_key, 16, 0, lim.max_tokens);
  c.temperature = number(body, "temperature", 1.0, 0, 1e6);
  c.top_p = number(body, "top_p", 1.0, 0, 1, true);
  c.top_k = integer(body, "top_k", 0, 0, std::int64_t{1} << 30);
  if (const lrt::json::Value* s = member(body, "seed")) {
    c.seed = static_cast<std::uint64_t>(
        integral(*s, "seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
  }
  if (const lrt::json::Value* s = member(body, "stop")) {
    std::vector<const lrt::json::Value*> items;
    if (s->is_string()) {
      items.push_back(s);
    } else if (s->is_array()) {
      for (const auto& it : s->items()) items.push_back(&it);
    } else {
      throw bad_param("stop", std::string("stop must be a string or an array of strings, got ") + kind_text(*s));
    }
    if (items.size() > lim.max_stop)
      throw bad_param("stop",
                      "stop has " + std::to_string(items.size()) + " strings; at most " + std::to_string(lim.max_stop));
    for (const lrt::json::Value* it : items) {
      if (!it->is_string()) throw bad_param("stop", std::string("stop strings must be strings, got ") + kind_text(*it));
      if (it->as_string().size() > 256) throw bad_param("stop", "a stop string is longer than 256 bytes");
      if (!it->as_string().empty()) c.stop.push_back(it->as_string());
    }
  }
  c.stream = boolean(body, "stream", false);
  c.ignore_eos = boolean(body, "ignore_eos", false);
  c.cache_prompt = boolean(body, "cache_prompt", true);
  if (const lrt::json::Value* so = member(body, "stream_options")) {
    if (!so->is_object())
      throw bad_param("stream_options", std::string("stream_options must be an object, got ") + kind_text(*so));
    c.include_usage = boolean(*so, "include_usage", false);
  }
}

/// A POST /v1/completions body (the parsed JSON) as a Completion, or an ApiError (400) naming the
/// parameter. Unknown parameters are ignored, as OpenAI's API ignores them.
inline Completion parse_completion(const lrt::json::Value& body, const CompletionLimits& lim) {
  using namespace detail;
  if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", "invalid_request_error", "", ""};
  Completion c;
  unsupported(
      body, "suffix", [](const lrt::json::Value& v) { return v.is_string() && v.as_string().empty(); }, "no insertion");
  unsupported(
      body, "echo", [](const lrt::json::Value& v) { return v.is_bool() && !v.as_bool(); }, "the prompt is not echoed");
  const lrt::json::Value* p = member(body, "prompt");
  if (!p) throw ApiError{400, "prompt is required", "invalid_request_error", "prompt", "missing_parameter"};
  const lrt::json::Value* one = p;
  if (p->is_array() && !p->items().empty() && !p->items()[0].is_number()) {  // a list of prompts
    if (p->items().size() != 1)
      throw ApiError{
          400, "prompt has " + std::to_string(p->items().size()) + " prompts; lrt-server takes one prompt per request",
          "invalid_request_error", "prompt", "unsupported_parameter"};
    one = &p->items()[0];
  }
  if (one->is_string()) {
    c.prompt_text = one->as_string();
  } else if (one->is_array()) {
    std::vector<std::int64_t> ids;
    for (const auto& t : one->items()) {
      if (!t.is_integer() || t.as_int() < 0 || t.as_int() >= lim.vocab_size)
        throw bad_param("prompt",
                        "prompt token " + t.dump() + " is not an id in [0, " + std::to_string(lim.vocab_size) + ")");
      ids.push_back(t.as_int());
    }
    c.prompt_tokens = std::move(ids);
  } else {
    throw bad_param("prompt", std::string("prompt must be a string or an array of token ids, got ") + kind_text(*one));
  }
  parse_sampling(body, lim, c);
  return c;
}

/// The plain chat template for base models (--chat-template plain): each message as
/// "System: ...", "User: ..." or "Assistant: ..." followed by a blank line, then "Assistant:";
/// the completion stops where the model starts the next turn ("\nUser:" or "\nSystem:").
inline std::string plain_chat_prompt(const lrt::json::Value& messages) {
  using namespace detail;
  if (!messages.is_array() || messages.items().empty())
    throw bad_param("messages", "messages must be a non-empty array");
  std::string text;
  for (const auto& m : messages.items()) {
    if (!m.is_object()) throw bad_param("messages", "each message must be an object with role and content");
    const lrt::json::Value* role = m.find("role");
    const lrt::json::Value* content = m.find("content");
    if (!role || !role->is_string()) throw bad_param("messages", "a message has no role string");
    std::string who;
    if (role->as_string() == "system" || role->as_string() == "developer")
      who = "System";
    else if (role->as_string() == "user")
      who = "User";
    else if (role->as_string() == "assistant")
      who = "Assistant";
    else
      throw bad_param("messages", "role '" + role->as_string() + "' is not system, developer, user or assistant");
    std::string said;
    if (content && content->is_string()) {
      said = content->as_string();
    } else if (content && content->is_array()) {  // [{"type": "text", "text": ...}]
      for (const auto& part : content->items()) {
        const lrt::json::Value* type = part.is_object() ? part.find("type") : nullptr;
        const lrt::json::Value* t = part.is_object() ? part.find("text") : nullptr;
        if (!type || !type->is_string() || type->as_string() != "text" || !t || !t->is_string())
          throw bad_param("messages", "content parts must be {\"type\": \"text\", \"text\": ...}");
        said += t->as_string();
      }
    } else if (!(content && content->is_null() && who == "Assistant")) {
      throw bad_param("messages", "a " + role->as_string() + " message needs content: a string");
    }
    text += who + ": " + said + "\n\n";
  }
  return text + "Assistant:";
}

/// A POST /v1/chat/completions body with the plain template (plain_chat_prompt).
inline Completion parse_chat(const lrt::json::Value& body, const CompletionLimits& lim) {
  using namespace detail;
  if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", "invalid_request_error", "", ""};
  Completion c;
  c.chat = true;
  const lrt::json::Value* m = member(body, "messages");
  if (!m) throw ApiError{400, "messages is required", "invalid_request_error", "messages", "missing_parameter"};
  for (const char* k : {"tools", "functions", "response_format"})
    unsupported(
        body, k, [](const lrt::json::Value&) { return false; }, "a base model with a plain template");
  c.prompt_text = plain_chat_prompt(*m);
  parse_sampling(body, lim, c);
  for (const char* s : {"\nUser:", "\nSystem:"})
    if (std::find(c.stop.begin(), c.stop.end(), s) == c.stop.end()) c.stop.push_back(s);
  return c;
}

/// Where stop strings end generated text. scan(text) returns the offset of the first stop string's
/// start (npos if none); safe(text) is how many bytes may be sent: all but a tail that is a
/// proper prefix of some stop string (it may still become one).
struct StopScan {
  std::vector<std::string> stops;
  /// The earliest start of a stop string in text at or after `from` (earlier text was scanned
  /// before), or npos.
  std::size_t scan(std::string_view text, std::size_t from = 0) const {
    std::size_t best = std::string_view::npos;
    for (const std::string& s : stops) {
      const std::size_t start = from > s.size() ? from - s.size() : 0;
      const std::size_t at = text.find(s, start);
      if (at != std::string_view::npos && at < best) best = at;
    }
    return best;
  }
  std::size_t safe(std::string_view text) const {
    std::size_t keep = 0;  // the longest tail that is a proper prefix of a stop string
    for (const std::string& s : stops)
      for (std::size_t k = std::min(s.size() - 1, text.size()); k > keep; --k)
        if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
          keep = k;
          break;
        }
    return text.size() - keep;
  }
};

}  // namespace server
