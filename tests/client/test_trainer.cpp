// perseus_test_trainer: a fake training process for the client tests. It runs a 1F1B
// pipeline schedule (or its plan's order with --follow-plan) through the Perseus client,
// on a simulated, NVML, gpud or dry-run GPU.
//   perseus_test_trainer --url U --token T --job J --rank R --dp D --pp P [--tp 0]
//     --stages S --microbatches M --iterations N [--backend simulated|nvml|gpud|dry-run]
//     [--profile CSV] [--time-scale X] [--nvml-library PATH] [--gpud-socket PATH] [--dry-run-log PATH]
//     [--freq-log PATH] [--progress PATH] [--watchdog PATH] [--hang] [--poll S]
//     [--fork-child PIDFILE] [--sigpipe-default] [--no-coalesce] [--follow-plan] [--plan-dir DIR] [--pause-at K[,K...] --gate DIR]
// --plan-dir: writes DIR/plan_<rank>_v<version>.txt ("<instruction> <microbatch> <freq_mhz>"
// per line) for every plan version it runs.
// --hang: after the first iteration, write "ready" to --progress and sleep forever.
// --progress: one line per iteration: "<iteration> <plan_version> <unix_time_s>".
// --pause-at K --gate DIR: before iteration K (after K iterations), keep writing the newest plan
// version the client has fetched to DIR/paused_<rank>_<K> and wait until DIR/resume_<K> exists.
// Tests use it to order events (a straggler report, a server outage) against iterations
// without relying on how fast the machine is.
// Straggler emulation (simulated backend; docs/stragglers.md):
//   --virtual-clock: no sleeping; times are simulated s, independent of the machine's load;
//     each computation waits until the controller applied its clock.
//   --pipeline-model: after its computations the rank blocks (at blocking power) until
//     plan iteration_time_s × (its busy time / the plan's busy time for it): its pipeline's
//     iteration time when every computation is stretched alike (jitter, throttling, ignored clocks).
//   --jitter F --seed N: 1 + F·N(0,1) on each computation (seed + rank makes ranks differ).
//   --slowdown FROM:UNTIL:FACTOR: iterations [FROM, UNTIL) run FACTOR times slower (throttling).
//   --ignore-clocks: the GPU accepts clock requests but keeps its highest clock.
//   --energy-log PATH: one line per iteration "<iteration> <plan_version> <time_s> <energy_j>"
//     (simulated s and J of this rank's GPU).
// Exit status: 0 ok, 1 client error, 2 usage.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "perseus/runtime/client.hpp"
#include "perseus/runtime/gpu_factory.hpp"
#include "perseus/runtime/simulated_gpu.hpp"

using namespace perseus::runtime;

namespace {

std::vector<std::string> one_f_one_b(int stages, int stage, int microbatches) {
  std::vector<std::string> seq;
  const int warmup = std::min(stages - stage - 1, microbatches);
  for (int i = 0; i < warmup; ++i) seq.emplace_back("forward");
  for (int i = 0; i < microbatches - warmup; ++i) {
    seq.emplace_back("forward");
    seq.emplace_back("backward");
  }
  for (int i = 0; i < warmup; ++i) seq.emplace_back("backward");
  return seq;
}

// Writes `text` to `path` atomically (a reader never sees a half-written file).
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << text << std::flush;
  std::filesystem::rename(tmp, path);
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a;
  bool hang = false;
  bool follow_plan = false;
  bool no_coalesce = false;
  bool virtual_clock = false, pipeline_model = false, ignore_clocks = false;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--hang") {
      hang = true;
    } else if (k == "--sigpipe-default") {
      // SIGPIPE as in a program started from a shell (the test's own process ignores it, and
      // an ignored disposition is inherited across exec).
      ::signal(SIGPIPE, SIG_DFL);
    } else if (k == "--no-coalesce") {
      no_coalesce = true;
    } else if (k == "--follow-plan") {
      follow_plan = true;
    } else if (k == "--virtual-clock") {
      virtual_clock = true;
    } else if (k == "--pipeline-model") {
      pipeline_model = true;
    } else if (k == "--ignore-clocks") {
      ignore_clocks = true;
    } else if (k.rfind("--", 0) == 0 && i + 1 < argc) {
      a[k.substr(2)] = argv[++i];
    } else {
      fmt::print(stderr, "usage: see the comment at the top of test_trainer.cpp\n");
      return 2;
    }
  }
  auto get = [&](const std::string& k, const std::string& d = "") { return a.count(k) ? a[k] : d; };
  auto num = [&](const std::string& k, double d) { return a.count(k) ? std::stod(a[k]) : d; };
  try {
    ClientOptions o;
    o.server_url = get("url");
    o.token = get("token");
    o.job_id = get("job");
    o.ranks = {static_cast<int>(num("rank", 0)), static_cast<int>(num("dp", 0)), static_cast<int>(num("pp", 0)),
               static_cast<int>(num("tp", 0))};
    o.plan_poll_interval_s = num("poll", 0.05);
    o.retry_initial_s = 0.02;
    o.retry_max_s = 0.2;
    o.request_timeout_s = 2.0;
    o.startup_timeout_s = num("startup-timeout", 10.0);
    o.freq_log_path = get("freq-log");
    o.watchdog_path = get("watchdog");
    o.coalesce_clock_requests = !no_coalesce;
    GpuSpec spec;
    spec.backend = get("backend", "simulated");
    spec.device_index = static_cast<int>(num("device", 0));
    spec.nvml_library = get("nvml-library");
    spec.gpud_socket = get("gpud-socket");
    spec.profile_path = get("profile");
    spec.stage = o.ranks.pp_rank;
    spec.time_scale = num("time-scale", 0.01);
    spec.blocking_power_w = num("blocking-power", 80.0);
    spec.log_path = get("dry-run-log");
    auto gpu = make_gpu(spec);
    auto sim = std::dynamic_pointer_cast<SimulatedGpu>(gpu);
    int slow_from = -1, slow_until = -1;
    double slow_factor = 1.0;
    if (sim) {
      if (virtual_clock) sim->use_virtual_clock();
      if (ignore_clocks) sim->set_ignore_clocks(true);
      if (a.count("jitter")) sim->set_jitter(num("jitter", 0), static_cast<std::uint64_t>(num("seed", 0)) * 1000 + o.ranks.rank);
      if (a.count("slowdown") && std::sscanf(a["slowdown"].c_str(), "%d:%d:%lf", &slow_from, &slow_until, &slow_factor) != 3) {
        fmt::print(stderr, "trainer: --slowdown wants FROM:UNTIL:FACTOR\n");
        return 2;
      }
    } else if (virtual_clock || pipeline_model || ignore_clocks || a.count("jitter") || a.count("slowdown")) {
      fmt::print(stderr, "trainer: straggler emulation options need --backend simulated\n");
      return 2;
    }
    const perseus::Profile* profile = nullptr;
    std::unique_ptr<perseus::Profile> profile_copy;
    if (pipeline_model && sim) {
      profile_copy = std::make_unique<perseus::Profile>(perseus::load_profile_csv(spec.profile_path));
      profile = profile_copy.get();
    }
    std::ofstream energy_log;
    if (!get("energy-log").empty()) energy_log.open(get("energy-log"), std::ios::app);
    auto client = Client::create(o, gpu);
    // --fork-child PIDFILE: fork a child that writes its pid to PIDFILE and waits for signals
    // (a DataLoader worker forked after the client exists); the trainer goes on and exits
    // without waiting for it. Only async-signal-safe calls in the child.
    if (const std::string pidfile = get("fork-child"); !pidfile.empty()) {
      const std::string tmp = pidfile + ".tmp";  // before fork(): no allocation in the child
      const pid_t child = ::fork();
      if (child == 0) {
        char text[32];
        const int len = std::snprintf(text, sizeof text, "%d\n", static_cast<int>(::getpid()));
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
          [[maybe_unused]] const ssize_t n = ::write(fd, text, static_cast<std::size_t>(len));
          ::close(fd);
          ::rename(tmp.c_str(), pidfile.c_str());
        }
        for (;;) ::pause();
      }
    }

    const int stages = static_cast<int>(num("stages", 1));
    const int microbatches = static_cast<int>(num("microbatches", 2));
    const int iterations = static_cast<int>(num("iterations", 1));
    std::ofstream progress;
    if (!get("progress").empty()) progress.open(get("progress"), std::ios::app);
    const auto schedule = one_f_one_b(stages, o.ranks.pp_rank, microbatches);
    std::set<int> pause_at;
    {
      std::istringstream in(get("pause-at"));
      for (std::string k; std::getline(in, k, ',');) pause_at.insert(std::stoi(k));
    }
    const std::string gate = get("gate");
    if (!pause_at.empty() && gate.empty()) {
      fmt::print(stderr, "trainer: --pause-at needs --gate DIR\n");
      return 2;
    }
    std::int64_t dumped_version = -2;
    for (int it = 0; it < iterations; ++it) {
      if (pause_at.count(it)) {
        const std::string paused = fmt::format("{}/paused_{}_{}", gate, o.ranks.rank, it);
        const std::string resume = fmt::format("{}/resume_{}", gate, it);
        while (!std::filesystem::exists(resume)) {
          write_atomically(paused, std::to_string(client->stats().latest_plan_version));
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
      const double t = unix_now();
      if (sim) sim->set_slowdown(it >= slow_from && it < slow_until ? slow_factor : 1.0);
      const double sim_t0 = sim ? sim->now_s() : 0.0;
      const double sim_e0 = sim ? sim->total_energy_j().value_or(0.0) : 0.0;
      double busy_s = 0, planned_busy_s = 0;
      client->on_step_begin();
      const RankPlan plan = client->plan();
      if (!get("plan-dir").empty() && plan.version != dumped_version) {
        std::ofstream f(fmt::format("{}/plan_{}_v{}.txt", get("plan-dir"), o.ranks.rank, plan.version));
        for (const auto& i : plan.instructions) f << i.instruction << " " << i.microbatch << " " << i.freq_mhz << "\n";
        dumped_version = plan.version;
      }
      std::vector<std::string> seq = schedule;
      if (follow_plan && !client->plan().instructions.empty()) {
        seq.clear();
        for (const auto& i : client->plan().instructions) seq.push_back(i.instruction);
      }
      for (std::size_t n = 0; n < seq.size(); ++n) {
        const auto& name = seq[n];
        client->on_instruction_begin(name);
        // The controller sets clocks on its own thread; a real kernel runs long enough for it,
        // a virtual-clock computation takes no time at all, so wait until the clock is set.
        if (virtual_clock) client->controller().flush();
        if (sim) {
          const auto kind = *perseus::parse_instruction_kind(name);
          busy_s += sim->compute(kind);
          if (profile && n < plan.instructions.size()) {
            const auto& pts = profile->points(o.ranks.pp_rank, kind);
            const int f = plan.instructions[n].freq_mhz;
            planned_busy_s += std::min_element(pts.begin(), pts.end(), [&](const auto& x, const auto& y) {
                                return std::abs(x.freq_mhz - f) < std::abs(y.freq_mhz - f);
                              })->time_s;
          }
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        client->on_instruction_end(name);
      }
      if (profile && planned_busy_s > 0 && plan.iteration_time_s > 0)
        sim->block(std::max(0.0, plan.iteration_time_s * busy_s / planned_busy_s - busy_s));
      client->on_step_end();
      if (energy_log.is_open() && sim) {
        energy_log << fmt::format("{} {} {:.9f} {:.9f}\n", it, plan.version, sim->now_s() - sim_t0,
                                  sim->total_energy_j().value_or(0.0) - sim_e0)
                   << std::flush;
      }
      if (progress.is_open()) {
        progress << fmt::format("{} {} {:.6f}\n", it, client->stats().plan_version, t) << std::flush;
      }
      if (hang) {
        client->controller().flush();
        if (progress.is_open()) progress << "ready" << std::endl;
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
    if (!client->flush_reports(20.0)) {
      fmt::print(stderr, "trainer rank {}: reports still pending: {}\n", o.ranks.rank,
                 client->stats().last_server_error);
    }
    client->close();
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "trainer: {}\n", e.what());
    return 1;
  }
}
