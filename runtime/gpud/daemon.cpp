// Gpud: accept loop (poll), per-connection credentials and rate limit, one worker per GPU.
#include "perseus/gpud/daemon.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/error.hpp"
#include "perseus/gpud/protocol.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/runtime/clock_check.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace perseus::gpud {

using nlohmann::json;
using runtime::GpuControl;

namespace {

constexpr std::size_t kMaxQueuedPerGpu = 1024;

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string errno_text() { return std::strerror(errno); }

std::string user_name(uid_t uid) {
  const passwd* p = ::getpwuid(uid);
  return p != nullptr ? p->pw_name : std::to_string(uid);
}

// Supplementary groups of the peer: SO_PEERGROUPS (Linux >= 4.13), else the user database.
std::vector<gid_t> peer_groups(int fd, uid_t uid, gid_t gid) {
  std::vector<gid_t> groups(64);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
    groups.resize(len / sizeof(gid_t));
    return groups;
  }
  if (errno == ERANGE && len / sizeof(gid_t) <= 65536) {
    groups.resize(len / sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
  }
  const passwd* p = ::getpwuid(uid);
  if (p == nullptr) return {};
  int n = 64;
  groups.assign(static_cast<std::size_t>(n), 0);
  if (::getgrouplist(p->pw_name, gid, groups.data(), &n) < 0) {
    groups.assign(static_cast<std::size_t>(n), 0);
    if (::getgrouplist(p->pw_name, gid, groups.data(), &n) < 0) return {};
  }
  groups.resize(static_cast<std::size_t>(n));
  return groups;
}

// A connected client. The fd is closed when the last reference (the loop's or a queued GPU
// job's) goes away, so a worker never writes to a reused descriptor.
struct Conn {
  long id = 0;
  int fd = -1;
  int pidfd = -1;
  PeerCredentials cred;
  std::string who;  // "uid=1000(alice) pid=4242"
  LineBuffer in{kMaxRequestBytes};
  double tokens = 0;
  double refill_s = 0;
  std::mutex write_mu;
  bool broken = false;  // a reply could not be written: the loop hangs up

  ~Conn() {
    if (pidfd >= 0) ::close(pidfd);
    if (fd >= 0) ::close(fd);
  }
  // One reply line; never blocks (a client that does not read its replies is hung up on).
  void reply(const json& j) {
    const std::string line = j.dump() + "\n";
    std::lock_guard lock(write_mu);
    if (broken) return;
    const ssize_t n = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != static_cast<ssize_t>(line.size())) broken = true;
  }
};

json error_reply(const std::string& code, const std::string& message) {
  return {{"ok", false}, {"error", code}, {"message", message}};
}

}  // namespace

// One GPU: its control, its supported clocks, who holds its lock, and its worker thread.
struct GpuSlot {
  int index = 0;
  std::unique_ptr<GpuControl> ctl;
  runtime::NvmlDeviceInfo info;
  std::vector<int> clocks_mhz;
  // Owned by the worker thread only:
  long owner = 0;  // connection id, 0 = nobody
  std::string owner_who;
  int locked_mhz = 0;
  // Queue:
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  bool quit = false;
  std::thread worker;
};

struct Gpud::Impl {
  GpudConfig cfg;
  std::FILE* log = nullptr;
  std::mutex log_mu;
  int device_count = 0;
  std::map<int, std::unique_ptr<GpuSlot>> gpus;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  long next_id = 1;
  std::map<long, std::shared_ptr<Conn>> conns;

  template <typename... Args>
  void note(fmt::format_string<Args...> f, Args&&... args) {
    const std::string text = fmt::format(f, std::forward<Args>(args)...);
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    std::lock_guard lock(log_mu);
    std::fprintf(log, "%s perseus gpud: %s\n", stamp, text.c_str());
    std::fflush(log);
  }

  std::string state_file(int gpu) const { return cfg.state_dir + "/locked-" + std::to_string(gpu); }

  /// Writes GPU `gpu`'s lock record (its owner `who`) atomically (write_file_atomically()),
  /// before the clock is locked. Returns "" when it is in place, else why not (then nothing is
  /// locked: a helper killed afterwards could not reset the GPU).
  std::string record_lock(int gpu, const std::string& who) {
    try {
      perseus::write_file_atomically(state_file(gpu), who + "\n");
      return "";
    } catch (const perseus::InputError& e) {
      return e.what();
    }
  }
  void forget_lock(int gpu) {
    std::error_code ec;
    std::filesystem::remove(state_file(gpu), ec);
  }

  // Worker side: reset g's clock on behalf of `why`; the lock record goes only when it worked.
  void reset(GpuSlot& g, const std::string& why) {
    try {
      g.ctl->reset_locked_clocks();
      if (g.locked_mhz > 0) {
        note("GPU {}: clocks reset ({}; was locked at {} MHz by {})", g.index, why, g.locked_mhz, g.owner_who);
      } else {
        note("GPU {}: clocks reset ({}; was locked by {})", g.index, why, g.owner_who);
      }
      forget_lock(g.index);
    } catch (const std::exception& e) {
      note("GPU {}: FAILED to reset clocks ({}): {}", g.index, why, e.what());
    }
    g.owner = 0;
    g.owner_who.clear();
    g.locked_mhz = 0;
  }

  void enqueue(GpuSlot& g, std::function<void()> job) {
    {
      std::lock_guard lock(g.mu);
      g.jobs.push_back(std::move(job));
    }
    g.cv.notify_one();
  }

  void work(GpuSlot& g) {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(g.mu);
        g.cv.wait(lock, [&] { return g.quit || !g.jobs.empty(); });
        if (g.jobs.empty()) return;
        job = std::move(g.jobs.front());
        g.jobs.pop_front();
      }
      job();
    }
  }

  // Worker side: one request of `c` on GPU g (already authorized).
  void serve(GpuSlot& g, Conn& c, const Request& r) {
    try {
      switch (r.op) {
        case Op::kClocks:
          if (g.clocks_mhz.empty()) g.clocks_mhz = g.ctl->supported_graphics_clocks_mhz();
          c.reply({{"ok", true}, {"gpu", g.index}, {"clocks_mhz", g.clocks_mhz}});
          return;
        case Op::kEnergy: {
          const auto e = g.ctl->total_energy_j();
          const auto p = g.ctl->power_w();
          c.reply({{"ok", true}, {"gpu", g.index}, {"energy_j", e ? json(*e) : json(nullptr)},
                   {"power_w", p ? json(*p) : json(nullptr)}});
          return;
        }
        case Op::kLock: {
          if (g.owner != 0 && g.owner != c.id) {
            c.reply(error_reply("busy", fmt::format("GPU {} is locked by {}", g.index, g.owner_who)));
            return;
          }
          if (g.clocks_mhz.empty()) g.clocks_mhz = g.ctl->supported_graphics_clocks_mhz();
          const runtime::ClockCheck check = runtime::check_clock(r.mhz, g.clocks_mhz, 0.0);
          if (!check.ok) {
            c.reply(error_reply("unsupported_clock", fmt::format("GPU {}: {}", g.index, check.reason)));
            return;
          }
          // The record (who holds it; a restarted helper resets it) goes first: a clock is never
          // locked without it.
          const bool new_owner = g.owner != c.id;
          if (new_owner) {
            if (const std::string why = record_lock(g.index, c.who); !why.empty()) {
              note("GPU {}: not locked for {}: cannot write its lock record ({})", g.index, c.who, why);
              c.reply(error_reply("gpu_error", fmt::format("GPU {}: not locked: the helper cannot write the lock record "
                                                           "it needs to reset the GPU after a crash ({})",
                                                           g.index, why)));
              return;
            }
          }
          try {
            g.ctl->set_locked_clocks(r.mhz);
          } catch (...) {
            if (new_owner) forget_lock(g.index);  // nothing was locked for this owner
            throw;
          }
          g.owner = c.id;
          g.owner_who = c.who;
          g.locked_mhz = r.mhz;
          note("GPU {}: locked at {} MHz by {}", g.index, r.mhz, c.who);
          c.reply({{"ok", true}, {"gpu", g.index}, {"mhz", r.mhz}});
          return;
        }
        case Op::kUnlock:
          if (g.owner != 0 && g.owner != c.id) {
            c.reply(error_reply("busy", fmt::format("GPU {} is locked by {}", g.index, g.owner_who)));
            return;
          }
          g.ctl->reset_locked_clocks();
          if (g.owner != 0) forget_lock(g.index);
          note("GPU {}: unlocked by {}", g.index, c.who);
          g.owner = 0;
          g.owner_who.clear();
          g.locked_mhz = 0;
          c.reply({{"ok", true}, {"gpu", g.index}});
          return;
        case Op::kHello: break;
      }
    } catch (const std::exception& e) {
      c.reply(error_reply("gpu_error", e.what()));
    }
  }

  // Every GPU the backend sees, in index order (clients map CUDA ordinals by position);
  // "served": this helper controls it; "allowed": the caller may use it.
  json hello(const Conn& c) const {
    json gl = json::array();
    const int n = std::max(device_count, gpus.rbegin()->first + 1);
    for (int i = 0; i < n; ++i) {
      const auto it = gpus.find(i);
      const bool served = it != gpus.end();
      gl.push_back({{"index", i}, {"uuid", served ? it->second->info.uuid : ""},
                    {"pci_bus_id", served ? it->second->info.pci_bus_id : ""},
                    {"name", served ? it->second->info.name : ""}, {"served", served},
                    {"allowed", served && cfg.allows(i, c.cred)}});
    }
    return {{"ok", true},     {"version", kProtocolVersion}, {"backend", cfg.backend}, {"uid", c.cred.uid},
            {"gid", c.cred.gid}, {"pid", c.cred.pid},          {"gpus", gl}};
  }

  // Loop side: one request line of connection c.
  void handle(const std::shared_ptr<Conn>& c, const std::string& line) {
    const double now = steady_s();
    c->tokens = std::min(cfg.rate_burst, c->tokens + (now - c->refill_s) * cfg.rate_per_s);
    c->refill_s = now;
    if (c->tokens < 1.0) {
      c->reply(error_reply("rate_limited", fmt::format("more than {} requests/s (burst {}); slow down",
                                                       cfg.rate_per_s, cfg.rate_burst)));
      return;
    }
    c->tokens -= 1.0;
    Request r;
    try {
      r = parse_request(line);
    } catch (const ProtocolError& e) {
      c->reply(error_reply(e.code(), e.what()));
      return;
    }
    if (r.op == Op::kHello) {
      c->reply(hello(*c));
      return;
    }
    const auto it = gpus.find(r.gpu);
    if (it == gpus.end()) {
      c->reply(error_reply("unknown_gpu", fmt::format("GPU {} is not served by this helper", r.gpu)));
      return;
    }
    if (!cfg.allows(r.gpu, c->cred)) {
      note("refused {} GPU {} to {}: no allow rule matches", to_string(r.op), r.gpu, c->who);
      c->reply(error_reply("forbidden", fmt::format("{} may not use GPU {} (no allow rule in {} matches uid {}, gid {} "
                                                    "or its groups)",
                                                    c->who, r.gpu, cfg.source.empty() ? "the config" : cfg.source,
                                                    c->cred.uid, c->cred.gid)));
      return;
    }
    GpuSlot& g = *it->second;
    {
      std::lock_guard lock(g.mu);
      if (g.jobs.size() >= kMaxQueuedPerGpu) {
        c->reply(error_reply("rate_limited", fmt::format("GPU {}: too many requests queued", r.gpu)));
        return;
      }
    }
    enqueue(g, [this, &g, c, r] { serve(g, *c, r); });
  }

  void accept_one() {
    const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    ucred cr{};
    socklen_t len = sizeof cr;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      note("refused a connection: SO_PEERCRED failed: {}", errno_text());
      return;
    }
    c->cred.pid = cr.pid;
    c->cred.uid = cr.uid;
    c->cred.gid = cr.gid;
    c->cred.groups = peer_groups(fd, cr.uid, cr.gid);
    c->who = fmt::format("uid={}({}) pid={}", cr.uid, user_name(cr.uid), cr.pid);
    // A user no rule allows any GPU gets no slot: its every request would be refused, and idle
    // connections of such a user filled max_clients and locked every trainer out (session 22's trial).
    bool allowed_somewhere = false;
    for (const auto& [i, g] : gpus) allowed_somewhere = allowed_somewhere || cfg.allows(i, c->cred);
    if (!allowed_somewhere) {  // (logged before the answer: whoever reads the answer finds the log line)
      note("refused {}: no allow rule matches it for any GPU", c->who);
      c->reply(error_reply("forbidden", fmt::format("no allow rule in {} matches uid {}, gid {} for any GPU served "
                                                    "here (docs/gpud.md)",
                                                    cfg.source.empty() ? "the config" : cfg.source, cr.uid, cr.gid)));
      return;
    }
    if (static_cast<int>(conns.size()) >= cfg.max_clients) {
      std::map<uid_t, int> by_uid;
      for (const auto& [id, other] : conns) ++by_uid[other->cred.uid];
      const auto most = std::max_element(by_uid.begin(), by_uid.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
      note("refused {}: {} clients connected already (uid {} holds {})", c->who, conns.size(), most->first,
           most->second);
      c->reply(error_reply("too_many_clients", fmt::format("{} clients connected already (max_clients)", conns.size())));
      return;
    }
    // The process itself, apart from the socket: a forked child can keep the socket open
    // after the trainer died; its pidfd still says that the trainer exited.
    c->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, cr.pid, 0));
    c->id = next_id++;
    c->tokens = cfg.rate_burst;
    c->refill_s = steady_s();
    conns[c->id] = c;
  }

  // Loop side: the client is gone (or misbehaved); reset every GPU it holds, in order after
  // its queued requests.
  void drop(long id, const std::string& why) {
    const auto it = conns.find(id);
    if (it == conns.end()) return;
    std::shared_ptr<Conn> c = it->second;
    conns.erase(it);
    ::shutdown(c->fd, SHUT_RDWR);
    const std::string reason = fmt::format("{} {}", c->who, why);
    for (auto& [i, g] : gpus) {
      GpuSlot* slot = g.get();
      enqueue(*slot, [this, slot, id, reason] {
        if (slot->owner == id) reset(*slot, reason);
      });
    }
  }

  void read_from(const std::shared_ptr<Conn>& c) {
    char buf[4096];
    const ssize_t n = ::read(c->fd, buf, sizeof buf);
    if (n == 0) return drop(c->id, "disconnected");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return drop(c->id, fmt::format("connection failed: {}", errno_text()));
    }
    const bool fits = c->in.append(buf, static_cast<std::size_t>(n));
    while (auto line = c->in.next_line()) handle(c, *line);
    if (!fits) {
      c->reply(error_reply("bad_request", fmt::format("request longer than {} bytes", kMaxRequestBytes)));
      note("hung up on {}: request longer than {} bytes", c->who, kMaxRequestBytes);
      return drop(c->id, "sent an oversized request");
    }
    std::lock_guard lock(c->write_mu);
    if (c->broken) {
      note("hung up on {}: it does not read its replies", c->who);
      drop(c->id, "does not read its replies");
    }
  }

  void reset_leftovers() {
    std::error_code ec;
    std::filesystem::create_directories(cfg.state_dir, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot create state_dir {}: {}", cfg.state_dir, ec.message()));
    // The helper (root, typically) reads and replaces files here: only its own user may write
    // in it, or links planted there were followed (a root file's text logged, another truncated
    // through the record's temporary name; session 22's trial).
    struct stat dir_st {};
    if (::lstat(cfg.state_dir.c_str(), &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) {
      throw std::runtime_error(fmt::format("state_dir {} is not a directory (a symbolic link is refused)", cfg.state_dir));
    }
    if (dir_st.st_uid != ::geteuid()) {
      throw std::runtime_error(fmt::format("state_dir {} is owned by uid {}, not by the helper's user (uid {}): that "
                                           "user could plant links in it; chown it, or choose another state_dir",
                                           cfg.state_dir, dir_st.st_uid, ::geteuid()));
    }
    if (::chmod(cfg.state_dir.c_str(), 0700) != 0) {
      throw std::runtime_error(fmt::format("cannot make state_dir {} private (0700): {}", cfg.state_dir, errno_text()));
    }
    for (const auto& e : std::filesystem::directory_iterator(cfg.state_dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("locked-", 0) != 0 || name.find('.') != std::string::npos) continue;
      int index = -1;
      try {
        index = std::stoi(name.substr(7));
      } catch (const std::exception&) {
        continue;
      }
      // Never through a link; a record is a small regular file.
      std::string what;
      const int fd = ::open(e.path().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) ::close(fd);
        note("{} is not a lock record (not a regular file); not read", e.path().string());
        continue;
      }
      char buf[512];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      ::close(fd);
      what.assign(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
      what = what.substr(0, what.find('\n'));
      const auto it = gpus.find(index);
      if (it == gpus.end()) {
        note("GPU {} was left locked ({}) but is not served now; not touched", index, what);
        continue;
      }
      GpuSlot& g = *it->second;
      g.owner_who = what;
      reset(g, "left locked when the previous helper ended");
    }
  }

  void bind_socket() {
    const std::string& path = cfg.socket_path;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(fmt::format("{} exists and is not a socket; not replacing it", path));
      const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
      const bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(probe);
      if (live) throw std::runtime_error(fmt::format("another perseus gpud answers on {}", path));
      ::unlink(path.c_str());
    }
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listen_fd < 0) throw std::runtime_error(fmt::format("socket(): {}", errno_text()));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof a.sun_path) throw std::runtime_error(fmt::format("socket path {} is too long", path));
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    const mode_t old = ::umask(0177);  // the socket is born 0600: no window where others may connect
    const int rc = ::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    const int bind_errno = errno;
    ::umask(old);
    if (rc != 0) throw std::runtime_error(fmt::format("cannot bind {}: {}", path, std::strerror(bind_errno)));
    if (cfg.socket_gid != static_cast<gid_t>(-1) && ::chown(path.c_str(), static_cast<uid_t>(-1), cfg.socket_gid) != 0) {
      throw std::runtime_error(fmt::format("cannot give {} to group {}: {}", path, cfg.socket_group, errno_text()));
    }
    if (::chmod(path.c_str(), cfg.socket_mode) != 0) {
      throw std::runtime_error(fmt::format("cannot chmod {}: {}", path, errno_text()));
    }
    if (::listen(listen_fd, 64) != 0) throw std::runtime_error(fmt::format("listen(): {}", errno_text()));
  }
};

Gpud::Gpud(GpudConfig config, const GpuOpener& open, int device_count, std::FILE* log)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = std::move(config);
  m.log = log != nullptr ? log : stderr;
  m.device_count = device_count;
  std::vector<int> indices = m.cfg.gpus;
  if (indices.empty()) {
    for (int i = 0; i < device_count && i <= kMaxGpuIndex; ++i) indices.push_back(i);
  }
  if (indices.empty()) throw std::runtime_error("no GPU to serve (the backend sees none)");
  for (int i : indices) {
    auto g = std::make_unique<GpuSlot>();
    g->index = i;
    g->ctl = open(i);
    g->info.index = i;
    g->info.uuid = g->ctl->uuid();
    try {
      g->clocks_mhz = g->ctl->supported_graphics_clocks_mhz();
    } catch (const std::exception& e) {
      m.note("GPU {}: supported clocks not readable yet: {}", i, e.what());
    }
    m.gpus[i] = std::move(g);
  }
  m.reset_leftovers();
  if (::pipe2(m.wake, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  m.bind_socket();
  for (auto& [i, g] : m.gpus) {
    GpuSlot* slot = g.get();
    slot->worker = std::thread([&m, slot] { m.work(*slot); });
  }
  std::string served;
  for (const auto& [i, g] : m.gpus) served += (served.empty() ? "" : ",") + std::to_string(i);
  m.note("serving GPUs {} ({}) on {} (mode {:04o}{}), {} allow rule(s) from {}", served, m.cfg.backend,
         m.cfg.socket_path, m.cfg.socket_mode, m.cfg.socket_group.empty() ? "" : ", group " + m.cfg.socket_group,
         m.cfg.rules.size(), m.cfg.source.empty() ? "code" : m.cfg.source);
}

Gpud::~Gpud() {
  Impl& m = *impl_;
  for (auto& [i, g] : m.gpus) {
    {
      std::lock_guard lock(g->mu);
      g->quit = true;
    }
    g->cv.notify_all();
    if (g->worker.joinable()) g->worker.join();
  }
  if (m.listen_fd >= 0) ::close(m.listen_fd);
  for (int fd : m.wake) {
    if (fd >= 0) ::close(fd);
  }
}

void Gpud::stop() {
  const char b = 1;
  const ssize_t n = ::write(impl_->wake[1], &b, 1);
  (void)n;
}

void Gpud::run() {
  Impl& m = *impl_;
  for (;;) {
    std::vector<pollfd> fds = {{m.wake[0], POLLIN, 0}, {m.listen_fd, POLLIN, 0}};
    std::vector<std::pair<long, bool>> who;  // (connection, is its pidfd)
    for (const auto& [id, c] : m.conns) {
      fds.push_back({c->fd, POLLIN, 0});
      who.emplace_back(id, false);
      if (c->pidfd >= 0) {
        fds.push_back({c->pidfd, POLLIN, 0});
        who.emplace_back(id, true);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("poll(): {}", errno_text()));
    }
    if (fds[0].revents != 0) break;
    for (std::size_t k = 2; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const auto [id, is_pid] = who[k - 2];
      const auto it = m.conns.find(id);
      if (it == m.conns.end()) continue;
      if (is_pid) {
        m.drop(id, "exited");
      } else {
        m.read_from(it->second);
      }
    }
    if (fds[1].revents != 0) m.accept_one();
  }
  // Shutdown: every client is dropped, so every GPU still locked is reset (by its worker).
  std::vector<long> ids;
  for (const auto& [id, c] : m.conns) ids.push_back(id);
  for (long id : ids) m.drop(id, "disconnected: the helper is stopping");
  ::unlink(m.cfg.socket_path.c_str());
  for (auto& [i, g] : m.gpus) {
    {
      std::lock_guard lock(g->mu);
      g->quit = true;
    }
    g->cv.notify_all();
    if (g->worker.joinable()) g->worker.join();
  }
  m.note("stopped");
}

std::pair<GpuOpener, int> backend_for(const GpudConfig& config) {
  const std::string lib = config.library;
  if (config.backend == "nvml") {
    return {[lib](int i) { return runtime::make_nvml_gpu(i, lib); }, runtime::nvml_device_count(lib)};
  }
  if (config.backend == "rocm-smi") {
    return {[lib](int i) { return runtime::make_rocm_smi_gpu(i, lib); }, runtime::rocm_smi_device_count(lib)};
  }
  if (config.backend == "dry-run") {
    if (config.gpus.empty()) throw std::invalid_argument("backend dry-run needs a 'gpus' list");
    const std::string log = config.dry_run_log;
    return {[log](int i) { return runtime::make_dry_run_gpu(i, log); }, 0};
  }
  throw std::invalid_argument(fmt::format("unknown backend '{}'", config.backend));
}

}  // namespace perseus::gpud
