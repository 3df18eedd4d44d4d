// CUDA ordinal / UUID / PCI bus id -> NVML device index.
#include "perseus/runtime/gpu_identity.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_ci(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == lower(prefix);
}

std::string describe(const NvmlDeviceInfo& d) {
  std::string out = fmt::format("NVML GPU {}", d.index);
  std::vector<std::string> parts;
  if (!d.uuid.empty()) parts.push_back(d.uuid);
  if (!d.pci_bus_id.empty()) parts.push_back(d.pci_bus_id);
  if (!parts.empty()) out += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
  return out;
}

// Devices whose UUID starts with `prefix` ("GPU-" optional), case-insensitive.
std::vector<const NvmlDeviceInfo*> by_uuid_prefix(const std::vector<NvmlDeviceInfo>& devices, std::string prefix) {
  if (!starts_with_ci(prefix, "GPU-")) prefix = "GPU-" + prefix;
  std::vector<const NvmlDeviceInfo*> out;
  for (const auto& d : devices)
    if (!d.uuid.empty() && starts_with_ci(d.uuid, prefix)) out.push_back(&d);
  return out;
}

[[noreturn]] void refuse(const std::string& what) {
  throw GpuError(fmt::format("cannot identify the GPU to control: {}. Perseus refuses rather than risk locking "
                             "the clocks of another job's GPU (docs/client.md, \"Which GPU\")",
                             what));
}

std::string mig_message(const std::string& entry) {
  return fmt::format("'{}' is a MIG instance; SM clock locks act on the whole physical GPU that other MIG "
                     "instances share, and NVML refuses them on MIG-enabled GPUs. Run this rank with the "
                     "dry-run backend, or disable MIG",
                     entry);
}

bool is_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

std::optional<std::string> canonical_pci_bus_id(const std::string& text) {
  const std::string t = trim(text);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  if (std::sscanf(t.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) == 4) {
  } else if (std::sscanf(t.c_str(), "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3) {
    domain = 0;
  } else {
    return std::nullopt;
  }
  if (bus > 0xff || dev > 0x1f || fn > 7) return std::nullopt;
  return fmt::format("{:08X}:{:02X}:{:02X}.{:X}", domain, bus, dev, fn);
}

ResolvedGpu resolve_nvml_device(const GpuSelector& sel, const std::vector<NvmlDeviceInfo>& devices,
                                const std::optional<std::string>& cuda_visible_devices,
                                const std::optional<std::string>& cuda_device_order) {
  if (devices.empty()) refuse("NVML reports no GPU on this node");
  auto found = [](const NvmlDeviceInfo& d, const std::string& how) { return ResolvedGpu{d.index, how + " = " + describe(d)}; };

  if (!sel.uuid.empty()) {
    const std::string u = trim(sel.uuid);
    if (starts_with_ci(u, "MIG-")) refuse(mig_message(u));
    const auto m = by_uuid_prefix(devices, u);
    if (m.empty()) refuse(fmt::format("no GPU on this node has UUID '{}'", u));
    if (m.size() > 1) refuse(fmt::format("UUID prefix '{}' matches {} GPUs; give more of it", u, m.size()));
    return found(*m.front(), fmt::format("UUID '{}'", u));
  }
  if (!sel.pci_bus_id.empty()) {
    const auto want = canonical_pci_bus_id(sel.pci_bus_id);
    if (!want) refuse(fmt::format("'{}' is not a PCI bus id (expected DOMAIN:BUS:DEVICE.FUNCTION, hex)", sel.pci_bus_id));
    for (const auto& d : devices) {
      if (canonical_pci_bus_id(d.pci_bus_id) == want) return found(d, fmt::format("PCI bus id {}", sel.pci_bus_id));
    }
    refuse(fmt::format("no GPU on this node has PCI bus id {}", *want));
  }
  if (sel.nvml_index >= 0) {
    if (sel.nvml_index >= static_cast<int>(devices.size()))
      refuse(fmt::format("NVML GPU {} does not exist (the node has {})", sel.nvml_index, devices.size()));
    return found(devices[static_cast<std::size_t>(sel.nvml_index)], fmt::format("NVML index {}", sel.nvml_index));
  }

  const int ordinal = std::max(sel.cuda_ordinal, 0);
  const bool pci_order = cuda_device_order && trim(*cuda_device_order) == "PCI_BUS_ID";
  auto check_order = [&](const std::string& how) {
    if (pci_order) return;
    std::set<std::string> names;
    for (const auto& d : devices) names.insert(d.name);
    if (names.size() > 1) {
      refuse(fmt::format("{}: the node's GPUs differ ({}), so CUDA's default device order (fastest first) may "
                         "differ from NVML's PCI order; set CUDA_DEVICE_ORDER=PCI_BUS_ID or pass the GPU's UUID",
                         how, fmt::join(names, ", ")));
    }
  };
  if (!cuda_visible_devices) {
    const std::string how = fmt::format("cuda:{} (CUDA_VISIBLE_DEVICES unset)", ordinal);
    if (ordinal >= static_cast<int>(devices.size()))
      refuse(fmt::format("{}: the node has only {} GPU(s)", how, devices.size()));
    check_order(how);
    return found(devices[static_cast<std::size_t>(ordinal)], how);
  }

  // CUDA's parsing: entries up to the first invalid one.
  const std::string cvd = *cuda_visible_devices;
  std::vector<std::pair<std::string, const NvmlDeviceInfo*>> visible;  // entry text, device (nullptr = MIG)
  std::string stopped_at;
  std::size_t start = 0;
  while (start <= cvd.size()) {
    const std::size_t comma = cvd.find(',', start);
    const std::string entry = trim(cvd.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? cvd.size() + 1 : comma + 1;
    if (entry.empty() && visible.empty() && comma == std::string::npos) break;  // "" = no GPU
    if (starts_with_ci(entry, "MIG-")) {
      visible.emplace_back(entry, nullptr);
      continue;
    }
    if (is_digits(entry)) {
      const long idx = std::strtol(entry.c_str(), nullptr, 10);
      if (idx >= static_cast<long>(devices.size())) {
        stopped_at = entry;
        break;
      }
      visible.emplace_back(entry, &devices[static_cast<std::size_t>(idx)]);
      continue;
    }
    if (starts_with_ci(entry, "GPU-")) {
      const auto m = by_uuid_prefix(devices, entry);
      if (m.size() > 1)
        refuse(fmt::format("CUDA_VISIBLE_DEVICES='{}': entry '{}' matches {} GPUs' UUIDs", cvd, entry, m.size()));
      if (m.size() == 1) {
        visible.emplace_back(entry, m.front());
        continue;
      }
    }
    stopped_at = entry;  // negative, unknown UUID, junk: CUDA ignores it and every later entry
    break;
  }
  std::set<int> seen;
  for (const auto& [entry, dev] : visible) {
    if (dev != nullptr && !seen.insert(dev->index).second)
      refuse(fmt::format("CUDA_VISIBLE_DEVICES='{}' lists NVML GPU {} twice", cvd, dev->index));
  }
  const std::string note = stopped_at.empty() ? "" : fmt::format(" (CUDA ignores '{}' and every entry after it)", stopped_at);
  if (ordinal >= static_cast<int>(visible.size()))
    refuse(fmt::format("cuda:{} but CUDA_VISIBLE_DEVICES='{}' makes {} GPU(s) visible{}", ordinal, cvd, visible.size(), note));
  const auto& [entry, dev] = visible[static_cast<std::size_t>(ordinal)];
  if (dev == nullptr) refuse(mig_message(entry));
  const std::string how = fmt::format("cuda:{} = CUDA_VISIBLE_DEVICES entry '{}'", ordinal, entry);
  if (is_digits(entry)) check_order(how);
  return found(*dev, how);
}

ResolvedGpu resolve_nvml_device_from_env(const GpuSelector& sel, const std::vector<NvmlDeviceInfo>& devices) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  return resolve_nvml_device(sel, devices, cvd != nullptr ? std::optional<std::string>(cvd) : std::nullopt,
                             order != nullptr ? std::optional<std::string>(order) : std::nullopt);
}

}  // namespace perseus::runtime
