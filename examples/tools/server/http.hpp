// lrt-server's HTTP/1.1 transport on POSIX sockets (no dependency): a listener whose accept loop
// gives each connection a thread of its own, up to a limit (past it the accept loop itself
// answers 503, so a full server still says so), and a Connection that reads one request under a
// deadline for its line, headers and body together (a client sending a byte a second is cut off,
// 408), writes with a time limit per write, and notices a client that has gone. Every response
// closes the connection (Connection: close); a stream's body ends with the connection.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "api.hpp"

namespace server {

/// Milliseconds left until t (0 when past), capped for poll().
inline int ms_until(std::chrono::steady_clock::time_point t) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - std::chrono::steady_clock::now()).count();
  return left <= 0 ? 0 : left > 1000000 ? 1000000 : static_cast<int>(left);
}

/// One accepted connection: one request read, one response written.
class Connection {
 public:
  explicit Connection(int fd) : fd_(fd) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { close(); }

  /// Reads a request (line, headers and a body of Content-Length bytes) before `deadline`.
  /// Returns true with `req` filled; false with error.status set to the status to answer (400,
  /// 408, 413, 431, 501, 505), or 0 when the client closed without a request.
  bool read_request(HttpRequest& req, const HeadLimits& lim, std::chrono::steady_clock::time_point deadline,
                    ApiError& error) {
    std::string buf;
    std::size_t head = 0;
    char chunk[16384];
    for (;;) {
      const HeadState st = parse_head(buf, lim, req, head, error);
      if (st == HeadState::bad) return false;
      if (st == HeadState::complete) break;
      const long n = read_some(chunk, sizeof chunk, deadline, error);
      if (n <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
    }
    req.body = buf.substr(head);
    if (req.body.size() > req.content_length) req.body.resize(req.content_length);  // pipelined bytes: ignored
    while (req.body.size() < req.content_length) {
      const long n = read_some(chunk, std::min(sizeof chunk, req.content_length - req.body.size()), deadline, error);
      if (n <= 0) {
        if (error.status == 0)
          error = ApiError{400, "the body ended before Content-Length bytes", "invalid_request_error", "", ""};
        return false;
      }
      req.body.append(chunk, static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Writes all of `data`, each wait for the socket at most `timeout_s`; false when the client is
  /// gone (or stalled that long), after which every send fails.
  bool send(std::string_view data, double timeout_s = 30) {
    while (ok_ && !data.empty()) {
      pollfd p{fd_, POLLOUT, 0};
      const int r = ::poll(&p, 1, static_cast<int>(timeout_s * 1000));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return ok_ = false;
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n <= 0) return ok_ = false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return ok_;
  }

  /// Whether the client has closed its side or the connection failed (a request's bytes past its
  /// body are not a sign: they are read and dropped).
  bool gone() {
    if (!ok_) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return !(ok_ = false);
    char c[512];
    const ssize_t n = ::recv(fd_, c, sizeof c, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return !(ok_ = false);
    return false;
  }

  /// A whole response with a body (Content-Length) and the headers every answer carries.
  bool respond(int status, std::string_view type, std::string_view body,
               const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    std::string head = status_line(status);
    if (!type.empty()) head += "Content-Type: " + std::string(type) + "\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [k, v] : extra) head += k + ": " + v + "\r\n";
    head += "\r\n";
    return send(head) && send(body);
  }
  bool respond_error(const ApiError& e) {
    std::vector<std::pair<std::string, std::string>> extra;
    if (e.status == 503) extra.emplace_back("Retry-After", "1");
    if (e.status == 401) extra.emplace_back("WWW-Authenticate", "Bearer");
    return respond(e.status, "application/json", error_body(e), extra);
  }
  /// The head of a server-sent event stream; its body ends when the connection closes.
  bool start_events() {
    return send(status_line(200) + "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n");
  }

  /// Ends the response: no more writes, then up to `linger_s` to read what the client still sends
  /// (so that closing does not reset a connection whose response it has not read), then closes.
  void finish(double linger_s = 2) {
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_WR);
    const auto until =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(linger_s));
    char buf[16384];
    std::size_t drained = 0;
    while (drained < (64u << 20)) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, ms_until(until));
      if (r <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) break;
      drained += static_cast<std::size_t>(n);
    }
    close();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
  }

 private:
  static std::string status_line(int status) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
           "\r\nConnection: close\r\nAccess-Control-Allow-Origin: *\r\nServer: lrt-server\r\n";
  }
  /// Up to n bytes before the deadline: > 0 bytes read; 0 the client closed (error.status 0) or
  /// the deadline passed (408); < 0 an error.
  long read_some(char* buf, std::size_t n, std::chrono::steady_clock::time_point deadline, ApiError& error) {
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, ms_until(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        error = ApiError{408, "the request was not received in time (--read-timeout)", "invalid_request_error", "",
                         "timeout"};
        return 0;
      }
      const ssize_t got = ::recv(fd_, buf, n, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) {  // closed (the client may still read the answer) or failed
        error.status = 0;
        if (got < 0) ok_ = false;
        return got < 0 ? -1 : 0;
      }
      return static_cast<long>(got);
    }
  }

  int fd_;
  bool ok_ = true;
};

/// A listening socket and its accept loop.
class Listener {
 public:
  Listener() {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  }
  ~Listener() {
    stop();
    wait_idle(5);
    for (int fd : {listen_fd_, wake_[0], wake_[1]})
      if (fd >= 0) ::close(fd);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// Binds host:port (port 0: any free port, then port() says which); "" or why not.
  std::string open(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM, hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    if (const int e = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); e != 0)
      return "cannot resolve host '" + host + "': " + ::gai_strerror(e);
    std::string why = "no address for '" + host + "'";
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 512) == 0) {
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
    return listen_fd_ >= 0 ? "" : why;
  }
  int port() const { return port_; }

  /// Accepts connections until stop(): each runs handle(connection) on a thread of its own, at
  /// most max_connections at once; past that the connection is answered `busy` here and closed.
  void serve(const std::function<void(Connection&)>& handle, int max_connections,
             const std::function<ApiError()>& busy) {
    for (;;) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      const int r = ::poll(p, 2, -1);
      if (r < 0 && errno == EINTR) continue;
      if (stopped_ || (p[1].revents & POLLIN)) break;
      if (!(p[0].revents & POLLIN)) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      {
        std::lock_guard<std::mutex> lock(m_);
        if (active_ >= max_connections) {
          Connection c(fd);
          c.respond_error(busy());
          c.finish(0.2);
          continue;
        }
        ++active_;
      }
      std::thread([this, fd, &handle] {
        {
          Connection c(fd);
          try {
            handle(c);
          } catch (...) {  // the handler answers its own errors; nothing may end the process
          }
        }
        std::lock_guard<std::mutex> lock(m_);
        --active_;
        idle_.notify_all();
      }).detach();
    }
    if (listen_fd_ >= 0) ::close(listen_fd_), listen_fd_ = -1;  // no more connections are taken
  }

  /// Makes serve() return (from any thread; async-signal-safe).
  void stop() {
    stopped_ = true;
    if (wake_[1] >= 0) {
      const char c = 1;
      [[maybe_unused]] const ssize_t n = ::write(wake_[1], &c, 1);
    }
  }
  /// Waits up to `seconds` for every connection's thread to end; whether they all did.
  bool wait_idle(double seconds) {
    std::unique_lock<std::mutex> lock(m_);
    return idle_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return active_ == 0; });
  }
  int connections() const {
    std::lock_guard<std::mutex> lock(m_);
    return active_;
  }

 private:
  int listen_fd_ = -1, port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopped_{false};
  mutable std::mutex m_;
  std::condition_variable idle_;
  int active_ = 0;
};

}  // namespace server
