// lrt-server: an OpenAI-compatible completion server for an LRT (or baseline) checkpoint, with
// continuous batching on the lean decoder's rows: each request keeps its own recurrent memory,
// and its text is what lrt-generate --stop-at-bos prints for the same arguments, whatever else
// the server is decoding (docs/serving.md).
//   lrt-server -m runs/lrt --port 8080 --parallel 4
//   curl -s localhost:8080/v1/completions -d '{"prompt": "The jury said", "max_tokens": 32}'
// Endpoints: POST /v1/completions (stream: server-sent events), POST /v1/chat/completions (with
// --chat-template plain), GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize,
// POST /detokenize, and a page at /. Transport: server/http.hpp (an epoll loop; framing in
// server/framing.hpp); protocol: server/api.hpp; batching: server/engine.hpp; all of it compiled
// once behind server/server.hpp (the library lrt_server, shared with lrt-bench-server).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <lrt/core/thread_pool.hpp>
#include <lrt/runtime/decoding.hpp>

#include "cli/args.hpp"
#include "server/server.hpp"

namespace {

int g_wake = -1;  // the self-pipe SIGTERM / SIGINT write to
volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) {
  g_signal = sig;
  const char c = 1;
  if (g_wake >= 0) [[maybe_unused]]
    const ssize_t n = ::write(g_wake, &c, 1);
}

}  // namespace

int main(int argc, char** argv) {
  tool::Args a("lrt-server",
               "Serves a checkpoint over HTTP with OpenAI's completion API, decoding up to --parallel requests "
               "together (docs/serving.md).");
  a.shared("checkpoint")
      .option("host", "ADDR", "address to listen on (0.0.0.0: every interface)", "127.0.0.1")
      .option("port", "N", "port to listen on (0: any free port, printed at start)", "8080")
      .option("parallel", "N", "requests decoded together (rows of the decoder)", "4")
      .option("queue", "N", "requests waiting beyond --parallel; more get 503", "64")
      .option("cache-mb", "N",
              "the prompt cache's budget in MiB: requests that begin with an earlier sequence start from its cached "
              "state, with the same bits (0: off)",
              "1024")
      .option("slot-save-path", "DIR",
              "a folder where POST /slots/{id}?action=save|restore writes and reads sessions (default: off)")
      .option("ctx", "N", "positions per request, prompt (with BOS) and completion (0: the model's sequence_len)", "0")
      .shared("threads")
      .option("api-key", "KEY",
              "require Authorization: Bearer KEY on /v1/*, /tokenize, /detokenize, /metrics and /slots/* (default: "
              "$LRT_API_KEY)")
      .option("alias", "NAME", "the model's id in /v1/models and responses (default: the checkpoint's file name)")
      .option("chat-template", "NAME", "none, or plain: /v1/chat/completions as \"User: ...\" / \"Assistant: ...\"",
              "none")
      .option("timeout", "S", "a request's time limit, queue included (finish_reason \"timeout\")", "600")
      .option("read-timeout", "S", "time to receive a request's line, headers and body (a new connection's first)",
              "10")
      .option("keep-alive-timeout", "S", "an idle connection's time between requests", "5")
      .option("stream-keep-alive", "S",
              "while a stream's prompt is prefilled, a comment line every S seconds (0: none)", "5")
      .option("max-body", "BYTES", "the largest request body (413 past it)", "1048576")
      .option("max-connections", "N",
              "requests in progress at once (past it: 503 at once); idle connections are limited by the descriptor "
              "limit",
              "256")
      .option("shutdown-grace", "S", "on SIGTERM: time for requests in flight to finish before they are cancelled",
              "10");
  a.alias("-m", "checkpoint").alias("-t", "threads").alias("-np", "parallel");
  return tool::run_main(a, [&] {
    if (!a.parse(argc, argv)) return 0;
    server::ServerOptions o;
    const int port = static_cast<int>(a.integer("port", 0, 65535));
    o.parallel = a.integer("parallel", 1, 1024);
    o.queue = static_cast<std::size_t>(a.integer("queue", 0, 1000000));
    const std::int64_t ctx = a.integer("ctx", 0, 1LL << 30);
    o.cache_bytes = static_cast<std::size_t>(a.integer("cache-mb", 0, 1LL << 24)) << 20;
    o.timeout_s = a.number("timeout", 0.001, 1e9);
    o.stream_keep_alive_s = a.number("stream-keep-alive", 0, 1e6);
    o.read_timeout_s = a.number("read-timeout", 0.001, 1e6);
    o.keep_alive_s = a.number("keep-alive-timeout", 0, 1e6);
    o.max_body = static_cast<std::size_t>(a.integer("max-body", 1, 1LL << 32));
    o.max_requests = static_cast<int>(a.integer("max-connections", 1, 100000));
    const double grace = a.number("shutdown-grace", 0, 1e6);
    o.chat_template = a.str("chat-template");
    if (o.chat_template != "none" && o.chat_template != "plain")
      throw tool::UsageError("--chat-template expects none or plain, got '" + o.chat_template + "'");
    o.api_key = a.has("api-key") ? a.str("api-key") : (std::getenv("LRT_API_KEY") ? std::getenv("LRT_API_KEY") : "");
    tool::apply_threads(a);
    tool::require_path(a.str("checkpoint"), "--checkpoint");
    if (a.has("slot-save-path")) {
      o.slot_save_path = a.str("slot-save-path");
      std::error_code ec;
      if (o.slot_save_path.empty() || !std::filesystem::is_directory(o.slot_save_path, ec))
        throw tool::UsageError("--slot-save-path: not a folder: '" + o.slot_save_path + "'");
      if (o.cache_bytes == 0) throw tool::UsageError("--slot-save-path needs the prompt cache (--cache-mb above 0)");
    }
    std::string note;
    const std::string file = lrt::runtime::checkpoint_model_file(a.str("checkpoint"), &note);
    if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
    o.model_id = a.has("alias") ? a.str("alias") : std::filesystem::path(a.str("checkpoint")).filename().string();
    if (o.model_id.empty() || o.model_id == "." || o.model_id == "..")
      o.model_id = std::filesystem::path(file).parent_path().filename().string();

    int pipefd[2];
    lrt::check(::pipe2(pipefd, O_CLOEXEC) == 0, "lrt-server", "pipe: ", std::strerror(errno));
    g_wake = pipefd[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    server::Server srv(o);
    const std::string host = a.str("host");
    // The server answers from the start: /health says "loading" until the model is ready.
    if (const std::string why = srv.listen(host, port); !why.empty()) throw std::runtime_error(why);
    try {
      const server::ServedModel m = srv.load(file, ctx);
      const std::string what =
          m.variant + ", " + m.format + " weights, " + (m.bytes_tokenizer ? "bytes" : "BPE") + " tokenizer";
      const bool v6 = host.find(':') != std::string::npos;  // an IPv6 address goes in brackets in a URL
      std::fprintf(stderr,
                   "lrt-server: listening on http://%s%s%s:%d (model %s: %s; %d requests together, context %lld, "
                   "%d threads; descriptor limit %llu, up to %zu idle connections)\n",
                   v6 ? "[" : "", host.c_str(), v6 ? "]" : "", srv.port(), o.model_id.c_str(), what.c_str(),
                   static_cast<int>(o.parallel), static_cast<long long>(m.context), lrt::ThreadPool::global().size(),
                   static_cast<unsigned long long>(srv.descriptor_limit()), srv.max_idle_connections());
      if (m.cache_bytes > 0)
        std::fprintf(stderr,
                     "lrt-server: prompt cache %zu MiB; a position's state takes %lld bytes (keys and values %lld, "
                     "memory %lld)\n",
                     m.cache_bytes >> 20, static_cast<long long>(m.state_bytes), static_cast<long long>(m.kv_bytes),
                     static_cast<long long>(m.state_bytes - m.kv_bytes));
      else
        std::fprintf(stderr, "lrt-server: prompt cache off (--cache-mb 0)\n");
      if (o.api_key.empty() && host != "127.0.0.1" && host != "localhost" && host != "::1")
        std::fprintf(stderr,
                     "lrt-server: warning: listening on %s without an API key: anyone who reaches this address can "
                     "use the server (--api-key KEY)\n",
                     host.c_str());
    } catch (...) {
      srv.shutdown(0);
      throw;
    }
    char c;
    while (g_signal == 0 && ::read(pipefd[0], &c, 1) < 0 && errno == EINTR) {
    }
    std::fprintf(stderr, "lrt-server: %s: no new requests; finishing those in flight (up to %g s)\n",
                 g_signal == SIGINT ? "SIGINT" : "SIGTERM", grace);
    srv.shutdown(grace);
    std::fprintf(stderr, "lrt-server: stopped after %llu requests\n", static_cast<unsigned long long>(srv.served()));
    return 0;
  });
}
