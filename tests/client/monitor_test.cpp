// `perseus monitor`: energy through (fake) NVML, exit status passthrough, no-GPU machines.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace {

using namespace perseus::testing;

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

TEST(Monitor, ReportsTimeAndEnergyOfEveryGpu) {
  TempDir dir;
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "--json", dir.file("m.json"),
                           "--", "sleep", "0.2"},
                          {{"FAKE_NVML_DEVICES", "2"}}, dir.file("out.txt"));
  ASSERT_EQ(exit_code(wait_exit(pid)), 0) << read_file(dir.file("out.txt"));
  const std::string out = read_file(dir.file("out.txt"));
  EXPECT_NE(out.find("exited with status 0"), std::string::npos) << out;
  EXPECT_NE(out.find("total"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(read_file(dir.file("m.json")));
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_GE(j["time_s"].get<double>(), 0.2);
  for (const auto& g : j["gpus"]) {
    EXPECT_EQ(g["method"], "energy counter");
    EXPECT_GT(g["energy_j"].get<double>(), 5.0);  // fake GPU: 100 W x >= 0.2 s
    EXPECT_LT(g["energy_j"].get<double>(), 1000.0);
  }
}

TEST(Monitor, PassesTheCommandsExitStatusThrough) {
  TempDir dir;
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "-d", "0", "--", "sh", "-c", "exit 3"},
                          {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 3) << read_file(dir.file("out.txt"));
  const pid_t missing = spawn({PERSEUS_BINARY, "monitor", "--", "/nonexistent/cmd"},
                              {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out2.txt"));
  EXPECT_EQ(exit_code(wait_exit(missing)), 127) << read_file(dir.file("out2.txt"));
}

TEST(Monitor, SaysClearlyWhenThereIsNoGpu) {
  TempDir dir;
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--", "touch", dir.file("ran")},
                          {{"PERSEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 4);
  const std::string out = read_file(dir.file("out.txt"));
  EXPECT_NE(out.find("no NVIDIA GPU can be measured on this machine"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));  // not run
  const pid_t allowed = spawn({PERSEUS_BINARY, "monitor", "--allow-no-gpu", "--", "touch", dir.file("ran")},
                              {{"PERSEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}, dir.file("out2.txt"));
  EXPECT_EQ(exit_code(wait_exit(allowed)), 0) << read_file(dir.file("out2.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("ran")));
}

}  // namespace
