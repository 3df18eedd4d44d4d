// `perseus gpud` configuration: which GPUs it serves, who may use each, and its socket.
#pragma once

#include <cstddef>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace perseus::gpud {

/// A user or group named in an allow rule, resolved to its numeric id when the file is read.
struct Principal {
  enum class Kind { kUser, kGroup };
  Kind kind = Kind::kUser;
  unsigned id = 0;   ///< uid or gid.
  std::string text;  ///< As written ("user:alice", "gid:1000"), for logs.
};

/// `allow GPU PRINCIPAL...`: the principals may use GPU `gpu` (-1 = every GPU served).
struct AllowRule {
  int gpu = -1;
  std::vector<Principal> who;
  int line = 0;  ///< Line of the rule in the config file (for messages).
};

/// The kernel credentials of a connected client (SO_PEERCRED, SO_PEERGROUPS).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  ///< Supplementary groups (primary gid not necessarily included).
};

/// Settings of the helper (docs/gpud.md shows a complete file).
struct GpudConfig {
  std::string source;                                ///< File it was read from ("" = built in code).
  std::string socket_path = "/run/perseus/gpud.sock";  ///< `socket PATH`.
  unsigned socket_mode = 0660;                       ///< `socket_mode OCTAL`; no bit for "other" allowed.
  std::string socket_group;                          ///< `socket_group NAME|GID`; "" = the daemon's group.
  gid_t socket_gid = static_cast<gid_t>(-1);         ///< Resolved socket_group (-1 = unchanged).
  std::string state_dir = "/run/perseus/gpud";       ///< `state_dir PATH`: locks that outlive a crash.
  std::string backend = "nvml";                      ///< `backend nvml|rocm-smi|dry-run`.
  std::string library;                               ///< `library PATH`: the vendor library to dlopen.
  std::string dry_run_log;                           ///< `dry_run_log PATH` (dry-run backend only).
  std::vector<int> gpus;                             ///< `gpus I J ...`; empty = every GPU the backend sees.
  /// `rate_limit PER_S BURST`: token bucket per client. A trainer sends about 3 requests per
  /// computation (lock, energy at its start and end): 5000/s covers ~1,600 computations/s
  /// (0.6 ms each). 500/s before session 31 throttled one trainer of 2 ms computations.
  double rate_per_s = 5000;
  double rate_burst = 10000;
  int max_clients = 64;                              ///< `max_clients N`: further connections are refused.
  std::vector<AllowRule> rules;                      ///< `allow` lines; nothing is allowed without one.

  /// True when some rule lets `peer` (by uid, primary gid or a supplementary group) use `gpu`.
  bool allows(int gpu, const PeerCredentials& peer) const;
};

/// Parses the text of a config file. `source` names the file in messages. One directive a
/// line, '#' starts a comment:
///   socket PATH | socket_mode 0660 | socket_group NAME|GID | state_dir PATH
///   backend nvml|rocm-smi|dry-run | library PATH | dry_run_log PATH | gpus I J ...
///   rate_limit PER_S BURST | max_clients N
///   allow GPU|* user:NAME uid:N group:NAME gid:N ...
/// Throws perseus::InputError naming the file, line and field for an unknown directive, a
/// missing or malformed value, a world-accessible socket_mode, an unknown user or group, a
/// GPU index out of 0..255, or a file without any allow rule.
GpudConfig parse_gpud_config(std::string_view text, const std::string& source);

/// Largest gpud config file read, bytes (a real one is a few hundred).
inline constexpr std::size_t kMaxGpudConfigBytes = 1 << 20;

/// Reads and parses the regular file at `path` (throws perseus::InputError naming the reason
/// when it cannot be read: missing, no permission, a folder, not a regular file (a device such
/// as /dev/zero, a FIFO), or larger than kMaxGpudConfigBytes).
GpudConfig load_gpud_config(const std::string& path);

}  // namespace perseus::gpud
