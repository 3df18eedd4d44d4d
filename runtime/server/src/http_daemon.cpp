// libmicrohttpd transport: listen socket, per-connection limits, body accumulation, deadlines.
#include "http_daemon.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/server/api_error.hpp"

namespace perseus::server {

namespace {

std::string header(MHD_Connection* c, const char* key) {
  const char* v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, key);
  return v ? std::string(v) : std::string();
}

std::string peer_address(MHD_Connection* c) {
  const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  const sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

/// Where the names (or keys) libmicrohttpd parsed in place begin, for the raw-NUL checks: is a
/// byte the start of one? Sorted once, so n lookups cost O(n log n) (a request can hold
/// thousands of tiny headers or query arguments).
class PointerSet {
 public:
  template <class Pairs>
  explicit PointerSet(const Pairs& pairs) {
    starts_.reserve(pairs.size());
    for (const auto& p : pairs) starts_.push_back(p.first);
    std::sort(starts_.begin(), starts_.end(), std::less<>());
  }
  bool contains(const char* p) const { return std::binary_search(starts_.begin(), starts_.end(), p, std::less<>()); }

 private:
  std::vector<const char*> starts_;
};

/// Per-request state kept in MHD's con_cls (made by uri_seen()).
struct RequestCtx {
  HttpRequest req;
  bool started = false;         // access() has read the request line and headers
  bool answered = false;        // a response was queued early (before the body)
  bool query_overflow = false;  // more than kMaxQueryParameters + 1 query arguments: cut by uri_seen()
};

/// libmicrohttpd's URI log callback: called with the request line's URI before libmicrohttpd
/// splits its query into arguments, each of which takes ~56 bytes of the connection's memory
/// pool (header_bytes). A query of a few hundred arguments ran the pool out, and the request was
/// never answered (the client waited for the idle timeout). A query with more arguments than any
/// request may carry is cut here, in libmicrohttpd's own buffer, before it is split (the '?' it
/// found is kept, the arguments become ""), and access() refuses it with 400. Returns the
/// request's RequestCtx (MHD's con_cls; freed by request_completed()).
void* uri_seen(void*, const char* uri, MHD_Connection*) {
  auto* ctx = new RequestCtx;
  if (char* q = std::strchr(const_cast<char*>(uri), '?')) {
    std::size_t arguments = 1;
    for (const char* p = q + 1; *p != '\0'; ++p) arguments += *p == '&';
    if (arguments > kMaxQueryParameters + 1) {
      q[1] = '\0';
      ctx->query_overflow = true;
    }
  }
  return ctx;
}

/// Per-connection state for the whole-request deadline (MHD's socket context).
struct ConnState {
  int fd = -1;
  std::atomic<double> request_start_s{0};  // when the current request's clock started (connect or last answer)
};

/// libmicrohttpd's unescape callback: keeps the text as sent. By default it decodes %HH in the
/// whole path before the application sees it, so "/v1/jobs/a%2Fb" arrived as "/v1/jobs/a/b" (a
/// different route) and "%00" cut the path short. The router decodes each path segment itself
/// after splitting at '/' (http_server.cpp); query arguments are decoded by unescape() below.
std::size_t keep_escaped(void*, MHD_Connection*, char* s) { return std::strlen(s); }

/// %HH escapes of a query argument decoded as libmicrohttpd decodes them (a malformed escape is
/// kept as it is). The result may hold any byte, NUL included.
std::string unescape(const char* s) {
  std::string v = s ? s : "";
  v.resize(MHD_http_unescape(v.data()));
  return v;
}

}  // namespace

const std::string* HttpRequest::param(const std::string& key) const {
  for (const auto& [k, v] : query)
    if (k == key) return &v;
  return nullptr;
}

struct HttpDaemon::Impl {
  HttpLimits lim;
  Precheck precheck;
  Handler handler;
  Logger logger;
  MHD_Daemon* daemon = nullptr;

  mutable std::mutex conn_mu;  // guards the set (connect/close), not the per-request clock
  std::unordered_set<ConnState*> conns;
  std::atomic<std::size_t> deadline_closures{0};

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread reaper;

  void queue(MHD_Connection* c, const HttpRequest& req, const HttpResponse& r, bool close) {
    MHD_Response* resp = MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()),
                                                         MHD_RESPMEM_MUST_COPY);
    if (!resp) return;  // out of memory: MHD closes the connection
    if (r.status != 304 && !r.content_type.empty())
      MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r.content_type.c_str());
    for (const auto& [k, v] : r.headers) MHD_add_response_header(resp, k.c_str(), v.c_str());
    if (close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    MHD_queue_response(c, static_cast<unsigned>(r.status), resp);
    MHD_destroy_response(resp);
    if (logger) logger(req, r.status);
  }

  static HttpResponse transport_error(int status, const char* code, const std::string& message) {
    HttpResponse r;
    r.status = status;
    r.body = error_body(code, message);
    return r;
  }

  /// Framing and identity headers as sent: how often each came.
  struct HeaderScan {
    int content_length = 0, transfer_encoding = 0, authorization = 0, content_type = 0;
    /// A header whose value holds a NUL byte (libmicrohttpd's lookups end it there, so
    /// "Authorization: Bearer TOKEN\0junk" was read as the token): its name.
    std::string nul_in;
    std::vector<std::pair<const char*, std::string_view>> lines;  // (name, value) as parsed
  };
  static HeaderScan scan_headers(MHD_Connection* c) {
    HeaderScan scan;
    MHD_get_connection_values_n(
        c, MHD_HEADER_KIND,
        [](void* cls, MHD_ValueKind, const char* k, std::size_t ks, const char* v, std::size_t vs) -> MHD_Result {
          auto* h = static_cast<HeaderScan*>(cls);
          const std::string_view key(k, ks);
          if (v != nullptr) h->lines.emplace_back(k, std::string_view(v, vs));  // bounded by the header block's size
          auto is = [&](std::string_view name) {
            return key.size() == name.size() && ::strncasecmp(key.data(), name.data(), name.size()) == 0;
          };
          if (is(MHD_HTTP_HEADER_CONTENT_LENGTH)) ++h->content_length;
          if (is(MHD_HTTP_HEADER_TRANSFER_ENCODING)) ++h->transfer_encoding;
          if (is(MHD_HTTP_HEADER_AUTHORIZATION)) ++h->authorization;
          if (is(MHD_HTTP_HEADER_CONTENT_TYPE)) ++h->content_type;
          return MHD_YES;
        },
        &scan);
    // libmicrohttpd 0.9.75 parses the header block in place, writing a NUL over each line's CR
    // (or bare LF). A value's C string therefore ends at its line's end, where the next byte is
    // the LF, another NUL or the next header's name; any other byte there is the rest of a
    // value cut by a raw NUL (the same layout check_raw_nul() relies on for the path).
    const PointerSet names(scan.lines);
    for (const auto& [name, value] : scan.lines) {
      const char* q = value.data() + value.size() + 1;  // after the NUL that ended the value
      if (*q != '\n' && *q != '\0' && !names.contains(q)) {
        scan.nul_in = name;
        break;
      }
    }
    return scan;
  }
  /// Ambiguous framing or identity (RFC 9112 §6.3: a request smuggled past a proxy that reads
  /// the other length): refused, and the connection closed. nullopt: fine.
  static std::optional<HttpResponse> check_headers(const HeaderScan& h, const std::string& transfer_encoding) {
    if (!h.nul_in.empty())
      return transport_error(400, "invalid_header",
                             fmt::format("header {} holds a NUL byte; a header is text", quote_input(h.nul_in, 64)));
    if (h.content_length > 1 || h.transfer_encoding > 1 || h.authorization > 1 || h.content_type > 1)
      return transport_error(400, "invalid_header",
                             "a Content-Length, Transfer-Encoding, Authorization or Content-Type header appears more "
                             "than once; send each once");
    if (h.content_length > 0 && h.transfer_encoding > 0)
      return transport_error(400, "invalid_header",
                             "both Content-Length and Transfer-Encoding: send one (RFC 9112 section 6.3)");
    if (h.transfer_encoding > 0) {
      std::string te = transfer_encoding;
      for (auto& ch : te) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      while (!te.empty() && (te.back() == ' ' || te.back() == '\t')) te.pop_back();
      while (!te.empty() && (te.front() == ' ' || te.front() == '\t')) te.erase(te.begin());
      if (te != "chunked")
        return transport_error(501, "unsupported_transfer_encoding",
                               fmt::format("Transfer-Encoding {} is not supported; send the body with Content-Length "
                                           "or \"Transfer-Encoding: chunked\"",
                                           quote_input(transfer_encoding, 64)));
    }
    return std::nullopt;
  }

  /// A raw NUL byte in the request's path (not "%00", which the router refuses by segment):
  /// libmicrohttpd hands the path over as a C string, cut at the NUL, so
  /// "DELETE /v1/jobs/J\0/stragglers/0" arrived as "DELETE /v1/jobs/J" and deleted the job.
  /// Refused with 400, the connection closed. libmicrohttpd 0.9.75 parses the request
  /// line in place, ending the path with a NUL where the query or the " HTTP/1.x" begins, so
  /// without a query only NULs lie between the path's own end and the version string; any other
  /// byte there is the rest of a path cut by a raw NUL. (With a query, a NUL inside it cuts the
  /// query only.)
  static std::optional<HttpResponse> check_raw_nul(const char* url, const char* version, bool no_query) {
    bool nul = false;
    if (no_query && url != nullptr && version != nullptr) {
      const char* path_end = url + std::strlen(url);
      // Same buffer, version after the path (else the layout is not the one described: no check).
      // "/v1/jobs?" (an empty query) leaves only NULs there too.
      if (version > path_end && version - path_end < 65536)
        for (const char* p = path_end; p < version && !nul; ++p) nul = *p != '\0';
    }
    if (!nul) return std::nullopt;
    return transport_error(400, "invalid_request",
                           "the request's path holds a raw NUL byte; percent-encode it, or remove it");
  }

  /// A raw NUL inside the query: libmicrohttpd splits the query in place, a NUL over each '&'
  /// and over the space before the version, so each argument's C string ends where the next
  /// argument (or another NUL, or the version) begins; any other byte there is the rest of an
  /// argument cut by a raw NUL ("?since_version=1<NUL>junk" read as since_version=1).
  static bool query_cut_by_nul(const std::vector<std::pair<const char*, const char*>>& raw, const char* version) {
    const PointerSet keys(raw);
    for (const auto& [k, v] : raw) {
      const char* next = (v != nullptr ? v + std::strlen(v) : k + std::strlen(k)) + 1;
      if (*next != '\0' && next != version && !keys.contains(next)) return true;
    }
    return false;
  }

  /// Transport limits on the header block: body size (declared), encodings. nullopt: fine.
  std::optional<HttpResponse> check_transport(const HttpRequest& req) const {
    if (!req.content_encoding.empty() && req.content_encoding != "identity")
      return transport_error(415, "unsupported_encoding",
                             fmt::format("Content-Encoding \"{}\" is not accepted: the server never decompresses; "
                                         "send the JSON body uncompressed",
                                         req.content_encoding.substr(0, 64)));
    if (req.content_length && *req.content_length > lim.max_body_bytes)
      return transport_error(413, "payload_too_large",
                             fmt::format("request body of {} bytes exceeds the limit of {} bytes (--max-body-mb)",
                                         *req.content_length, lim.max_body_bytes));
    return std::nullopt;
  }

  /// The path of a request target: an absolute-form target ("http://host:port/v1/jobs", which
  /// RFC 9112 §3.2.2 says a server MUST accept, as proxies send it) loses its scheme and
  /// authority ("http://host" alone is "/"); any other target is kept as it is.
  static std::string origin_form(const char* url) {
    std::string_view u = url != nullptr ? url : "";
    for (std::string_view scheme : {"http://", "https://"}) {
      if (u.size() < scheme.size() ||
          !std::equal(scheme.begin(), scheme.end(), u.begin(), [](char a, char b) {
            return a == std::tolower(static_cast<unsigned char>(b));
          }))
        continue;
      const auto slash = u.find('/', scheme.size());
      return slash == std::string_view::npos ? "/" : std::string(u.substr(slash));
    }
    return std::string(u);
  }

  MHD_Result access(MHD_Connection* c, const char* url, const char* method, const char* version,
                    const char* upload_data, std::size_t* upload_size, void** con_cls) {
    auto* ctx = static_cast<RequestCtx*>(*con_cls);
    if (!ctx) {  // uri_seen() always makes it; kept for a libmicrohttpd that would not call it
      ctx = new RequestCtx;
      *con_cls = ctx;
    }
    if (!ctx->started) {  // headers complete; no body byte read yet
      ctx->started = true;
      HttpRequest& q = ctx->req;
      q.method = method;
      q.path = origin_form(url);
      q.remote_addr = peer_address(c);
      q.authorization = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
      q.content_type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
      q.content_encoding = header(c, MHD_HTTP_HEADER_CONTENT_ENCODING);
      const std::string te = header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
      q.chunked = te.find("chunked") != std::string::npos;
      if (const std::string cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH); !cl.empty() && !q.chunked) {
        errno = 0;
        char* end = nullptr;
        const unsigned long long n = std::strtoull(cl.c_str(), &end, 10);
        q.content_length = (errno == ERANGE || !end || *end) ? std::numeric_limits<std::size_t>::max()
                                                               : static_cast<std::size_t>(n);
      }
      struct QueryScan {
        std::vector<std::pair<std::string, std::string>>* query;
        std::vector<std::pair<const char*, const char*>> raw;  // (key, value) as parsed
      } qs{&q.query, {}};
      MHD_get_connection_values(
          c, MHD_GET_ARGUMENT_KIND,
          [](void* cls, MHD_ValueKind, const char* k, const char* v) -> MHD_Result {
            auto* scan = static_cast<QueryScan*>(cls);
            // Every argument (pointers only; their number is bounded by the request line's size):
            // query_cut_by_nul() looks for each one's successor among them.
            if (k != nullptr) scan->raw.emplace_back(k, v);
            // An empty pair ("?&since_version=1", "?&") is no parameter (WHATWG URL form parsing).
            if ((k == nullptr || *k == '\0') && (v == nullptr || *v == '\0')) return MHD_YES;
            if (scan->query->size() <= kMaxQueryParameters) scan->query->emplace_back(unescape(k), unescape(v));
            return MHD_YES;
          },
          &qs);
      auto refused = ctx->query_overflow ? transport_error(400, "invalid_query", too_many_query_parameters_message())
                                         : check_raw_nul(url, version, q.query.empty());
      if (!refused && query_cut_by_nul(qs.raw, version))
        refused = transport_error(400, "invalid_request",
                                  "the request's query holds a raw NUL byte; percent-encode it, or remove it");
      if (refused) {
        ctx->answered = true;
        queue(c, q, *refused, /*close=*/true);
        return MHD_YES;
      }
      if (auto refused = check_headers(scan_headers(c), te)) {
        ctx->answered = true;
        queue(c, q, *refused, /*close=*/true);
        return MHD_YES;
      }
      std::optional<HttpResponse> early = check_transport(q);
      if (!early && precheck) early = precheck(q);
      if (early) {
        const bool body_pending = q.chunked || (q.content_length && *q.content_length > 0);
        ctx->answered = true;
        queue(c, q, *early, body_pending);
      }
      return MHD_YES;
    }
    if (ctx->answered) {  // MHD still hands us body bytes: drop them
      *upload_size = 0;
      return MHD_YES;
    }
    if (*upload_size > 0) {
      if (ctx->req.body.size() + *upload_size > lim.max_body_bytes) {
        if (logger) logger(ctx->req, 413);
        return MHD_NO;  // chunked (or lying) body past the limit: close the connection now
      }
      ctx->req.body.append(upload_data, *upload_size);
      *upload_size = 0;
      return MHD_YES;
    }
    ctx->answered = true;
    HttpResponse r;
    try {
      r = handler(ctx->req);
    } catch (const std::exception&) {
      r = transport_error(500, "internal_error", "internal server error");
    }
    queue(c, ctx->req, r, false);
    return MHD_YES;
  }

  void connection_event(MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
      const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      auto* st = new ConnState;
      st->fd = info ? info->connect_fd : -1;
      st->request_start_s = monotonic_s();
      if (st->fd >= 0) {
        const int one = 1;
        setsockopt(st->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
      *socket_context = st;
      std::lock_guard lock(conn_mu);
      conns.insert(st);
    } else {  // CLOSED: called before MHD closes the fd, so the reaper never touches a reused fd
      auto* st = static_cast<ConnState*>(*socket_context);
      {
        std::lock_guard lock(conn_mu);
        conns.erase(st);
      }
      delete st;
      *socket_context = nullptr;
    }
  }

  void request_completed(MHD_Connection* c, void** con_cls) {
    delete static_cast<RequestCtx*>(*con_cls);
    *con_cls = nullptr;
    const auto* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (info && info->socket_context) static_cast<ConnState*>(info->socket_context)->request_start_s = monotonic_s();
  }

  void reap_loop() {
    const double period = std::clamp(lim.request_deadline_s / 4, 0.02, 1.0);
    std::unique_lock lock(stop_mu);
    while (!stop_cv.wait_for(lock, std::chrono::duration<double>(period), [&] { return stopping; })) {
      const double now = monotonic_s();
      std::lock_guard cl(conn_mu);
      for (ConnState* s : conns) {
        if (s->fd >= 0 && now - s->request_start_s.load() > lim.request_deadline_s) {
          ::shutdown(s->fd, SHUT_RDWR);  // MHD sees the error and closes the connection
          s->request_start_s = std::numeric_limits<double>::infinity();
          deadline_closures++;
        }
      }
    }
  }
};

HttpDaemon::HttpDaemon(HttpLimits limits, Precheck precheck, Handler handler, Logger logger)
    : impl_(std::make_unique<Impl>()) {
  impl_->lim = limits;
  impl_->precheck = std::move(precheck);
  impl_->handler = std::move(handler);
  impl_->logger = std::move(logger);
}

HttpDaemon::~HttpDaemon() { stop(); }

void HttpDaemon::start(int listen_fd) {
  Impl* i = impl_.get();
  const auto& l = i->lim;
  auto access = [](void* cls, MHD_Connection* c, const char* url, const char* method, const char* version,
                   const char* data, std::size_t* size, void** con_cls) -> MHD_Result {
    return static_cast<Impl*>(cls)->access(c, url, method, version, data, size, con_cls);
  };
  auto completed = [](void* cls, MHD_Connection* c, void** con_cls, MHD_RequestTerminationCode) {
    static_cast<Impl*>(cls)->request_completed(c, con_cls);
  };
  auto notify = [](void* cls, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
    static_cast<Impl*>(cls)->connection_event(c, socket_context, code);
  };
  // max_connections refuses at accept (the connection is closed at once, so a probe fails fast).
  // libmicrohttpd's own limit instead stops accepting: extra connections waited in the backlog,
  // unanswered, until another closed (session 22's trial). Its limit stays a little above ours
  // (the pool's threads accept concurrently), as the hard cap.
  auto admit = [](void* cls, const sockaddr*, socklen_t) -> MHD_Result {
    auto* impl = static_cast<Impl*>(cls);
    std::lock_guard lock(impl->conn_mu);
    return impl->conns.size() < std::max(1u, impl->lim.max_connections) ? MHD_YES : MHD_NO;
  };
  const unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC;
  i->daemon = MHD_start_daemon(
      flags, 0, admit, i, access, i,                                             //
      MHD_OPTION_LISTEN_SOCKET, static_cast<MHD_socket>(listen_fd),              //
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(std::max(1, l.threads)),  //
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<std::size_t>(std::max<std::size_t>(4096, l.header_bytes)),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(std::max(1, l.idle_timeout_s)),  //
      MHD_OPTION_CONNECTION_LIMIT, std::max(1u, l.max_connections) + 64u,                     //
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, l.per_ip_connections,                               //
      MHD_OPTION_NOTIFY_COMPLETED, static_cast<MHD_RequestCompletedCallback>(completed), i,    //
      MHD_OPTION_NOTIFY_CONNECTION, static_cast<MHD_NotifyConnectionCallback>(notify), i,      //
      MHD_OPTION_STRICT_FOR_CLIENT, 1,                                                        //
      MHD_OPTION_UNESCAPE_CALLBACK, &keep_escaped, nullptr,                                   //
      MHD_OPTION_URI_LOG_CALLBACK, &uri_seen, nullptr,                                        //
      MHD_OPTION_END);
  if (!i->daemon) {
    ::close(listen_fd);
    throw std::runtime_error("libmicrohttpd could not start (threads, memory or the listen socket)");
  }
  i->reaper = std::thread([i] { i->reap_loop(); });
}

void HttpDaemon::stop() {
  Impl* i = impl_.get();
  {
    std::lock_guard lock(i->stop_mu);
    if (i->stopping) return;
    i->stopping = true;
  }
  i->stop_cv.notify_all();
  if (i->reaper.joinable()) i->reaper.join();
  if (i->daemon) {
    // MHD_stop_daemon closes the listen socket itself. No MHD_quiesce_daemon first: with the
    // connection cap reached, libmicrohttpd 0.9.75 has already taken the listen socket out of
    // its epoll sets, and quiesce then aborted the process ("Failed to remove listen FD from
    // epoll set", seen once under ctest -j2).
    MHD_stop_daemon(i->daemon);
    i->daemon = nullptr;
  }
}

std::size_t HttpDaemon::open_connections() const {
  std::lock_guard lock(impl_->conn_mu);
  return impl_->conns.size();
}

std::size_t HttpDaemon::deadline_closures() const { return impl_->deadline_closures.load(); }

int open_listen_socket(const std::string& host, int port, int backlog, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res); rc != 0)
    throw InputError(fmt::format("cannot listen on {}:{}: {}", host, port, gai_strerror(rc)));
  std::string why = "no usable address";
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart over TIME_WAIT; no REUSEPORT
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, std::max(16, backlog)) != 0) {
      const int e = errno;
      why = e == EADDRINUSE ? fmt::format("port {} on {} is already in use by another process "
                                          "(another `perseus serve`?); pick another --port or stop it",
                                          port, host)
            : e == EADDRNOTAVAIL ? fmt::format("{} is not an address of this machine", host)
                                 : std::string(std::strerror(e));
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) throw InputError(fmt::format("cannot listen on {}:{}: {}", host, port, why));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

}  // namespace perseus::server
