// GPU identity: CUDA ordinal -> NVML device through CUDA_VISIBLE_DEVICES, UUIDs, PCI bus ids
// (issue 16 row 1), against exact expected indices; and end to end through the fake NVML.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "perseus/runtime/gpu_factory.hpp"
#include "perseus/runtime/gpu_identity.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using perseus::testing::read_file;
using perseus::testing::TempDir;

std::string fmt_uuid(int i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-00000000-0000-0000-0000-%012d", i);
  return buf;
}

std::vector<NvmlDeviceInfo> node(int n, const std::string& name = "NVIDIA A100") {
  std::vector<NvmlDeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({i, fmt_uuid(i), "00000000:" + std::string(i < 10 ? "0" : "") + std::to_string(i + 1) + ":00.0", name});
  }
  return out;
}

int cuda(int ordinal, const std::vector<NvmlDeviceInfo>& devices, std::optional<std::string> cvd,
         std::optional<std::string> order = std::nullopt) {
  GpuSelector sel;
  sel.cuda_ordinal = ordinal;
  return resolve_nvml_device(sel, devices, cvd, order).nvml_index;
}

std::string refusal(int ordinal, const std::vector<NvmlDeviceInfo>& devices, std::optional<std::string> cvd,
                    std::optional<std::string> order = std::nullopt) {
  try {
    cuda(ordinal, devices, cvd, order);
  } catch (const GpuError& e) {
    return e.what();
  }
  return "";
}

TEST(GpuIdentity, IndicesAreMappedThroughCudaVisibleDevices) {
  const auto d = node(4);
  EXPECT_EQ(cuda(0, d, std::nullopt), 0);
  EXPECT_EQ(cuda(3, d, std::nullopt), 3);
  EXPECT_EQ(cuda(0, d, "2,3"), 2);  // the case: cuda:0 is NVML GPU 2, not 0
  EXPECT_EQ(cuda(1, d, "2,3"), 3);
  EXPECT_EQ(cuda(0, d, " 3 , 1"), 3);
  EXPECT_EQ(cuda(1, d, "3,1"), 1);
}

TEST(GpuIdentity, UuidsAndUniquePrefixesAreMapped) {
  auto d = node(4);
  d[2].uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
  d[3].uuid = "GPU-8932aaaa-d72c-4106-c12f-20bd9faed9f6";
  EXPECT_EQ(cuda(0, d, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"), 2);
  EXPECT_EQ(cuda(0, d, "GPU-8932f"), 2);    // CUDA accepts a unique prefix
  EXPECT_EQ(cuda(1, d, "1,GPU-8932a"), 3);
  EXPECT_NE(refusal(0, d, "GPU-8932").find("matches 2 GPUs"), std::string::npos);  // ambiguous
  GpuSelector sel;
  sel.uuid = "8932f937-d72c-4106-c12f-20bd9faed9f6";  // torch prints UUIDs without "GPU-"
  EXPECT_EQ(resolve_nvml_device(sel, d, "0").nvml_index, 2);  // a UUID wins over CUDA_VISIBLE_DEVICES
  sel.uuid = "GPU-ffff";
  EXPECT_THROW(resolve_nvml_device(sel, d, std::nullopt), GpuError);
}

TEST(GpuIdentity, PciBusIdsInEitherSpelling) {
  const auto d = node(4);
  GpuSelector sel;
  sel.pci_bus_id = "0000:03:00.0";  // CUDA/torch: 4-digit domain
  EXPECT_EQ(resolve_nvml_device(sel, d, std::nullopt).nvml_index, 2);
  sel.pci_bus_id = "00000000:04:00.0";  // NVML: 8-digit domain
  EXPECT_EQ(resolve_nvml_device(sel, d, std::nullopt).nvml_index, 3);
  EXPECT_EQ(canonical_pci_bus_id("41:00.0"), "00000000:41:00.0");
  EXPECT_EQ(canonical_pci_bus_id("0000:af:00.1"), "00000000:AF:00.1");
  EXPECT_FALSE(canonical_pci_bus_id("GPU-1234"));
  sel.pci_bus_id = "0000:99:00.0";
  EXPECT_THROW(resolve_nvml_device(sel, d, std::nullopt), GpuError);
}

TEST(GpuIdentity, RefusesClearlyWhenItCannotBeSure) {
  const auto d = node(4);
  // Fewer visible GPUs than the ordinal.
  EXPECT_NE(refusal(2, d, "2,3").find("makes 2 GPU(s) visible"), std::string::npos);
  // Empty list: no GPU visible.
  EXPECT_NE(refusal(0, d, "").find("makes 0 GPU(s) visible"), std::string::npos);
  // CUDA stops at the first invalid entry: "1,-1,2" makes only GPU 1 visible.
  EXPECT_EQ(cuda(0, d, "1,-1,2"), 1);
  const std::string junk = refusal(1, d, "1,-1,2");
  EXPECT_NE(junk.find("ignores '-1'"), std::string::npos) << junk;
  EXPECT_NE(refusal(1, d, "0,7").find("ignores '7'"), std::string::npos);  // out of range
  // The same GPU twice.
  EXPECT_NE(refusal(0, d, "1,1").find("twice"), std::string::npos);
  // MIG instances: clock locks would act on the whole shared GPU.
  const std::string mig = refusal(0, d, "MIG-4f4b2d4f-5e2d-5b52-9c6d-6a1d1b8f4e2b");
  EXPECT_NE(mig.find("MIG instance"), std::string::npos) << mig;
  EXPECT_NE(refusal(0, d, "MIG-GPU-00000000-0000-0000-0000-000000000002/1/0").find("MIG"), std::string::npos);
  // No GPU at all.
  EXPECT_NE(refusal(0, {}, std::nullopt).find("no GPU"), std::string::npos);
}

TEST(GpuIdentity, MixedNodesNeedPciBusOrderForIndices) {
  auto d = node(2);
  d[1].name = "NVIDIA H100";
  const std::string m = refusal(0, d, "1");
  EXPECT_NE(m.find("CUDA_DEVICE_ORDER=PCI_BUS_ID"), std::string::npos) << m;
  EXPECT_EQ(cuda(0, d, "1", "PCI_BUS_ID"), 1);
  EXPECT_EQ(cuda(0, d, "GPU-00000000-0000-0000-0000-000000000001"), 1);  // UUIDs need no order
}

// End to end: the fake NVML with 4 GPUs, CUDA_VISIBLE_DEVICES=2,3, the trainer's "cuda:0".
TEST(GpuIdentity, ClocksAreLockedOnTheTrainersOwnGpu) {
  TempDir dir;
  ::setenv("FAKE_NVML_LOG", dir.file("nvml.log").c_str(), 1);
  ::setenv("FAKE_NVML_DEVICES", "4", 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "2,3", 1);
  GpuSpec spec;
  spec.backend = "nvml";
  spec.nvml_library = FAKE_NVML_PATH;
  spec.device_index = 0;  // cuda:0
  {
    auto gpu = make_gpu(spec);
    EXPECT_EQ(gpu->device_index(), 2);
    EXPECT_NE(gpu->identity().find("CUDA_VISIBLE_DEVICES entry '2'"), std::string::npos) << gpu->identity();
    gpu->set_locked_clocks(1200);
  }
  ::setenv("CUDA_VISIBLE_DEVICES", "2,3,MIG-abc", 1);
  spec.device_index = 2;
  EXPECT_THROW(make_gpu(spec), GpuError);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ::unsetenv("FAKE_NVML_DEVICES");
  ::unsetenv("FAKE_NVML_LOG");
  const std::string log = read_file(dir.file("nvml.log"));
  EXPECT_NE(log.find("nvmlDeviceSetGpuLockedClocks 2 1200 1200"), std::string::npos) << log;
  EXPECT_EQ(log.find("nvmlDeviceSetGpuLockedClocks 0"), std::string::npos) << log;  // another job's GPU
}

}  // namespace
}  // namespace perseus::runtime
