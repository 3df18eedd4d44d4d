// `perseus monitor -- CMD [ARGS...]`: runs CMD and prints its wall time and the GPUs' energy
// (NVML total-energy counter, or integrated power where the counter is missing).
// Exit status: CMD's own status (128+N if killed by signal N); 4 when no GPU can be measured
// (NVML missing or failing; CMD is NOT run unless --allow-no-gpu); 5 when CMD exited 0 but the
// --json file could not be written afterwards (the result is printed to stderr instead; a
// non-zero CMD status wins over 5); 127 when CMD cannot be started; 1/2 for bad arguments.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/runtime/gpu_control.hpp"
#include "perseus/runtime/gpu_identity.hpp"

extern char** environ;

namespace perseus::cli {
namespace {

constexpr int kExitNoGpu = 4;
constexpr int kExitJsonNotWritten = 5;
constexpr int kExitCannotRun = 127;
/// A run shorter than this many energy-counter updates gets a note on the reading's resolution
/// (and "short_run": true in --json): one update's worth of energy is >= 10 % of such a run's.
constexpr double kShortRunUpdates = 10;

struct MonitorArgs {
  std::vector<int> devices;
  std::string backend = "nvml";
  std::string nvml_library;
  std::string rocm_smi_library;
  std::string gpud_socket;
  std::string json_path;
  double interval_s = 0.1;
  bool allow_no_gpu = false;
  bool force = false;  // replace an existing --json file
  std::vector<std::string> command;
};

// Readings of one GPU over the run: counter at start and end, power samples in between
// (every GPU is sampled, so that an interval whose counter misbehaves can fall back to power).
struct DeviceMeter {
  std::unique_ptr<runtime::GpuControl> gpu;
  runtime::CounterReading c0, c1;
  std::vector<runtime::PowerSample> power;  // guarded by the sampler's mutex
};

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The command's pid while it runs, and a SIGTERM/SIGHUP that arrived before it was known.
volatile sig_atomic_t g_child_pid = 0;
volatile sig_atomic_t g_pending_signal = 0;

void forward_to_child(int sig) {
  if (g_child_pid > 0) {
    ::kill(static_cast<pid_t>(g_child_pid), sig);
  } else {
    g_pending_signal = sig;
  }
}

// Runs the command; *t0_s/*t1_s: steady-clock times right before the spawn and right after
// the wait (the command's lifetime, the interval energy is integrated over).
int run_command(const std::vector<std::string>& command, double* t0_s, double* t1_s) {
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Like time(1): Ctrl-C goes to the command; we wait for it and still report. SIGTERM and
  // SIGHUP sent to the monitor alone (a job scheduler) are passed on to the command, so it
  // never runs on unsupervised; the monitor then reports and exits with its status.
  struct sigaction ignore {}, forward {}, old_int {}, old_quit {}, old_term {}, old_hup {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  forward.sa_handler = forward_to_child;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  sigaction(SIGTERM, &forward, &old_term);
  sigaction(SIGHUP, &forward, &old_hup);
  // The command gets the default actions back (an ignored SIGINT would be inherited: Ctrl-C
  // would not stop a command that keeps the dispositions it is given, such as sleep).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  *t0_s = steady_now_s();
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (rc == 0) {
    g_child_pid = pid;
    if (g_pending_signal != 0) ::kill(pid, g_pending_signal);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child_pid = 0;
  }
  *t1_s = steady_now_s();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  if (rc != 0) {
    fmt::print(stderr, "perseus monitor: cannot run '{}': {}\n", command[0], std::strerror(rc));
    return kExitCannotRun;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Checks, before CMD runs, that the --json file can be written where it will be: a temporary
// file in its folder is created and removed (the result is written the same way, then renamed
// into place). A run of hours must not end in "cannot write" with its numbers lost.
// An existing file is kept unless `force` (a run's numbers are not lost to the next run's).
void check_json_writable(const std::string& path, bool force) {
  try {
    check_output_file_writable(path, force, "json");  // a device, FIFO or link is never replaced
  } catch (const InputError& e) {
    throw InputError(fmt::format("monitor: --json {}; command not run", e.message()));
  }
}

// Writes the result to `path` atomically (a temporary file renamed into place: never a
// half-written file). CMD has run by now, so a failure (the folder removed or made read-only
// meanwhile, disk full) must not lose its numbers or its status: the error names the file and
// why, the JSON goes to stderr, and the exit status is CMD's when non-zero, else
// kExitJsonNotWritten. Returns the exit status.
int write_json_or_report(const std::string& path, const nlohmann::json& out, int status) {
  // The command's arguments need not be UTF-8: their bad bytes are written as U+FFFD.
  const std::string text = out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  try {
    write_file_atomically(path, text);
    return status;
  } catch (const InputError& e) {  // "PATH: cannot write the file: REASON"
    const int exit_status = status != 0 ? status : kExitJsonNotWritten;
    fmt::print(stderr, "perseus monitor: --json {}; the result follows as JSON:\n{}", e.what(), text);
    fmt::print(stderr, "perseus monitor: exit status {} ({}; --json {} was not written)\n", exit_status,
               status != 0 ? "the command's" : "the command exited 0", path);
    return exit_status;
  }
}

int monitor(const MonitorArgs& args) {
  if (args.command.empty()) throw InputError("monitor: no command given (usage: perseus monitor -- CMD [ARGS...])");
  if (!(args.interval_s > 0)) throw InputError("monitor: --interval must be > 0");
  if (!args.json_path.empty()) check_json_writable(args.json_path, args.force);
  std::vector<int> devices = args.devices;
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  std::vector<DeviceMeter> meters;
  std::string no_gpu;
  try {
    const bool rocm = args.backend == "rocm-smi";
    const bool gpud = args.backend == "gpud";
    if (devices.empty()) {
      if (gpud) {
        devices = runtime::gpud_allowed_gpus(args.gpud_socket);
      } else {
        const int n = rocm ? runtime::rocm_smi_device_count(args.rocm_smi_library)
                           : runtime::nvml_device_count(args.nvml_library);
        for (int i = 0; i < n; ++i) devices.push_back(i);
      }
      if (devices.empty()) {
        no_gpu = gpud ? "the gpud helper lets this user use no GPU" : rocm ? "ROCm SMI reports 0 GPUs" : "NVML reports 0 GPUs";
      }
    } else if (gpud) {
      // A GPU the helper does not let this user use is the caller's mistake too (exit 1), unless
      // it lets them use none (no GPU can be measured: exit 4, below).
      const std::vector<int> allowed = runtime::gpud_allowed_gpus(args.gpud_socket);
      for (int d : devices) {
        if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), d) == allowed.end()) {
          throw InputError(fmt::format("monitor: -d {}: the gpud helper lets this user use GPU{} {}; command not run", d,
                                       allowed.size() == 1 ? "" : "s", fmt::join(allowed, ", ")));
        }
      }
    } else {
      // A GPU number the machine lacks is the caller's mistake, not "no GPU on this machine".
      const int n = rocm ? runtime::rocm_smi_device_count(args.rocm_smi_library)
                         : runtime::nvml_device_count(args.nvml_library);
      if (n > 0 && devices.back() >= n) {
        throw InputError(fmt::format("monitor: -d {}: this machine has {} {} GPU{} (indices 0..{}); command not run",
                                     devices.back(), n, rocm ? "AMD" : "NVIDIA", n == 1 ? "" : "s", n - 1));
      }
    }
    for (int d : devices) {
      DeviceMeter m;
      runtime::GpuSelector sel;
      sel.nvml_index = d;
      m.gpu = gpud   ? runtime::make_gpud_gpu(sel, args.gpud_socket)
              : rocm ? runtime::make_rocm_smi_gpu(d, args.rocm_smi_library)
                     : runtime::make_nvml_gpu(d, args.nvml_library);
      meters.push_back(std::move(m));
    }
  } catch (const runtime::GpuError& e) {
    no_gpu = e.what();
    meters.clear();
  }
  if (!no_gpu.empty()) {
    fmt::print(stderr, "perseus monitor: no {} GPU can be measured on this machine: {}\n",
               args.backend == "rocm-smi" ? "AMD" : args.backend == "gpud" ? "gpud-served" : "NVIDIA", no_gpu);
    if (!args.allow_no_gpu) {
      fmt::print(stderr, "perseus monitor: command not run (pass --allow-no-gpu to run it and report time only); "
                         "exit status 4\n");
      return kExitNoGpu;
    }
  }
  // Every reading uses one clock: the steady clock in seconds (GpuControl::now_s of NVML).
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  auto sample_all = [&] {
    for (auto& m : meters) {
      if (auto p = runtime::read_power(*m.gpu)) {
        std::lock_guard lock(mu);
        m.power.push_back(*p);
      }
    }
  };
  for (auto& m : meters) m.c0 = runtime::read_counter(*m.gpu);
  sample_all();
  std::thread sampler([&] {
    if (meters.empty()) return;
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, std::chrono::duration<double>(args.interval_s), [&] { return done; })) {
      lock.unlock();
      sample_all();
      lock.lock();
    }
  });
  double t0 = 0, t1 = 0;
  const int status = run_command(args.command, &t0, &t1);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  sampler.join();
  sample_all();
  for (auto& m : meters) m.c1 = runtime::read_counter(*m.gpu);
  if (status == kExitCannotRun && t1 - t0 < 1e-3) return status;
  const double time_s = t1 - t0;

  nlohmann::json out = {{"command", args.command}, {"exit_status", status}, {"time_s", time_s},
                        {"gpus", nlohmann::json::array()}};
  double total_j = 0;
  bool all_measured = !meters.empty();
  // run_command() gives 128 + N for a command killed by signal N (as a shell does): say so.
  const std::string how = status > 128 && status < 128 + NSIG
                              ? fmt::format("was killed by signal {} ({}; exit status {})", status - 128,
                                            sigabbrev_np(status - 128) != nullptr
                                                ? std::string("SIG") + sigabbrev_np(status - 128)
                                                : std::string("unknown"),
                                            status)
                              : fmt::format("exited with status {}", status);
  fmt::print(stderr, "perseus monitor: '{}' {} after {:.3f} s\n", args.command[0], how, time_s);
  if (!meters.empty()) fmt::print(stderr, "{:>5} {:>14} {:>12}  {}\n", "gpu", "energy_j", "avg_power_w", "method");
  for (std::size_t i = 0; i < meters.size(); ++i) {
    auto& m = meters[i];
    // The counter readings bracket the command; clip them to its lifetime so that the
    // power fallback integrates exactly over [t0, t1].
    runtime::CounterReading c0 = m.c0, c1 = m.c1;
    c0.t_s = t0;
    c1.t_s = t1;
    const runtime::IntervalEnergy r = runtime::interval_energy(c0, c1, m.power);
    if (!r.anomalies.empty()) {
      fmt::print(stderr, "perseus monitor: WARNING: GPU {}: {}\n", devices[i], r.detail);
    }
    nlohmann::json g = {{"index", devices[i]}, {"method", to_string(r.source)}};
    nlohmann::json anomalies = nlohmann::json::array();
    for (auto a : r.anomalies) anomalies.push_back(to_string(a));
    g["anomalies"] = anomalies;
    if (r.source == runtime::EnergySource::kPowerSamples) g["power_samples"] = m.power.size();
    if (r.energy_j) {
      total_j += *r.energy_j;
      const double avg_w = time_s > 0 ? *r.energy_j / time_s : 0.0;
      g["energy_j"] = *r.energy_j;
      g["avg_power_w"] = avg_w;
      fmt::print(stderr, "{:>5} {:>14.3f} {:>12.1f}  {}\n", devices[i], *r.energy_j, avg_w, to_string(r.source));
    } else {
      all_measured = false;
      g["energy_j"] = nullptr;
      g["avg_power_w"] = nullptr;
      g["error"] = r.detail;
      fmt::print(stderr, "{:>5} {:>14} {:>12}  {}\n", devices[i], "unknown", "unknown", r.detail);
    }
    out["gpus"].push_back(g);
  }
  if (meters.empty()) {
    out["energy_j"] = nullptr;  // no GPU measured (--allow-no-gpu): unknown, as documented
  } else {
    if (all_measured) {
      out["energy_j"] = total_j;
      fmt::print(stderr, "{:>5} {:>14.3f} {:>12.1f}\n", "total", total_j, time_s > 0 ? total_j / time_s : 0.0);
    } else {
      out["energy_j"] = nullptr;  // a sum over some GPUs is not the total
      const std::size_t measured = std::count_if(out["gpus"].begin(), out["gpus"].end(),
                                                 [](const nlohmann::json& g) { return !g["energy_j"].is_null(); });
      if (measured == 0) {
        fmt::print(stderr, "{:>5} {:>14} {:>12}  (no GPU measured)\n", "total", "unknown", "unknown");
      } else {
        fmt::print(stderr, "{:>5} {:>14} {:>12}  ({} of {} GPUs not measured; the measured ones: {:.3f} J)\n", "total",
                   "unknown", "unknown", meters.size() - measured, meters.size(), total_j);
      }
    }
  }
  // A counter difference over a short run is dominated by the counter's update period.
  const bool counted = std::any_of(out["gpus"].begin(), out["gpus"].end(), [](const nlohmann::json& g) {
    return g["method"] == runtime::to_string(runtime::EnergySource::kCounter);
  });
  const double update_s = runtime::TelemetryLimits{}.counter_update_s;
  out["short_run"] = counted && time_s < kShortRunUpdates * update_s;
  if (out["short_run"].get<bool>())
    fmt::print(stderr,
               "perseus monitor: note: the command ran {:.3f} s; the energy counter updates about every {} s, so "
               "energy_j can be off by up to {} s x the GPU's power and avg_power_w by much more; measure a run "
               "of at least {} s (or repeat the command inside one run) for an accurate average\n",
               time_s, update_s, update_s, kShortRunUpdates * update_s);
  if (!args.json_path.empty()) return write_json_or_report(args.json_path, out, status);
  return status;
}

}  // namespace

void register_monitor(CLI::App& app) {
  auto args = std::make_shared<MonitorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "monitor",
      "Run a command and print its wall time and GPU energy (NVML or ROCm SMI). Exit status: the command's; 4 if no GPU "
      "can be measured (command not run); 5 if the command exited 0 but --json could not be written after it (the "
      "result is printed to stderr); 127 if the command cannot be started");
  cmd->add_option("-d,--device", args->devices, "GPU index to measure (repeatable; default: all GPUs)")
      ->allow_extra_args(false)
      ->check(integer_in(0, 255));
  CLI::Option* nvml_library = cmd->add_option("--nvml-library", args->nvml_library,
                  "NVML library to dlopen (default: $PERSEUS_NVML_LIBRARY or libnvidia-ml.so.1)");
  cmd->add_option("--backend", args->backend,
                  "GPU library: nvml (NVIDIA), rocm-smi (AMD) or gpud (readings through the perseus gpud helper)")
      ->check(CLI::IsMember({"nvml", "rocm-smi", "gpud"}))
      ->capture_default_str();
  CLI::Option* rocm_smi_library = cmd->add_option("--rocm-smi-library", args->rocm_smi_library,
                  "ROCm SMI library to dlopen (default: $PERSEUS_ROCM_SMI_LIBRARY or librocm_smi64.so)");
  CLI::Option* gpud_socket = cmd->add_option("--gpud-socket", args->gpud_socket,
                  "gpud backend: the helper's socket (default: $PERSEUS_GPUD_SOCKET or /run/perseus/gpud.sock)");
  cmd->add_option("--json", args->json_path,
                  "Also write the result as JSON to this file (written atomically; checked before CMD runs; an "
                  "existing file is kept unless --force)")
      ->check(non_empty_path("a JSON output file"));
  cmd->add_flag("--force", args->force, "Replace an existing --json file");
  cmd->add_option("--interval", args->interval_s, "Power sampling period, s, for GPUs without an energy counter")
      ->check(positive_number_up_to(3600, "s"))
      ->capture_default_str();
  cmd->add_flag("--allow-no-gpu", args->allow_no_gpu, "Run the command even when no GPU can be measured");
  cmd->add_option("command", args->command, "Command and its arguments (after --)")->required();
  cmd->footer("Usage: perseus monitor [OPTIONS] -- CMD [ARGS...]");
  cmd->callback([args, nvml_library, rocm_smi_library, gpud_socket] {
    // An option of another backend would be silently ignored: say so instead.
    for (const auto& [opt, backend] : {std::pair{nvml_library, "nvml"}, std::pair{rocm_smi_library, "rocm-smi"},
                                       std::pair{gpud_socket, "gpud"}}) {
      if (opt->count() > 0 && args->backend != backend)
        throw CLI::ValidationError(opt->get_name(), fmt::format("applies to --backend {} only; the backend is {}",
                                                                backend, args->backend));
    }
    const int status = monitor(*args);
    std::fflush(stdout);
    std::fflush(stderr);
    if (status != 0) std::exit(status);
  });
}

}  // namespace perseus::cli
