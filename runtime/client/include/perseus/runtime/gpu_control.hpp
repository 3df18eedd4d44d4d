// GPU clock control and energy measurement behind one interface (NVML, ROCm SMI, the gpud
// helper, simulated, dry run).
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "perseus/runtime/telemetry.hpp"

namespace perseus::runtime {

/// Raised by a GpuControl backend when the device or driver refuses an operation (NVML
/// missing, no permission, unsupported clock, ...). The message names the call, the device
/// and the driver's reason, and says what to do when there is something to do.
class GpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The GPU is gone (NVML_ERROR_GPU_IS_LOST: fell off the bus, reset): every later call fails.
class GpuLostError : public GpuError {
 public:
  using GpuError::GpuError;
};

/// Control of one GPU's SM ("graphics") clock plus its energy and power counters.
/// Implementations: NVML (make_nvml_gpu), ROCm SMI for AMD GPUs (make_rocm_smi_gpu), the
/// `perseus gpud` helper (make_gpud_gpu), simulated from a profile (SimulatedGpu), dry run
/// (make_dry_run_gpu). All methods may be called from any thread; implementations serialize
/// internally.
class GpuControl {
 public:
  virtual ~GpuControl() = default;

  /// Backend name: "nvml", "rocm-smi", "gpud", "simulated" or "dry-run".
  virtual std::string name() const = 0;
  /// Device index this object controls, 0-based, in the backend's numbering (NVML index for
  /// nvml and gpud, ROCm SMI index for rocm-smi).
  virtual int device_index() const = 0;
  /// The device's UUID ("GPU-..."; "" when the backend has none). Keys the per-GPU lock
  /// record (see gpu_lock_record.hpp).
  virtual std::string uuid() const { return ""; }
  /// How the device was chosen, for messages (e.g. "cuda:0 = CUDA_VISIBLE_DEVICES entry '2'
  /// = NVML GPU 2 (GPU-..., 00000000:03:00.0)").
  virtual std::string identity() const { return "GPU " + std::to_string(device_index()); }
  /// Supported SM clocks, MHz, highest first (for NVML: at the highest memory clock).
  /// Throws GpuError when the driver cannot list them.
  virtual std::vector<int> supported_graphics_clocks_mhz() = 0;
  /// Locks the SM clock to freq_mhz (min = max = freq_mhz). Throws GpuError on failure
  /// (e.g. no permission: needs root or CAP_SYS_ADMIN, see docs/client.md).
  virtual void set_locked_clocks(int freq_mhz) = 0;
  /// Removes any SM clock lock (driver default behaviour). Throws GpuError on failure.
  virtual void reset_locked_clocks() = 0;
  /// Total energy the device consumed since some fixed origin (driver load for NVML), J.
  /// std::nullopt when the device has no energy counter (dry run, pre-Volta GPUs). Throws
  /// GpuError when the read fails (NVML: GpuLostError when the GPU is lost).
  virtual std::optional<double> total_energy_j() = 0;
  /// Current power draw, W; std::nullopt when unsupported. Throws GpuError when the read fails
  /// (NVML: GpuLostError when the GPU is lost).
  virtual std::optional<double> power_w() = 0;
  /// Timestamp used for measurements, s, monotonic. Real backends: steady clock; the
  /// simulated GPU: simulated time (real time divided by its time scale).
  virtual double now_s() const;
  /// Arguments for the `perseus-watchdog` helper so that it can reset this device's clocks
  /// after the training process died (e.g. {"--backend","nvml","--device","0"}). Empty when
  /// no reset from another process is needed or possible (simulated GPU).
  virtual std::vector<std::string> watchdog_args() const { return {}; }
  /// True when a clock this object locked may have been released behind its back since
  /// (gpud: the helper's connection closed, e.g. the helper restarted, and the helper resets a
  /// GPU whose client connection closes). The frequency controller then applies the next
  /// request even when it equals the clock it believes in force. Default: false.
  virtual bool lock_may_be_lost() { return false; }
  /// True when something outside this process resets the clocks this object locked once its
  /// process lets go of them (gpud: the helper resets a GPU when its client's connection
  /// closes), so a failed final reset does not leave the GPU locked. Default: false.
  virtual bool reset_on_disconnect() const { return false; }
};

struct GpuSelector;
struct NvmlDeviceInfo;

/// Opens NVML GPU device_index (NVML's numbering, which ignores CUDA_VISIBLE_DEVICES; the
/// training client uses the GpuSelector overload), loaded with dlopen at run time (never linked).
/// library_path: file to dlopen; empty = $PERSEUS_NVML_LIBRARY if set, else
/// "libnvidia-ml.so.1" (found through the usual LD_LIBRARY_PATH / ld.so.cache search).
/// Throws GpuError when the library cannot be loaded, a symbol is missing, nvmlInit_v2 or
/// the device lookup fails. nvmlShutdown is called on destruction.
std::unique_ptr<GpuControl> make_nvml_gpu(int device_index, const std::string& library_path = "");

/// Opens the GPU `selector` names (CUDA ordinal through CUDA_VISIBLE_DEVICES, UUID, PCI bus
/// id or NVML index; see gpu_identity.hpp). Throws GpuError as above, and when the device
/// cannot be identified with certainty (the message says why; nothing is touched).
std::unique_ptr<GpuControl> make_nvml_gpu(const GpuSelector& selector, const std::string& library_path = "");

/// UUID, PCI bus id and name of every GPU NVML sees, in NVML index order (loads NVML as
/// make_nvml_gpu does). Throws GpuError when NVML cannot be loaded or initialized, a symbol is
/// missing or nvmlDeviceGetCount_v2 fails; a field the driver does not give for a device is
/// left empty (no error).
std::vector<NvmlDeviceInfo> nvml_devices(const std::string& library_path = "");

/// Number of GPUs NVML sees (loads NVML as make_nvml_gpu does). Throws GpuError when NVML
/// cannot be loaded or initialized (e.g. a machine without an NVIDIA GPU or driver).
int nvml_device_count(const std::string& library_path = "");

/// Opens AMD GPU device_index (ROCm SMI's numbering) through librocm_smi64.so, loaded with
/// dlopen at run time (never linked). library_path: file to dlopen; empty =
/// $PERSEUS_ROCM_SMI_LIBRARY if set, else "librocm_smi64.so". Clocks are the sclk DPM levels;
/// a lock is performance level MANUAL plus a one-level sclk mask, a reset is performance level
/// AUTO (the mapping is listed in rocm_smi_gpu.cpp and docs/client.md). Throws GpuError when
/// the library cannot be loaded, a symbol is missing, rsmi_init fails or there is no such GPU.
std::unique_ptr<GpuControl> make_rocm_smi_gpu(int device_index, const std::string& library_path = "");

/// Number of GPUs ROCm SMI sees (rsmi_num_monitor_devices). Throws GpuError as above.
int rocm_smi_device_count(const std::string& library_path = "");

/// The GPU `selector` names, controlled through the `perseus gpud` helper on the Unix socket
/// socket_path (empty = $PERSEUS_GPUD_SOCKET, else /run/perseus/gpud.sock); the training
/// process needs no privilege. The selector is resolved against the helper's GPU list as
/// make_nvml_gpu does (CUDA ordinal through CUDA_VISIBLE_DEVICES, UUID, PCI bus id, index).
/// Throws GpuError when the helper cannot be reached, speaks another protocol version, does
/// not serve the GPU or does not allow this process's user to use it (docs/gpud.md).
std::unique_ptr<GpuControl> make_gpud_gpu(const GpuSelector& selector, const std::string& socket_path = "");

/// Indices of the GPUs the helper on socket_path lets this process's user use (its "hello"
/// answer). Throws GpuError when the helper cannot be reached.
std::vector<int> gpud_allowed_gpus(const std::string& socket_path = "");

/// The gpud socket used when none is given: $PERSEUS_GPUD_SOCKET, else /run/perseus/gpud.sock.
std::string default_gpud_socket();

/// Reads gpu's energy counter now (never throws: a failed read is CounterReading::failed).
CounterReading read_counter(GpuControl& gpu);
/// Reads gpu's power now; empty when unsupported or the read failed.
std::optional<PowerSample> read_power(GpuControl& gpu);

/// A backend that changes nothing: it records every call, one line each
/// ("<time_s> <pid> dev=<i> <call> <args>"), to log_path (appended; empty = stderr) and
/// answers with supported_clocks_mhz (empty = 1410 down to 210 in 15 MHz steps, an A100).
/// It has no energy counter. Throws GpuError when log_path cannot be opened for appending.
std::unique_ptr<GpuControl> make_dry_run_gpu(int device_index, const std::string& log_path = "",
                                             std::vector<int> supported_clocks_mhz = {});

}  // namespace perseus::runtime
