// The compiled server behind server.hpp: the engine, the endpoints and the transport, and the
// thread that runs the transport's loop.
#include "server.hpp"

#include <thread>

#include "service.hpp"

namespace server {

struct Server::Impl {
  explicit Impl(const ServerOptions& o)
      : engine(EngineOptions{static_cast<index_t>(o.parallel), o.queue, o.cache_bytes}),
        settings(settings_of(o)),
        service(engine, settings),
        transport(
            transport_of(o), [this](Connection& c, HttpRequest& r, Clock::time_point t0) { service.handle(c, r, t0); },
            [this](const std::string& peer, const HttpRequest& r, const ApiError& e, Clock::time_point t0) {
              service.refused(peer, r, e, t0);
            }) {
    service.watch(transport);
  }
  static Settings settings_of(const ServerOptions& o) {
    Settings s;
    s.model_id = o.model_id, s.api_key = o.api_key, s.chat_template = o.chat_template;
    s.timeout_s = o.timeout_s, s.stream_keep_alive_s = o.stream_keep_alive_s, s.log = o.log;
    s.slot_save_path = o.slot_save_path;
    return s;
  }
  static TransportOptions transport_of(const ServerOptions& o) {
    TransportOptions t;
    t.max_requests = o.max_requests, t.read_timeout_s = o.read_timeout_s, t.keep_alive_s = o.keep_alive_s;
    t.limits.max_body = o.max_body;
    return t;
  }

  Engine engine;
  Settings settings;
  Service service;
  Transport transport;
  std::thread loop;
  bool down = false;
};

Server::Server(const ServerOptions& o) : impl_(std::make_unique<Impl>(o)) {}
Server::~Server() { shutdown(0); }

std::string Server::listen(const std::string& host, int port) {
  if (const std::string why = impl_->transport.open(host, port); !why.empty()) return why;
  impl_->loop = std::thread([this] { impl_->transport.run(); });
  return "";
}
int Server::port() const { return impl_->transport.port(); }

ServedModel Server::load(const std::string& file, std::int64_t ctx) {
  Loaded loaded = server::load(file, static_cast<index_t>(impl_->engine.parallel()), static_cast<index_t>(ctx));
  if (!impl_->settings.slot_save_path.empty()) loaded.identity = model_identity(file);
  impl_->engine.set_capacity(ctx > 0 ? static_cast<index_t>(ctx) : loaded.model->config().sequence_len);
  ServedModel m;
  m.variant = loaded.variant, m.format = loaded.format, m.bytes_tokenizer = loaded.tokenizer.is_bytes();
  m.context = impl_->engine.capacity();
  const lrt::ModelConfig& c = loaded.model->config();
  m.state_bytes = static_cast<std::int64_t>(loaded.model->position_state_size() * sizeof(float));
  m.kv_bytes = static_cast<std::int64_t>(2 * c.n_layer * c.kv_dim() * sizeof(float));
  m.cache_bytes = impl_->engine.cache_bytes();
  impl_->engine.start(std::move(loaded));
  return m;
}

std::uint64_t Server::descriptor_limit() const { return impl_->transport.descriptor_limit(); }
std::size_t Server::max_idle_connections() const { return impl_->transport.options().max_waiting; }
std::uint64_t Server::served() const { return impl_->engine.stats().served; }

void Server::shutdown(double grace) {
  if (impl_->down) return;
  impl_->down = true;
  impl_->transport.stop();
  impl_->engine.shutdown(grace);
  impl_->transport.wait_idle(grace + 5);
  if (impl_->loop.joinable()) impl_->loop.join();
}

}  // namespace server
