// Dry-run backend (logs calls, changes nothing) and the GpuControl defaults.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include <fmt/core.h>

#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {

double GpuControl::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

class DryRunGpu final : public GpuControl {
 public:
  DryRunGpu(int device_index, std::string log_path, std::vector<int> clocks)
      : index_(device_index), log_path_(std::move(log_path)), clocks_(std::move(clocks)) {
    if (clocks_.empty()) {
      for (int f = 1410; f >= 210; f -= 15) clocks_.push_back(f);
    }
    if (!log_path_.empty()) {
      fd_ = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd_ < 0) throw GpuError(fmt::format("dry-run GPU: cannot open log file {}", log_path_));
    }
  }
  ~DryRunGpu() override {
    if (fd_ >= 0) ::close(fd_);
  }

  std::string name() const override { return "dry-run"; }
  int device_index() const override { return index_; }
  std::vector<int> supported_graphics_clocks_mhz() override {
    record("supported_graphics_clocks", "");
    return clocks_;
  }
  void set_locked_clocks(int freq_mhz) override { record("set_locked_clocks", fmt::format("{} {}", freq_mhz, freq_mhz)); }
  void reset_locked_clocks() override { record("reset_locked_clocks", ""); }
  std::optional<double> total_energy_j() override { return std::nullopt; }
  std::optional<double> power_w() override { return std::nullopt; }
  std::vector<std::string> watchdog_args() const override {
    std::vector<std::string> args{"--backend", "dry-run", "--device", std::to_string(index_)};
    if (!log_path_.empty()) {
      args.push_back("--log");
      args.push_back(log_path_);
    }
    return args;
  }

 private:
  void record(const char* call, const std::string& args) {
    const std::string line = fmt::format("{:.6f} {} dev={} {} {}\n", now_s(), ::getpid(), index_, call, args);
    std::lock_guard lock(mutex_);
    const int fd = fd_ >= 0 ? fd_ : STDERR_FILENO;
    [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());  // one write: atomic append
  }

  int index_;
  std::string log_path_;
  std::vector<int> clocks_;
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<GpuControl> make_dry_run_gpu(int device_index, const std::string& log_path,
                                             std::vector<int> supported_clocks_mhz) {
  return std::make_unique<DryRunGpu>(device_index, log_path, std::move(supported_clocks_mhz));
}

}  // namespace perseus::runtime
