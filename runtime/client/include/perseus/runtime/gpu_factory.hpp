// Builds a GpuControl backend from a plain description (used by the C ABI and tools).
#pragma once

#include <memory>
#include <string>

#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace perseus::runtime {

/// Which backend to build and its settings.
struct GpuSpec {
  std::string backend = "nvml";  ///< "nvml", "rocm-smi", "gpud", "simulated" or "dry-run".
  /// nvml, gpud: the CUDA ordinal ("cuda:N"), mapped to the NVML device through
  /// CUDA_VISIBLE_DEVICES (see gpu_identity.hpp); with device_is_nvml_index, NVML's own
  /// index. rocm-smi: ROCm SMI's index (refused while HIP_VISIBLE_DEVICES or
  /// ROCR_VISIBLE_DEVICES is set, unless device_is_nvml_index says it is the SMI index).
  /// Other backends: a label.
  int device_index = 0;
  bool device_is_nvml_index = false;  ///< nvml: device_index is NVML's index (no CUDA mapping).
  std::string device_uuid;       ///< nvml: "GPU-..." UUID (or unique prefix); overrides device_index.
  std::string device_pci_bus_id; ///< nvml: PCI bus id "0000:41:00.0"; overrides device_index.
  std::string nvml_library;      ///< nvml: library to dlopen ("" = default search).
  std::string rocm_smi_library;  ///< rocm-smi: library to dlopen ("" = $PERSEUS_ROCM_SMI_LIBRARY or librocm_smi64.so).
  std::string gpud_socket;       ///< gpud: the helper's socket ("" = $PERSEUS_GPUD_SOCKET or /run/perseus/gpud.sock).
  std::string profile_path;      ///< simulated: profile CSV (stage,instruction,frequency,time,energy).
  int stage = 0;                 ///< simulated: profile stage this GPU runs (0-based, < the profile's stages).
  /// simulated: real seconds slept per simulated second, in [kMinSimTimeScale, kMaxSimTimeScale]
  /// = [1e-6, 1e6].
  double time_scale = 1.0;
  double blocking_power_w = 0;   ///< simulated: idle power, W, in [0, 1e5].
  std::string log_path;          ///< dry-run: call log ("" = stderr).
};

/// Builds the backend. Throws GpuError (NVML cannot be loaded, ...), perseus::InputError
/// (bad profile file) or std::invalid_argument (unknown backend name, bad settings: e.g. a
/// simulated stage, time_scale or blocking_power_w out of range).
std::shared_ptr<GpuControl> make_gpu(const GpuSpec& spec);

}  // namespace perseus::runtime
