// Event-driven HTTP/1.1 transport of `perseus serve` over GNU libmicrohttpd (private header).
// Every limit here holds before any route or token is looked at; see docs/http-api.md, "HTTP layer".
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clocks.hpp"

namespace perseus::server {


/// Transport limits. All hold before authentication.
struct HttpLimits {
  int threads = 4;                          ///< Event-loop threads (each epoll()s many connections).
  std::size_t max_body_bytes = 16u << 20;   ///< Largest request body, any transfer encoding, bytes.
  std::size_t header_bytes = 16u << 10;     ///< Request line + headers + I/O buffers per connection, bytes.
  int idle_timeout_s = 15;                  ///< A connection silent this long is closed, s.
  double request_deadline_s = 30;           ///< Whole-request deadline (idle wait included), s.
  unsigned max_connections = 16384;         ///< Open connections in total.
  unsigned per_ip_connections = 256;        ///< Open connections per client address (0: unlimited).
  int listen_backlog = 4096;                ///< listen() backlog (the kernel caps it at somaxconn).
};

/// Most query parameters a request may carry (none of the routes takes more than two).
inline constexpr std::size_t kMaxQueryParameters = 64;

/// The 400 `invalid_query` message for a request with more than kMaxQueryParameters.
inline std::string too_many_query_parameters_message() {
  return "more than " + std::to_string(kMaxQueryParameters) +
         " query parameters; this API takes at most one or two";
}

/// One request as the routes see it. `body` is complete (at most max_body_bytes).
struct HttpRequest {
  std::string method, remote_addr;
  /// The path as sent, percent-escapes kept (never decoded as a whole: an encoded '/' must not
  /// split a segment, an encoded NUL must not end the path). The router splits it at '/' and
  /// decodes each segment.
  std::string path;
  /// Decoded query arguments, at most kMaxQueryParameters + 1 (one more says "too many").
  std::vector<std::pair<std::string, std::string>> query;
  std::string authorization, content_type, content_encoding;  ///< Header values ("" if absent).
  std::optional<std::size_t> content_length;  ///< Declared length; nullopt if chunked or absent.
  bool chunked = false;                       ///< Transfer-Encoding: chunked.
  std::string body;
  int route = -1;                             ///< Set by the precheck for the handler (route index).
  bool admin = false;                         ///< Set by the precheck: the admin token was presented.
  std::vector<std::string> params;            ///< Path parameters of that route.
  /// Query argument `key`, or nullptr.
  const std::string* param(const std::string& key) const;
};

/// A response: status, body, content type and extra headers.
struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Opens a TCP listening socket on host:port (IPv4 or IPv6 literal, or "localhost") with
/// SO_REUSEADDR only (never SO_REUSEPORT: a second server on a taken port fails), the given
/// backlog, non-blocking and TCP_NODELAY. Returns the fd and writes the bound port (useful with
/// port 0). Throws perseus::InputError naming the cause ("port 7787 on 127.0.0.1 is already in
/// use by another process") when it cannot.
int open_listen_socket(const std::string& host, int port, int backlog, int* bound_port);

/// The HTTP daemon: libmicrohttpd in internal epoll mode with a pool of event-loop threads, so an
/// idle or slow connection costs a file descriptor and a small buffer, never a thread.
/// `precheck` runs once the request line and headers are in, before the body is read: it may
/// answer early (401, 404, 413, 415, 429), and then the body is never read and the connection is
/// closed after the answer. `handler` runs once the whole body is in. Both run on event-loop
/// threads and must not block for long. A chunked body that grows past max_body_bytes closes
/// the connection at that point; a request that is not complete within request_deadline_s has
/// its connection shut down.
class HttpDaemon {
 public:
  using Precheck = std::function<std::optional<HttpResponse>(HttpRequest&)>;
  using Handler = std::function<HttpResponse(HttpRequest&)>;
  /// Called after every answered request (status) for counters and the access log.
  using Logger = std::function<void(const HttpRequest&, int status)>;

  HttpDaemon(HttpLimits limits, Precheck precheck, Handler handler, Logger logger);
  ~HttpDaemon();
  HttpDaemon(const HttpDaemon&) = delete;
  HttpDaemon& operator=(const HttpDaemon&) = delete;

  /// Starts serving on `listen_fd` (from open_listen_socket(); the daemon owns it afterwards).
  /// Throws std::runtime_error when libmicrohttpd cannot start.
  void start(int listen_fd);
  /// Stops accepting, closes every connection and joins the threads. Idempotent.
  void stop();
  /// Connections currently open (for tests and /metrics).
  std::size_t open_connections() const;
  /// Connections shut down by the whole-request deadline so far.
  std::size_t deadline_closures() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::server
