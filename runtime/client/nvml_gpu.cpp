// NVML backend: libnvidia-ml.so.1 loaded with dlopen at run time, never linked.
#include "shared_library.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fmt/core.h>

#include "perseus/input_limits.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace perseus::runtime {
namespace {

// The few NVML types and codes we use (values from nvml.h, which is not needed to build).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlNoPermission = 4;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
constexpr nvmlReturn_t kNvmlFunctionNotFound = 13;
constexpr nvmlReturn_t kNvmlGpuIsLost = 15;

// nvml.h's nvmlPciInfo_t (layout of nvmlDeviceGetPciInfo_v3).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

// A read that the driver cannot answer for this device (not an error of the call).
bool unsupported(nvmlReturn_t rc) { return rc == kNvmlNotSupported || rc == kNvmlFunctionNotFound; }

const char* code_name(nvmlReturn_t rc) {
  switch (rc) {
    case 0: return "NVML_SUCCESS";
    case 1: return "NVML_ERROR_UNINITIALIZED";
    case 2: return "NVML_ERROR_INVALID_ARGUMENT";
    case 3: return "NVML_ERROR_NOT_SUPPORTED";
    case 4: return "NVML_ERROR_NO_PERMISSION";
    case 6: return "NVML_ERROR_NOT_FOUND";
    case 7: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 13: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case 15: return "NVML_ERROR_GPU_IS_LOST";
    default: return "NVML error";
  }
}

// The loaded library and its entry points. One per GpuControl object (dlopen is ref-counted).
struct NvmlLibrary {
  detail::SharedLibrary lib;
  const std::string& path = lib.path();
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;  // optional
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*set_locked)(nvmlDevice_t, unsigned int, unsigned int) = nullptr;
  nvmlReturn_t (*reset_locked)(nvmlDevice_t) = nullptr;
  nvmlReturn_t (*mem_clocks)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*gfx_clocks)(nvmlDevice_t, unsigned int, unsigned int*, unsigned int*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;     // optional
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;     // optional
  nvmlReturn_t (*get_pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;             // optional
  bool initialized = false;

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  explicit NvmlLibrary(const std::string& requested)
      : lib({detail::library_path(requested, "PERSEUS_NVML_LIBRARY", "libnvidia-ml.so.1")}) {
    if (!lib.loaded()) {
      throw GpuError(fmt::format(
          "cannot load NVML {}: {}. Is an NVIDIA driver installed? (set PERSEUS_NVML_LIBRARY to its path)", path,
          lib.error()));
    }
    resolve(init, "nvmlInit_v2");
    resolve(shutdown, "nvmlShutdown");
    resolve(error_string, "nvmlErrorString");
    resolve(get_handle, "nvmlDeviceGetHandleByIndex_v2");
    resolve(set_locked, "nvmlDeviceSetGpuLockedClocks");
    resolve(reset_locked, "nvmlDeviceResetGpuLockedClocks");
    resolve(mem_clocks, "nvmlDeviceGetSupportedMemoryClocks");
    resolve(gfx_clocks, "nvmlDeviceGetSupportedGraphicsClocks");
    resolve(energy, "nvmlDeviceGetTotalEnergyConsumption");
    resolve(power, "nvmlDeviceGetPowerUsage");
    lib.find(get_count, "nvmlDeviceGetCount_v2");  // optional ones
    lib.find(get_uuid, "nvmlDeviceGetUUID");
    lib.find(get_name, "nvmlDeviceGetName");
    lib.find(get_pci, "nvmlDeviceGetPciInfo_v3");
    const nvmlReturn_t rc = init();
    if (rc != kNvmlSuccess) throw GpuError(fmt::format("nvmlInit_v2 failed: {}", describe(rc)));
    initialized = true;
  }
  ~NvmlLibrary() {
    if (initialized) shutdown();
  }

  template <typename Fn>
  void resolve(Fn& fn, const char* name) {
    if (!lib.find(fn, name)) throw GpuError(fmt::format("NVML library {} has no symbol {} (driver too old?)", path, name));
  }
  int device_count() {
    if (get_count == nullptr) return 1;  // very old driver: assume one device
    unsigned n = 0;
    const nvmlReturn_t rc = get_count(&n);
    if (rc != kNvmlSuccess) throw GpuError(fmt::format("nvmlDeviceGetCount_v2 failed: {}", describe(rc)));
    return static_cast<int>(n);
  }
  // UUID, PCI bus id and name of device `index` (empty strings where the driver does not say).
  NvmlDeviceInfo info(int index) {
    NvmlDeviceInfo d;
    d.index = index;
    nvmlDevice_t dev = nullptr;
    if (get_handle(static_cast<unsigned>(index), &dev) != kNvmlSuccess) return d;
    char buf[128] = {};
    if (get_uuid != nullptr && get_uuid(dev, buf, sizeof buf) == kNvmlSuccess) d.uuid = buf;
    buf[0] = '\0';
    if (get_name != nullptr && get_name(dev, buf, sizeof buf) == kNvmlSuccess) d.name = buf;
    NvmlPciInfo pci{};
    if (get_pci != nullptr && get_pci(dev, &pci) == kNvmlSuccess) {
      pci.bus_id[sizeof pci.bus_id - 1] = '\0';
      d.pci_bus_id = pci.bus_id;
    }
    return d;
  }
  std::vector<NvmlDeviceInfo> devices() {
    std::vector<NvmlDeviceInfo> out;
    const int n = device_count();
    for (int i = 0; i < n; ++i) out.push_back(info(i));
    return out;
  }
  std::string describe(nvmlReturn_t rc) const {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    std::string out = fmt::format("{} ({}, code {})", text != nullptr ? text : "?", code_name(rc), rc);
    if (rc == kNvmlGpuIsLost) out += "; the GPU fell off the bus or was reset (check dmesg / nvidia-smi)";
    if (rc == kNvmlNoPermission) {
      out += "; locking clocks needs root or CAP_SYS_ADMIN, or use the gpud backend (the perseus gpud "
             "helper, docs/gpud.md)";
    }
    return out;
  }
};

class NvmlGpu final : public GpuControl {
 public:
  NvmlGpu(const GpuSelector& selector, const std::string& library_path) : lib_(library_path) {
    if (selector.nvml_index >= 0 && selector.uuid.empty() && selector.pci_bus_id.empty()) {
      index_ = selector.nvml_index;  // explicit NVML index: no enumeration needed
      how_ = fmt::format("NVML index {}", index_);
    } else {
      const ResolvedGpu r = resolve_nvml_device_from_env(selector, lib_.devices());
      index_ = r.nvml_index;
      how_ = r.how;
    }
    const nvmlReturn_t rc = lib_.get_handle(static_cast<unsigned>(index_), &device_);
    if (rc != kNvmlSuccess) {
      throw GpuError(fmt::format("nvmlDeviceGetHandleByIndex_v2({}) failed: {}", index_, lib_.describe(rc)));
    }
    char buf[128] = {};
    if (lib_.get_uuid != nullptr && lib_.get_uuid(device_, buf, sizeof buf) == kNvmlSuccess) uuid_ = buf;
  }

  std::string name() const override { return "nvml"; }
  int device_index() const override { return index_; }
  std::string uuid() const override { return uuid_; }
  std::string identity() const override { return how_; }

  std::vector<int> supported_graphics_clocks_mhz() override {
    std::lock_guard lock(mutex_);
    const std::vector<unsigned> mem = list([&](unsigned* n, unsigned* out) { return lib_.mem_clocks(device_, n, out); },
                                           "nvmlDeviceGetSupportedMemoryClocks");
    if (mem.empty()) throw GpuError(fmt::format("GPU {}: NVML reports no memory clocks", index_));
    const unsigned mem_max = *std::max_element(mem.begin(), mem.end());
    const std::vector<unsigned> gfx = list(
        [&](unsigned* n, unsigned* out) { return lib_.gfx_clocks(device_, mem_max, n, out); },
        "nvmlDeviceGetSupportedGraphicsClocks");
    std::vector<int> out(gfx.begin(), gfx.end());
    std::sort(out.rbegin(), out.rend());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  void set_locked_clocks(int freq_mhz) override {
    if (freq_mhz <= 0 || freq_mhz > perseus::limits::kMaxFrequencyMhz) {
      throw GpuError(fmt::format("GPU {}: refusing to lock the SM clock to {} MHz (not a clock)", index_, freq_mhz));
    }
    std::lock_guard lock(mutex_);
    const auto f = static_cast<unsigned>(freq_mhz);
    const nvmlReturn_t rc = lib_.set_locked(device_, f, f);
    if (rc != kNvmlSuccess) {
      throw_error(rc, fmt::format("nvmlDeviceSetGpuLockedClocks(GPU {}, {} MHz, {} MHz) failed: {}", index_, f, f,
                                 lib_.describe(rc)));
    }
  }

  void reset_locked_clocks() override {
    std::lock_guard lock(mutex_);
    const nvmlReturn_t rc = lib_.reset_locked(device_);
    if (rc != kNvmlSuccess) {
      throw_error(rc, fmt::format("nvmlDeviceResetGpuLockedClocks(GPU {}) failed: {}", index_, lib_.describe(rc)));
    }
  }

  // The reads take no lock: NVML is thread-safe ("safe to make simultaneous NVML calls from
  // multiple threads", NVML API Reference), and they run on the training thread at every
  // computation boundary, where waiting out a clock change of the controller thread (tens to
  // hundreds of ms on some drivers) slowed every hook (session 23's trial).
  std::optional<double> total_energy_j() override {
    unsigned long long mj = 0;
    const nvmlReturn_t rc = lib_.energy(device_, &mj);
    if (unsupported(rc)) return std::nullopt;
    if (rc != kNvmlSuccess) {
      throw_error(rc, fmt::format("nvmlDeviceGetTotalEnergyConsumption(GPU {}) failed: {}", index_, lib_.describe(rc)));
    }
    return static_cast<double>(mj) / 1000.0;
  }

  std::optional<double> power_w() override {
    unsigned mw = 0;
    const nvmlReturn_t rc = lib_.power(device_, &mw);
    if (unsupported(rc)) return std::nullopt;
    if (rc != kNvmlSuccess) {
      throw_error(rc, fmt::format("nvmlDeviceGetPowerUsage(GPU {}) failed: {}", index_, lib_.describe(rc)));
    }
    return static_cast<double>(mw) / 1000.0;
  }

  // GpuLostError for NVML_ERROR_GPU_IS_LOST, GpuError otherwise.
  [[noreturn]] static void throw_error(nvmlReturn_t rc, const std::string& message) {
    if (rc == kNvmlGpuIsLost) throw GpuLostError(message);
    throw GpuError(message);
  }

  std::vector<std::string> watchdog_args() const override {
    return {"--backend", "nvml", "--device", std::to_string(index_), "--nvml-library", lib_.path};
  }

 private:
  template <typename Call>
  std::vector<unsigned> list(Call call, const char* what) {
    std::vector<unsigned> buf(128);
    for (int attempt = 0; attempt < 6; ++attempt) {
      unsigned n = static_cast<unsigned>(buf.size());
      const nvmlReturn_t rc = call(&n, buf.data());
      if (rc == kNvmlSuccess) {
        buf.resize(std::min<std::size_t>(n, buf.size()));
        return buf;
      }
      if (rc != kNvmlInsufficientSize) throw GpuError(fmt::format("{}(GPU {}) failed: {}", what, index_, lib_.describe(rc)));
      buf.resize(std::max<std::size_t>(n, buf.size() * 2));
    }
    throw GpuError(fmt::format("{}(GPU {}): list keeps growing", what, index_));
  }

  NvmlLibrary lib_;
  int index_ = 0;
  std::string uuid_;
  std::string how_;
  nvmlDevice_t device_ = nullptr;
  std::mutex mutex_;  // serializes clock changes and the clock list (not the reads)
};

}  // namespace

std::unique_ptr<GpuControl> make_nvml_gpu(int device_index, const std::string& library_path) {
  if (device_index < 0) throw GpuError(fmt::format("invalid GPU index {}", device_index));
  GpuSelector sel;
  sel.nvml_index = device_index;
  return std::make_unique<NvmlGpu>(sel, library_path);
}

std::unique_ptr<GpuControl> make_nvml_gpu(const GpuSelector& selector, const std::string& library_path) {
  return std::make_unique<NvmlGpu>(selector, library_path);
}

int nvml_device_count(const std::string& library_path) {
  NvmlLibrary lib(library_path);
  return lib.device_count();
}

std::vector<NvmlDeviceInfo> nvml_devices(const std::string& library_path) {
  NvmlLibrary lib(library_path);
  return lib.devices();
}

}  // namespace perseus::runtime
