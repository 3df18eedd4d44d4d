// `perseus monitor`: energy through (fake) NVML, exit status passthrough, no-GPU machines.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>

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

// A counter difference over a run of a few counter updates is mostly the update period (the
// trial: `perseus monitor -- true` on a 100 W fake read 122-135 W): such a run gets a note and
// "short_run": true; a run of 10 updates (1 s) or more does not.
TEST(Monitor, ShortRunsAreToldTheCountersResolution) {
  TempDir dir;
  for (const char* seconds : {"0", "1.05"}) {
    const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "--json", dir.file("m.json"),
                             "--", "sleep", seconds},
                            {}, dir.file(std::string("out-") + seconds));
    const int status = wait_exit(pid);
    const std::string out = read_file(dir.file(std::string("out-") + seconds));
    ASSERT_EQ(exit_code(status), 0) << out;
    const auto j = nlohmann::json::parse(read_file(dir.file("m.json")));
    // By the measured time, not the sleep's: a loaded machine may stretch "sleep 0".
    const bool short_run = j["time_s"].get<double>() < 1.0;
    if (std::string(seconds) != "0") {
      EXPECT_FALSE(short_run);
    }
    EXPECT_EQ(j["short_run"], short_run) << out;
    EXPECT_EQ(out.find("the energy counter updates about every 0.1 s") != std::string::npos, short_run) << out;
    std::filesystem::remove(dir.file("m.json"));
  }
}

// -d naming a GPU the machine lacks is the caller's mistake: an error naming it and the
// machine's count, the command not run (it said "no NVIDIA GPU can be measured", exit 4).
TEST(Monitor, AGpuNumberTheMachineLacksIsNamed) {
  TempDir dir;
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "-d", "5", "--allow-no-gpu",
                           "--", "touch", dir.file("ran")},
                          {{"FAKE_NVML_DEVICES", "2"}}, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 1);
  const std::string out = read_file(dir.file("out.txt"));
  EXPECT_NE(out.find("-d 5: this machine has 2 NVIDIA GPUs (indices 0..1); command not run"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));
}

// SIGTERM to the monitor alone (a job scheduler) reaches the command, which never runs on
// unsupervised; the monitor reports and exits with the command's status. SIGINT reaches a
// command that keeps its dispositions (sleep): the monitor ignores it, the command must not
// inherit that. Event-driven: the signals go out once the command wrote its pid.
TEST(Monitor, SignalsReachTheCommand) {
  for (const int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    const std::string pid_file = dir.file("pid");
    const pid_t monitor = spawn({PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "--json",
                                 dir.file("m.json"), "--", "sh", "-c", "echo $$ > " + pid_file + ".tmp && mv " +
                                 pid_file + ".tmp " + pid_file + " && exec sleep 60"},
                                {{"FAKE_NVML_DEVICES", "1"}}, dir.file("out.txt"));
    ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(pid_file); }, 60)) << read_file(dir.file("out.txt"));
    const pid_t child = std::stoi(read_file(pid_file));
    ::kill(sig == SIGTERM ? monitor : child, sig);  // Ctrl-C reaches both; the monitor ignores it
    if (sig == SIGINT) ::kill(monitor, SIGINT);
    EXPECT_EQ(exit_code(wait_exit(monitor)), 128 + sig) << read_file(dir.file("out.txt"));
    EXPECT_NE(::kill(child, 0), 0) << "the command outlived the monitor";
    EXPECT_TRUE(std::filesystem::exists(dir.file("m.json"))) << "the monitor still reports";
  }
}

TEST(Monitor, PassesTheCommandsExitStatusThrough) {
  TempDir dir;
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "-d", "0", "--", "sh", "-c", "exit 3"},
                          {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 3) << read_file(dir.file("out.txt"));
  EXPECT_NE(read_file(dir.file("out.txt")).find("'sh' exited with status 3 after"), std::string::npos);
  // A command killed by a signal: the signal is named (it said "exited with status 137").
  const pid_t killed = spawn({PERSEUS_BINARY, "monitor", "-d", "0", "--", "sh", "-c", "kill -9 $$"},
                             {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out3.txt"));
  EXPECT_EQ(exit_code(wait_exit(killed)), 137) << read_file(dir.file("out3.txt"));
  EXPECT_NE(read_file(dir.file("out3.txt")).find("'sh' was killed by signal 9 (SIGKILL; exit status 137) after"),
            std::string::npos)
      << read_file(dir.file("out3.txt"));
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
  const pid_t allowed = spawn({PERSEUS_BINARY, "monitor", "--allow-no-gpu", "--json", dir.file("m.json"), "--", "touch",
                               dir.file("ran")},
                              {{"PERSEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}, dir.file("out2.txt"));
  EXPECT_EQ(exit_code(wait_exit(allowed)), 0) << read_file(dir.file("out2.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.file("ran")));
  // Nothing measured: the energy is unknown (null), never left out or 0.
  const auto j = nlohmann::json::parse(read_file(dir.file("m.json")));
  ASSERT_TRUE(j.contains("energy_j")) << j.dump();
  EXPECT_TRUE(j["energy_j"].is_null()) << j.dump();
}

TEST(Monitor, UnwritableJsonIsRefusedBeforeTheCommandRuns) {
  TempDir dir;
  // A missing folder: exit 1 naming the reason, the command never started, no file left.
  const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--json", dir.file("missing/m.json"), "--", "touch", dir.file("ran")},
                          {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 1) << read_file(dir.file("out.txt"));
  const std::string out = read_file(dir.file("out.txt"));
  EXPECT_NE(out.find("No such file or directory; command not run"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));
  // A folder given as the file.
  const pid_t folder = spawn({PERSEUS_BINARY, "monitor", "--json", dir.path(), "--", "touch", dir.file("ran")},
                             {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out2.txt"));
  EXPECT_EQ(exit_code(wait_exit(folder)), 1) << read_file(dir.file("out2.txt"));
  EXPECT_NE(read_file(dir.file("out2.txt")).find("is a folder"), std::string::npos) << read_file(dir.file("out2.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));
  // An existing file is kept (the last run's numbers), unless --force.
  std::ofstream(dir.file("m.json")) << "{\"earlier\": 1}\n";
  const pid_t exists = spawn({PERSEUS_BINARY, "monitor", "--json", dir.file("m.json"), "--", "touch", dir.file("ran")},
                             {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out3.txt"));
  EXPECT_EQ(exit_code(wait_exit(exists)), 1) << read_file(dir.file("out3.txt"));
  EXPECT_NE(read_file(dir.file("out3.txt")).find("exists; pass --force to replace it; command not run"), std::string::npos)
      << read_file(dir.file("out3.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));
  EXPECT_EQ(read_file(dir.file("m.json")), "{\"earlier\": 1}\n");
  const pid_t forced = spawn({PERSEUS_BINARY, "monitor", "--force", "--json", dir.file("m.json"), "--", "touch",
                              dir.file("ran")},
                             {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, dir.file("out4.txt"));
  EXPECT_EQ(exit_code(wait_exit(forced)), 0) << read_file(dir.file("out4.txt"));
  EXPECT_TRUE(nlohmann::json::parse(read_file(dir.file("m.json"))).contains("energy_j"));
  std::filesystem::remove(dir.file("ran"));
  for (const char* f : {"m.json", "out3.txt", "out4.txt"}) std::filesystem::remove(dir.file(f));
  // Nothing but the two outputs in the folder: no temporary left behind.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 2);
}

// The JSON printed to stderr after "the result follows as JSON:" (null when there is none).
nlohmann::json json_in_output(const std::string& out) {
  const auto marker = out.find("the result follows as JSON:\n");
  if (marker == std::string::npos) return nullptr;
  const auto begin = out.find('{', marker);
  const auto end = out.find("\n}\n", begin);
  if (begin == std::string::npos || end == std::string::npos) return nullptr;
  return nlohmann::json::parse(out.substr(begin, end + 2 - begin), nullptr, false);
}

// The --json folder vanishes (or turns into a file) while CMD runs: CMD itself does it, so the
// write fails deterministically after CMD ran. The status and the numbers must not be lost.
TEST(Monitor, JsonWriteFailingAfterTheCommandKeepsItsStatusAndNumbers) {
  TempDir dir;
  const std::string sub = dir.file("sub");
  const std::string json_path = sub + "/m.json";
  struct Case {
    std::string script;  // run by sh -c
    int want_exit;
    std::string why;     // strerror of the failed write
  };
  const std::vector<Case> cases = {
      {"rm -r '" + sub + "'", 5, "No such file or directory"},              // CMD succeeded: the distinct status 5
      {"rm -r '" + sub + "' && touch '" + sub + "'; exit 3", 3, "Not a directory"},  // CMD failed: its own status
  };
  int n = 0;
  for (const auto& c : cases) {
    std::filesystem::remove_all(sub);
    std::filesystem::create_directory(sub);
    const std::string log = dir.file("out" + std::to_string(n++) + ".txt");
    const pid_t pid = spawn({PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "--json", json_path, "--",
                             "sh", "-c", c.script},
                            {{"FAKE_NVML_DEVICES", "2"}}, log);
    EXPECT_EQ(exit_code(wait_exit(pid)), c.want_exit) << c.script << ": " << read_file(log);
    const std::string out = read_file(log);
    EXPECT_NE(out.find("perseus monitor: --json " + json_path + ": cannot write the file: " + c.why), std::string::npos)
        << out;
    EXPECT_NE(out.find("exit status " + std::to_string(c.want_exit)), std::string::npos) << out;
    EXPECT_NE(out.find("total"), std::string::npos) << "the summary table is printed: " << out;
    const nlohmann::json j = json_in_output(out);
    ASSERT_TRUE(j.is_object()) << "the JSON that could not be written is on stderr: " << out;
    EXPECT_EQ(j["exit_status"], c.want_exit == 5 ? 0 : c.want_exit);
    ASSERT_EQ(j["gpus"].size(), 2u);
    EXPECT_GT(j["energy_j"].get<double>(), 0.0);
    EXPECT_FALSE(std::filesystem::exists(json_path));
  }
  // No half-written or temporary file anywhere: only the logs and what CMD left ("sub", a file).
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.rfind("out", 0) == 0 || name == "sub") << name;
  }
}

TEST(Monitor, OptionValuesOutOfRangeAreUsageErrors) {
  TempDir dir;
  int n = 0;
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--interval", "0"}, {"--interval", "-1"}, {"--interval", "nan"}, {"--interval", "1e9"},
           {"-d", "-1"}, {"-d", "x"}, {"--json", ""},
           // an option of another backend (the default nvml) would be ignored silently
           {"--gpud-socket", "/run/x.sock"}, {"--rocm-smi-library", "/x.so"}}) {
    std::vector<std::string> argv = {PERSEUS_BINARY, "monitor"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    for (const char* a : {"--", "touch"}) argv.push_back(a);
    argv.push_back(dir.file("ran"));
    const std::string log = dir.file("out" + std::to_string(n++) + ".txt");
    const pid_t pid = spawn(argv, {{"PERSEUS_NVML_LIBRARY", FAKE_NVML_PATH}}, log);
    EXPECT_EQ(exit_code(wait_exit(pid)), 2) << bad[0] << " " << bad[1] << ": " << read_file(log);
    EXPECT_NE(read_file(log).find(bad[0]), std::string::npos) << read_file(log);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("ran")));
}

}  // namespace

namespace {

using namespace perseus::testing;

// Runs `perseus monitor` on one fake GPU playing `scenario`; returns the JSON and the output.
std::pair<nlohmann::json, std::string> monitor_with(const TempDir& dir, const std::string& scenario,
                                                    std::map<std::string, std::string> env = {},
                                                    std::vector<std::string> command = {"true"}) {
  std::ofstream(dir.file("scenario")) << scenario;
  std::filesystem::remove(dir.file("m.json"));  // --json keeps an existing file
  env["FAKE_NVML_SCENARIO"] = dir.file("scenario");
  std::vector<std::string> argv = {PERSEUS_BINARY, "monitor", "--nvml-library", FAKE_NVML_PATH, "--json", dir.file("m.json"),
                                   "--interval", "0.01", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  const pid_t pid = spawn(argv, env, dir.file("out.txt"));
  EXPECT_EQ(exit_code(wait_exit(pid)), 0) << read_file(dir.file("out.txt"));
  return {nlohmann::json::parse(read_file(dir.file("m.json"))), read_file(dir.file("out.txt"))};
}

// Row 6: the counter goes back by 1 kJ (driver reload, GPU reset) between the two readings.
TEST(MonitorAnomalies, CounterGoingBackFallsBackToPowerSamplesWithAWarning) {
  TempDir dir;
  const auto [j, out] = monitor_with(dir, "energy_offset 0 2 -1000000\n");
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["method"], "power samples");
  EXPECT_EQ(g["anomalies"][0], "counter_backwards");
  // The fake draws exactly 100 W: the integral over the command's lifetime is 100 W x time.
  EXPECT_NEAR(g["energy_j"].get<double>(), 100.0 * j["time_s"].get<double>(), 1e-9);
  EXPECT_GE(g["avg_power_w"].get<double>(), 0.0);
  EXPECT_NE(out.find("WARNING: GPU 0: energy counter went back by"), std::string::npos) << out;
}

// Row 8: no energy counter: power integrated exactly over the command's lifetime.
TEST(MonitorAnomalies, MissingCounterIntegratesPowerOverTheCommandsLifetime) {
  TempDir dir;
  for (const char* how : {"not_supported nvmlDeviceGetTotalEnergyConsumption\n",
                          "missing nvmlDeviceGetTotalEnergyConsumption\n"}) {
    const auto [j, out] = monitor_with(dir, how, {}, {"sleep", "0.05"});
    const auto& g = j["gpus"][0];
    EXPECT_EQ(g["method"], "power samples") << how;
    EXPECT_NEAR(g["avg_power_w"].get<double>(), 100.0, 1e-6) << out;  // not 1823 W
    EXPECT_NEAR(j["energy_j"].get<double>(), 100.0 * j["time_s"].get<double>(), 1e-9);
  }
}

// No counter and no power: explicitly unknown, never a number.
TEST(MonitorAnomalies, NoCounterAndNoPowerIsUnknown) {
  TempDir dir;
  const auto [j, out] = monitor_with(dir, "not_supported nvmlDeviceGetTotalEnergyConsumption\n"
                                          "not_supported nvmlDeviceGetPowerUsage\n");
  EXPECT_TRUE(j["gpus"][0]["energy_j"].is_null());
  EXPECT_TRUE(j["energy_j"].is_null());
  EXPECT_NE(out.find("unknown"), std::string::npos) << out;
  // Session 14's trial: the total line said "measured ones: 0.000 J" when none was measured.
  EXPECT_NE(out.find("(no GPU measured)"), std::string::npos) << out;
  EXPECT_EQ(out.find("0.000 J"), std::string::npos) << out;
}

// GPU lost during the command: unknown with a warning; the other GPU is still measured.
TEST(MonitorAnomalies, LostGpuIsUnknownAndTheOthersAreMeasured) {
  TempDir dir;
  const auto [j, out] = monitor_with(dir, "devices 2\nlost 1 2\n");
  EXPECT_EQ(j["gpus"][0]["method"], "energy counter");
  EXPECT_TRUE(j["gpus"][1]["energy_j"].is_null());
  EXPECT_EQ(j["gpus"][1]["anomalies"][0], "gpu_lost");
  EXPECT_TRUE(j["energy_j"].is_null());  // a sum over some GPUs is not the total
  EXPECT_NE(out.find("GPU is lost"), std::string::npos) << out;
  EXPECT_NE(out.find("(1 of 2 GPUs not measured; the measured ones: "), std::string::npos) << out;
}

// A 32-bit counter wrapping between the readings is still measured, with a note.
TEST(MonitorAnomalies, WrapIsMeasured) {
  TempDir dir;
  const auto [j, out] = monitor_with(dir, "energy_value 0 1 4294967000\nenergy_value 0 2 100\n");
  const auto& g = j["gpus"][0];
  EXPECT_EQ(g["method"], "energy counter");
  EXPECT_EQ(g["anomalies"][0], "counter_wrapped");
  EXPECT_NEAR(g["energy_j"].get<double>(), (4294967296.0 - 4294967000.0 + 100.0) / 1000.0, 1e-9);
}

// An impossible jump (1 GJ during a short command) falls back to power samples.
TEST(MonitorAnomalies, ImpossibleJumpFallsBack) {
  TempDir dir;
  const auto [j, out] = monitor_with(dir, "energy_offset 0 2 1000000000000\n");
  EXPECT_EQ(j["gpus"][0]["anomalies"][0], "counter_jump");
  EXPECT_EQ(j["gpus"][0]["method"], "power samples");
  EXPECT_LT(j["gpus"][0]["avg_power_w"].get<double>(), 100.0 + 1e-6);
}

}  // namespace
