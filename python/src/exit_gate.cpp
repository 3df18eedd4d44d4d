// The exit gate (bindings.hpp): no thread takes the GIL back once the interpreter begins to exit.
#include <condition_variable>
#include <mutex>

#include <unistd.h>

#include "bindings.hpp"

namespace perseus::python {
namespace {

struct ExitGate {
  std::mutex mu;
  std::condition_variable idle;
  bool closed = false;
  int taking = 0;  // threads between passing the gate and holding the GIL
};

// Never destroyed: a thread hanging in GilRelease at exit() must not find it gone.
ExitGate& gate() {
  static auto* g = new ExitGate;
  return *g;
}

bool on_main_thread() { return PyThread_get_thread_ident() == main_thread_ident(); }

}  // namespace

bool take_gil_before_exit(const std::function<void()>& take) {
  // The main thread finalizes the interpreter: CPython never ends it in take_gil.
  if (on_main_thread()) {
    take();
    return true;
  }
  ExitGate& g = gate();
  {
    const std::lock_guard lock(g.mu);
    if (g.closed || interpreter_finalizing()) return false;
    ++g.taking;
  }
  take();  // may wait while the main thread runs; close_exit_gate() waits for it in turn
  {
    const std::lock_guard lock(g.mu);
    --g.taking;
  }
  g.idle.notify_all();
  return true;
}

void close_exit_gate() {
  ExitGate& g = gate();
  {
    const std::lock_guard lock(g.mu);
    g.closed = true;
  }
  // Those already past the gate wait for the GIL: let them have it, before finalizing begins.
  const py::gil_scoped_release release;
  std::unique_lock lock(g.mu);
  g.idle.wait(lock, [&] { return g.taking == 0; });
}

void hang_until_exit() {
  for (;;) ::pause();
}

}  // namespace perseus::python
