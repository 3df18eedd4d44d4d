// gpud backend: clock changes and readings through `perseus gpud` over its Unix socket, so
// the training process needs no privilege (protocol: runtime/gpud, docs/gpud.md).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "perseus/gpud/protocol.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace perseus::runtime {
namespace {

using nlohmann::json;
using gpud::Op;
using gpud::Request;

constexpr int kReplyTimeoutMs = 30000;

// One connection to the helper; requests are answered in order, one at a time.
class GpudConnection {
 public:
  explicit GpudConnection(std::string path) : path_(std::move(path)) {}
  ~GpudConnection() { close(); }

  // Sends r and returns the reply (ok or not). Reconnects once when the helper hung up
  // (e.g. it was restarted). Throws GpuError when the helper cannot be reached.
  json call(const Request& r) {
    for (int attempt = 0;; ++attempt) {
      try {
        if (fd_ < 0) connect();
        send(gpud::format_request(r));
        return receive();
      } catch (const GpuError&) {
        close();
        if (attempt > 0 || r.op == Op::kHello) throw;
      }
    }
  }
  const std::string& path() const { return path_; }
  /// Connections made so far (a reconnect after a hang-up increments it).
  std::uint64_t generation() const { return generation_; }
  /// True when the helper closed the connection (it stopped or was restarted), checked without
  /// blocking; false while it is open or when none is.
  bool peer_closed() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if ((p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0) return true;
    char c = 0;
    return (p.revents & POLLIN) != 0 && ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

 private:
  void connect() {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path_.size() >= sizeof a.sun_path) throw GpuError(fmt::format("gpud socket path {} is too long", path_));
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      const std::string why = std::strerror(errno);
      close();
      throw GpuError(fmt::format("cannot connect to perseus gpud at {}: {} (is the helper running? is this user in "
                                 "the socket's group? see docs/gpud.md)",
                                 path_, why));
    }
    buf_.clear();
    ++generation_;
  }
  void send(const std::string& line) {
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = std::strerror(errno);
        // The helper may have answered the connection itself and hung up (too_many_clients,
        // forbidden): its reason, not "Broken pipe" (session 22's trial).
        if (const std::string refusal = pending_refusal(); !refusal.empty())
          throw GpuError(fmt::format("perseus gpud at {} refused the connection: {}", path_, refusal));
        throw GpuError(fmt::format("perseus gpud at {}: send failed: {}", path_, why));
      }
      done += static_cast<std::size_t>(n);
    }
  }
  /// "CODE: MESSAGE" of an error reply already waiting on the socket, else "" (never blocks).
  std::string pending_refusal() {
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n <= 0) return "";
    const std::string text(chunk, static_cast<std::size_t>(n));
    const json j = json::parse(text.substr(0, text.find('\n')), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_string()) return "";
    const std::string message = j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : "";
    return j["error"].get<std::string>() + (message.empty() ? "" : ": " + message);
  }
  json receive() {
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        const std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        json j = json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("ok")) {
          throw GpuError(fmt::format("perseus gpud at {}: malformed reply", path_));
        }
        return j;
      }
      if (buf_.size() > gpud::kMaxReplyBytes) throw GpuError(fmt::format("perseus gpud at {}: reply too long", path_));
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, kReplyTimeoutMs);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) throw GpuError(fmt::format("perseus gpud at {}: no reply within {} s", path_, kReplyTimeoutMs / 1000));
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw GpuError(fmt::format("perseus gpud at {} closed the connection", path_));
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string path_;
  int fd_ = -1;
  std::string buf_;
  std::uint64_t generation_ = 0;
};

class GpudGpu final : public GpuControl {
 public:
  GpudGpu(const GpuSelector& selector, const std::string& socket_path) : conn_(socket_path) {
    const json hello = conn_.call(Request{Op::kHello, -1, 0});
    if (!hello.value("ok", false)) {
      // The helper's refusal (forbidden, too_many_clients) as words, not its JSON.
      const auto text = [&](const char* key) {
        return hello.contains(key) && hello[key].is_string() ? hello[key].get<std::string>() : std::string();
      };
      throw GpuError(fmt::format("perseus gpud at {} refused the connection: {}{}", socket_path,
                                 text("error").empty() ? hello.dump() : text("error"),
                                 text("message").empty() ? "" : ": " + text("message")));
    }
    if (hello.value("version", 0) != gpud::kProtocolVersion) {
      throw GpuError(fmt::format("perseus gpud at {} speaks protocol {}, this client {}", socket_path,
                                 hello.value("version", 0), gpud::kProtocolVersion));
    }
    std::vector<NvmlDeviceInfo> devices;
    for (const auto& g : hello.at("gpus")) {
      NvmlDeviceInfo d;
      d.index = g.value("index", 0);
      d.uuid = g.value("uuid", "");
      d.pci_bus_id = g.value("pci_bus_id", "");
      d.name = g.value("name", "");
      devices.push_back(d);
    }
    if (selector.nvml_index >= 0 && selector.uuid.empty() && selector.pci_bus_id.empty()) {
      index_ = selector.nvml_index;
      how_ = fmt::format("gpud GPU {}", index_);
    } else {
      const ResolvedGpu r = resolve_nvml_device_from_env(selector, devices);
      index_ = r.nvml_index;
      how_ = r.how + " via gpud";
    }
    const auto& gpus = hello.at("gpus");
    if (index_ < 0 || index_ >= static_cast<int>(gpus.size()) || !gpus[static_cast<std::size_t>(index_)].value("served", false)) {
      throw GpuError(fmt::format("perseus gpud at {} does not serve GPU {}", socket_path, index_));
    }
    if (!gpus[static_cast<std::size_t>(index_)].value("allowed", false)) {
      throw GpuError(fmt::format("perseus gpud at {} does not allow uid {} (gid {}) to use GPU {} (ask the node's "
                                 "administrator for an allow rule, docs/gpud.md)",
                                 socket_path, hello.value("uid", -1), hello.value("gid", -1), index_));
    }
    uuid_ = devices[static_cast<std::size_t>(index_)].uuid;
  }

  std::string name() const override { return "gpud"; }
  int device_index() const override { return index_; }
  std::string uuid() const override { return uuid_; }
  std::string identity() const override { return how_; }

  std::vector<int> supported_graphics_clocks_mhz() override {
    const json r = call(Op::kClocks, 0, "clocks");
    return r.at("clocks_mhz").get<std::vector<int>>();
  }
  void set_locked_clocks(int freq_mhz) override {
    if (freq_mhz <= 0 || freq_mhz > gpud::kMaxClockMhz) {
      throw GpuError(fmt::format("GPU {}: refusing to lock the SM clock to {} MHz (not a clock)", index_, freq_mhz));
    }
    call(Op::kLock, freq_mhz, fmt::format("lock GPU {} at {} MHz", index_, freq_mhz));
  }
  void reset_locked_clocks() override { call(Op::kUnlock, 0, fmt::format("unlock GPU {}", index_)); }
  std::optional<double> total_energy_j() override { return reading("energy_j"); }
  std::optional<double> power_w() override { return reading("power_w"); }
  // The helper resets the clocks when this process's connection closes or the process
  // exits: no watchdog process is needed.
  std::vector<std::string> watchdog_args() const override { return {}; }
  bool reset_on_disconnect() const override { return true; }
  bool lock_may_be_lost() override {
    std::lock_guard lock(mutex_);
    return locked_mhz_ > 0 && (conn_.generation() != locked_generation_ || conn_.peer_closed());
  }

 private:
  std::optional<double> reading(const char* key) {
    const json r = call(Op::kEnergy, 0, "energy");
    const auto it = r.find(key);
    if (it == r.end() || it->is_null()) return std::nullopt;
    return it->get<double>();
  }
  json call(Op op, int mhz, const std::string& what) {
    std::lock_guard lock(mutex_);
    json r = conn_.call(Request{op, index_, mhz});
    if (!r.value("ok", false)) {
      throw GpuError(fmt::format("perseus gpud refused {}: {} ({})", what, r.value("message", "?"), r.value("error", "?")));
    }
    if (op == Op::kLock) {
      locked_mhz_ = mhz;
      locked_generation_ = conn_.generation();
    } else if (op == Op::kUnlock) {
      locked_mhz_ = 0;
    } else if (locked_mhz_ > 0 && conn_.generation() != locked_generation_) {
      // This call reconnected: the helper reset the GPU when the old connection closed. Lock
      // it again, so a reading (e.g. a profiling sweep's) is taken at the clock it is labelled
      // with; if that fails, lock_may_be_lost() stays true and the controller's next request
      // is applied.
      const json again = conn_.call(Request{Op::kLock, index_, locked_mhz_});
      if (again.value("ok", false)) locked_generation_ = conn_.generation();
    }
    return r;
  }

  GpudConnection conn_;
  int locked_mhz_ = 0;                     ///< clock this object locked (0 = none), MHz
  std::uint64_t locked_generation_ = 0;    ///< the connection it was locked on
  int index_ = 0;
  std::string uuid_;
  std::string how_;
  std::mutex mutex_;
};

}  // namespace

std::string default_gpud_socket() {
  const char* env = std::getenv("PERSEUS_GPUD_SOCKET");
  return (env != nullptr && *env != '\0') ? env : "/run/perseus/gpud.sock";
}

std::vector<int> gpud_allowed_gpus(const std::string& socket_path) {
  GpudConnection conn(socket_path.empty() ? default_gpud_socket() : socket_path);
  const json hello = conn.call(Request{Op::kHello, -1, 0});
  std::vector<int> out;
  for (const auto& g : hello.value("gpus", json::array())) {
    if (g.value("allowed", false)) out.push_back(g.value("index", 0));
  }
  return out;
}

std::unique_ptr<GpuControl> make_gpud_gpu(const GpuSelector& selector, const std::string& socket_path) {
  return std::make_unique<GpudGpu>(selector, socket_path.empty() ? default_gpud_socket() : socket_path);
}

}  // namespace perseus::runtime
