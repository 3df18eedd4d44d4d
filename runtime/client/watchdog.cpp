// perseus-watchdog: spawned by the client, resets GPU clocks when the trainer dies.
#include "perseus/runtime/watchdog.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fmt/core.h>

#include "perseus/runtime/gpu_control.hpp"
#include "fork_fd_slots.hpp"
#include "perseus/runtime/gpu_lock_record.hpp"

extern char** environ;

namespace perseus::runtime {

namespace {

constexpr int kChildFd = 3;  // the pipe's read end in the watchdog
constexpr char kDisarm = 'D';

bool executable(const std::filesystem::path& p) { return ::access(p.c_str(), X_OK) == 0; }

std::atomic<int> g_term_signal{0};
void on_term(int sig) { g_term_signal.store(sig); }

// Write ends of this process's watchdog pipes, pointed at /dev/null in a fork()ed child
// (pthread_atfork): a child holding one kept the pipe open, so the watchdog never saw end of
// file after the disarm byte and the trainer's close() waited for it as long as the child lived
// (DataLoader's persistent workers: for ever; session 25's trial). /dev/null, not close(): the
// child's copy of the Watchdog may still write to its descriptor number, which a closed one
// could have handed to another file.
detail::ForkFdSlots g_pipe_fds;

void detach_pipes_in_child() {
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);  // async-signal-safe, as the rest
  g_pipe_fds.drain([null_fd](int fd) {
    if (null_fd >= 0) {
      ::dup3(null_fd, fd, O_CLOEXEC);
    } else {
      ::close(fd);
    }
  });
  if (null_fd >= 0) ::close(null_fd);
}

void track_pipe(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &detach_pipes_in_child); });
  g_pipe_fds.add(fd);
}

void untrack_pipe(int fd) { g_pipe_fds.remove(fd); }

/// write(2) without SIGPIPE: a watchdog that died (killed by hand) made the trainer's final
/// disarm kill the program with SIGPIPE where SIGPIPE is not ignored (C programs; session 25).
void write_without_sigpipe(int fd, char byte) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  ::sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const ssize_t n = ::write(fd, &byte, 1);
  if (n < 0 && errno == EPIPE && !was_pending) {
    const timespec zero{};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

std::vector<std::string> watchdog_search_dirs() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> homes;  // the running program's folder, then the shared object's
  if (const fs::path self = fs::read_symlink("/proc/self/exe", ec); !ec) homes.push_back(self.parent_path());
  Dl_info info{};
  fs::path so_dir;
  if (dladdr(reinterpret_cast<void*>(&find_watchdog_executable), &info) != 0 && info.dli_fname != nullptr) {
    if (const fs::path so = fs::absolute(info.dli_fname, ec); !ec) homes.push_back(so_dir = so.parent_path());
  }
  std::vector<std::string> dirs;
  for (const auto& h : homes) dirs.push_back(h.lexically_normal().string());
  if (!so_dir.empty()) {
    // An installed library: <prefix>/lib/libperseus_client.so (or lib/<multiarch>/...) beside
    // <prefix>/bin/perseus-watchdog, wherever the prefix was installed or moved to.
    dirs.push_back((so_dir / ".." / "bin").lexically_normal().string());
    dirs.push_back((so_dir / ".." / ".." / "bin").lexically_normal().string());
  }
#ifdef PERSEUS_BUILD_TREE
  // The build directory only for code running from that build tree (its tests and tools): an
  // installed or copied library must never run whatever sits at the developer's path.
  {
    const std::string tree = fs::path(PERSEUS_BUILD_TREE).lexically_normal().string();
    const bool in_tree = std::any_of(homes.begin(), homes.end(), [&](const fs::path& h) {
      const std::string d = h.lexically_normal().string();
      return d.size() >= tree.size() && d.compare(0, tree.size(), tree) == 0 &&
             (d.size() == tree.size() || d[tree.size()] == '/');
    });
    if (in_tree) dirs.emplace_back(PERSEUS_WATCHDOG_BUILD_DIR);
  }
#endif
#ifdef PERSEUS_WATCHDOG_INSTALL_DIR
  dirs.emplace_back(PERSEUS_WATCHDOG_INSTALL_DIR);
#endif
  return dirs;
}

std::string find_watchdog_executable() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("PERSEUS_WATCHDOG"); env != nullptr && *env != '\0') return env;
  for (const auto& d : watchdog_search_dirs()) {
    const fs::path candidate = fs::path(d) / "perseus-watchdog";
    if (executable(candidate)) return candidate.string();
  }
  return "";
}

Watchdog::~Watchdog() { disarm(); }

bool Watchdog::start(const std::string& exe_in, const std::vector<std::string>& backend_args, std::string* error) {
  const std::string exe = exe_in.empty() ? find_watchdog_executable() : exe_in;
  if (exe.empty() || !executable(exe)) {
    *error = fmt::format("perseus-watchdog not found{}: set PERSEUS_WATCHDOG to its path",
                         exe.empty() ? "" : fmt::format(" at '{}'", exe));
    return false;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = fmt::format("pipe2 failed: {}", std::strerror(errno));
    return false;
  }
  std::vector<std::string> args = {exe, "--fd", std::to_string(kChildFd), "--parent", std::to_string(::getpid())};
  args.insert(args.end(), backend_args.begin(), backend_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], kChildFd);  // clears FD_CLOEXEC on the copy
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGHUP);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // Own session: a Ctrl-C or SIGHUP aimed at the trainer's process group does not reach it.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[0]);
  if (rc != 0) {
    ::close(fds[1]);
    *error = fmt::format("cannot start {}: {}", exe, std::strerror(rc));
    return false;
  }
  pid_ = pid;
  write_fd_ = fds[1];
  track_pipe(write_fd_);
  return true;
}

void Watchdog::disarm() {
  if (write_fd_ >= 0) {
    write_without_sigpipe(write_fd_, kDisarm);
    untrack_pipe(write_fd_);
    ::close(write_fd_);
    write_fd_ = -1;
  }
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = 0;
  }
}

bool Watchdog::reset_now() {
  if (write_fd_ < 0 || pid_ <= 0) return false;
  untrack_pipe(write_fd_);
  ::close(write_fd_);  // end of file without kDisarm: the watchdog resets, then exits
  write_fd_ = -1;
  int status = 0;
  pid_t got = -1;
  while ((got = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  pid_ = 0;
  return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int watchdog_main(int argc, char** argv) {
  int fd = -1;
  long parent = -1;
  int device = 0;
  std::string backend = "nvml";
  std::string nvml_library;
  std::string rocm_smi_library;
  std::string log_path;
  std::string lock_record;  // the trainer's GpuLockRecord, emptied after a reset
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--fd" && (v = value())) {
      fd = std::atoi(v);
    } else if (a == "--parent" && (v = value())) {
      parent = std::atol(v);
    } else if (a == "--backend" && (v = value())) {
      backend = v;
    } else if (a == "--device" && (v = value())) {
      device = std::atoi(v);
    } else if (a == "--nvml-library" && (v = value())) {
      nvml_library = v;
    } else if (a == "--rocm-smi-library" && (v = value())) {
      rocm_smi_library = v;
    } else if (a == "--log" && (v = value())) {
      log_path = v;
    } else if (a == "--lock-record" && (v = value())) {
      lock_record = v;
    } else {
      const bool help = a == "--help" || a == "-h";
      fmt::print(help ? stdout : stderr,
                 "usage: perseus-watchdog --fd N --parent PID [--backend nvml|rocm-smi|dry-run] "
                 "[--device I] [--nvml-library PATH] [--rocm-smi-library PATH] [--log PATH] [--lock-record PATH]\n"
                 "Started by the Perseus client; resets GPU clocks when the training process exits.\n");
      return help ? 0 : 2;
    }
  }
  if (fd < 0 || parent <= 0) {
    fmt::print(stderr, "perseus-watchdog: --fd and --parent are required\n");
    return 2;
  }
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGHUP, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);

  bool disarmed = false;
  std::string why;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 200);
    if (n > 0) {
      char buf[64];
      const ssize_t got = ::read(fd, buf, sizeof buf);
      if (got > 0) {
        if (std::memchr(buf, kDisarm, static_cast<std::size_t>(got)) != nullptr) disarmed = true;
        continue;
      }
      if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        why = "pipe closed";
        break;
      }
    }
    if (static_cast<long>(::getppid()) != parent) {
      why = "parent gone";
      break;
    }
    if (g_term_signal.load() != 0) {
      why = "SIGTERM";
      break;
    }
  }
  if (disarmed) return 0;
  try {
    std::unique_ptr<GpuControl> gpu = backend == "dry-run"    ? make_dry_run_gpu(device, log_path)
                                      : backend == "rocm-smi" ? make_rocm_smi_gpu(device, rocm_smi_library)
                                                              : make_nvml_gpu(device, nvml_library);
    gpu->reset_locked_clocks();
    fmt::print(stderr, "perseus-watchdog: training process {} exited without cleanup ({}); reset GPU {} clocks\n",
               parent, why, device);
    // The clocks are reset: the record no longer stands for a lock left behind (the next client
    // would reset again and blame a container teardown; session 21's trial).
    if (!lock_record.empty()) GpuLockRecord::clear_after_reset(lock_record);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus-watchdog: training process {} exited ({}); FAILED to reset GPU {} clocks: {}\n",
               parent, why, device, e.what());
    return 1;
  }
}

}  // namespace perseus::runtime
