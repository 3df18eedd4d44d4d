// Helpers for the gpud tests: a `perseus gpud` process on the fake NVML / ROCm SMI library in
// a temporary directory, and a raw protocol client.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace perseus::testing {

/// A raw connection speaking the gpud line protocol (to send what no real client would).
class RawGpudClient {
 public:
  explicit RawGpudClient(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    connect_errno_ = errno;
  }
  ~RawGpudClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  int connect_errno() const { return connect_errno_; }
  void send_raw(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }
  /// The next reply line as JSON; null when the helper hung up (or nothing came in 30 s).
  nlohmann::json reply() {
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        const std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return nlohmann::json::parse(line);
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 30000) <= 0) return nullptr;
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n <= 0) return nullptr;
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  nlohmann::json call(const std::string& line) {
    send_raw(line + "\n");
    return reply();
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  int connect_errno_ = 0;
  std::string buf_;
};

/// A `perseus gpud` process serving the fake library's GPUs from a temporary directory.
class GpudProcess {
 public:
  explicit GpudProcess(const TempDir& dir, std::string backend = "nvml") : dir_(dir), backend_(std::move(backend)) {
    std::filesystem::create_directories(dir_.file("gpu_state"));
  }
  ~GpudProcess() { kill(SIGKILL); }

  std::string socket() const { return dir_.file("gpud.sock"); }
  std::string log() const { return read_file(dir_.file("gpud.log")); }
  std::string gpu_log() const { return read_file(dir_.file("gpu_calls.log")); }
  /// The lock file the fake library keeps for GPU i ("" = unlocked).
  std::string gpu_state(int i) const {
    return read_file(dir_.file(backend_ == "nvml" ? "gpu_state/locked_" + std::to_string(i)
                                                  : "gpu_state/level_" + std::to_string(i)));
  }
  bool gpu_locked(int i) const {
    return std::filesystem::exists(dir_.file(backend_ == "nvml" ? "gpu_state/locked_" + std::to_string(i)
                                                                : "gpu_state/level_" + std::to_string(i)));
  }
  /// Environment that makes the fake library keep its state in this directory.
  std::map<std::string, std::string> env(int devices) const {
    if (backend_ == "nvml") {
      return {{"FAKE_NVML_STATE_DIR", dir_.file("gpu_state")}, {"FAKE_NVML_LOG", dir_.file("gpu_calls.log")},
              {"FAKE_NVML_DEVICES", std::to_string(devices)}};
    }
    return {{"FAKE_RSMI_STATE_DIR", dir_.file("gpu_state")}, {"FAKE_RSMI_LOG", dir_.file("gpu_calls.log")},
            {"FAKE_RSMI_DEVICES", std::to_string(devices)}};
  }
  /// Writes the config (socket, state_dir, backend, library + `rules`) and starts the helper;
  /// returns once it logged that it serves (or exited: then false).
  bool start(const std::string& rules, int devices = 2) {
    std::string library = FAKE_NVML_PATH;
#ifdef FAKE_RSMI_PATH
    if (backend_ == "rocm-smi") library = FAKE_RSMI_PATH;
#endif
    std::ofstream(dir_.file("gpud.conf")) << "socket " << socket() << "\nstate_dir " << dir_.file("state")
                                          << "\nbackend " << backend_ << "\nlibrary " << library << "\n"
                                          << rules;
    const std::size_t before = log().size();
    pid_ = spawn({PERSEUS_BINARY, "gpud", "--config", dir_.file("gpud.conf")}, env(devices), dir_.file("gpud.log"));
    int status = 0;
    wait_for([&] {
      return log().find("serving GPUs", before) != std::string::npos || ::waitpid(pid_, &status, WNOHANG) == pid_;
    }, 60);
    if (log().find("serving GPUs", before) == std::string::npos) {
      pid_ = 0;
      return false;
    }
    return true;
  }
  /// Sends `sig` and waits for the exit; returns the wait status (-1: none running).
  int kill(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    const int status = wait_exit(pid_, 30);
    pid_ = 0;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  const TempDir& dir_;
  std::string backend_;
  pid_t pid_ = 0;
};

}  // namespace perseus::testing
