// ROCm SMI backend: librocm_smi64.so loaded with dlopen at run time, never linked. Types and
// codes come from Debian's librocm-smi-dev header (rocm_smi/rocm_smi.h).
//
// What maps to what (AMD has no "locked clock" call; see docs/client.md "AMD GPUs"):
//   supported clocks  = the SM ("sclk", RSMI_CLK_TYPE_SYS) DPM levels of
//                       rsmi_dev_gpu_clk_freq_get (Hz -> MHz), highest first
//   lock to F MHz     = rsmi_dev_perf_level_set_v1(RSMI_DEV_PERF_LEVEL_MANUAL), then
//                       rsmi_dev_gpu_clk_freq_set(RSMI_CLK_TYPE_SYS, mask = 1 << level(F)):
//                       only the DPM level whose frequency is F stays enabled
//   reset             = rsmi_dev_perf_level_set_v1(RSMI_DEV_PERF_LEVEL_AUTO) (the driver
//                       re-enables every level)
//   energy            = rsmi_dev_energy_count_get: counter x resolution (uJ) -> J
//   power             = rsmi_dev_power_ave_get(sensor 0), uW -> W
#include "shared_library.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/core.h>

#include "perseus/runtime/gpu_control.hpp"

#if __has_include(<rocm_smi/rocm_smi.h>)
#include <rocm_smi/rocm_smi.h>
#define PERSEUS_HAVE_ROCM_SMI_H 1
#endif

namespace perseus::runtime {

#ifdef PERSEUS_HAVE_ROCM_SMI_H
namespace {

// The loaded library and its entry points (dlopen is ref-counted: one per object is fine).
struct RocmSmiLibrary {
  detail::SharedLibrary lib;
  const std::string& path = lib.path();
  decltype(&::rsmi_init) init = nullptr;
  decltype(&::rsmi_shut_down) shut_down = nullptr;
  decltype(&::rsmi_status_string) status_string = nullptr;
  decltype(&::rsmi_num_monitor_devices) num_devices = nullptr;
  decltype(&::rsmi_dev_gpu_clk_freq_get) freq_get = nullptr;
  decltype(&::rsmi_dev_gpu_clk_freq_set) freq_set = nullptr;
  decltype(&::rsmi_dev_perf_level_set_v1) perf_level_set = nullptr;
  decltype(&::rsmi_dev_energy_count_get) energy = nullptr;
  decltype(&::rsmi_dev_power_ave_get) power = nullptr;
  decltype(&::rsmi_dev_unique_id_get) unique_id = nullptr;  // optional
  bool initialized = false;

  RocmSmiLibrary(const RocmSmiLibrary&) = delete;
  RocmSmiLibrary& operator=(const RocmSmiLibrary&) = delete;

  explicit RocmSmiLibrary(const std::string& requested) : lib(candidates(requested)) {
    if (!lib.loaded()) {
      throw GpuError(fmt::format("cannot load ROCm SMI ({}): {}. Is ROCm installed? (set PERSEUS_ROCM_SMI_LIBRARY "
                                 "to its path)",
                                 path, lib.error()));
    }
    resolve(init, "rsmi_init");
    resolve(shut_down, "rsmi_shut_down");
    resolve(status_string, "rsmi_status_string");
    resolve(num_devices, "rsmi_num_monitor_devices");
    resolve(freq_get, "rsmi_dev_gpu_clk_freq_get");
    resolve(freq_set, "rsmi_dev_gpu_clk_freq_set");
    resolve(perf_level_set, "rsmi_dev_perf_level_set_v1");
    resolve(energy, "rsmi_dev_energy_count_get");
    resolve(power, "rsmi_dev_power_ave_get");
    lib.find(unique_id, "rsmi_dev_unique_id_get");  // optional
    const rsmi_status_t rc = init(0);
    if (rc != RSMI_STATUS_SUCCESS) throw GpuError(fmt::format("rsmi_init failed: {}", describe(rc)));
    initialized = true;
  }
  ~RocmSmiLibrary() {
    if (initialized) shut_down();
  }
  // The library's path, else $PERSEUS_ROCM_SMI_LIBRARY, else librocm_smi64.so or, without the
  // -dev package, the versioned name only (Debian librocm-smi64-1).
  static std::vector<std::string> candidates(const std::string& requested) {
    const std::string path = detail::library_path(requested, "PERSEUS_ROCM_SMI_LIBRARY", "librocm_smi64.so");
    if (requested.empty() && path == "librocm_smi64.so") return {path, "librocm_smi64.so.1"};
    return {path};
  }
  template <typename Fn>
  void resolve(Fn& fn, const char* name) {
    if (!lib.find(fn, name)) throw GpuError(fmt::format("ROCm SMI library {} has no symbol {} (too old?)", path, name));
  }
  std::string describe(rsmi_status_t rc) const {
    const char* text = nullptr;
    if (status_string == nullptr || status_string(rc, &text) != RSMI_STATUS_SUCCESS) text = nullptr;
    std::string out = fmt::format("{} (code {})", text != nullptr ? text : "?", static_cast<int>(rc));
    if (rc == RSMI_STATUS_PERMISSION) {
      out += "; setting AMD clocks needs root (writes to sysfs), or use the gpud backend (docs/gpud.md)";
    }
    return out;
  }
  int device_count() {
    uint32_t n = 0;
    const rsmi_status_t rc = num_devices(&n);
    if (rc != RSMI_STATUS_SUCCESS) throw GpuError(fmt::format("rsmi_num_monitor_devices failed: {}", describe(rc)));
    return static_cast<int>(n);
  }
};

bool unsupported(rsmi_status_t rc) { return rc == RSMI_STATUS_NOT_SUPPORTED || rc == RSMI_STATUS_NOT_YET_IMPLEMENTED; }

class RocmSmiGpu final : public GpuControl {
 public:
  RocmSmiGpu(int index, const std::string& library_path) : lib_(library_path), index_(index) {
    const int n = lib_.device_count();
    if (index < 0 || index >= n) throw GpuError(fmt::format("ROCm SMI GPU {} does not exist (the node has {})", index, n));
    uint64_t id = 0;
    if (lib_.unique_id != nullptr && lib_.unique_id(dev(), &id) == RSMI_STATUS_SUCCESS) uuid_ = fmt::format("AMD-{:016x}", id);
  }

  std::string name() const override { return "rocm-smi"; }
  int device_index() const override { return index_; }
  std::string uuid() const override { return uuid_; }
  std::string identity() const override { return fmt::format("ROCm SMI GPU {}", index_); }

  std::vector<int> supported_graphics_clocks_mhz() override {
    std::lock_guard lock(mutex_);
    std::vector<int> out;
    for (const auto& [mhz, level] : levels()) out.push_back(mhz);
    std::sort(out.rbegin(), out.rend());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  void set_locked_clocks(int freq_mhz) override {
    std::lock_guard lock(mutex_);
    int level = -1;
    for (const auto& [mhz, l] : levels()) {
      if (mhz == freq_mhz) level = l;
    }
    if (level < 0) {
      throw GpuError(fmt::format("GPU {}: {} MHz is not one of the sclk DPM levels; refusing to set it", index_, freq_mhz));
    }
    rsmi_status_t rc = lib_.perf_level_set(dev(), RSMI_DEV_PERF_LEVEL_MANUAL);
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_perf_level_set_v1(GPU {}, MANUAL) failed: {}", index_, lib_.describe(rc)));
    }
    rc = lib_.freq_set(dev(), RSMI_CLK_TYPE_SYS, uint64_t{1} << level);
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_gpu_clk_freq_set(GPU {}, SYS, level {} = {} MHz) failed: {}", index_, level,
                                 freq_mhz, lib_.describe(rc)));
    }
  }

  void reset_locked_clocks() override {
    std::lock_guard lock(mutex_);
    const rsmi_status_t rc = lib_.perf_level_set(dev(), RSMI_DEV_PERF_LEVEL_AUTO);
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_perf_level_set_v1(GPU {}, AUTO) failed: {}", index_, lib_.describe(rc)));
    }
  }

  std::optional<double> total_energy_j() override {
    std::lock_guard lock(mutex_);
    uint64_t counter = 0, timestamp = 0;
    float resolution_uj = 0;
    const rsmi_status_t rc = lib_.energy(dev(), &counter, &resolution_uj, &timestamp);
    if (unsupported(rc)) return std::nullopt;
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_energy_count_get(GPU {}) failed: {}", index_, lib_.describe(rc)));
    }
    return static_cast<double>(counter) * static_cast<double>(resolution_uj) * 1e-6;
  }

  std::optional<double> power_w() override {
    std::lock_guard lock(mutex_);
    uint64_t uw = 0;
    const rsmi_status_t rc = lib_.power(dev(), 0, &uw);
    if (unsupported(rc)) return std::nullopt;
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_power_ave_get(GPU {}) failed: {}", index_, lib_.describe(rc)));
    }
    return static_cast<double>(uw) * 1e-6;
  }

  std::vector<std::string> watchdog_args() const override {
    return {"--backend", "rocm-smi", "--device", std::to_string(index_), "--rocm-smi-library", lib_.path};
  }

 private:
  uint32_t dev() const { return static_cast<uint32_t>(index_); }
  // (MHz, DPM level index) of every sclk level.
  std::vector<std::pair<int, int>> levels() {
    rsmi_frequencies_t f{};
    const rsmi_status_t rc = lib_.freq_get(dev(), RSMI_CLK_TYPE_SYS, &f);
    if (rc != RSMI_STATUS_SUCCESS) {
      throw GpuError(fmt::format("rsmi_dev_gpu_clk_freq_get(GPU {}, SYS) failed: {}", index_, lib_.describe(rc)));
    }
    std::vector<std::pair<int, int>> out;
    const uint32_t n = std::min<uint32_t>(f.num_supported, RSMI_MAX_NUM_FREQUENCIES);
    for (uint32_t i = 0; i < n; ++i) out.emplace_back(static_cast<int>(f.frequency[i] / 1000000u), static_cast<int>(i));
    if (out.empty()) throw GpuError(fmt::format("GPU {}: ROCm SMI reports no sclk levels", index_));
    return out;
  }

  RocmSmiLibrary lib_;
  int index_ = 0;
  std::string uuid_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<GpuControl> make_rocm_smi_gpu(int device_index, const std::string& library_path) {
  return std::make_unique<RocmSmiGpu>(device_index, library_path);
}

int rocm_smi_device_count(const std::string& library_path) {
  RocmSmiLibrary lib(library_path);
  return lib.device_count();
}

#else  // built without rocm_smi.h

std::unique_ptr<GpuControl> make_rocm_smi_gpu(int, const std::string&) {
  throw GpuError("this Perseus was built without the ROCm SMI header (Debian package librocm-smi-dev); "
                 "install it and rebuild");
}
int rocm_smi_device_count(const std::string& library_path) { return (void)make_rocm_smi_gpu(0, library_path), 0; }

#endif

}  // namespace perseus::runtime
