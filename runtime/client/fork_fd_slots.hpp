// Descriptors a fork()ed child must not keep as they are (private to the client library).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>

namespace perseus::runtime::detail {

/// A lock-free set of at most 64 descriptors, for a pthread_atfork child handler: there only
/// the forking thread exists and only async-signal-safe calls are allowed, so no lock and no
/// allocation. Each slot holds a descriptor + 1 (0: free), so the zero-initialized set is empty.
/// Used for the lock records' flock descriptors (closed in the child) and the watchdog pipes'
/// write ends (pointed at /dev/null in the child).
class ForkFdSlots {
 public:
  /// Adds fd; beyond 64 descriptors the rest are not tracked (one per GPU a process drives).
  void add(int fd) {
    for (auto& slot : slots_) {
      int free = 0;
      if (slot.compare_exchange_strong(free, fd + 1)) return;
    }
  }
  /// Removes fd if present (call before closing it: a fork() then leaves the number alone).
  void remove(int fd) {
    for (auto& slot : slots_) {
      int mine = fd + 1;
      if (slot.compare_exchange_strong(mine, 0)) return;
    }
  }
  /// Empties the set, calling fn(fd) for each descriptor (async-signal-safe if fn is).
  template <class Fn>
  void drain(Fn&& fn) {
    for (auto& slot : slots_) {
      const int fd_plus_1 = slot.exchange(0);
      if (fd_plus_1 > 0) fn(fd_plus_1 - 1);
    }
  }

 private:
  std::array<std::atomic<int>, 64> slots_{};
};

}  // namespace perseus::runtime::detail
