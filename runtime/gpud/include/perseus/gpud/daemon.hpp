// `perseus gpud`: the privileged helper that owns the GPUs' clock controls and serves
// unprivileged training processes over a Unix socket (docs/gpud.md).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "perseus/gpud/config.hpp"
#include "perseus/runtime/gpu_control.hpp"

namespace perseus::gpud {

/// Opens GPU `index` (the backend's numbering: NVML or ROCm SMI index). Throws GpuError.
using GpuOpener = std::function<std::unique_ptr<runtime::GpuControl>(int index)>;

/// The helper. Every client connection is authenticated by its kernel credentials
/// (SO_PEERCRED: pid, uid, gid; SO_PEERGROUPS: supplementary groups) and may use only the GPUs
/// an allow rule grants it. A GPU locked by a client belongs to that client until it unlocks
/// it; the helper resets the clock the moment the client's connection closes or its process
/// exits (pidfd; covers kill -9 and a forked child still holding the socket), on shutdown,
/// and at start for GPUs a previous instance left locked (state_dir). Each GPU has its own
/// worker thread, so a slow driver call on one GPU does not delay the others; requests on one
/// GPU are served in arrival order. Every clock change is logged (who, GPU, clock).
class Gpud {
 public:
  /// Opens the GPUs (config.gpus, else 0..device_count-1), reads their supported clocks,
  /// resets the GPUs listed in state_dir, then binds config.socket_path: created mode 0600
  /// (umask), then chgrp socket_group, chmod socket_mode. Refuses to start (throws
  /// std::runtime_error, or GpuError from the backend) when another helper answers on the
  /// socket, when the path exists and is not a socket, or when a GPU cannot be opened.
  /// `log` receives one line per event (stderr under systemd = the journal).
  Gpud(GpudConfig config, const GpuOpener& open, int device_count, std::FILE* log);
  ~Gpud();
  Gpud(const Gpud&) = delete;
  Gpud& operator=(const Gpud&) = delete;

  /// Serves until stop(); then resets every clock still locked by a client and removes the
  /// socket file.
  void run();
  /// Makes run() return. Async-signal-safe (one write to a pipe); callable from any thread.
  void stop();

  /// The implementation, defined in daemon.cpp. A private detail, not part of the API (it is
  /// only declared here); nothing outside daemon.cpp uses it.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// The backend's GPU opener and device count for `config` (backend nvml, rocm-smi or dry-run;
/// dry-run needs a `gpus` list). Throws GpuError when the vendor library cannot be loaded.
std::pair<GpuOpener, int> backend_for(const GpudConfig& config);

}  // namespace perseus::gpud
