// SIGTERM/SIGINT clock reset: async-signal-safe handler + helper thread.
#include "signal_guard.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "perseus/runtime/frequency_controller.hpp"

namespace perseus::runtime::detail {
namespace {

std::mutex g_mutex;
std::map<FrequencyController*, std::function<void()>> g_controllers;  // -> after_reset
int g_pipe[2] = {-1, -1};
struct sigaction g_prev_term {};
struct sigaction g_prev_int {};
bool g_installed = false;
pid_t g_installed_by = 0;  // the process whose reset thread reads g_pipe

// In a fork()ed child (pthread_atfork): the previous SIGTERM/SIGINT handlers back and the
// self-pipe closed. The child inherited the handler, and its signal's byte went down the
// shared pipe to the *parent's* reset thread: a terminated DataLoader worker lived on and the
// trainer died instead (session 25's trial). A client the child creates installs afresh.
void uninstall_in_child() {
  if (!g_installed) return;
  ::sigaction(SIGTERM, &g_prev_term, nullptr);  // async-signal-safe
  ::sigaction(SIGINT, &g_prev_int, nullptr);
  ::close(g_pipe[0]);
  ::close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
  g_installed = false;
}

void chain(int sig, siginfo_t* info, void* ctx) {
  const struct sigaction& prev = sig == SIGTERM ? g_prev_term : g_prev_int;
  if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
    prev.sa_sigaction(sig, info, ctx);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(sig);
  }
}

bool prev_is_default(int sig) {
  const struct sigaction& prev = sig == SIGTERM ? g_prev_term : g_prev_int;
  return (prev.sa_flags & SA_SIGINFO) == 0 && prev.sa_handler == SIG_DFL;
}

void on_signal(int sig, siginfo_t* info, void* ctx) {
  if (prev_is_default(sig)) {
    const char s = static_cast<char>(sig);
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &s, 1);
  } else {
    chain(sig, info, ctx);
  }
}

void reset_thread() {
  for (;;) {
    char s = 0;
    const ssize_t n = ::read(g_pipe[0], &s, 1);
    if (n <= 0) continue;
    {
      std::lock_guard lock(g_mutex);
      for (const auto& [c, after_reset] : g_controllers)
        if (c->stop(true) && after_reset) after_reset();
    }
    ::signal(s, SIG_DFL);
    ::kill(::getpid(), s);  // to the process: this thread blocks it (start_signal_free_thread)
  }
}

void install_locked() {
  if (g_installed) return;
  if (g_installed_by != 0 && g_installed_by != ::getpid()) g_controllers.clear();  // the parent's, copied by fork()
  if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;
  static std::once_flag atfork;
  std::call_once(atfork, [] { ::pthread_atfork(nullptr, nullptr, &uninstall_in_child); });
  // SA_RESTART only where the previous handler had it: Python installs SIGINT without it, so
  // that Ctrl-C ends a blocking read (EINTR, then KeyboardInterrupt); with it, every blocking
  // read of the process ignored Ctrl-C once a Client existed.
  for (auto [sig, prev] : {std::pair{SIGTERM, &g_prev_term}, std::pair{SIGINT, &g_prev_int}}) {
    ::sigaction(sig, nullptr, prev);
    struct sigaction sa {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | (prev->sa_flags & SA_RESTART);
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
  start_signal_free_thread(reset_thread).detach();
  g_installed = true;
  g_installed_by = ::getpid();
}

}  // namespace

void guard_controller(FrequencyController* controller, std::function<void()> after_reset) {
  std::lock_guard lock(g_mutex);
  install_locked();
  g_controllers[controller] = std::move(after_reset);
}

void unguard_controller(FrequencyController* controller) {
  std::lock_guard lock(g_mutex);
  g_controllers.erase(controller);
}

}  // namespace perseus::runtime::detail
