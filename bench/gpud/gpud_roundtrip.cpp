// perseus_gpud_bench [REQUESTS]: latency of one request through `perseus gpud` (Unix socket,
// JSON line, credentials check, per-GPU worker), measured from a client in the same process
// against a helper whose backend is the dry-run GPU (no driver time), so the numbers are the
// helper's own overhead. Prints mean, p50 and p99 in microseconds for lock and energy.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "perseus/gpud/config.hpp"
#include "perseus/gpud/daemon.hpp"
#include "perseus/runtime/gpu_identity.hpp"

namespace {

void report(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  fmt::print("{:>7}: {} requests, mean {:.1f} us, p50 {:.1f} us, p99 {:.1f} us\n", what, us.size(), sum / us.size(),
             us[us.size() / 2], us[us.size() * 99 / 100]);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (n < 100 || n > 10000000) {
    fmt::print(stderr, "usage: perseus_gpud_bench [REQUESTS >= 100]\n");
    return 2;
  }
  const std::string dir = fmt::format("{}/perseus_gpud_bench_{}", std::filesystem::temp_directory_path().string(), ::getpid());
  std::filesystem::create_directories(dir);
  perseus::gpud::GpudConfig cfg = perseus::gpud::parse_gpud_config(
      fmt::format("socket {0}/gpud.sock\nstate_dir {0}/state\nbackend dry-run\ndry_run_log /dev/null\ngpus 0\n"
                  "rate_limit 999999 999999\nallow * uid:{1}\n",
                  dir, ::getuid()),
      "bench");
  const auto [open, count] = perseus::gpud::backend_for(cfg);
  perseus::gpud::Gpud daemon(cfg, open, count, stderr);
  std::thread loop([&] { daemon.run(); });
  {
    perseus::runtime::GpuSelector sel;
    sel.nvml_index = 0;
    auto gpu = perseus::runtime::make_gpud_gpu(sel, dir + "/gpud.sock");
    const auto clocks = gpu->supported_graphics_clocks_mhz();
    std::vector<double> lock_us, energy_us;
    for (int i = 0; i < n; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      gpu->set_locked_clocks(clocks[static_cast<std::size_t>(i) % clocks.size()]);
      auto t1 = std::chrono::steady_clock::now();
      gpu->power_w();
      auto t2 = std::chrono::steady_clock::now();
      lock_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      energy_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    gpu->reset_locked_clocks();
    report("lock", lock_us);
    report("energy", energy_us);
  }
  daemon.stop();
  loop.join();
  std::filesystem::remove_all(dir);
  return 0;
}
