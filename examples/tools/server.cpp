// lrt-server: an OpenAI-compatible completion server for an LRT (or baseline) checkpoint, with
// continuous batching on the lean decoder's rows: each request keeps its own recurrent memory,
// and its text is what lrt-generate --stop-at-bos prints for the same arguments, whatever else
// the server is decoding (docs/serving.md).
//   lrt-server -m runs/lrt --port 8080 --parallel 4
//   curl -s localhost:8080/v1/completions -d '{"prompt": "The jury said", "max_tokens": 32}'
// Endpoints: POST /v1/completions (stream: server-sent events), POST /v1/chat/completions (with
// --chat-template plain), GET /v1/models, GET /health, GET /metrics (Prometheus), POST /tokenize,
// POST /detokenize, and a page at /. Transport: server/http.hpp (an epoll loop; framing in
// server/framing.hpp); protocol: server/api.hpp; batching: server/engine.hpp.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <lrt/core/thread_pool.hpp>

#include "cli/args.hpp"
#include "server/service.hpp"

namespace {

using server::ApiError;

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
  a.option("checkpoint", "FILE",
           "model.safetensors written by lrt-train, or its run directory, or an int8/bf16 file of lrt-quantize "
           "(variants baseline, lrt, lrt-release)",
           "", true)
      .option("host", "ADDR", "address to listen on (0.0.0.0: every interface)", "127.0.0.1")
      .option("port", "N", "port to listen on (0: any free port, printed at start)", "8080")
      .option("parallel", "N", "requests decoded together (rows of the decoder)", "4")
      .option("queue", "N", "requests waiting beyond --parallel; more get 503", "64")
      .option("ctx", "N", "positions per request, prompt (with BOS) and completion (0: the model's sequence_len)", "0")
      .option("threads", "N", tool::threads_help)
      .option("api-key", "KEY",
              "require Authorization: Bearer KEY on /v1/*, /tokenize, /detokenize and /metrics (default: $LRT_API_KEY)")
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
    server::Settings s;
    const int port = static_cast<int>(a.integer("port", 0, 65535));
    const auto parallel = static_cast<lrt::index_t>(a.integer("parallel", 1, 1024));
    const auto queue = static_cast<std::size_t>(a.integer("queue", 0, 1000000));
    const auto ctx = static_cast<lrt::index_t>(a.integer("ctx", 0, 1LL << 30));
    s.timeout_s = a.number("timeout", 0.001, 1e9);
    s.stream_keep_alive_s = a.number("stream-keep-alive", 0, 1e6);
    server::TransportOptions t;
    t.read_timeout_s = a.number("read-timeout", 0.001, 1e6);
    t.keep_alive_s = a.number("keep-alive-timeout", 0, 1e6);
    t.limits.max_body = static_cast<std::size_t>(a.integer("max-body", 1, 1LL << 32));
    t.max_requests = static_cast<int>(a.integer("max-connections", 1, 100000));
    const double grace = a.number("shutdown-grace", 0, 1e6);
    s.chat_template = a.str("chat-template");
    if (s.chat_template != "none" && s.chat_template != "plain")
      throw tool::UsageError("--chat-template expects none or plain, got '" + s.chat_template + "'");
    s.api_key = a.has("api-key") ? a.str("api-key") : (std::getenv("LRT_API_KEY") ? std::getenv("LRT_API_KEY") : "");
    tool::apply_threads(a);
    tool::require_path(a.str("checkpoint"), "--checkpoint");
    std::string note;
    const std::string file = lrt::runtime::checkpoint_model_file(a.str("checkpoint"), &note);
    if (!note.empty()) std::fprintf(stderr, "warning: %s\n", note.c_str());
    s.model_id = a.has("alias") ? a.str("alias") : std::filesystem::path(a.str("checkpoint")).filename().string();
    if (s.model_id.empty() || s.model_id == "." || s.model_id == "..")
      s.model_id = std::filesystem::path(file).parent_path().filename().string();

    int pipefd[2];
    lrt::check(::pipe2(pipefd, O_CLOEXEC) == 0, "lrt-server", "pipe: ", std::strerror(errno));
    g_wake = pipefd[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);

    server::Engine engine(server::EngineOptions{parallel, queue});
    server::Service service(engine, s);
    server::Transport transport(
        t,
        [&](server::Connection& c, server::HttpRequest& r, server::Clock::time_point t0) { service.handle(c, r, t0); },
        [&](const std::string& peer, const server::HttpRequest& r, const ApiError& e, server::Clock::time_point t0) {
          service.refused(peer, r, e, t0);
        });
    service.watch(transport);
    if (const std::string why = transport.open(a.str("host"), port); !why.empty()) throw std::runtime_error(why);
    // The transport answers from the start: /health says "loading" until the model is ready.
    std::thread loop([&] { transport.run(); });
    const auto shut = [&](int code) {
      transport.stop();
      engine.shutdown(grace);
      transport.wait_idle(grace + 5);
      loop.join();
      return code;
    };
    try {
      server::Loaded loaded = server::load(file, parallel, ctx);
      engine.set_capacity(ctx > 0 ? ctx : loaded.model->config().sequence_len);
      const std::string what = loaded.variant + ", " + loaded.format + " weights, " +
                               (loaded.tokenizer.is_bytes() ? "bytes" : "BPE") + " tokenizer";
      engine.start(std::move(loaded));
      std::fprintf(stderr,
                   "lrt-server: listening on http://%s:%d (model %s: %s; %d requests together, context %lld, "
                   "%d threads; descriptor limit %llu, up to %zu idle connections)\n",
                   a.str("host").c_str(), transport.port(), s.model_id.c_str(), what.c_str(),
                   static_cast<int>(parallel), static_cast<long long>(engine.capacity()),
                   lrt::ThreadPool::global().size(), static_cast<unsigned long long>(transport.descriptor_limit()),
                   transport.options().max_waiting);
      const std::string host = a.str("host");
      if (s.api_key.empty() && host != "127.0.0.1" && host != "localhost" && host != "::1")
        std::fprintf(stderr,
                     "lrt-server: warning: listening on %s without an API key: anyone who reaches this address can "
                     "use the server (--api-key KEY)\n",
                     host.c_str());
    } catch (...) {
      shut(1);
      throw;
    }
    char c;
    while (g_signal == 0 && ::read(pipefd[0], &c, 1) < 0 && errno == EINTR) {
    }
    std::fprintf(stderr, "lrt-server: %s: no new requests; finishing those in flight (up to %g s)\n",
                 g_signal == SIGINT ? "SIGINT" : "SIGTERM", grace);
    const int code = shut(0);
    std::fprintf(stderr, "lrt-server: stopped after %llu requests\n",
                 static_cast<unsigned long long>(engine.stats().served));
    return code;
  });
}
