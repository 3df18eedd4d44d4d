// Many-connection probe of `perseus serve` (loopback): N keep-alive connections each poll a
// rank's plan once per period (as the runtime client does between iterations), optionally while
// M slow connections hold half-sent requests open. One epoll thread drives every connection.
// Reports served polls, errors and latency percentiles; exits 1 unless every connection was
// served every round without error. See docs/http-api.md "Load test".
//
//   perseus_server_pollers --port P --path /v1/jobs/J/ranks/0/plan?since_version=V --token-file F
//                          [--connections 10000] [--rounds 10] [--period-s 1] [--slow 0]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

struct Conn {
  int fd = -1;
  Clock::time_point sent;
  std::string in;
  bool waiting = false;
  int served = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0, connections = 10000, rounds = 10, slow = 0;
  double period = 1.0;
  std::string path, token_file;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--port") port = std::stoi(v);
    else if (k == "--path") path = v;
    else if (k == "--token-file") token_file = v;
    else if (k == "--connections") connections = std::stoi(v);
    else if (k == "--rounds") rounds = std::stoi(v);
    else if (k == "--period-s") period = std::stod(v);
    else if (k == "--slow") slow = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::ifstream tf(token_file);
  std::string token;
  std::getline(tf, token);
  if (!port || path.empty() || token.empty()) {
    std::fprintf(stderr, "need --port, --path and --token-file\n");
    return 2;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  std::vector<int> slow_fds;
  for (int i = 0; i < slow; ++i) {  // half-sent request heads, never finished
    const int fd = connect_loopback(port);
    if (fd >= 0 && ::send(fd, "GET /v1/health HTTP/1.1\r\nX-Slow: ", 33, MSG_NOSIGNAL) > 0) slow_fds.push_back(fd);
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(connections);
  int connect_errors = 0;
  for (int i = 0; i < connections; ++i) {
    conns[i].fd = connect_loopback(port);
    if (conns[i].fd < 0) {
      ++connect_errors;
      continue;
    }
    epoll_event ev{EPOLLIN, {.u32 = static_cast<uint32_t>(i)}};
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
  }
  std::vector<double> lat;
  lat.reserve(static_cast<std::size_t>(connections) * rounds);
  std::uint64_t errors = connect_errors;
  // Warm-up (not measured): one request per connection, all answered, so that the server has
  // accepted every connection (connection setup is not what the rounds measure).
  const auto warm0 = Clock::now();
  {
    int pending = 0;
    for (auto& c : conns)
      if (c.fd >= 0 && ::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()))
        ++pending;
    std::vector<epoll_event> wev(4096);
    while (pending > 0 && since(warm0) < 120) {
      const int n = epoll_wait(ep, wev.data(), static_cast<int>(wev.size()), 100);
      for (int e = 0; e < n; ++e) {
        Conn& c = conns[wev[e].data.u32];
        char buf[16384];
        ssize_t r;
        while ((r = ::recv(c.fd, buf, sizeof buf, 0)) > 0) c.in.append(buf, static_cast<std::size_t>(r));
        const auto end = c.in.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        std::size_t len = 0;
        if (auto cl = c.in.find("Content-Length: "); cl != std::string::npos && cl < end)
          len = std::strtoull(c.in.c_str() + cl + 16, nullptr, 10);
        if (c.in.size() < end + 4 + len) continue;
        c.in.erase(0, end + 4 + len);
        --pending;
      }
    }
    std::printf("warm-up: %d connections answered once in %.2f s (%d unanswered)\n", connections, since(warm0), pending);
    errors += static_cast<std::uint64_t>(pending);
  }
  const auto start = Clock::now();
  std::vector<epoll_event> evs(4096);
  for (int round = 0; round < rounds; ++round) {
    const auto round_start = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(round * period));
    // Spread each round's polls evenly over the period, as independent ranks would.
    int next = 0;
    while (true) {
      const double t = since(round_start);
      const int due = std::min(connections, static_cast<int>(connections * std::max(0.0, t) / (period * 0.9)) + 1);
      for (; next < due; ++next) {
        Conn& c = conns[next];
        if (c.fd < 0) continue;
        if (c.waiting) {  // still unanswered from the previous round
          ++errors;
          continue;
        }
        c.sent = Clock::now();
        c.waiting = true;
        if (::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) ++errors;
      }
      const int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 5);
      for (int e = 0; e < n; ++e) {
        Conn& c = conns[evs[e].data.u32];
        char buf[16384];
        while (true) {
          const ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
          if (r <= 0) {
            if (r == 0) {  // closed by the server
              ++errors;
              epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
              ::close(c.fd);
              c.fd = -1;
            }
            break;
          }
          c.in.append(buf, static_cast<std::size_t>(r));
        }
        const auto end = c.in.find("\r\n\r\n");
        if (end == std::string::npos || !c.waiting) continue;
        std::size_t len = 0;
        if (auto cl = c.in.find("Content-Length: "); cl != std::string::npos && cl < end)
          len = std::strtoull(c.in.c_str() + cl + 16, nullptr, 10);
        if (c.in.size() < end + 4 + len) continue;
        const int status = std::atoi(c.in.c_str() + 9);
        if (status != 200 && status != 304) ++errors;
        c.in.erase(0, end + 4 + len);
        c.waiting = false;
        ++c.served;
        lat.push_back(since(c.sent));
      }
      if (next >= connections && since(round_start) >= period) break;
    }
  }
  int all_served = 0;
  for (const auto& c : conns) all_served += c.served == rounds;
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double q) { return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, static_cast<std::size_t>(q * lat.size()))]; };
  std::printf("pollers %d x %d rounds (period %.2f s, %d slow connections): served %zu, connections served every "
              "round %d, errors %llu, p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
              connections, rounds, period, static_cast<int>(slow_fds.size()), lat.size(), all_served,
              static_cast<unsigned long long>(errors), pct(0.5) * 1e3, pct(0.99) * 1e3,
              lat.empty() ? 0.0 : lat.back() * 1e3);
  for (int fd : slow_fds) ::close(fd);
  return errors == 0 && all_served == connections ? 0 : 1;
}
