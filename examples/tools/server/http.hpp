// lrt-server's HTTP/1.1 transport on POSIX sockets and epoll (no dependency): one thread runs an
// event loop that accepts connections, reads requests under their deadlines (framing.hpp, a state
// machine without I/O), writes responses and streams, and notices clients that have gone. A
// connection costs a descriptor and a deadline, never a thread, until it has sent a whole request;
// then the request runs on a thread of its own (the handler: routing, the engine's waits), which
// writes the bytes of its answer to the socket itself while the socket takes them all and nothing
// is queued, and otherwise hands them to the loop through the connection's queue (coalesced into
// one write per wake). Connections are kept alive (HTTP/1.1), pipelined requests are served in
// order, one at a time. docs/serving.md says why this loop rather than Asio.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api.hpp"
#include "framing.hpp"

namespace server {

using Clock = std::chrono::steady_clock;

inline Clock::duration seconds_to(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

/// Raises the soft limit on open descriptors to the hard one; the limit now in force.
inline std::uint64_t raise_descriptor_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
  }
  return r.rlim_cur == RLIM_INFINITY ? (1u << 20) : static_cast<std::uint64_t>(r.rlim_cur);
}

struct TransportOptions {
  int max_requests = 256;               // requests in progress at once (--max-connections); past it, 503
  std::size_t max_waiting = 0;          // connections without a request in progress; 0: from the descriptor limit
  double read_timeout_s = 10;           // a request's line, headers and body, from its first byte (408)
  double keep_alive_s = 5;              // an idle connection between requests (closed without a word)
  int requests_per_connection = 10000;  // then the connection closes after its answer
  double write_timeout_s = 30;          // a stalled client (no byte taken that long) is dropped
  double linger_s = 2;                  // after the last answer: time to read what the client still sends
  std::size_t queue_limit = std::size_t{1} << 20;  // bytes a handler may queue ahead of the client
  HeadLimits limits;
};

/// What the transport holds now, and what it has refused.
struct TransportStats {
  std::int64_t open = 0, waiting = 0, in_request = 0;  // connections: all, without and with a request in progress
  std::uint64_t accepted = 0, refused = 0;
};

/// The status line and the headers every answer carries.
inline std::string status_line(int status, bool keep) {
  return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
         (keep ? "\r\nConnection: keep-alive" : "\r\nConnection: close") +
         "\r\nAccess-Control-Allow-Origin: *\r\nServer: lrt-server\r\n";
}
using Headers = std::vector<std::pair<std::string, std::string>>;
/// A whole answer with a body (Content-Length).
inline std::string response(int status, bool keep, std::string_view type, std::string_view body,
                            const Headers& extra = {}) {
  std::string out = status_line(status, keep);
  if (!type.empty()) out += "Content-Type: " + std::string(type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : extra) out += k + ": " + v + "\r\n";
  out += "\r\n";
  out += body;
  return out;
}
/// An error's answer: OpenAI's error object, with Retry-After on a 503 and WWW-Authenticate on a 401.
inline std::string error_response(const ApiError& e, bool keep) {
  Headers extra;
  if (e.status == 503) extra.emplace_back("Retry-After", "1");
  if (e.status == 401) extra.emplace_back("WWW-Authenticate", "Bearer");
  return response(e.status, keep, "application/json", error_body(e), extra);
}

namespace detail {

/// One connection. The loop thread alone touches the first group; the handler thread and the
/// loop share the second under `m`.
struct Conn {
  int fd = -1;
  std::string peer;
  // The loop's.
  RequestFramer framer;
  enum class Phase { reading, handling, closing } phase = Phase::reading;
  Clock::time_point deadline{}, since{}, last_write{};
  bool started = false;  // the deadline is a request's (408, from `since`), not an idle connection's
  int served = 0;
  std::uint32_t events = 0;   // registered with epoll
  std::string pending;        // bytes taken from `out`, being written
  bool refuse_after = false;  // close once `pending` is written (an answer the loop gave itself)
  // Shared.
  std::mutex m;
  std::condition_variable cv;
  std::string out;       // bytes the handler queued
  bool unsent = false;   // the loop holds bytes of this answer not yet written (`pending`)
  bool queued = false;   // on the loop's list of connections with news
  bool done = false;     // the handler has answered
  bool keep = false;     // the connection stays open after the answer
  bool chunked = false;  // the answer's body is sent in chunks (a stream)
  std::atomic<bool> gone{false};
};

}  // namespace detail

class Transport;

/// A handler's side of a connection with a request in progress: the answer's bytes go to the
/// loop's queue; `gone()` says whether the client has left.
class Connection {
 public:
  Connection(Transport& t, std::shared_ptr<detail::Conn> c, int fd, bool keep)
      : t_(t), c_(std::move(c)), fd_(fd), keep_(keep) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { finish(); }

  /// Sends `data`: straight to the socket when nothing of the answer is waiting ahead of it and
  /// the socket takes it all (no wake of the loop: a streamed token costs one thread switch, not
  /// two), else what is left goes to the loop's queue; waits while more than the queue limit is
  /// ahead of the client. False once the client is gone (or stalled past the write timeout), after
  /// which nothing more is sent.
  bool send(std::string_view data);
  bool gone() const { return c_->gone.load(); }

  /// A whole response with a body (Content-Length) and the headers every answer carries.
  bool respond(int status, std::string_view type, std::string_view body, const Headers& extra = {}) {
    return send(response(status, keep_, type, body, extra));
  }
  bool respond_error(const ApiError& e) { return send(error_response(e, keep_)); }
  /// The head of a server-sent event stream; its body goes in chunks (finish() ends it).
  bool start_events() {
    const bool ok =
        send(status_line(200, keep_) +
             "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n");
    std::lock_guard<std::mutex> lock(c_->m);
    c_->chunked = true;
    return ok;
  }
  /// Ends the answer: the loop writes what is queued, then waits for the next request (keep-alive)
  /// or closes. Called by the destructor when the handler has not.
  void finish();

 private:
  Transport& t_;
  /// Under c_->m: sends what of `data` the socket takes now, if nothing is waiting ahead of it;
  /// leaves the rest in `data`.
  void write_through(std::string_view& data);

  std::shared_ptr<detail::Conn> c_;
  int fd_;  // the socket: the loop closes it only after finish()
  bool keep_;
  bool finished_ = false;
};

/// The listening socket, the event loop and the handlers' threads.
class Transport {
 public:
  /// handle(connection, request, when its first byte arrived): answers one request on a thread of
  /// its own. refused(peer, request as far as read, error, since): an answer the loop gave itself
  /// (400, 408, 413, 431, 501, 505, 503), once each.
  using Handler = std::function<void(Connection&, HttpRequest&, Clock::time_point)>;
  using Refused = std::function<void(const std::string&, const HttpRequest&, const ApiError&, Clock::time_point)>;

  Transport(const TransportOptions& o, Handler handle, Refused refused)
      : o_(o), handle_(std::move(handle)), refused_(std::move(refused)) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_ >= 0 && wake_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN, ev.data.fd = wake_;
      ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    }
    descriptors_ = raise_descriptor_limit();
    if (o_.max_waiting == 0) {
      const std::uint64_t reserve = 64 + static_cast<std::uint64_t>(o_.max_requests);
      o_.max_waiting = descriptors_ > reserve + 16 ? static_cast<std::size_t>(descriptors_ - reserve) : 16;
    }
  }
  ~Transport() {
    stop();
    wait_idle(5);
    for (auto& [fd, c] : conns_) ::close(fd);
    for (int fd : {listen_fd_, epoll_, wake_})
      if (fd >= 0) ::close(fd);
  }
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  /// Binds host:port (port 0: any free port, then port() says which); "" or why not.
  std::string open(const std::string& host, int port) {
    if (epoll_ < 0 || wake_ < 0) return std::string("epoll: ") + std::strerror(errno);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM, hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    if (const int e = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); e != 0)
      return "cannot resolve host '" + host + "': " + ::gai_strerror(e);
    std::string why = "no address for '" + host + "'";
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 4096) == 0) {
        listen_fd_ = fd;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
        port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
        break;
      }
      why = "cannot listen on " + host + ":" + service + ": " + std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(res);
    if (listen_fd_ < 0) return why;
    epoll_event ev{};
    ev.events = EPOLLIN, ev.data.fd = listen_fd_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, listen_fd_, &ev);
    return "";
  }
  int port() const { return port_; }
  const TransportOptions& options() const { return o_; }
  /// The limit on open descriptors (raised to the hard limit when the transport was made).
  std::uint64_t descriptor_limit() const { return descriptors_; }

  /// The loop: runs until stop() and then until every request in progress has been answered
  /// and written (or its client has gone).
  void run() {
    std::vector<epoll_event> events(256);
    auto next_sweep = Clock::now();
    for (;;) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 50);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<std::size_t>(i)].data.fd;
        const std::uint32_t ev = events[static_cast<std::size_t>(i)].events;
        if (fd == wake_) {
          std::uint64_t v;
          [[maybe_unused]] const ssize_t r = ::read(wake_, &v, sizeof v);
        } else if (fd == listen_fd_) {
          accept_all();
        } else if (auto it = conns_.find(fd); it != conns_.end()) {
          const std::shared_ptr<detail::Conn> c = it->second;  // on_event may close it
          on_event(c, ev);
        }
      }
      take_news();
      const auto now = Clock::now();
      if (now >= next_sweep) sweep(now), next_sweep = now + std::chrono::milliseconds(50);
      if (stopped_.load()) {
        if (listen_fd_ >= 0)
          ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_fd_, nullptr), ::close(listen_fd_), listen_fd_ = -1;
        bool busy = false;
        std::vector<std::shared_ptr<detail::Conn>> idle;
        for (auto& [fd, c] : conns_) {
          if (c->phase == detail::Conn::Phase::handling || !c->pending.empty())
            busy = true;
          else if (c->phase == detail::Conn::Phase::reading)
            idle.push_back(c);
        }
        for (auto& c : idle) close_conn(c);
        if (!busy && in_request_.load() == 0) break;
      }
    }
    for (auto& [fd, c] : conns_) {
      ::close(fd);
      std::lock_guard<std::mutex> lock(c->m);
      c->gone = true;
      c->cv.notify_all();
    }
    conns_.clear();
    publish();
  }

  /// Stops taking connections (from any thread; async-signal-safe); run() returns once the
  /// requests in progress have been answered.
  void stop() {
    stopped_ = true;
    wake();
  }
  /// Waits up to `seconds` for every handler's thread to end; whether they all did.
  bool wait_idle(double seconds) {
    std::unique_lock<std::mutex> lock(idle_m_);
    return idle_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return handlers_ == 0; });
  }
  TransportStats stats() const {
    TransportStats s;
    s.open = open_.load(), s.in_request = in_request_.load(), s.waiting = s.open - s.in_request;
    s.accepted = accepted_.load(), s.refused = refused_count_.load();
    return s;
  }

 private:
  friend class Connection;
  using Conn = detail::Conn;

  void wake() {
    const std::uint64_t one = 1;
    if (wake_ >= 0) [[maybe_unused]]
      const ssize_t r = ::write(wake_, &one, sizeof one);
  }
  /// A handler has queued bytes or finished: the loop looks at `c` at its next turn.
  void notify(const std::shared_ptr<Conn>& c) {
    {
      std::lock_guard<std::mutex> lock(news_m_);
      news_.push_back(c);
    }
    wake();
  }
  void publish() { open_ = static_cast<std::int64_t>(conns_.size()); }

  void accept_all() {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: stop listening for a moment rather than spin on the same error.
          ::epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_fd_, nullptr);
          resume_accept_ = Clock::now() + std::chrono::milliseconds(100);
          if (!emfile_said_) {
            std::fprintf(stderr, "lrt-server: accept: %s; not accepting for 0.1 s\n", std::strerror(errno));
            emfile_said_ = true;
          }
        }
        return;
      }
      ++accepted_;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_shared<Conn>();
      c->fd = fd;
      c->peer = peer_name(ss);
      c->framer = RequestFramer(o_.limits);
      c->since = Clock::now();
      c->deadline = c->since + seconds_to(o_.read_timeout_s);
      c->started = true;  // a new connection owes a request within the read timeout
      const bool full = conns_.size() - static_cast<std::size_t>(in_request_.load()) >= o_.max_waiting;
      conns_.emplace(fd, c);
      watch(c, EPOLLIN | EPOLLRDHUP, true);
      publish();
      if (full)  // past the limit: the answer at once, then close
        refuse(c, HttpRequest{},
               ApiError{503, "too many open connections (the descriptor limit)", "server_error", "", "busy"}, c->since);
    }
  }

  static std::string peer_name(const sockaddr_storage& ss) {
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
      ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
      port = ntohs(a->sin_port);
      return std::string(host) + ":" + std::to_string(port);
    }
    if (ss.ss_family == AF_INET6) {
      const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
      ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
      port = ntohs(a->sin6_port);
      return "[" + std::string(host) + "]:" + std::to_string(port);
    }
    return "?";
  }

  void watch(const std::shared_ptr<Conn>& c, std::uint32_t events, bool add = false) {
    if (!add && events == c->events) return;
    epoll_event ev{};
    ev.events = events, ev.data.fd = c->fd;
    ::epoll_ctl(epoll_, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
  }

  void close_conn(const std::shared_ptr<Conn>& c) {
    if (c->fd < 0) return;
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
    conns_.erase(c->fd);
    c->fd = -1;
    {
      std::lock_guard<std::mutex> lock(c->m);
      c->gone = true;
    }
    c->cv.notify_all();
    publish();
  }

  /// An answer the loop gives itself (a request it cannot read, a limit): written, logged, and
  /// then the connection closes.
  void refuse(const std::shared_ptr<Conn>& c, const HttpRequest& req, const ApiError& e, Clock::time_point since) {
    ++refused_count_;
    if (refused_) refused_(c->peer, req, e, since);
    c->refuse_after = true;
    if (c->pending.empty()) c->last_write = Clock::now();
    c->pending += error_response(e, false);
    write_pending(c);
  }

  void on_event(const std::shared_ptr<Conn>& c, std::uint32_t ev) {
    if (ev & EPOLLOUT) write_pending(c);
    if (c->fd < 0) return;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) read_some(c, ev);
  }

  /// Reads what is there. While a request is being received, that is the request; while one is
  /// handled, the bytes of the next (kept for later, up to a limit) or the sign that the client left.
  void read_some(const std::shared_ptr<Conn>& c, std::uint32_t ev) {
    char buf[16384];
    bool eof = (ev & (EPOLLHUP | EPOLLERR)) != 0;
    // Bytes after an answer that closes the connection are read and dropped.
    const bool keep_bytes = c->phase != Conn::Phase::closing && !c->refuse_after;
    for (int rounds = 0; rounds < 8 && !eof; ++rounds) {
      if (keep_bytes && !room(c)) break;  // a limit on pipelined bytes
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        if (keep_bytes) c->framer.feed(std::string_view(buf, static_cast<std::size_t>(n)));
        if (static_cast<std::size_t>(n) < sizeof buf) break;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      eof = true;  // closed by the client, or failed
    }
    if ((ev & EPOLLRDHUP) && !(ev & EPOLLIN)) eof = true;
    switch (c->phase) {
      case Conn::Phase::closing:
        if (eof) close_conn(c);
        return;
      case Conn::Phase::handling:
        if (eof) {  // the client has gone: the handler stops; the loop closes once it has
          {
            std::lock_guard<std::mutex> lock(c->m);
            c->gone = true;
          }
          c->cv.notify_all();
          watch(c, 0);
        } else if (!room(c)) {
          watch(c, EPOLLRDHUP | (c->pending.empty() ? 0u : EPOLLOUT));
        }
        return;
      case Conn::Phase::reading:
        if (c->refuse_after) {
          if (eof) close_conn(c);
          return;
        }
        dispatch(c);
        if (eof && c->fd >= 0 && c->phase == Conn::Phase::reading && !c->refuse_after) {
          if (c->framer.in_body())  // it may still read the answer
            refuse(c, HttpRequest{},
                   ApiError{400, "the body ended before Content-Length bytes", "invalid_request_error", "", ""},
                   c->since);
          else
            close_conn(c);
        }
        return;
    }
  }

  /// Whether a connection may buffer more bytes (a request's, or pipelined ones).
  bool room(const std::shared_ptr<Conn>& c) const {
    return c->framer.buffered() < o_.limits.max_head + o_.limits.max_body + 65536;
  }

  /// The next request of a connection that is reading, if it is all there.
  void dispatch(const std::shared_ptr<Conn>& c) {
    HttpRequest req;
    ApiError err;
    if (!c->started && c->framer.started()) {  // the first byte of a request on a kept-alive connection
      c->started = true;
      c->since = Clock::now();
      c->deadline = c->since + seconds_to(o_.read_timeout_s);
    }
    switch (c->framer.next(req, err)) {
      case RequestFramer::Event::none:
        if (c->framer.wants_continue()) {
          c->pending += "HTTP/1.1 100 Continue\r\n\r\n";
          write_pending(c);
        }
        return;
      case RequestFramer::Event::error:
        refuse(c, req, err, c->since);
        return;
      case RequestFramer::Event::request:
        break;
    }
    const Clock::time_point since = c->since;
    if (in_request_.load() >= o_.max_requests) {
      refuse(c, req, ApiError{503, "too many requests in progress (--max-connections)", "server_error", "", "busy"},
             since);
      return;
    }
    ++in_request_;
    c->phase = Conn::Phase::handling;
    ++c->served;
    const bool keep = wants_keep_alive(req) && !stopped_.load() && c->served < o_.requests_per_connection;
    {
      std::lock_guard<std::mutex> lock(c->m);
      c->out.clear();
      c->done = false, c->keep = keep, c->chunked = false;
      c->unsent = !c->pending.empty();  // a "100 Continue" still being written
    }
    {
      std::lock_guard<std::mutex> lock(idle_m_);
      ++handlers_;
    }
    std::thread([this, c, fd = c->fd, keep, since, r = std::move(req)]() mutable {
      {
        Connection conn(*this, c, fd, keep);
        try {
          handle_(conn, r, since);
        } catch (...) {  // the handler answers its own errors; nothing may end the process
        }
      }  // finish(): the loop takes over
      std::lock_guard<std::mutex> lock(idle_m_);
      --handlers_;
      idle_cv_.notify_all();
    }).detach();
  }

  /// The connections whose handlers queued bytes or finished.
  void take_news() {
    std::vector<std::shared_ptr<Conn>> news;
    {
      std::lock_guard<std::mutex> lock(news_m_);
      news.swap(news_);
    }
    for (const auto& c : news) {
      {
        std::lock_guard<std::mutex> lock(c->m);
        c->queued = false;
      }
      if (c->fd >= 0) write_pending(c);
    }
  }

  /// Writes what is queued; once an answer is all written, the next request or the close.
  void write_pending(const std::shared_ptr<Conn>& c) {
    if (c->fd < 0) return;
    bool done = false, keep = false, gone = c->gone.load();
    for (;;) {
      if (c->pending.empty() && c->phase == Conn::Phase::handling) {
        std::lock_guard<std::mutex> lock(c->m);
        c->pending.swap(c->out);
        c->unsent = !c->pending.empty();  // cleared here once what was taken is written
        done = c->done, keep = c->keep;
        if (!c->pending.empty()) c->last_write = Clock::now();
        c->cv.notify_all();  // room in the queue
      }
      if (c->pending.empty() || gone) break;
      const ssize_t n = ::send(c->fd, c->pending.data(), c->pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->pending.erase(0, static_cast<std::size_t>(n));
        c->last_write = Clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      gone = true;  // the client has gone
      {
        std::lock_guard<std::mutex> lock(c->m);
        c->gone = true;
      }
      c->cv.notify_all();
    }
    if (gone) c->pending.clear();
    const bool writing = !c->pending.empty();
    if (c->refuse_after) {
      if (!writing)
        begin_close(c);
      else
        watch(c, EPOLLOUT | EPOLLRDHUP);
      return;
    }
    if (c->phase == Conn::Phase::handling) {
      if (!(done && !writing) && !(gone && done)) {
        const std::uint32_t base = gone ? 0u : (EPOLLRDHUP | (room(c) ? EPOLLIN : 0u));
        watch(c, base | (writing ? EPOLLOUT : 0u));
        return;
      }
      // The answer is written (or its client gone): the next request, or the end.
      --in_request_;
      if (gone || !keep) {
        if (gone)
          close_conn(c);
        else
          begin_close(c);
        return;
      }
      c->phase = Conn::Phase::reading;
      c->started = false;
      c->deadline = Clock::now() + seconds_to(o_.keep_alive_s);
      watch(c, EPOLLIN | EPOLLRDHUP);
      dispatch(c);  // a pipelined request may be here already
      return;
    }
    watch(c, (c->phase == Conn::Phase::closing ? EPOLLIN : EPOLLIN | EPOLLRDHUP) | (writing ? EPOLLOUT : 0u));
  }

  /// No more writes: shut the sending side, then read and drop what the client still sends for
  /// the linger time (so that closing does not reset a connection whose answer it has not read).
  void begin_close(const std::shared_ptr<Conn>& c) {
    c->refuse_after = false;
    c->phase = Conn::Phase::closing;
    ::shutdown(c->fd, SHUT_WR);
    c->deadline = Clock::now() + seconds_to(o_.linger_s);
    watch(c, EPOLLIN | EPOLLRDHUP);
  }

  /// Deadlines: a request not received in time (408), an idle kept-alive connection (closed), a
  /// stalled client (dropped), the end of a linger; and accepting again after running out of
  /// descriptors.
  void sweep(Clock::time_point now) {
    if (listen_fd_ >= 0 && resume_accept_ != Clock::time_point{} && now >= resume_accept_) {
      epoll_event ev{};
      ev.events = EPOLLIN, ev.data.fd = listen_fd_;
      ::epoll_ctl(epoll_, EPOLL_CTL_ADD, listen_fd_, &ev);
      resume_accept_ = {};
      emfile_said_ = false;
    }
    std::vector<std::shared_ptr<Conn>> expired, stalled;
    for (auto& [fd, c] : conns_) {
      if (!c->pending.empty() && now - c->last_write > seconds_to(o_.write_timeout_s))
        stalled.push_back(c);
      else if (c->phase != Conn::Phase::handling && now >= c->deadline)
        expired.push_back(c);
    }
    for (auto& c : stalled) {
      if (c->fd < 0) continue;
      if (c->phase == Conn::Phase::handling) {
        {
          std::lock_guard<std::mutex> lock(c->m);
          c->gone = true;
        }
        c->cv.notify_all();
        c->pending.clear();
        write_pending(c);
      } else {
        close_conn(c);
      }
    }
    for (auto& c : expired) {
      if (c->fd < 0) continue;
      if (c->phase == Conn::Phase::closing || c->refuse_after || !c->started) {
        close_conn(c);
      } else {
        refuse(c, HttpRequest{},
               ApiError{408, "the request was not received in time (--read-timeout)", "invalid_request_error", "",
                        "timeout"},
               c->since);
      }
    }
  }

  TransportOptions o_;
  Handler handle_;
  Refused refused_;
  int listen_fd_ = -1, port_ = 0, epoll_ = -1, wake_ = -1;
  std::uint64_t descriptors_ = 0;
  std::unordered_map<int, std::shared_ptr<Conn>> conns_;  // the loop's
  Clock::time_point resume_accept_{};
  bool emfile_said_ = false;
  std::atomic<bool> stopped_{false};
  std::atomic<std::int64_t> open_{0}, in_request_{0};
  std::atomic<std::uint64_t> accepted_{0}, refused_count_{0};
  std::mutex news_m_;
  std::vector<std::shared_ptr<Conn>> news_;
  std::mutex idle_m_;
  std::condition_variable idle_cv_;
  int handlers_ = 0;
};

inline bool Connection::send(std::string_view data) {
  if (finished_) return false;
  std::unique_lock<std::mutex> lock(c_->m);
  if (c_->gone) return false;
  std::string framed;  // a chunk of a stream: SIZE CRLF DATA CRLF
  if (c_->chunked && !data.empty()) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    framed.reserve(data.size() + 32);
    framed += size;
    framed += data;
    framed += "\r\n";
    data = framed;
  }
  write_through(data);
  if (data.empty()) return true;
  c_->out += data;
  const bool first = !c_->queued;
  c_->queued = true;
  if (first) {
    lock.unlock();
    t_.notify(c_);
    lock.lock();
  }
  // Ahead of the client by more than the limit: wait for the loop to take it (the loop drops a
  // client stalled past the write timeout, which sets `gone`).
  while (c_->out.size() > t_.o_.queue_limit && !c_->gone) c_->cv.wait_for(lock, std::chrono::milliseconds(100));
  return !c_->gone;
}

inline void Connection::write_through(std::string_view& data) {
  if (!c_->out.empty() || c_->unsent) return;  // bytes ahead of these: the loop's
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      data.remove_prefix(static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR)
      continue;
    else
      return;  // full, or failed: the loop writes the rest, or finds that the client has gone
  }
}

inline void Connection::finish() {
  if (finished_) return;
  finished_ = true;
  {
    std::lock_guard<std::mutex> lock(c_->m);
    if (c_->chunked && !c_->gone) {  // the stream's last chunk, at once if the socket takes it
      std::string_view end = "0\r\n\r\n";
      write_through(end);
      c_->out += end;
    }
    c_->done = true;
    c_->queued = true;
  }
  t_.notify(c_);
}

}  // namespace server
