// lrt-bench-server: lrt-server's throughput and latency with C concurrent streams. The server
// runs in this process (the program's engine, endpoints and transport, examples/tools/server/)
// on 127.0.0.1 with --parallel C and random weights of a preset (bytes tokenizer); C client
// threads each stream R completions in turn over loopback sockets (a prompt of P bytes, N new
// tokens, sampled, ignore_eos). Reported: the aggregate generated tokens/s, the p50 / p99 time
// to first token and time per token after it (over all requests), and, side by side in the same
// run, the same decoding done by the lean decoder's rows directly (join, step, sample, no HTTP):
// server/direct is what the server keeps of the decoder's speed. Each row is --repeat pairs of
// runs, direct then server, one after the other (this machine's speed drifts between runs, so a
// ratio is taken within each pair): the medians of the pairs' tokens/s and of their ratios, the
// ratios' range, and the latency percentiles over every request of the server runs.
//   lrt-bench-server [--presets tiny,small] [--streams 1,4,16] [--repeat 3] [--threads 2]
//
// --chat: the prompt cache instead (examples/tools/server/prompt_cache.hpp). 8 conversations
// (--conversations) of 10 turns (--turns) at once, each turn's prompt the whole conversation so
// far (a shared system prompt of 1,000 bytes, --system; then each turn's question and answer), as
// chat clients send them; a server with the default cache, then one with --cache-mb 0, on the
// same model (--ctx 4096: past the training context). Reported per turn: the median time to first
// token of each, their ratio, and the prompt tokens the cache supplied; the texts must be the same.
//   lrt-bench-server --chat [--presets small] [--conversations 8] [--turns 10] [--system 1000]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <lrt/core/thread_pool.hpp>
#include <lrt/runtime/decoding.hpp>
#include <lrt/runtime/text.hpp>
#include <lrt/runtime/training.hpp>

#include <lrt/io/json.hpp>

#include "bench_util.hpp"
#include "server/server.hpp"

namespace {

using lrt::index_t;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// One streamed completion's timings, as its client saw them.
struct Seen {
  double ttft = 0, per_token = 0;
  std::int64_t tokens = 0, cached = 0;  // generated; prompt tokens from the cache
  std::string text;
  bool ok = false;
};

/// A connection to 127.0.0.1:port (TCP_NODELAY), or -1.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET, a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return ::close(fd), -1;
  return fd;
}

/// Streams one completion on the kept-alive connection `fd` (a chunked event stream) and times
/// it; false in `ok` when the stream or the connection failed.
Seen stream_one(int fd, const std::string& prompt, index_t n, std::uint64_t seed) {
  Seen out;
  const auto t0 = Clock::now();
  lrt::json::Value body = lrt::json::Value::object();
  body["prompt"] = prompt, body["max_tokens"] = static_cast<std::int64_t>(n), body["temperature"] = 0.8;
  body["seed"] = static_cast<std::int64_t>(seed), body["stream"] = true, body["ignore_eos"] = true;
  lrt::json::Value so = lrt::json::Value::object();
  so["include_usage"] = true;
  body["stream_options"] = std::move(so);
  const std::string b = body.dump();
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(b.size()) + "\r\n\r\n" + b;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) return out;
  std::string raw, events;  // bytes received; the event stream's bytes, unchunked
  char chunk[8192];
  bool head = true, done = false, end = false;
  double first = -1, last = -1;
  while (!end) {
    const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    if (got <= 0) break;
    raw.append(chunk, static_cast<std::size_t>(got));
    if (head) {
      const std::size_t e = raw.find("\r\n\r\n");
      if (e == std::string::npos) continue;
      if (raw.compare(0, 12, "HTTP/1.1 200") != 0) break;
      raw.erase(0, e + 4), head = false;
    }
    for (std::size_t nl; !end && (nl = raw.find("\r\n")) != std::string::npos;) {  // chunks: SIZE CRLF DATA CRLF
      const std::size_t size = std::stoul(raw.substr(0, nl), nullptr, 16);
      if (raw.size() < nl + 2 + size + 2) break;
      events.append(raw, nl + 2, size);
      raw.erase(0, nl + 2 + size + 2);
      end = size == 0;
    }
    for (std::size_t e; (e = events.find("\n\n")) != std::string::npos;) {
      const bool comment = events[0] == ':';           // ": keep-alive" while the prompt is fed
      const std::string ev = events.substr(6, e - 6);  // after "data: "
      events.erase(0, e + 2);
      if (comment) continue;
      if (ev == "[DONE]") {
        done = true;
        continue;
      }
      const lrt::json::Value v = lrt::json::parse(ev, "event");
      if (const lrt::json::Value* u = v.find("usage"); u && u->is_object()) {
        out.tokens = u->at("completion_tokens").as_int();
        out.cached = u->at("prompt_tokens_details").at("cached_tokens").as_int();
      }
      const auto& ch = v.at("choices").items();
      if (!ch.empty()) out.text += ch[0].at("text").as_string();
      if (!ch.empty() && !ch[0].at("text").as_string().empty()) {
        last = since(t0);
        if (first < 0) first = last;
      }
    }
  }
  out.ok = end && done && out.tokens == n && first >= 0;
  out.ttft = first;
  out.per_token = out.tokens > 1 ? (last - first) / static_cast<double>(out.tokens - 1) : 0;
  return out;
}

/// Request i of client `client`: P bytes, no two alike (they begin with "client-i:"), so that the
/// prompt cache finds no more than a digit or two of one in another.
std::string prompt_of(int client, int i, index_t P) {
  std::string s = std::to_string(client) + "-" + std::to_string(i) + ":";
  for (index_t k = 0; static_cast<index_t>(s.size()) < P; ++k)
    s += static_cast<char>('a' + (client * 7 + i * 3 + k * 5) % 26);
  s.resize(static_cast<std::size_t>(P));
  return s;
}

struct Row {
  double tokens_per_s = 0;
  std::vector<double> ttft, per_token;
  int failed = 0;
};

/// The server in this process on 127.0.0.1 (any free port), decoding `file` with `rows` rows of
/// `capacity` positions and `cache_bytes` of prompt cache.
std::unique_ptr<server::Server> start_server(const std::string& file, index_t capacity, int rows,
                                             std::size_t cache_bytes) {
  server::ServerOptions o;
  o.parallel = rows, o.queue = 1024, o.max_requests = 4096, o.cache_bytes = cache_bytes;
  o.model_id = "bench", o.log = false;
  auto srv = std::make_unique<server::Server>(o);
  lrt::check(srv->listen("127.0.0.1", 0).empty(), "lrt-bench-server", "cannot listen on 127.0.0.1");
  srv->load(file, capacity);
  return srv;
}

/// The server with C rows of `capacity` positions and C clients, each streaming R completions, on
/// the checkpoint `file`.
void run_server(const std::string& file, index_t capacity, int C, int R, index_t P, index_t N, std::size_t cache_bytes,
                Row& row) {
  const auto server = start_server(file, capacity, C, cache_bytes);
  server::Server& srv = *server;
  std::vector<std::vector<Seen>> seen(static_cast<std::size_t>(C));
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < C; ++c)
    clients.emplace_back([&, c] {  // one kept-alive connection per client, as HTTP clients do
      int fd = -1;
      for (int i = 0; i < R; ++i) {
        if (fd < 0) fd = connect_to(srv.port());
        Seen x = fd < 0 ? Seen{} : stream_one(fd, prompt_of(c, i, P), N, static_cast<std::uint64_t>(c * 1000 + i));
        if (!x.ok && fd >= 0) ::close(fd), fd = -1;
        seen[static_cast<std::size_t>(c)].push_back(x);
      }
      if (fd >= 0) ::close(fd);
    });
  for (auto& t : clients) t.join();
  const double wall = since(t0);
  srv.shutdown(0);
  std::int64_t tokens = 0;
  for (const auto& v : seen)
    for (const Seen& x : v) {
      if (!x.ok) ++row.failed;
      tokens += x.tokens;
      row.ttft.push_back(x.ttft), row.per_token.push_back(x.per_token);
    }
  row.tokens_per_s = static_cast<double>(tokens) / wall;
}

/// The same decoding without the server: C rows of the lean decoder (the runtime's, as the
/// server's) of `capacity` positions, each fed its prompt token by token beside the others' steps, then N sampled
/// tokens, R times.
double run_direct(const std::string& file, index_t capacity, int C, int R, index_t P, index_t N) {
  const lrt::runtime::DecodingModel m = lrt::runtime::open_decoding(file, {C, capacity});
  lrt::runtime::Decoding& dec = *m.decoding;
  lrt::runtime::Sampling so{.temperature = 0.8};
  std::vector<index_t> rows(static_cast<std::size_t>(C)), toks(static_cast<std::size_t>(C));
  const auto t0 = Clock::now();
  for (int i = 0; i < R; ++i) {
    for (int c = 0; c < C; ++c) {
      const index_t bos = m.config.bos();
      rows[static_cast<std::size_t>(c)] = dec.join(std::span<const index_t>(&bos, 1));
    }
    for (index_t k = 0; k < P; ++k) {
      for (int c = 0; c < C; ++c) toks[static_cast<std::size_t>(c)] = prompt_of(c, i, P)[static_cast<std::size_t>(k)];
      dec.step(rows, toks);
    }
    for (index_t k = 0; k < N; ++k) {
      for (int c = 0; c < C; ++c) {
        const index_t r = rows[static_cast<std::size_t>(c)];
        so.seed = static_cast<std::uint64_t>(c * 1000 + i);
        toks[static_cast<std::size_t>(c)] = lrt::runtime::sample(dec.logits(r), so, dec.position(r));
      }
      if (k + 1 < N) dec.step(rows, toks);
    }
    for (int c = 0; c < C; ++c) dec.leave(rows[static_cast<std::size_t>(c)]);
  }
  return static_cast<double>(C) * R * N / since(t0);
}

/// One chat run: `conv` conversations of `turns` turns at once on a server with `cache_bytes` of
/// prompt cache; per conversation and turn, what its client saw.
std::vector<std::vector<Seen>> run_chat(const std::string& file, index_t capacity, int conv, int turns, index_t system,
                                        index_t N, std::size_t cache_bytes) {
  const auto server = start_server(file, capacity, conv, cache_bytes);
  server::Server& srv = *server;
  std::string sys = "System: ";
  for (index_t k = 0; static_cast<index_t>(sys.size()) < system; ++k) sys += "answer briefly and kindly. ";
  sys.resize(static_cast<std::size_t>(system));
  std::vector<std::vector<Seen>> seen(static_cast<std::size_t>(conv));
  std::vector<std::thread> clients;
  for (int c = 0; c < conv; ++c)
    clients.emplace_back([&, c] {
      int fd = connect_to(srv.port());
      std::string history = sys;
      for (int t = 0; t < turns && fd >= 0; ++t) {
        history += "\nUser: question " + std::to_string(t) + " of conversation " + std::to_string(c) + "?\nAssistant:";
        Seen x = stream_one(fd, history, N, static_cast<std::uint64_t>(c * 100 + t));
        history += x.text;
        seen[static_cast<std::size_t>(c)].push_back(std::move(x));
        if (!seen[static_cast<std::size_t>(c)].back().ok) ::close(fd), fd = -1;
      }
      if (fd >= 0) ::close(fd);
    });
  for (auto& t : clients) t.join();
  srv.shutdown(0);
  return seen;
}

/// --chat: the per-turn table of run_chat with the cache and without; 1 when a text differs or
/// a request failed.
int chat_table(const std::string& file, const lrt::ModelConfig& c, const std::string& name, index_t capacity, int conv,
               int turns, index_t system, index_t N) {
  std::printf(
      "%s: %d conversations of %d turns at once, system prompt %lld bytes, %lld tokens per answer, context "
      "%lld (trained at %lld)\n",
      name.c_str(), conv, turns, static_cast<long long>(system), static_cast<long long>(N),
      static_cast<long long>(capacity), static_cast<long long>(c.sequence_len));
  const auto t0 = Clock::now();
  const auto with = run_chat(file, capacity, conv, turns, system, N, std::size_t{1024} << 20);
  const double with_s = since(t0);
  const auto t1 = Clock::now();
  const auto without = run_chat(file, capacity, conv, turns, system, N, 0);
  const double without_s = since(t1);
  std::printf("%5s %14s %14s %9s %14s\n", "turn", "ttft cached", "ttft no cache", "ratio", "cached tokens");
  int bad = 0;
  for (int t = 0; t < turns; ++t) {
    std::vector<double> a, b, cached;
    for (int k = 0; k < conv; ++k) {
      const auto ks = static_cast<std::size_t>(k), ts = static_cast<std::size_t>(t);
      if (ts >= with[ks].size() || ts >= without[ks].size() || !with[ks][ts].ok || !without[ks][ts].ok) {
        ++bad;
        continue;
      }
      const Seen &x = with[ks][ts], &y = without[ks][ts];
      if (x.text != y.text) ++bad;
      a.push_back(x.ttft), b.push_back(y.ttft), cached.push_back(static_cast<double>(x.cached));
    }
    std::printf("%5d %12.1fms %12.1fms %8.1fx %14.0f\n", t + 1, 1e3 * percentile(a, 0.5), 1e3 * percentile(b, 0.5),
                percentile(b, 0.5) / percentile(a, 0.5), percentile(cached, 0.5));
  }
  std::printf("whole run: %.1f s with the cache, %.1f s without; %s\n", with_s, without_s,
              bad ? "TEXTS DIFFER OR REQUESTS FAILED" : "every text the same");
  std::fflush(stdout);
  return bad ? 1 : 0;
}

/// A folder of the system's temporary folder for this process, removed at the end of its scope.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("lrt-bench-server-" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> presets;
  std::vector<long long> streams;
  index_t P = 32, N = 64;
  int R = 4, repeat = 3, conversations = 8, turns = 10;
  index_t system = 1000, ctx = 4096;
  bool chat = false;
  std::size_t cache_mb = 1024;
  tool::Args args("lrt-bench-server",
                  "lrt-server's tokens/s and latencies with C concurrent streams (in this process, over loopback), "
                  "beside the lean decoder's rows doing the same decoding directly.");
  args.option("presets", "LIST", "model presets (random weights of variant lrt, bytes tokenizer)", "tiny,small")
      .option("streams", "LIST", "concurrent streams C (the server's --parallel)", "1,4,16")
      .option("requests", "R", "completions each client streams in turn", "4")
      .option("prompt", "P", "prompt bytes per request", "32")
      .option("tokens", "N", "tokens generated per request", "64")
      .option("repeat", "K", "pairs of runs (direct, then server) per row; medians reported", "3")
      .option("cache-mb", "N", "the server's prompt cache (--cache-mb; 0: off)", "1024")
      .flag("chat",
            "the prompt cache's benchmark instead: conversations resent whole each turn, with and without "
            "the cache (presets default to small)")
      .option("conversations", "N", "--chat: conversations at once (the server's --parallel)", "8")
      .option("turns", "N", "--chat: turns per conversation", "10")
      .option("system", "BYTES", "--chat: the shared system prompt's bytes", "1000")
      .option("ctx", "N", "--chat: positions per request (the server's --ctx)", "4096")
      .shared("threads");
  const int rc = tool::parse_args(args, argc, argv, [&] {
    presets = lrt_bench::preset_list(args);
    chat = args.has("chat");
    cache_mb = static_cast<std::size_t>(args.integer("cache-mb", 0, 1 << 24));
    if (chat && !args.has("presets")) presets = {"small"};
    conversations = static_cast<int>(args.integer("conversations", 1, 256));
    turns = static_cast<int>(args.integer("turns", 1, 1000));
    system = static_cast<index_t>(args.integer("system", 1, 1 << 20));
    ctx = static_cast<index_t>(args.integer("ctx", 16, 1 << 24));
    streams = args.integers("streams", 1, 256);
    R = static_cast<int>(args.integer("requests", 1, 1 << 20));
    P = static_cast<index_t>(args.integer("prompt", 1, 1 << 16));
    N = static_cast<index_t>(args.integer("tokens", 1, 1 << 16));
    repeat = static_cast<int>(args.integer("repeat", 1, 1000));
    tool::apply_threads(args);
  });
  if (rc >= 0) return rc;
  std::signal(SIGPIPE, SIG_IGN);
  try {
    const TempDir tmp;
    if (chat) {
      std::printf("lrt-bench-server --chat: %d thread(s), products %s\n", lrt::ThreadPool::global().size(),
                  lrt::runtime::products().c_str());
      int rc = 0;
      for (const auto& name : presets) {
        const lrt::ModelConfig c = lrt::preset(name);
        const std::string file = (tmp.path / (name + ".safetensors")).string();
        lrt::runtime::make_model("lrt", c, 1)->save(file);  // random weights of variant lrt
        rc |= chat_table(file, c, name, ctx, conversations, turns, system, N);
      }
      return rc;
    }
    std::printf(
        "lrt-bench-server: %d thread(s), products %s, prompt %lld bytes, %lld tokens per request, %d requests per "
        "stream, medians of %d pairs of runs, prompt cache %zu MiB\n",
        lrt::ThreadPool::global().size(), lrt::runtime::products().c_str(), static_cast<long long>(P),
        static_cast<long long>(N), R, repeat, cache_mb);
    std::printf("%-7s %7s %10s %10s %8s %11s %9s %9s %9s %9s %6s\n", "preset", "streams", "tok/s", "direct", "srv/dir",
                "range", "ttft p50", "ttft p99", "tok p50", "tok p99", "failed");
    for (const auto& name : presets) {
      const lrt::ModelConfig c = lrt::preset(name);
      lrt::check(P + N <= c.sequence_len * 4, "lrt-bench-server", "prompt + tokens = ", P + N, " is past 4 x ", name,
                 "'s context ", c.sequence_len);
      const std::string file = (tmp.path / (name + ".safetensors")).string();
      lrt::runtime::make_model("lrt", c, 1)->save(file);  // random weights of variant lrt
      const index_t capacity = c.sequence_len * 4;
      (void)run_direct(file, capacity, 1, 1, P, 8);  // warm-up
      for (const long long C : streams) {
        Row row;
        std::vector<double> served, direct, ratio;
        for (int k = 0; k < repeat; ++k) {
          direct.push_back(run_direct(file, capacity, static_cast<int>(C), R, P, N));
          run_server(file, capacity, static_cast<int>(C), R, P, N, cache_mb << 20, row);
          served.push_back(row.tokens_per_s);
          ratio.push_back(served.back() / direct.back());
        }
        const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
        std::printf("%-7s %7lld %10.0f %10.0f %8.2f %5.2f-%-5.2f %8.1fms %8.1fms %8.2fms %8.2fms %6d\n", name.c_str(),
                    C, percentile(served, 0.5), percentile(direct, 0.5), percentile(ratio, 0.5), *lo, *hi,
                    1e3 * percentile(row.ttft, 0.5), 1e3 * percentile(row.ttft, 0.99),
                    1e3 * percentile(row.per_token, 0.5), 1e3 * percentile(row.per_token, 0.99), row.failed);
        std::fflush(stdout);
        if (row.failed) return std::fprintf(stderr, "lrt-bench-server: %d requests failed\n", row.failed), 1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lrt-bench-server: %s\n", e.what());
    return 1;
  }
}
