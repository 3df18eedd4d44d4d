// `perseus monitor -- CMD [ARGS...]`: runs CMD and prints its wall time and the GPUs' energy
// (NVML total-energy counter, or integrated power where the counter is missing).
// Exit status: CMD's own status (128+N if killed by signal N); 4 when no GPU can be measured
// (NVML missing or failing; CMD is NOT run unless --allow-no-gpu); 127 when CMD cannot be
// started; 1/2 for bad arguments.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "perseus/error.hpp"
#include "perseus/runtime/gpu_control.hpp"

extern char** environ;

namespace perseus::cli {
namespace {

constexpr int kExitNoGpu = 4;
constexpr int kExitCannotRun = 127;

struct MonitorArgs {
  std::vector<int> devices;
  std::string nvml_library;
  std::string json_path;
  double interval_s = 0.1;
  bool allow_no_gpu = false;
  std::vector<std::string> command;
};

// Energy of one GPU over the run: counter difference, or power integrated by a sampler.
struct DeviceMeter {
  std::unique_ptr<runtime::GpuControl> gpu;
  std::optional<double> e0_j;
  std::optional<double> e1_j;
  double sampled_j = 0;
  std::string error;
};

int run_command(const std::vector<std::string>& command, double* time_s) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    fmt::print(stderr, "perseus monitor: cannot run '{}': {}\n", command[0], std::strerror(rc));
    return kExitCannotRun;
  }
  // Like time(1): Ctrl-C goes to the command; we wait for it and still report.
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  *time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int monitor(const MonitorArgs& args) {
  if (args.command.empty()) throw InputError("monitor: no command given (usage: perseus monitor -- CMD [ARGS...])");
  if (!(args.interval_s > 0)) throw InputError("monitor: --interval must be > 0");
  std::vector<int> devices = args.devices;
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  std::vector<DeviceMeter> meters;
  std::string no_gpu;
  try {
    if (devices.empty()) {
      const int n = runtime::nvml_device_count(args.nvml_library);
      for (int i = 0; i < n; ++i) devices.push_back(i);
      if (n == 0) no_gpu = "NVML reports 0 GPUs";
    }
    for (int d : devices) {
      DeviceMeter m;
      m.gpu = runtime::make_nvml_gpu(d, args.nvml_library);
      meters.push_back(std::move(m));
    }
  } catch (const runtime::GpuError& e) {
    no_gpu = e.what();
    meters.clear();
  }
  if (!no_gpu.empty()) {
    fmt::print(stderr, "perseus monitor: no NVIDIA GPU can be measured on this machine: {}\n", no_gpu);
    if (!args.allow_no_gpu) {
      fmt::print(stderr, "perseus monitor: command not run (pass --allow-no-gpu to run it and report time only); "
                         "exit status 4\n");
      return kExitNoGpu;
    }
  }
  for (auto& m : meters) {
    try {
      m.e0_j = m.gpu->total_energy_j();
    } catch (const runtime::GpuError& e) {
      m.error = e.what();
    }
  }
  // Sampler for GPUs without an energy counter: rectangle rule, one sample every interval_s.
  std::atomic<bool> done{false};
  const bool need_sampler = std::any_of(meters.begin(), meters.end(), [](const auto& m) { return !m.e0_j && m.error.empty(); });
  std::thread sampler([&] {
    if (!need_sampler) return;
    auto last = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(args.interval_s));
      const auto now = std::chrono::steady_clock::now();
      const double dt = std::chrono::duration<double>(now - last).count();
      last = now;
      for (auto& m : meters) {
        if (m.e0_j || !m.error.empty()) continue;
        try {
          if (const auto p = m.gpu->power_w()) m.sampled_j += *p * dt;
        } catch (const runtime::GpuError&) {
        }
      }
    }
  });
  double time_s = 0;
  const int status = run_command(args.command, &time_s);
  for (auto& m : meters) {
    if (!m.e0_j) continue;
    try {
      m.e1_j = m.gpu->total_energy_j();
    } catch (const runtime::GpuError& e) {
      m.error = e.what();
    }
  }
  done.store(true);
  sampler.join();
  if (status == kExitCannotRun && time_s == 0) return status;

  nlohmann::json out = {{"command", args.command}, {"exit_status", status}, {"time_s", time_s},
                        {"gpus", nlohmann::json::array()}};
  double total_j = 0;
  bool all_measured = !meters.empty();
  fmt::print(stderr, "perseus monitor: '{}' exited with status {} after {:.3f} s\n", args.command[0], status, time_s);
  if (!meters.empty()) fmt::print(stderr, "{:>5} {:>14} {:>12}  {}\n", "gpu", "energy_j", "avg_power_w", "method");
  for (std::size_t i = 0; i < meters.size(); ++i) {
    auto& m = meters[i];
    std::optional<double> energy;
    std::string method;
    if (m.e0_j && m.e1_j) {
      energy = *m.e1_j - *m.e0_j;
      method = "energy counter";
    } else if (!m.e0_j && m.error.empty()) {
      energy = m.sampled_j;
      method = fmt::format("power sampled every {} s", args.interval_s);
    }
    nlohmann::json g = {{"index", devices[i]}};
    if (energy) {
      total_j += *energy;
      const double avg_w = time_s > 0 ? *energy / time_s : 0.0;
      g["energy_j"] = *energy;
      g["avg_power_w"] = avg_w;
      g["method"] = method;
      fmt::print(stderr, "{:>5} {:>14.3f} {:>12.1f}  {}\n", devices[i], *energy, avg_w, method);
    } else {
      all_measured = false;
      g["error"] = m.error;
      fmt::print(stderr, "{:>5} {:>14} {:>12}  {}\n", devices[i], "n/a", "n/a", m.error);
    }
    out["gpus"].push_back(g);
  }
  if (!meters.empty()) {
    out["energy_j"] = total_j;
    fmt::print(stderr, "{:>5} {:>14.3f} {:>12.1f}{}\n", "total", total_j, time_s > 0 ? total_j / time_s : 0.0,
               all_measured ? "" : "  (some GPUs not measured)");
  }
  if (!args.json_path.empty()) {
    std::ofstream f(args.json_path);
    f << out.dump(2) << "\n";
    if (!f) throw InputError(fmt::format("monitor: cannot write {}", args.json_path));
  }
  return status;
}

}  // namespace

void register_monitor(CLI::App& app) {
  auto args = std::make_shared<MonitorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Run a command and print its wall time and GPU energy (NVML). Exit status: the command's; 4 if no GPU "
      "can be measured (command not run); 127 if the command cannot be started");
  cmd->add_option("-d,--device", args->devices, "GPU index to measure (repeatable; default: all GPUs)")
      ->allow_extra_args(false);
  cmd->add_option("--nvml-library", args->nvml_library,
                  "NVML library to dlopen (default: $PERSEUS_NVML_LIBRARY or libnvidia-ml.so.1)");
  cmd->add_option("--json", args->json_path, "Also write the result as JSON to this file");
  cmd->add_option("--interval", args->interval_s, "Power sampling period, s, for GPUs without an energy counter");
  cmd->add_flag("--allow-no-gpu", args->allow_no_gpu, "Run the command even when no GPU can be measured");
  cmd->add_option("command", args->command, "Command and its arguments (after --)")->required();
  cmd->footer("Usage: perseus monitor [OPTIONS] -- CMD [ARGS...]");
  cmd->callback([args] {
    const int status = monitor(*args);
    std::fflush(stdout);
    std::fflush(stderr);
    if (status != 0) std::exit(status);
  });
}

}  // namespace perseus::cli
