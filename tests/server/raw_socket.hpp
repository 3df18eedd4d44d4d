// A raw loopback TCP client for the hostile-input tests: sends arbitrary bytes, reads raw replies.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace perseus::server::testing {

/// One TCP connection to 127.0.0.1:port. Every blocking call is bounded by `safety_s` (a failure
/// bound, not a timing assumption: tests wait for the server's answer or close, never for time).
class RawConn {
 public:
  explicit RawConn(int port, double safety_s = 60) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval tv{static_cast<time_t>(safety_s), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConn() { close(); }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// Sends all of `data`; false once the peer closed or reset the connection.
  bool send(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  /// Reads until the peer closes (or the safety bound passes); returns everything read.
  std::string read_all() {
    std::string out;
    char buf[65536];
    while (true) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  /// Reads one HTTP response (headers, then Content-Length bytes). Empty if the peer closed first.
  std::string read_response() {
    std::string out;
    char buf[65536];
    std::size_t need = std::string::npos;
    while (need == std::string::npos || out.size() < need) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      const auto end = out.find("\r\n\r\n");
      if (end != std::string::npos && need == std::string::npos) {
        std::size_t len = 0;
        const auto cl = out.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) len = std::strtoull(out.c_str() + cl + 16, nullptr, 10);
        need = end + 4 + len;
      }
    }
    return out;
  }
  /// True once the peer has closed the connection (EOF or reset); blocks up to the safety bound.
  bool wait_closed() {
    char buf[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET || errno == EPIPE;
    }
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

/// Status code of a raw HTTP response ("HTTP/1.1 413 ..."), or -1.
inline int raw_status(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

/// Body of a raw HTTP response (after the blank line).
inline std::string raw_body(const std::string& response) {
  const auto end = response.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : response.substr(end + 4);
}

}  // namespace perseus::server::testing
