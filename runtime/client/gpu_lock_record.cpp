// GpuLockRecord: flock-held per-GPU record; stale records reset the clocks.
#include "perseus/runtime/gpu_lock_record.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include <fmt/core.h>

#include "fork_fd_slots.hpp"

namespace perseus::runtime {
namespace {

// Descriptors of this process's records, closed in a fork()ed child (pthread_atfork): a flock
// belongs to the open file description, which a child shares, so a DataLoader worker that
// outlived a killed trainer kept the GPU "driven by another live Perseus client" (session 23's
// trial).
detail::ForkFdSlots g_record_fds;

void close_records_in_child() {
  g_record_fds.drain([](int fd) { ::close(fd); });  // async-signal-safe
}

void track_fd(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &close_records_in_child); });
  g_record_fds.add(fd);
}

void untrack_fd(int fd) { g_record_fds.remove(fd); }

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  off_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    off += n;
    if (out.size() > 4096) break;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

/// Creates dir (and its parents) when missing; only a directory this call created is made
/// mode 1777 (shared by every user's trainers, like /tmp; best effort). An existing one keeps its
/// mode: /run/perseus may be `perseus gpud`'s 0755 runtime directory, which holds its socket.
bool make_dir(const std::string& dir) {
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  if (created) ::chmod(dir.c_str(), 01777);
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

}  // namespace

std::string default_lock_dir() {
  if (const char* env = std::getenv("PERSEUS_LOCK_DIR"); env != nullptr && *env != '\0') return env;
  if (make_dir(kRunLockDir)) return kRunLockDir;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/perseus-gpu-locks";
}

GpuLockRecord::GpuLockRecord(GpuLockRecord&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), owner_pid_(o.owner_pid_), path_(std::move(o.path_)), reset_stale_(o.reset_stale_) {}

GpuLockRecord& GpuLockRecord::operator=(GpuLockRecord&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
    owner_pid_ = o.owner_pid_;
    path_ = std::move(o.path_);
    reset_stale_ = o.reset_stale_;
  }
  return *this;
}

void GpuLockRecord::close_fd() {
  if (owner_pid_ == ::getpid()) {
    untrack_fd(fd_);
    ::close(fd_);  // drops the flock
  }  // else a fork's copy: the child closed the descriptor at fork (its number may be reused)
  fd_ = -1;
}

void GpuLockRecord::release() {
  if (fd_ < 0) return;
  if (owner_pid_ == ::getpid() && ::ftruncate(fd_, 0) != 0) {
    // The text stays: the next claim resets the clocks once more (harmless).
  }
  close_fd();
}

void GpuLockRecord::abandon() {
  if (fd_ < 0) return;
  close_fd();  // the owner text stays for the next claim
}

bool GpuLockRecord::clear_after_reset(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st {};
  bool cleared = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
    // The trainer's exit closes its files in fd order: its pipe to the watchdog (which woke us)
    // may close before the record, whose flock it still holds for a moment (a race seen as a
    // record left full in about half the runs of Watchdog.KillMinus9OfTheTrainerResetsClocks).
    constexpr int kTries = static_cast<int>(kClearWaitS / 0.005);
    for (int i = 0; i < kTries && !cleared; ++i) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
        cleared = ::ftruncate(fd, 0) == 0;
      } else if (errno == EWOULDBLOCK) {
        ::usleep(5000);
      } else {
        break;
      }
    }
  }
  ::close(fd);  // drops the flock
  return cleared;
}

GpuLockRecord GpuLockRecord::claim(GpuControl& gpu, const std::string& dir_in) {
  GpuLockRecord rec;
  const std::string uuid = gpu.uuid();
  if (uuid.empty()) return rec;
  const std::string dir = dir_in.empty() ? default_lock_dir() : dir_in;
  if (!make_dir(dir)) {
    fmt::print(stderr, "perseus client: WARNING: cannot create the lock-record directory {}: {}; stale clock locks "
                       "of a killed container will not be detected (docs/client.md)\n",
               dir, std::strerror(errno));
    return rec;
  }
  const std::string path = dir + "/gpu-" + uuid + ".lock";
  // The directory may be shared by every user (/tmp/perseus-gpu-locks when /run/perseus cannot
  // be made): never follow a symbolic link planted there, never write a file with other names
  // (a hard link), and make only a file of our own writable by all.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0666);
  if (fd < 0) {
    fmt::print(stderr, "perseus client: WARNING: cannot open the lock record {}: {}; stale clock locks will not be "
                       "detected\n",
               path, errno == ELOOP ? "it is a symbolic link" : std::strerror(errno));
    return rec;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd);
    fmt::print(stderr, "perseus client: WARNING: the lock record {} is not a regular file with one name; it is left "
                       "alone and stale clock locks will not be detected\n",
               path);
    return rec;
  }
  if (st.st_uid == ::geteuid()) ::fchmod(fd, 0666);  // another user's client may claim this GPU next
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string owner = read_all(fd);
    ::close(fd);
    throw GpuError(fmt::format("{} is already driven by another live Perseus client ({}; record {}). Two ranks on "
                               "one GPU means the device mapping is wrong: check CUDA_VISIBLE_DEVICES and the "
                               "device given to the client",
                               gpu.identity(), owner.empty() ? "owner unknown" : owner, path));
  }
  rec.fd_ = fd;
  rec.owner_pid_ = ::getpid();
  track_fd(fd);
  rec.path_ = path;
  const std::string stale = read_all(fd);
  if (!stale.empty()) {
    try {
      gpu.reset_locked_clocks();
      rec.reset_stale_ = true;
      fmt::print(stderr,
                 "perseus client: WARNING: {}: reset the clock lock left by a client that died without releasing it "
                 "({}), e.g. trainer and watchdog killed together by a container teardown\n",
                 gpu.identity(), stale);
    } catch (const std::exception& e) {
      fmt::print(stderr, "perseus client: WARNING: {}: a stale clock lock ({}) could not be reset: {}\n", gpu.identity(),
                 stale, e.what());
    }
  }
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string text = fmt::format("pid {} on host {} since unix time {:.0f}\n", ::getpid(), hostname(),
                                       std::chrono::duration<double>(now).count());
  // The text first, then the length: a failed write (a full disk) leaves the old text, or part
  // of the new one, never an emptied record; an empty one reads as a clean release.
  if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd, static_cast<off_t>(text.size())) != 0) {
    const int err = errno;
    fmt::print(stderr,
               "perseus client: WARNING: cannot write the lock record {} ({}): if this trainer and its watchdog "
               "are killed together, the next client will not detect the clock lock they leave\n",
               path, std::strerror(err));
  }
  return rec;
}

}  // namespace perseus::runtime
