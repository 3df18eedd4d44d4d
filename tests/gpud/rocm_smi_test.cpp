// The rocm-smi backend through the fake librocm_smi64.so (loaded with dlopen like the real
// one): what each GpuControl call maps to, errors, `perseus monitor --backend rocm-smi`, and
// the gpud helper serving AMD GPUs (reset on client kill -9).
#include <rocm_smi/rocm_smi.h>

#include <cstdlib>

#include "gpud_test_util.hpp"
#include "stub_server.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_factory.hpp"

namespace {

using namespace perseus::testing;
using perseus::runtime::GpuError;
using perseus::runtime::make_rocm_smi_gpu;

class RocmSmi : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("FAKE_RSMI_LOG", dir_.file("calls.log").c_str(), 1);
    ::setenv("FAKE_RSMI_DEVICES", "2", 1);
    ::unsetenv("FAKE_RSMI_PERMISSION");
    ::unsetenv("FAKE_RSMI_STATE_DIR");
  }
  void TearDown() override { ::unsetenv("FAKE_RSMI_PERMISSION"); }
  std::string calls() const { return read_file(dir_.file("calls.log")); }
  TempDir dir_;
};

std::string what(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const GpuError& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(RocmSmi, ClocksAreTheSclkLevelsALockIsManualPlusAOneLevelMaskAResetIsAuto) {
  auto g = make_rocm_smi_gpu(1, FAKE_RSMI_PATH);
  EXPECT_EQ(g->name(), "rocm-smi");
  EXPECT_EQ(g->uuid(), "AMD-fa4e000000000001");
  EXPECT_EQ(g->supported_graphics_clocks_mhz(), (std::vector<int>{1700, 1400, 1100, 800, 500}));
  g->set_locked_clocks(1100);  // level 2 of 500, 800, 1100, 1400, 1700
  g->reset_locked_clocks();
  const std::string manual = std::to_string(static_cast<int>(RSMI_DEV_PERF_LEVEL_MANUAL));
  const std::string autolvl = std::to_string(static_cast<int>(RSMI_DEV_PERF_LEVEL_AUTO));
  const auto lines = nonempty_lines(calls());
  std::vector<std::string> sets;
  for (const auto& l : lines) {
    const auto sp = l.find(' ');
    if (l.find("_set") != std::string::npos) sets.push_back(l.substr(sp + 1));
  }
  EXPECT_EQ(sets, (std::vector<std::string>{"rsmi_dev_perf_level_set_v1 1 " + manual,
                                            "rsmi_dev_gpu_clk_freq_set 1 0 0x4",
                                            "rsmi_dev_perf_level_set_v1 1 " + autolvl}));
  const auto e = g->total_energy_j();
  ASSERT_TRUE(e.has_value());
  EXPECT_GT(*e, 0);
  EXPECT_EQ(g->power_w(), 100.0);
  EXPECT_EQ(g->watchdog_args(), (std::vector<std::string>{"--backend", "rocm-smi", "--device", "1",
                                                          "--rocm-smi-library", FAKE_RSMI_PATH}));
}

TEST_F(RocmSmi, ClockOutsideTheLevelsNeverReachesTheDriver) {
  auto g = make_rocm_smi_gpu(0, FAKE_RSMI_PATH);
  EXPECT_NE(what([&] { g->set_locked_clocks(1000); }).find("1000 MHz is not one of the sclk DPM levels"), std::string::npos);
  EXPECT_EQ(calls().find("_set"), std::string::npos);
}

TEST_F(RocmSmi, ErrorsSayWhatToDo) {
  ::setenv("FAKE_RSMI_PERMISSION", "1", 1);
  auto g = make_rocm_smi_gpu(0, FAKE_RSMI_PATH);
  const std::string denied = what([&] { g->set_locked_clocks(1400); });
  EXPECT_NE(denied.find("rsmi_dev_perf_level_set_v1(GPU 0, MANUAL) failed: RSMI_STATUS_PERMISSION"), std::string::npos) << denied;
  EXPECT_NE(denied.find("use the gpud backend"), std::string::npos) << denied;
  EXPECT_NE(what([] { make_rocm_smi_gpu(0, "/nonexistent/librocm_smi64.so"); }).find("cannot load ROCm SMI"),
            std::string::npos);
  EXPECT_NE(what([] { make_rocm_smi_gpu(2, FAKE_RSMI_PATH); }).find("ROCm SMI GPU 2 does not exist (the node has 2)"),
            std::string::npos);
  EXPECT_EQ(perseus::runtime::rocm_smi_device_count(FAKE_RSMI_PATH), 2);
}

TEST_F(RocmSmi, FactoryRefusesAnOrdinalItCannotMapThroughHipVisibleDevices) {
  perseus::runtime::GpuSpec spec;
  spec.backend = "rocm-smi";
  spec.rocm_smi_library = FAKE_RSMI_PATH;
  spec.device_index = 0;
  ::setenv("HIP_VISIBLE_DEVICES", "1", 1);
  EXPECT_NE(what([&] { perseus::runtime::make_gpu(spec); }).find("HIP_VISIBLE_DEVICES=1 is set"), std::string::npos);
  spec.device_is_nvml_index = true;  // "this is the ROCm SMI index"
  EXPECT_EQ(perseus::runtime::make_gpu(spec)->device_index(), 0);
  ::unsetenv("HIP_VISIBLE_DEVICES");
}

TEST_F(RocmSmi, MonitorMeasuresAmdGpus) {
  const pid_t p = spawn({PERSEUS_BINARY, "monitor", "--backend", "rocm-smi", "--rocm-smi-library", FAKE_RSMI_PATH,
                         "--json", dir_.file("m.json"), "--", "sleep", "0.2"},
                        {}, dir_.file("monitor.log"));
  const int status = wait_exit(p, 60);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_.file("monitor.log"));
  const auto j = nlohmann::json::parse(read_file(dir_.file("m.json")));
  ASSERT_EQ(j["gpus"].size(), 2u);
  for (const auto& g : j["gpus"]) {
    EXPECT_EQ(g["method"], "energy counter");
    // The counter is read just outside the command's lifetime at a steady 100 W.
    EXPECT_GE(g["avg_power_w"].get<double>(), 99.0) << g.dump();
  }
  EXPECT_GE(j["time_s"].get<double>(), 0.2);
}

TEST_F(RocmSmi, MonitorWithoutRocmSaysSoAndDoesNotRunTheCommand) {
  const pid_t p = spawn({PERSEUS_BINARY, "monitor", "--backend", "rocm-smi", "--rocm-smi-library",
                         "/nonexistent/librocm_smi64.so", "--", "touch", dir_.file("ran")},
                        {}, dir_.file("monitor.log"));
  const int status = wait_exit(p, 60);
  EXPECT_EQ(WEXITSTATUS(status), 4);
  EXPECT_NE(read_file(dir_.file("monitor.log")).find("no AMD GPU can be measured on this machine: cannot load ROCm SMI"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("ran")));
}

TEST_F(RocmSmi, GpudServesAmdGpusAndResetsWhenTheClientIsKilled) {
  TempDir d;
  GpudProcess gpud(d, "rocm-smi");
  ASSERT_TRUE(gpud.start("allow * uid:" + std::to_string(::getuid()) + "\n")) << gpud.log();
  perseus::runtime::GpuSelector sel;
  sel.nvml_index = 1;
  const pid_t client = ::fork();
  if (client == 0) {
    try {
      auto g = perseus::runtime::make_gpud_gpu(sel, gpud.socket());
      g->set_locked_clocks(1400);
      std::ofstream(d.file("ready")) << "1\n";
      for (;;) ::pause();  // holds the connection (and the lock) until killed
    } catch (const std::exception& e) {
      std::fprintf(stderr, "client: %s\n", e.what());
      ::_exit(3);
    }
  }
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(d.file("ready")); }, 60)) << gpud.log();
  EXPECT_EQ(gpud.gpu_state(1), "manual 1400\n") << gpud.log() << gpud.gpu_log();
  ::kill(client, SIGKILL);
  wait_exit(client, 30);
  ASSERT_TRUE(wait_for([&] { return gpud.log().find("GPU 1: clocks reset") != std::string::npos; }, 60)) << gpud.log();
  EXPECT_FALSE(gpud.gpu_locked(1));
}

// A trainer on the rocm-smi backend (no helper) killed with -9: its perseus-watchdog resets
// the AMD GPU through ROCm SMI (performance level AUTO) from its own process.
TEST_F(RocmSmi, TheWatchdogResetsAnAmdGpuAfterTheTrainerIsKilled) {
  StubServer server;
  server.set_plan(0, make_plan(1, {{"forward", 1400}, {"backward", 1100}}));
  server.start();
  std::filesystem::create_directories(dir_.file("state"));
  const pid_t trainer = spawn({TEST_TRAINER, "--url", server.url(), "--token", "secret", "--job", "job1", "--backend",
                               "rocm-smi", "--stages", "1", "--microbatches", "1", "--iterations", "2", "--watchdog",
                               WATCHDOG, "--progress", dir_.file("progress"), "--no-coalesce", "--hang"},
                              {{"PERSEUS_ROCM_SMI_LIBRARY", FAKE_RSMI_PATH}, {"FAKE_RSMI_STATE_DIR", dir_.file("state")},
                               {"FAKE_RSMI_DEVICES", "1"}, {"PERSEUS_LOCK_DIR", dir_.file("locks")}},
                              dir_.file("out.txt"));
  ASSERT_TRUE(wait_for([&] { return read_file(dir_.file("progress")).find("ready") != std::string::npos; }, 60))
      << read_file(dir_.file("out.txt"));
  EXPECT_EQ(read_file(dir_.file("state/level_0")), "manual 1100\n");
  ::kill(trainer, SIGKILL);
  wait_exit(trainer, 30);
  ASSERT_TRUE(wait_for([&] { return !std::filesystem::exists(dir_.file("state/level_0")); }, 60)) << calls();
  bool reset_by_other = false;
  for (const auto& l : nonempty_lines(calls())) {
    const std::string auto_level = "rsmi_dev_perf_level_set_v1 0 " + std::to_string(static_cast<int>(RSMI_DEV_PERF_LEVEL_AUTO));
    if (l.find(auto_level) != std::string::npos && l.substr(0, l.find(' ')) != std::to_string(trainer)) reset_by_other = true;
  }
  EXPECT_TRUE(reset_by_other) << calls();
}

}  // namespace
