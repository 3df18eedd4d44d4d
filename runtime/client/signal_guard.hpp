// Resets GPU clocks when SIGTERM/SIGINT would kill the process (default disposition); starts
// the client's threads with asynchronous signals blocked.
#pragma once

#include <pthread.h>

#include <csignal>
#include <functional>
#include <thread>
#include <utility>

namespace perseus::runtime {
class FrequencyController;
namespace detail {

/// Adds `controller` to the set whose clocks are reset when SIGTERM or SIGINT arrives and the
/// signal's previous disposition was the default (terminate). The handler only writes to a
/// pipe; a helper thread stops the controllers (which resets their clocks), restores the
/// default disposition and re-raises the signal, so the process still dies by it. When the
/// application had its own handler (e.g. Python's KeyboardInterrupt), that handler is
/// called instead and the normal close() path / the watchdog reset the clocks.
/// `after_reset` (may be empty) runs on the helper thread, under the guard's lock, once
/// `controller`'s reset succeeded: the client disarms its watchdog there, which otherwise reset
/// the clocks a second time and said the trainer "exited without cleanup" (session 23's note).
void guard_controller(FrequencyController* controller, std::function<void()> after_reset = {});
/// Removes it (call before destroying the controller); waits for a running after_reset.
void unguard_controller(FrequencyController* controller);

/// Starts fn on a new thread with every asynchronous signal blocked (a thread inherits its
/// creator's mask; the caller's is restored), so that process-directed signals such as Ctrl-C's
/// SIGINT reach the application's own threads. A handler that ran on a client thread could not
/// interrupt the application's blocking call: Python's main thread stayed in read() and
/// KeyboardInterrupt never came (seen under load). Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
/// SIGABRT, SIGTRAP) stay deliverable. Throws what std::thread throws.
template <class Fn>
std::thread start_signal_free_thread(Fn&& fn) {
  sigset_t blocked, old;
  sigfillset(&blocked);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP}) sigdelset(&blocked, s);
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  struct Restore {
    sigset_t mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{old};
  return std::thread(std::forward<Fn>(fn));
}

}  // namespace detail
}  // namespace perseus::runtime
