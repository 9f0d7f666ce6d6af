// lrt-server's endpoints (Service::handle, one call per request, on the request's thread):
// routing, the API key, the JSON bodies of OpenAI's completion, chat and model objects,
// server-sent events, /health, /tokenize, /detokenize, /metrics and the page, over the engine
// (engine.hpp) and a connection (http.hpp). Compiled once in server/server.cpp (behind
// server.hpp) for the program and its benchmark.
#pragma once

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine.hpp"
#include "http.hpp"
#include "metrics.hpp"
#include "slots.hpp"
#include "page.hpp"

namespace server {

using lrt::json::Value;

struct Settings {
  std::string model_id, api_key, chat_template;
  double timeout_s = 600;
  double stream_keep_alive_s = 5;  // while a stream's prompt is prefilled: a comment this often (0: none)
  bool log = true;                 // a line per request on stderr
  std::string slot_save_path;      // where /slots saves and restores sessions ("": /slots is off)
};

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Service {
 public:
  Service(Engine& engine, const Settings& s) : engine_(engine), s_(s) {
    std::random_device rd;
    id_base_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    created_ = static_cast<std::int64_t>(std::time(nullptr));
  }

  /// The transport whose connections /metrics reports.
  void watch(const Transport& t) { transport_ = &t; }

  /// Answers one request (the transport has read it all, `t0` is when its first byte came).
  void handle(Connection& c, HttpRequest& req, Clock::time_point t0) {
    int status = 200;
    std::string note;
    try {
      status = route(c, req, note);
    } catch (const ApiError& e) {
      status = e.status, note = e.message;
      c.respond_error(e);
    } catch (const std::exception& e) {
      status = 500, note = e.what();
      c.respond_error(ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", ""});
    }
    log(req.method, req.path, status, t0, note);
    c.finish();
  }
  /// An answer the transport gave itself (a request it could not read, a limit): logged with the
  /// client's address.
  void refused(const std::string& peer, const HttpRequest& req, const ApiError& e, Clock::time_point t0) {
    log(req.method.empty() ? "-" : req.method, req.path.empty() ? "-" : req.path, e.status, t0,
        "from " + peer + ": " + e.message);
  }

 private:
  /// Answers one request; returns the status sent.
  int route(Connection& c, const HttpRequest& req, std::string& note) {
    const std::string& p = req.path;
    const auto method = [&](const char* want) {
      if (req.method != want)
        throw ApiError{405, req.method + " " + p + ": use " + want, "invalid_request_error", "", "method_not_allowed"};
    };
    if (req.method == "OPTIONS") {  // a browser's preflight for another origin
      c.respond(204, "", "",
                {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                 {"Access-Control-Allow-Headers", "Content-Type, Authorization"}});
      return 204;
    }
    if (p == "/" || p == "/index.html") {
      method("GET");
      c.respond(200, "text/html; charset=utf-8", page_html);
      return 200;
    }
    if (p == "/health") {
      method("GET");
      return health(c);
    }
    if (p.starts_with("/slots/")) {
      authorize(req);
      if (!engine_.ready()) throw ApiError{503, "the model is loading", "server_error", "", "loading"};
      method("POST");
      return slots(c, req);
    }
    if (!known_endpoint(p)) throw ApiError{404, "no endpoint " + p, "invalid_request_error", "", "not_found"};
    authorize(req);
    if (p == "/metrics") {
      method("GET");
      c.respond(200, "text/plain; version=0.0.4; charset=utf-8", metrics());
      return 200;
    }
    if (!engine_.ready()) throw ApiError{503, "the model is loading", "server_error", "", "loading"};
    if (p == "/v1/models" || p == "/models") {
      method("GET");
      return models(c);
    }
    method("POST");
    const Value body = parse_body(req);
    if (p == "/tokenize") return tokenize(c, body);
    if (p == "/detokenize") return detokenize(c, body);
    const bool chat = p == "/v1/chat/completions" || p == "/chat/completions";
    if (chat && s_.chat_template != "plain")
      throw ApiError{400,
                     "chat completions need a chat template, and this checkpoint is a base model without one: "
                     "use /v1/completions, or start lrt-server with --chat-template plain (turns written as "
                     "\"User: ...\" / \"Assistant: ...\"; docs/serving.md)",
                     "invalid_request_error", "", "no_chat_template"};
    return complete(c, body, chat, note);
  }

  static bool known_endpoint(const std::string& p) {
    return p == "/v1/completions" || p == "/completions" || p == "/v1/chat/completions" || p == "/chat/completions" ||
           p == "/v1/models" || p == "/models" || p == "/tokenize" || p == "/detokenize" || p == "/metrics";
  }

  /// GET /metrics: the counters, and the engine's and the transport's state now.
  std::string metrics() const {
    const EngineStats st = engine_.stats();
    const TransportStats t = transport_ ? transport_->stats() : TransportStats{};
    const CacheStats cs = engine_.cache_stats();
    return metrics_.text(
        {{"lrt_queue_requests", "requests waiting for a row", static_cast<double>(st.waiting)},
         {"lrt_prompt_cache_bytes", "bytes of the prompt cache's entries and of the histories being recorded",
          static_cast<double>(cs.bytes)},
         {"lrt_prompt_cache_budget_bytes", "the prompt cache's budget (--cache-mb)", static_cast<double>(cs.budget)},
         {"lrt_prompt_cache_entries", "sequences in the prompt cache", static_cast<double>(cs.entries)},
         {"lrt_busy_rows", "decoder rows with a request", static_cast<double>(st.active)},
         {"lrt_rows", "decoder rows (--parallel)", static_cast<double>(engine_.parallel())},
         {"lrt_open_connections", "open connections", static_cast<double>(t.open)},
         {"lrt_connections_in_request", "connections with a request in progress", static_cast<double>(t.in_request)}},
        {{"lrt_connections_accepted_total", "connections accepted", static_cast<double>(t.accepted)},
         {"lrt_completions_served_total", "completions the engine finished", static_cast<double>(st.served)},
         {"lrt_prompt_cache_hits_total", "requests that started from a cached prefix", static_cast<double>(cs.hits)},
         {"lrt_prompt_cache_misses_total", "requests that looked in the prompt cache and found no prefix",
          static_cast<double>(cs.misses)},
         {"lrt_prompt_cache_evictions_total", "entries dropped to make room", static_cast<double>(cs.evictions)},
         {"lrt_prompt_cache_tokens_total", "prompt tokens taken from the cache instead of computed",
          static_cast<double>(cs.cached_tokens)}});
  }

  void authorize(const HttpRequest& req) const {
    if (s_.api_key.empty()) return;
    const std::string* h = req.header("authorization");
    if (!h || *h != "Bearer " + s_.api_key)
      throw ApiError{401, h ? "invalid API key" : "an API key is required: send Authorization: Bearer KEY",
                     "authentication_error", "", "invalid_api_key"};
  }

  static Value parse_body(const HttpRequest& req) {
    try {
      return lrt::json::parse(req.body, "the request body is not valid JSON");
    } catch (const lrt::Error& e) {  // "[json] the request body is not valid JSON: <reason> at byte N"
      std::string_view what = e.what();
      if (what.starts_with("[json] ")) what.remove_prefix(7);
      throw ApiError{400, std::string(what), "invalid_request_error", "", "invalid_json"};
    }
  }

  int health(Connection& c) {
    Value v = Value::object();
    if (!engine_.ready()) {
      v["status"] = "loading";
      c.respond(503, "application/json", v.dump(), {{"Retry-After", "1"}});
      return 503;
    }
    const EngineStats st = engine_.stats();
    v["status"] = "ok";
    v["queue"] = static_cast<std::int64_t>(st.waiting);
    v["active"] = static_cast<std::int64_t>(st.active);
    v["parallel"] = static_cast<std::int64_t>(engine_.parallel());
    v["served"] = static_cast<std::int64_t>(st.served);
    c.respond(200, "application/json", v.dump());
    return 200;
  }

  int models(Connection& c) {
    const lrt::ModelConfig& cfg = engine_.config();
    Value m = Value::object();
    m["id"] = s_.model_id, m["object"] = "model", m["created"] = created_, m["owned_by"] = "lrt";
    Value meta = Value::object();
    meta["variant"] = engine_.loaded().variant, meta["weights"] = engine_.loaded().format;
    meta["context"] = static_cast<std::int64_t>(engine_.capacity());
    meta["vocab_size"] = static_cast<std::int64_t>(cfg.vocab_size);
    meta["tokenizer"] = engine_.tokenizer().is_bytes() ? "bytes" : "bpe";
    meta["parallel"] = static_cast<std::int64_t>(engine_.parallel());
    m["meta"] = std::move(meta);
    Value data = Value::array();
    data.push_back(std::move(m));
    Value v = Value::object();
    v["object"] = "list", v["data"] = std::move(data);
    c.respond(200, "application/json", v.dump());
    return 200;
  }

  /// POST /slots/{id}?action=save|restore|erase, {"filename": NAME} (llama-server's slot API):
  /// the slot's sequence in the prompt cache to a file of --slot-save-path, or back (slots.hpp).
  int slots(Connection& c, const HttpRequest& req) {
    const std::string digits = req.path.substr(7);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw ApiError{400, "the slot id in " + req.path + " is not a number", "invalid_request_error", "id_slot",
                     "invalid_value"};
    const auto id = static_cast<index_t>(std::stol(digits));
    std::string action;
    for (std::size_t at = 0; at <= req.query.size();) {
      const std::size_t end = std::min(req.query.find('&', at), req.query.size());
      const std::string_view kv = std::string_view(req.query).substr(at, end - at);
      if (kv.starts_with("action=")) action = std::string(kv.substr(7));
      at = end + 1;
    }
    if (action != "save" && action != "restore" && action != "erase")
      throw ApiError{400, "/slots/" + digits + " takes ?action=save, restore or erase, got '" + action + "'",
                     "invalid_request_error", "action", "invalid_value"};
    if (!engine_.caching())
      throw ApiError{501, "the slots need the prompt cache, which is off (--cache-mb 0)", "invalid_request_error", "",
                     "cache_off"};
    Value v = Value::object();
    v["id_slot"] = static_cast<std::int64_t>(id);
    const auto t0 = Clock::now();
    if (action == "erase") {
      v["n_erased"] = static_cast<std::int64_t>(engine_.slot_erase(id));
      c.respond(200, "application/json", v.dump());
      return 200;
    }
    if (s_.slot_save_path.empty())
      throw ApiError{501, "saving and restoring slots is off: start lrt-server with --slot-save-path DIR",
                     "invalid_request_error", "", "slots_off"};
    const Value body = parse_body(req);
    const Value* f = body.is_object() ? body.find("filename") : nullptr;
    if (!f || !f->is_string())
      throw ApiError{400, "/slots " + action + " takes {\"filename\": NAME}", "invalid_request_error", "filename",
                     "invalid_value"};
    const std::string name = f->as_string(), path = slot_path(s_.slot_save_path, name);
    const lrt::ModelConfig& cfg = engine_.config();
    const auto S = static_cast<std::int64_t>(engine_.loaded().model->position_state_size());
    SlotFile file;
    v["filename"] = name;
    if (action == "save") {
      engine_.slot_copy(id, file.tokens, file.states);
      std::size_t bytes = 0;
      try {
        bytes = write_slot(path, file, engine_.loaded().identity, S);
      } catch (const std::exception& e) {
        throw ApiError{500, std::string("cannot save the slot: ") + e.what(), "server_error", "", "write_failed"};
      }
      v["n_saved"] = static_cast<std::int64_t>(file.tokens.size());
      v["n_written"] = static_cast<std::int64_t>(bytes);
      Value t = Value::object();
      t["save_ms"] = 1e3 * seconds_since(t0);
      v["timings"] = std::move(t);
    } else {
      file = read_slot(path, name, engine_.loaded().identity, S, cfg.vocab_size, cfg.bos(), engine_.capacity());
      engine_.slot_restore(id, file.tokens, file.states);
      v["n_restored"] = static_cast<std::int64_t>(file.tokens.size());
      v["n_read"] =
          static_cast<std::int64_t>(file.tokens.size() * sizeof(std::int64_t) + file.states.size() * sizeof(float));
      Value t = Value::object();
      t["restore_ms"] = 1e3 * seconds_since(t0);
      v["timings"] = std::move(t);
    }
    c.respond(200, "application/json", v.dump());
    return 200;
  }

  int tokenize(Connection& c, const Value& body) {
    const Value* t = body.is_object() ? body.find("content") : nullptr;
    if (!t) t = body.is_object() ? body.find("prompt") : nullptr;
    if (!t || !t->is_string())
      throw ApiError{400, "tokenize takes {\"content\": TEXT}", "invalid_request_error", "content", "invalid_value"};
    Value ids = Value::array();
    std::vector<lrt::index_t> encoded;
    engine_.tokenizer().encode(t->as_string(), encoded);
    for (const lrt::index_t id : encoded) ids.push_back(static_cast<std::int64_t>(id));
    Value v = Value::object();
    v["tokens"] = std::move(ids);
    c.respond(200, "application/json", v.dump());
    return 200;
  }

  int detokenize(Connection& c, const Value& body) {
    const Value* t = body.is_object() ? body.find("tokens") : nullptr;
    if (!t || !t->is_array())
      throw ApiError{400, "detokenize takes {\"tokens\": [ids]}", "invalid_request_error", "tokens", "invalid_value"};
    std::string bytes;
    const auto V = engine_.tokenizer().vocab_size();
    for (const Value& id : t->items()) {
      if (!id.is_integer() || id.as_int() < 0 || id.as_int() >= V)
        throw ApiError{400, "token " + id.dump() + " is not an id in [0, " + std::to_string(V) + ")",
                       "invalid_request_error", "tokens", "invalid_value"};
      bytes += engine_.tokenizer().token_text(static_cast<lrt::index_t>(id.as_int()));
    }
    Value v = Value::object();
    v["content"] = valid_utf8(bytes);
    c.respond(200, "application/json", v.dump());
    return 200;
  }

  /// A job from a completion request: the prompt tokenized (BOS first), checked against the
  /// context, the sampler set.
  std::shared_ptr<Job> make_job(const Value& body, bool chat) {
    const lrt::ModelConfig& cfg = engine_.config();
    CompletionLimits lim;
    lim.vocab_size = cfg.vocab_size;
    auto job = std::make_shared<Job>();
    job->req = chat ? parse_chat(body, lim) : parse_completion(body, lim);
    job->prompt.push_back(cfg.bos());
    if (job->req.prompt_tokens) {
      for (auto id : *job->req.prompt_tokens) job->prompt.push_back(static_cast<lrt::index_t>(id));
    } else {
      engine_.tokenizer().encode(job->req.prompt_text, job->prompt);
    }
    const auto P = static_cast<std::int64_t>(job->prompt.size());
    const std::int64_t ctx = engine_.capacity();
    if (P > ctx)
      throw ApiError{413,
                     "the prompt has " + std::to_string(P) + " tokens (with BOS); the context is " +
                         std::to_string(ctx) + " (--ctx)",
                     "invalid_request_error", "prompt", "context_length_exceeded"};
    job->max_new = static_cast<lrt::index_t>(std::min<std::int64_t>(job->req.max_tokens, ctx - P + 1));
    job->sampler.temperature = job->req.temperature;
    job->sampler.top_p = job->req.top_p;
    job->sampler.top_k = static_cast<lrt::index_t>(job->req.top_k);
    if (job->req.seed) {
      job->sampler.seed = *job->req.seed;
    } else {
      std::lock_guard<std::mutex> lock(rng_m_);
      job->sampler.seed = rng_();
    }
    job->arrived = Clock::now();
    job->deadline =
        job->arrived + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s_.timeout_s));
    return job;
  }

  Value envelope(const Job& j, const std::string& id, bool chunk) const {
    Value v = Value::object();
    v["id"] = id;
    v["object"] = j.req.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    v["created"] = static_cast<std::int64_t>(std::time(nullptr));
    v["model"] = s_.model_id;
    return v;
  }
  static Value usage(const Job& j) {
    Value u = Value::object();
    u["prompt_tokens"] = static_cast<std::int64_t>(j.prompt.size());
    u["completion_tokens"] = j.completion_tokens;
    u["total_tokens"] = static_cast<std::int64_t>(j.prompt.size()) + j.completion_tokens;
    Value details = Value::object();
    details["cached_tokens"] = static_cast<std::int64_t>(j.cached);
    u["prompt_tokens_details"] = std::move(details);
    return u;
  }
  /// OpenAI's completion logprobs object of tokens lp (text_offset: byte offsets from `offset`).
  static Value logprobs(const std::vector<TokenLogprob>& lp, std::size_t& offset) {
    Value tokens = Value::array(), lps = Value::array(), tops = Value::array(), offsets = Value::array();
    for (const TokenLogprob& t : lp) {
      tokens.push_back(t.token);
      lps.push_back(t.logprob);
      Value top = Value::object();
      for (const auto& [k, v] : t.top)
        if (!top.find(k)) top[k] = v;
      tops.push_back(std::move(top));
      offsets.push_back(static_cast<std::int64_t>(offset));
      offset += t.bytes;
    }
    Value v = Value::object();
    v["tokens"] = std::move(tokens), v["token_logprobs"] = std::move(lps), v["top_logprobs"] = std::move(tops);
    v["text_offset"] = std::move(offsets);
    return v;
  }
  /// One choice: its text (a delta in a stream) and finish reason (null while going on); lp: its
  /// tokens' log-probabilities (with logprobs), offset: the first one's byte offset.
  static Value choice(const Job& j, const std::string& text, const std::string& reason, bool chunk, bool first,
                      const std::vector<TokenLogprob>* lp = nullptr, std::size_t* offset = nullptr) {
    Value ch = Value::object();
    ch["index"] = 0;
    if (j.req.chat) {
      Value msg = Value::object();
      if (!chunk || first) msg["role"] = "assistant";
      if (!chunk || !text.empty() || reason.empty()) msg["content"] = text;
      ch[chunk ? "delta" : "message"] = std::move(msg);
    } else {
      ch["text"] = text;
      ch["logprobs"] = lp && j.req.logprobs >= 0 ? logprobs(*lp, *offset) : Value();
    }
    ch["finish_reason"] = reason.empty() ? Value() : Value(reason);
    return ch;
  }

  int complete(Connection& c, const Value& body, bool chat, std::string& note) {
    std::shared_ptr<Job> job = make_job(body, chat);
    const std::string id =
        (chat ? "chatcmpl-" : "cmpl-") + std::to_string(id_base_ % 1000000007) + "-" + std::to_string(++next_id_);
    if (std::optional<ApiError> refused = engine_.submit(job)) throw *refused;
    Job& j = *job;
    // However this function ends (an answer, a client gone, an exception), the engine stops
    // decoding for it; a finished job ignores the flag.
    struct CancelOnExit {
      Job& j;
      Metrics& metrics;
      ~CancelOnExit() {
        j.cancel = true;
        std::lock_guard<std::mutex> lock(j.m);
        if (j.finished)
          metrics.completion(static_cast<std::int64_t>(j.prompt.size()), j.completion_tokens, j.ttft_s, j.total_s);
      }
    } cancel_on_exit{j, metrics_};
    // Until ready(), or the client is gone (false; the job is cancelled), or `until` (nullopt).
    const auto wait = [&](auto&& ready, Clock::time_point until = Clock::time_point::max()) -> std::optional<bool> {
      std::unique_lock<std::mutex> lock(j.m);
      // Every 0.1 s without ready(), however often the engine wakes this thread, a look at the
      // connection (the transport marks it when the client leaves).
      while (!j.cv.wait_for(lock, std::chrono::milliseconds(100), ready)) {
        if (c.gone()) {
          j.cancel = true;
          return false;
        }
        if (Clock::now() >= until) return std::nullopt;
      }
      return true;
    };
    if (!j.req.stream) {
      if (!*wait([&] { return j.finished; })) return note = "client gone", 499;
      if (j.error) throw *j.error;
      Value v = envelope(j, id, false);
      Value choices = Value::array();
      std::size_t offset = 0;
      choices.push_back(choice(j, j.text, j.finish_reason, false, true, &j.lp_all, &offset));
      v["choices"] = std::move(choices);
      v["usage"] = usage(j);
      if (j.slot >= 0) v["id_slot"] = static_cast<std::int64_t>(j.slot);  // llama-server's: for /slots
      c.respond(200, "application/json", v.dump());
      note = stats_note(j);
      return 200;
    }
    // A stream: the first event once the job has text or has ended, so that an error found before
    // any text (none is expected) is still an HTTP status. A prompt that takes longer to prefill
    // starts the stream with comments (": keep-alive"), one per stream_keep_alive_s, so that
    // clients and proxies that time out a silent connection do not.
    bool started = false;
    for (;;) {
      const auto every = seconds_to(s_.stream_keep_alive_s > 0 ? s_.stream_keep_alive_s : 1e9);
      const std::optional<bool> r = wait([&] { return j.finished || !j.out.empty(); }, Clock::now() + every);
      if (r && !*r) return note = "client gone", 499;
      if (r) break;
      if (!started && !c.start_events()) return j.cancel = true, note = "client gone", 499;
      started = true;
      if (!c.send(": keep-alive\n\n")) return j.cancel = true, note = "client gone", 499;
    }
    if (!started) {
      {
        std::lock_guard<std::mutex> lock(j.m);
        if (j.finished && j.error) throw *j.error;
      }
      if (!c.start_events()) return j.cancel = true, note = "client gone", 499;
    }
    bool first = true;
    std::size_t offset = 0;
    std::vector<TokenLogprob> lp;
    for (;;) {
      std::string text, reason;
      bool finished = false;
      if (!*wait([&] { return j.finished || !j.out.empty(); })) return note = "client gone", 499;
      {
        std::lock_guard<std::mutex> lock(j.m);
        text.swap(j.out);
        lp.clear();
        lp.swap(j.lp_out);
        finished = j.finished;
        reason = j.finish_reason;
      }
      if (finished && j.error) {  // after the stream began: an error event, then the end
        c.send("data: " + error_body(*j.error) + "\n\n");
        return j.error->status;
      }
      if (!text.empty() || (j.req.chat && first)) {
        Value v = envelope(j, id, true);
        Value choices = Value::array();
        choices.push_back(choice(j, text, "", true, first, &lp, &offset));
        lp.clear();
        v["choices"] = std::move(choices);
        if (!c.send("data: " + v.dump() + "\n\n")) return j.cancel = true, note = "client gone", 499;
        first = false;
      }
      if (finished) {
        Value v = envelope(j, id, true);
        Value choices = Value::array();
        choices.push_back(choice(j, "", reason, true, false, &lp, &offset));
        v["choices"] = std::move(choices);
        if (j.slot >= 0) v["id_slot"] = static_cast<std::int64_t>(j.slot);
        std::string out = "data: " + v.dump() + "\n\n";
        if (j.req.include_usage) {
          Value u = envelope(j, id, true);
          u["choices"] = Value::array();
          u["usage"] = usage(j);
          out += "data: " + u.dump() + "\n\n";
        }
        out += "data: [DONE]\n\n";
        c.send(out);
        note = stats_note(j);
        return 200;
      }
    }
  }

  static std::string stats_note(const Job& j) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "prompt %zu, generated %lld (%s), first token %.3f s", j.prompt.size(),
                  static_cast<long long>(j.completion_tokens), j.finish_reason.c_str(), j.ttft_s);
    return buf;
  }

  void log(const std::string& method, const std::string& path, int status, Clock::time_point t0,
           const std::string& note) {
    const bool named = known_endpoint(path) || path == "/health" || path == "/" || path == "/index.html";
    metrics_.request(named ? path : "other", status);
    if (!s_.log) return;
    std::lock_guard<std::mutex> lock(log_m_);
    std::fprintf(stderr, "lrt-server: %s %s %d %.3f s%s%s\n", method.c_str(), path.c_str(), status, seconds_since(t0),
                 note.empty() ? "" : ": ", note.c_str());
  }

  Engine& engine_;
  const Settings& s_;
  const Transport* transport_ = nullptr;
  Metrics metrics_;
  std::uint64_t id_base_ = 0;
  std::atomic<std::uint64_t> next_id_{0};
  std::int64_t created_ = 0;
  std::mutex rng_m_, log_m_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace server
