// Resets GPU clocks when SIGTERM/SIGINT would kill the process (default disposition).
#pragma once

namespace perseus::runtime {
class FrequencyController;
namespace detail {

/// Adds `controller` to the set whose clocks are reset when SIGTERM or SIGINT arrives and the
/// signal's previous disposition was the default (terminate). The handler only writes to a
/// pipe; a helper thread stops the controllers (which resets their clocks), restores the
/// default disposition and re-raises the signal, so the process still dies by it. When the
/// application had its own handler (e.g. Python's KeyboardInterrupt), that handler is
/// called instead and the normal close() path / the watchdog reset the clocks.
void guard_controller(FrequencyController* controller);
/// Removes it (call before destroying the controller).
void unguard_controller(FrequencyController* controller);

}  // namespace detail
}  // namespace perseus::runtime
