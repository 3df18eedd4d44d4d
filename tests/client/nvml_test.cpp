// NVML backend through the real dlopen path, against the fake libnvidia-ml.so.1.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "../../runtime/client/shared_library.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "test_util.hpp"

namespace perseus::runtime {
namespace {

using perseus::testing::read_file;
using perseus::testing::TempDir;

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("FAKE_NVML_LOG", dir_.file("nvml.log").c_str(), 1);
    ::unsetenv("FAKE_NVML_SET_RESULT");
    ::unsetenv("FAKE_NVML_INIT_RESULT");
    ::setenv("FAKE_NVML_DEVICES", "2", 1);
  }
  void TearDown() override {
    ::unsetenv("FAKE_NVML_LOG");
    ::unsetenv("FAKE_NVML_SET_RESULT");
    ::unsetenv("FAKE_NVML_INIT_RESULT");
    ::unsetenv("FAKE_NVML_DEVICES");
  }
  std::string calls() const { return read_file(dir_.file("nvml.log")); }
  static bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }
  TempDir dir_;
};

TEST_F(FakeNvml, SetAndResetCallNvmlWithTheRightArguments) {
  {
    auto gpu = make_nvml_gpu(1, FAKE_NVML_PATH);
    EXPECT_EQ(gpu->name(), "nvml");
    const auto clocks = gpu->supported_graphics_clocks_mhz();
    ASSERT_EQ(clocks.size(), 81u);
    EXPECT_EQ(clocks.front(), 1410);
    EXPECT_EQ(clocks.back(), 210);
    gpu->set_locked_clocks(1200);
    gpu->reset_locked_clocks();
    const auto args = gpu->watchdog_args();
    ASSERT_GE(args.size(), 4u);
    EXPECT_EQ(args[1], "nvml");
    EXPECT_EQ(args[3], "1");
  }
  const std::string c = calls();
  EXPECT_TRUE(has(c, "nvmlInit_v2"));
  EXPECT_TRUE(has(c, "nvmlDeviceGetHandleByIndex_v2 1"));
  EXPECT_TRUE(has(c, "nvmlDeviceGetSupportedGraphicsClocks 1 1593"));  // at the highest memory clock
  EXPECT_TRUE(has(c, "nvmlDeviceSetGpuLockedClocks 1 1200 1200"));
  EXPECT_TRUE(has(c, "nvmlDeviceResetGpuLockedClocks 1"));
  EXPECT_TRUE(has(c, "nvmlShutdown"));
}

TEST_F(FakeNvml, EnergyInJoulesAndPowerInWatts) {
  auto gpu = make_nvml_gpu(0, FAKE_NVML_PATH);
  const auto t0 = std::chrono::steady_clock::now();
  const double e0 = *gpu->total_energy_j();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const double e1 = *gpu->total_energy_j();
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(e1, e0);  // 100 W fake: ~3 J
  // mJ converted to J, not left in mJ (that would be 1000x): at most 100 W over the measured
  // interval (+1 J of rounding), however long the sleep took on a loaded machine.
  EXPECT_LE(e1 - e0, 100.0 * elapsed_s + 1.0);
  EXPECT_DOUBLE_EQ(*gpu->power_w(), 100.0);
  EXPECT_EQ(nvml_device_count(FAKE_NVML_PATH), 2);
}

// A clock change in progress (on the controller thread) does not hold up the energy and power
// reads of the training thread's hooks: NVML is thread-safe. A 100 ms clock change added up to
// 58 ms to each hook (session 23's trial). Event-based: the fake's set call waits until the test
// creates a file; the reads happen while it waits (its log says so) and must return first.
TEST_F(FakeNvml, ReadsDoNotWaitForAClockChangeInProgress) {
  const std::string scenario = dir_.file("scenario"), release = dir_.file("release");
  {
    std::ofstream(scenario) << "block_until nvmlDeviceSetGpuLockedClocks " << release << "\n";
  }
  ::setenv("FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  auto gpu = make_nvml_gpu(0, FAKE_NVML_PATH);
  std::atomic<bool> set_done{false};
  std::thread setter([&] {
    gpu->set_locked_clocks(1200);
    set_done = true;
  });
  while (!has(calls(), "nvmlDeviceSetGpuLockedClocks blocked")) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // With a lock shared with the clock change, these would wait for it forever (the release
  // file comes only after them): the test would hang, and ctest's timeout fail it.
  EXPECT_TRUE(gpu->total_energy_j().has_value());
  EXPECT_TRUE(gpu->power_w().has_value());
  EXPECT_FALSE(set_done.load());
  {
    std::ofstream(release) << "go\n";
  }
  setter.join();
  EXPECT_TRUE(set_done.load());
  ::unsetenv("FAKE_NVML_SCENARIO");
}

TEST_F(FakeNvml, NoPermissionGivesActionableMessage) {
  ::setenv("FAKE_NVML_SET_RESULT", "4", 1);
  auto gpu = make_nvml_gpu(0, FAKE_NVML_PATH);
  try {
    gpu->set_locked_clocks(1200);
    FAIL() << "expected GpuError";
  } catch (const GpuError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(has(m, "nvmlDeviceSetGpuLockedClocks(GPU 0, 1200 MHz, 1200 MHz)")) << m;
    EXPECT_TRUE(has(m, "NVML_ERROR_NO_PERMISSION")) << m;
    EXPECT_TRUE(has(m, "CAP_SYS_ADMIN")) << m;
  }
}

// The loader both vendor backends share: the first path that loads wins (ROCm SMI falls back to
// the versioned soname when the -dev package is missing); when none loads, the first path and
// its dlerror() text, once.
TEST(SharedLibrary, FirstPathThatLoadsAndTheFirstFailureOtherwise) {
  const detail::SharedLibrary lib({"/nonexistent/libx.so", FAKE_NVML_PATH});
  ASSERT_TRUE(lib.loaded()) << lib.error();
  EXPECT_EQ(lib.path(), FAKE_NVML_PATH);
  int (*init)() = nullptr;
  EXPECT_TRUE(lib.find(init, "nvmlInit_v2"));
  EXPECT_NE(init, nullptr);
  EXPECT_FALSE(lib.find(init, "no_such_symbol"));
  EXPECT_EQ(init, nullptr);
  const detail::SharedLibrary none({"/nonexistent/liba.so", "/nonexistent/libb.so"});
  EXPECT_FALSE(none.loaded());
  EXPECT_EQ(none.path(), "/nonexistent/liba.so");
  EXPECT_EQ(none.error().find("/nonexistent/liba.so"), std::string::npos) << none.error();
  EXPECT_NE(none.error().find("cannot open shared object file"), std::string::npos) << none.error();
  EXPECT_FALSE(none.find(init, "nvmlInit_v2"));
  ::setenv("PERSEUS_TEST_LIBRARY", "from-env.so", 1);
  EXPECT_EQ(detail::library_path("given.so", "PERSEUS_TEST_LIBRARY", "fallback.so"), "given.so");
  EXPECT_EQ(detail::library_path("", "PERSEUS_TEST_LIBRARY", "fallback.so"), "from-env.so");
  ::setenv("PERSEUS_TEST_LIBRARY", "", 1);
  EXPECT_EQ(detail::library_path("", "PERSEUS_TEST_LIBRARY", "fallback.so"), "fallback.so");
  ::unsetenv("PERSEUS_TEST_LIBRARY");
}

TEST_F(FakeNvml, LoadAndInitFailuresAreClear) {
  try {
    make_nvml_gpu(0, "/nonexistent/libnvidia-ml.so.1");
    FAIL() << "expected GpuError";
  } catch (const GpuError& e) {
    EXPECT_TRUE(has(e.what(), "cannot load NVML /nonexistent/libnvidia-ml.so.1: cannot open shared object file"))
        << e.what();
    // The library is named once (dlerror() names it too; issue 22).
    const std::string w = e.what();
    EXPECT_EQ(w.find("libnvidia-ml.so.1"), w.rfind("libnvidia-ml.so.1")) << w;
  }
  EXPECT_THROW(make_nvml_gpu(5, FAKE_NVML_PATH), GpuError);  // only 2 devices
  ::setenv("FAKE_NVML_INIT_RESULT", "9", 1);
  try {
    make_nvml_gpu(0, FAKE_NVML_PATH);
    FAIL() << "expected GpuError";
  } catch (const GpuError& e) {
    EXPECT_TRUE(has(e.what(), "nvmlInit_v2 failed: Driver Not Loaded")) << e.what();
  }
}

}  // namespace
}  // namespace perseus::runtime
