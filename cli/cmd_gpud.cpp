// `perseus gpud --config FILE`: the privileged clock helper (library: runtime/gpud,
// docs/gpud.md). Runs in the foreground until SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2, logging to stderr.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/core.h>

#include "commands.hpp"
#include "perseus/error.hpp"
#include "perseus/gpud/daemon.hpp"

namespace perseus::cli {
namespace {

std::atomic<gpud::Gpud*> g_daemon{nullptr};

void on_signal(int) {
  if (gpud::Gpud* d = g_daemon.load()) d->stop();
}

int run_gpud(const std::string& config_path, bool check_only) {
  gpud::GpudConfig cfg = gpud::load_gpud_config(config_path);  // InputError: file, line, field
  if (check_only) {
    fmt::print("{}: OK: backend {}, socket {} (mode {:04o}), {} allow rule(s)\n", config_path, cfg.backend,
               cfg.socket_path, cfg.socket_mode, cfg.rules.size());
    return 0;
  }
  try {
    const auto [open, count] = gpud::backend_for(cfg);
    gpud::Gpud daemon(std::move(cfg), open, count, stderr);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    // Every signal whose default ends the process stops it cleanly, resetting the clocks it
    // holds: a SIGHUP (a closed terminal), SIGQUIT or SIGUSR1 left a GPU locked (session 22's trial).
    for (const int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) ::sigaction(sig, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    g_daemon = &daemon;
    daemon.run();
    g_daemon = nullptr;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus gpud: cannot start: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

void register_gpud(CLI::App& app) {
  auto config = std::make_shared<std::string>("/etc/perseus/gpud.conf");
  auto check = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "gpud", "Privileged GPU clock helper: serves lock/unlock/clocks/energy to allowed users over a Unix socket and "
              "resets a GPU's clock when the client that set it disconnects or dies (docs/gpud.md)");
  cmd->add_option("-c,--config", *config, "Config file (socket, allow rules, backend)")->capture_default_str();
  cmd->add_flag("--check", *check, "Only read and check the config file, then exit");
  cmd->callback([config, check] {
    const int rc = run_gpud(*config, *check);
    std::fflush(stdout);
    std::fflush(stderr);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace perseus::cli
