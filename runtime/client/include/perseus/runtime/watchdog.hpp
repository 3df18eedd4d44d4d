// A helper process that resets GPU clocks when the training process dies (even by SIGKILL).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace perseus::runtime {

/// Handle on a running `perseus-watchdog` process. The watchdog holds the read end of a pipe
/// whose write end only this process holds; when this process dies for any reason the
/// kernel closes it, the watchdog sees EOF (or notices its parent changed) and resets the
/// clocks through the same backend. disarm() tells it that clocks were reset normally.
class Watchdog {
 public:
  Watchdog() = default;
  /// Disarms (if still running).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Starts `executable` with backend_args (from GpuControl::watchdog_args()). executable
  /// "" = find_watchdog_executable(). Returns false, with *error set, when it cannot be
  /// found or started (the caller decides whether that is fatal).
  bool start(const std::string& executable, const std::vector<std::string>& backend_args, std::string* error);
  /// Tells the watchdog to exit without touching the clocks and reaps it. Idempotent.
  void disarm();
  /// Has the watchdog reset the clocks now, as if the trainer had died (its pipe is closed
  /// without the disarm byte), and waits for it: for when the client's own final reset failed
  /// (a fresh process with its own driver session may succeed). Returns true when the watchdog
  /// reports the reset done (exit status 0); false when it failed or no watchdog runs.
  bool reset_now();
  /// Process id of the watchdog (0 when none).
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = 0;
  int write_fd_ = -1;
};

/// Folders searched for "perseus-watchdog", in order: the running executable's, the shared
/// object's holding this code, that object's <prefix>/bin (<prefix>/lib/libperseus_client.so
/// or <prefix>/lib/<multiarch>/..., wherever the prefix now is), the build directory (only
/// when the program or the object runs from that build tree), the install prefix's bin
/// recorded at configure time.
std::vector<std::string> watchdog_search_dirs();

/// Where the watchdog executable is: $PERSEUS_WATCHDOG if set; else the first executable
/// "perseus-watchdog" in watchdog_search_dirs(); else "" (not found).
std::string find_watchdog_executable();

/// Body of `perseus-watchdog` (argv as for main). Options: --fd N (pipe read end),
/// --parent PID, --backend nvml|rocm-smi|dry-run, --device I, --nvml-library PATH, --rocm-smi-library
/// PATH, --log PATH, --lock-record PATH (the trainer's GpuLockRecord, emptied after a reset).
/// Returns the process exit status: 0 disarmed or reset done, 1 reset failed, 2 bad usage.
int watchdog_main(int argc, char** argv);

}  // namespace perseus::runtime
