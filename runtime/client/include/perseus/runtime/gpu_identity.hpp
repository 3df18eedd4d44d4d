// Which NVML device is "my GPU": the CUDA ordinal mapped through CUDA_VISIBLE_DEVICES, a
// UUID or a PCI bus id. NVML numbers every GPU of the node and ignores CUDA_VISIBLE_DEVICES,
// so cuda:0 in a process with CUDA_VISIBLE_DEVICES=2,3 is NVML device 2, not 0.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace perseus::runtime {

/// How the trainer names its GPU. The first non-empty of uuid, pci_bus_id, nvml_index,
/// cuda_ordinal decides; all empty/negative = CUDA ordinal 0.
struct GpuSelector {
  /// "GPU-8932f937-..." (with or without the "GPU-" prefix; a unique prefix is enough), e.g.
  /// torch.cuda.get_device_properties(i).uuid. "MIG-..." is refused (see resolve_nvml_device).
  std::string uuid;
  /// PCI bus id as CUDA or NVML print it: "0000:41:00.0" or "00000000:41:00.0" (hex).
  std::string pci_bus_id;
  /// NVML's own index (no CUDA_VISIBLE_DEVICES mapping): tools such as `perseus monitor -d`.
  int nvml_index = -1;
  /// CUDA device ordinal as the framework sees it ("cuda:N"), mapped through
  /// CUDA_VISIBLE_DEVICES (indices, "GPU-" UUIDs or unique UUID prefixes, "MIG-" refused).
  int cuda_ordinal = -1;
};

/// What NVML says about one device (nvmlDeviceGetUUID, nvmlDeviceGetPciInfo_v3,
/// nvmlDeviceGetName). Empty strings when the driver does not answer.
struct NvmlDeviceInfo {
  int index = 0;           ///< NVML index, 0-based, PCI bus order.
  std::string uuid;        ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
  std::string pci_bus_id;  ///< "00000000:41:00.0".
  std::string name;        ///< Product name, e.g. "NVIDIA A100-SXM4-40GB".
};

/// A resolved device: NVML index plus how it was found (for messages and logs).
struct ResolvedGpu {
  int nvml_index = 0;
  std::string how;  ///< e.g. "cuda:0 = CUDA_VISIBLE_DEVICES entry '2' = NVML GPU 2 (GPU-..., 00000000:03:00.0)"
};

/// Maps `sel` to one NVML device of `devices` (NVML's list, in index order).
/// cuda_visible_devices: the value of $CUDA_VISIBLE_DEVICES (std::nullopt = unset: CUDA
/// ordinal = NVML index). Parsing follows CUDA: comma-separated entries, surrounding spaces
/// ignored, the list ends at the first invalid entry (a negative or out-of-range index, an
/// unknown UUID). cuda_device_order: $CUDA_DEVICE_ORDER; with index entries on a node whose
/// GPUs differ in name, the CUDA default order (FASTEST_FIRST) may differ from NVML's PCI
/// order, so the mapping is refused unless it is "PCI_BUS_ID" (or a UUID is given).
/// Throws GpuError with a message naming the input when the device cannot be identified
/// with certainty: no such ordinal, an empty visible list, an ambiguous UUID prefix, a
/// repeated entry, a MIG instance (clock locks act on the whole physical GPU that other
/// instances share, and NVML refuses them on MIG-enabled GPUs), or no device matching.
ResolvedGpu resolve_nvml_device(const GpuSelector& sel, const std::vector<NvmlDeviceInfo>& devices,
                                const std::optional<std::string>& cuda_visible_devices,
                                const std::optional<std::string>& cuda_device_order = std::nullopt);

/// Same as resolve_nvml_device with $CUDA_VISIBLE_DEVICES and $CUDA_DEVICE_ORDER of this process.
ResolvedGpu resolve_nvml_device_from_env(const GpuSelector& sel, const std::vector<NvmlDeviceInfo>& devices);

/// Canonical PCI bus id "DDDDDDDD:BB:DD.F" (upper-case hex, 8-digit domain) of "0000:41:00.0",
/// "00000000:41:00.0" or "41:00.0"; std::nullopt when the text is not a PCI bus id.
std::optional<std::string> canonical_pci_bus_id(const std::string& text);

}  // namespace perseus::runtime
