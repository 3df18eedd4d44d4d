// make_gpu(): backend by name.
#include "perseus/runtime/gpu_factory.hpp"

#include <cstdlib>
#include <stdexcept>

#include <fmt/core.h>

#include "perseus/profile.hpp"
#include "perseus/runtime/simulated_gpu.hpp"

namespace perseus::runtime {

namespace {

GpuSelector selector_of(const GpuSpec& spec) {
  GpuSelector sel;
  sel.uuid = spec.device_uuid;
  sel.pci_bus_id = spec.device_pci_bus_id;
  if (spec.device_index < 0) throw std::invalid_argument(fmt::format("GPU index {} is negative", spec.device_index));
  (spec.device_is_nvml_index ? sel.nvml_index : sel.cuda_ordinal) = spec.device_index;
  return sel;
}

}  // namespace

std::shared_ptr<GpuControl> make_gpu(const GpuSpec& spec) {
  if (spec.backend == "gpud") return make_gpud_gpu(selector_of(spec), spec.gpud_socket);
  if (spec.backend == "rocm-smi") {
    if (spec.device_index < 0) throw std::invalid_argument(fmt::format("GPU index {} is negative", spec.device_index));
    for (const char* var : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
      const char* v = std::getenv(var);
      if (!spec.device_is_nvml_index && v != nullptr && *v != '\0') {
        throw GpuError(fmt::format("rocm-smi backend: {}={} is set, so device {} may not be ROCm SMI GPU {}; pass the "
                                   "ROCm SMI index with device_index_is_nvml = 1 (the mapping is not implemented)",
                                   var, v, spec.device_index, spec.device_index));
      }
    }
    return make_rocm_smi_gpu(spec.device_index, spec.rocm_smi_library);
  }
  if (spec.backend == "nvml") return make_nvml_gpu(selector_of(spec), spec.nvml_library);
  if (spec.backend == "dry-run") return make_dry_run_gpu(spec.device_index, spec.log_path);
  if (spec.backend == "simulated") {
    if (spec.profile_path.empty()) throw std::invalid_argument("simulated GPU backend needs a profile CSV path");
    return std::make_shared<SimulatedGpu>(perseus::load_profile_csv(spec.profile_path), spec.stage, spec.time_scale,
                                          spec.blocking_power_w, spec.device_index);
  }
  throw std::invalid_argument(
      fmt::format("unknown GPU backend '{}' (expected nvml, rocm-smi, gpud, simulated or dry-run)", spec.backend));
}

}  // namespace perseus::runtime
