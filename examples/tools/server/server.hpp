// lrt-server as one object for a program's main: the engine (engine.hpp), the endpoints
// (service.hpp) and the transport (http.hpp) behind a header that includes none of them, so that
// the program (examples/tools/server.cpp) and its benchmark (bench/server.cpp) compile only their
// own logic and share one compiled server (server.cpp, the library lrt_server).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace server {

struct ServerOptions {
  // The engine.
  std::int64_t parallel = 4;                          // rows decoded together
  std::size_t queue = 64;                             // requests waiting beyond the rows
  std::size_t cache_bytes = std::size_t{1024} << 20;  // the prompt cache's budget (0: off)
  // The endpoints.
  std::string model_id, api_key, chat_template = "none";
  std::string slot_save_path;      // where POST /slots/{id} saves and restores sessions ("": off)
  double timeout_s = 600;          // a request's time limit, queue included
  double stream_keep_alive_s = 5;  // while a stream's prompt is prefilled: a comment this often (0: none)
  bool log = true;                 // a line per request on stderr
  // The transport.
  int max_requests = 256;  // requests in progress at once
  double read_timeout_s = 10, keep_alive_s = 5;
  std::size_t max_body = std::size_t{1} << 20;
};

/// What a loaded model is, for the start line.
struct ServedModel {
  std::string variant, format;  // lrt, f32 / int8 / bf16
  bool bytes_tokenizer = true;
  std::int64_t context = 0;  // positions per request
  // The prompt cache: the bytes a position's state takes (its keys and values in every layer, plus
  // its source state for a variant with memory), the keys and values alone, the budget.
  std::int64_t state_bytes = 0, kv_bytes = 0;
  std::size_t cache_bytes = 0;
};

class Server {
 public:
  explicit Server(const ServerOptions& o);
  ~Server();  // shutdown(0) if it was not called
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds host:port (0: any free port) and starts answering (/health says "loading" until
  /// load()); "" or why not.
  std::string listen(const std::string& host, int port);
  int port() const;
  /// Maps the checkpoint `file` with contexts of `ctx` positions (0: the model's sequence_len)
  /// and starts decoding; an lrt::Error says why not (a damaged file, a variant not built).
  ServedModel load(const std::string& file, std::int64_t ctx);

  /// The limit on open descriptors (raised to the hard one) and the idle connections it allows.
  std::uint64_t descriptor_limit() const;
  std::size_t max_idle_connections() const;
  /// Completions the engine has finished.
  std::uint64_t served() const;

  /// Takes no more connections, lets the requests in flight finish for up to `grace` seconds
  /// (then cancels them), and returns once every connection's answer is written.
  void shutdown(double grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
