// A per-GPU record of which process locked its clocks, so that locks left behind by a
// trainer killed together with its watchdog (container teardown) are reset at the next
// client start on that GPU, and two live clients never drive one GPU.
#pragma once

#include <sys/types.h>

#include <string>

#include "perseus/runtime/gpu_control.hpp"

namespace perseus::runtime {

/// The record is the file <dir>/gpu-<UUID>.lock. Its owner holds an exclusive flock(2) on it
/// for its whole life (close-on-exec), which the kernel drops when the process dies however
/// it dies, in any container sharing the directory; the file's text says who the owner was
/// (pid, host, time) and is emptied on a clean release. So at claim time:
///   - flock busy              -> a live client drives this GPU: refused (GpuError);
///   - flock free, text empty  -> clean: claimed;
///   - flock free, text left   -> the previous owner died without releasing (its watchdog
///                                died with it): the clocks are reset, with a warning.
/// For container teardown to be covered, the directory must outlive the container (mount it
/// from the host: `-v /run/perseus:/run/perseus`). A fork()ed child (a DataLoader worker)
/// closes its copy of the record's descriptor at once (pthread_atfork), so a child that outlives
/// a killed trainer does not keep the flock, and the child's copy of the record does nothing.
class GpuLockRecord {
 public:
  GpuLockRecord() = default;
  ~GpuLockRecord() { release(); }
  GpuLockRecord(GpuLockRecord&& other) noexcept;
  GpuLockRecord& operator=(GpuLockRecord&& other) noexcept;
  GpuLockRecord(const GpuLockRecord&) = delete;
  GpuLockRecord& operator=(const GpuLockRecord&) = delete;

  /// Empties the record at `path` after the watchdog reset the clocks of a trainer that died
  /// (so the next client does not reset again and call it a container teardown), if it is a
  /// regular file with one name and no live process holds its flock (a forked child of the
  /// trainer may still: then it is left alone). The dead trainer's own flock goes only when the
  /// kernel has closed all its files, which can be after the watchdog saw its pipe close: the
  /// flock is tried for up to kClearWaitS. Returns true when emptied. Never throws.
  static bool clear_after_reset(const std::string& path);
  static constexpr double kClearWaitS = 2.0;  ///< clear_after_reset()'s wait for a dying owner's flock, s.

  /// Claims gpu (keyed by gpu.uuid(); a GPU without a UUID is not recorded: returns an empty
  /// record). dir: "" = default_lock_dir(). Resets stale clock locks as described above.
  /// Throws GpuError when a live process holds the record. A directory or file that cannot
  /// be created is a warning (no record), never a failure.
  static GpuLockRecord claim(GpuControl& gpu, const std::string& dir = "");
  /// Empties the record and drops the flock. Idempotent.
  void release();
  /// Drops the flock but keeps the record's text, for when the clocks could not be reset: the
  /// next claim of this GPU (any client, after this one) finds a stale record and resets them.
  /// Idempotent; release() after it does nothing.
  void abandon();
  /// The record's path ("" when none).
  const std::string& path() const { return path_; }
  /// True when claim() found and reset a stale lock.
  bool reset_stale() const { return reset_stale_; }

 private:
  /// Closes fd_ unless this is a fork()ed child's copy (its descriptor is closed already).
  void close_fd();
  int fd_ = -1;
  pid_t owner_pid_ = 0;  // the process that claimed it
  std::string path_;
  bool reset_stale_ = false;
};

/// The default lock-record directory: a folder of its own inside /run/perseus, so that
/// creating it mode 1777 never changes /run/perseus itself (`perseus gpud`'s 0755 runtime
/// directory, holding its socket).
inline constexpr const char* kRunLockDir = "/run/perseus/locks";

/// $PERSEUS_LOCK_DIR if set, else kRunLockDir when it exists and is writable or can be
/// created, else $TMPDIR (or /tmp) + "/perseus-gpu-locks". A directory the client creates is
/// made mode 1777; an existing one keeps its mode.
std::string default_lock_dir();

}  // namespace perseus::runtime
