// C ABI over perseus::runtime::Client: catches everything, returns status + thread-local message.
#include "perseus/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/profile.hpp"
#include "perseus/runtime/client.hpp"
#include "perseus/runtime/gpu_factory.hpp"
#include "perseus/runtime/simulated_gpu.hpp"

using perseus::runtime::ClientErrc;
using perseus::runtime::ClientError;

struct perseus_client {
  /// The process that created the handle: in a fork()ed child the client's threads do not
  /// exist and its GPU is the parent's, so the child may use nothing of it (a join of a
  /// thread that is not there segfaulted).
  pid_t owner = ::getpid();
  std::unique_ptr<perseus::runtime::Client> client;
  std::shared_ptr<perseus::runtime::SimulatedGpu> sim;  // set for the simulated backend
  std::string running;                                  // current instruction name ("" = none)
};

namespace {

thread_local std::string g_last_error;

perseus_status fail(perseus_status s, const std::string& msg) {
  g_last_error = msg;
  return s;
}

// Runs fn, mapping exceptions to status codes; never lets one escape.
template <typename Fn>
perseus_status guarded(const char* what, Fn&& fn) noexcept {
  try {
    fn();
    return PERSEUS_OK;
  } catch (const ClientError& e) {
    return fail(static_cast<perseus_status>(static_cast<int>(e.code())), e.what());
  } catch (const perseus::runtime::GpuError& e) {
    return fail(PERSEUS_ERR_GPU, e.what());
  } catch (const perseus::InputError& e) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(PERSEUS_ERR_INTERNAL, fmt::format("{}: out of memory", what));
  } catch (const std::exception& e) {
    return fail(PERSEUS_ERR_INTERNAL, fmt::format("{}: {}", what, e.what()));
  } catch (...) {
    return fail(PERSEUS_ERR_INTERNAL, fmt::format("{}: unknown exception", what));
  }
}

std::string str(const char* s) { return s != nullptr ? s : ""; }

using perseus::runtime::kMaxSimTimeScale;

}  // namespace

extern "C" {

void perseus_client_config_init(perseus_client_config* c) {
  if (c == nullptr) return;
  *c = perseus_client_config{};
  c->struct_size = sizeof(perseus_client_config);
  c->backend = "nvml";
  c->sim_time_scale = 1.0;
  c->request_timeout_s = 5.0;
  c->startup_timeout_s = 10.0;
  c->plan_poll_interval_s = 1.0;
  c->max_buffered_reports = 4096;
  c->enable_watchdog = 1;
  c->handle_signals = 1;
  c->coalesce_clock_requests = 1;
  c->clock_snap_tolerance_mhz = 15.0;
}

perseus_status perseus_client_create(const perseus_client_config* cfg, perseus_client** out) {
  g_last_error.clear();
  if (cfg == nullptr || out == nullptr) return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_create: NULL argument");
  *out = nullptr;
  // Fields beyond the caller's struct_size (an older caller) keep perseus_client_config_init()'s values.
  perseus_client_config c;
  perseus_client_config_init(&c);
  if (cfg->struct_size < offsetof(perseus_client_config, backend) || cfg->struct_size > sizeof(perseus_client_config)) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                fmt::format("perseus_client_create: config.struct_size {} is invalid (expected {}); initialize the "
                            "config with perseus_client_config_init()",
                            cfg->struct_size, sizeof(perseus_client_config)));
  }
  std::memcpy(&c, cfg, cfg->struct_size);
  if (c.server_url == nullptr || c.job_id == nullptr) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_create: server_url and job_id are required");
  }
  // 0 keeps a field's default (but clock_snap_tolerance_mhz 0 means exact clocks only); a negative,
  // NaN or too large value is a caller's mistake, not a default (a duration becomes a deadline:
  // infinity would overflow the clock).
  using perseus::runtime::kMaxClientDurationS;
  for (const auto& [name, value, hi] : {std::tuple{"request_timeout_s", c.request_timeout_s, kMaxClientDurationS},
                                        std::tuple{"plan_poll_interval_s", c.plan_poll_interval_s, kMaxClientDurationS},
                                        std::tuple{"sim_time_scale", c.sim_time_scale, kMaxSimTimeScale},
                                        std::tuple{"clock_snap_tolerance_mhz", c.clock_snap_tolerance_mhz, 1e5}}) {
    if (!(value >= 0) || !(value <= hi)) {
      const bool zero_is_default = std::string_view(name) != "clock_snap_tolerance_mhz";
      return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                  fmt::format("perseus_client_create: {} must be a number in [0, {:g}]{}, got {}", name, hi,
                              zero_is_default ? " (0 = the default)" : " (0 = exact clocks only)", value));
    }
  }
  if (!(c.startup_timeout_s <= kMaxClientDurationS)) {  // negative means 0 (client.h); NaN or beyond: refused
    return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                fmt::format("perseus_client_create: startup_timeout_s must be a number of seconds <= {:g}, got {}",
                            kMaxClientDurationS, c.startup_timeout_s));
  }
  // Opened when the GPU is made: a missing folder was a GPU error there (session 22's trial),
  // while the same mistake in freq_log_path is the caller's (INVALID_ARGUMENT), as here.
  // The log is only appended to, so a character device (/dev/null, to silence it; a tty) is a
  // fine log: only a file that would be created or written needs the writability check.
  struct stat log_st {};
  if (c.dry_run_log_path != nullptr && *c.dry_run_log_path != '\0' &&
      !(::stat(c.dry_run_log_path, &log_st) == 0 && S_ISCHR(log_st.st_mode))) {
    try {
      perseus::check_output_file_writable(c.dry_run_log_path, /*force=*/true, "dry_run_log_path");
    } catch (const perseus::InputError& e) {
      return fail(PERSEUS_ERR_INVALID_ARGUMENT, fmt::format("perseus_client_create: dry_run_log_path {}", e.message()));
    }
  }
  return guarded("perseus_client_create", [&] {
    auto h = std::make_unique<perseus_client>();
    perseus::runtime::GpuSpec spec;
    spec.backend = c.backend != nullptr ? c.backend : "nvml";
    spec.device_index = c.device_index;
    spec.device_uuid = str(c.device_uuid);
    spec.device_pci_bus_id = str(c.device_pci_bus_id);
    spec.device_is_nvml_index = c.device_index_is_nvml != 0;
    spec.nvml_library = str(c.nvml_library_path);
    spec.gpud_socket = str(c.gpud_socket_path);
    spec.rocm_smi_library = str(c.rocm_smi_library_path);
    spec.profile_path = str(c.profile_path);
    spec.stage = c.pp_rank;
    spec.time_scale = c.sim_time_scale > 0 ? c.sim_time_scale : 1.0;
    spec.blocking_power_w = c.sim_blocking_power_w;
    spec.log_path = str(c.dry_run_log_path);
    std::shared_ptr<perseus::runtime::GpuControl> gpu = perseus::runtime::make_gpu(spec);
    h->sim = std::dynamic_pointer_cast<perseus::runtime::SimulatedGpu>(gpu);

    perseus::runtime::ClientOptions o;
    o.server_url = c.server_url;
    o.token = str(c.token);
    o.job_id = c.job_id;
    o.ranks = {c.rank, c.dp_rank, c.pp_rank, c.tp_rank};
    if (c.request_timeout_s > 0) o.request_timeout_s = c.request_timeout_s;
    o.startup_timeout_s = c.startup_timeout_s > 0 ? c.startup_timeout_s : 0.0;
    if (c.plan_poll_interval_s > 0) o.plan_poll_interval_s = c.plan_poll_interval_s;
    if (c.max_buffered_reports > 0) o.max_buffered_reports = c.max_buffered_reports;
    o.watchdog = c.enable_watchdog != 0;
    o.watchdog_path = str(c.watchdog_path);
    o.handle_signals = c.handle_signals != 0;
    o.first_iteration = c.first_iteration;
    o.coalesce_clock_requests = c.coalesce_clock_requests != 0;
    o.freq_log_path = str(c.freq_log_path);
    o.clock_snap_tolerance_mhz = c.clock_snap_tolerance_mhz > 0 ? c.clock_snap_tolerance_mhz : 0.0;
    if (c.startup_cancelled != nullptr)
      o.startup_cancelled = [fn = c.startup_cancelled, user = c.startup_cancelled_user] { return fn(user) != 0; };
    h->client = perseus::runtime::Client::create(std::move(o), std::move(gpu));
    *out = h.release();
  });
}

perseus_status perseus_client_destroy(perseus_client* h) {
  if (h == nullptr) return PERSEUS_OK;
  if (h->owner != ::getpid()) return PERSEUS_OK;  // a fork's copy: left alone (the parent owns it)
  const perseus_status s = guarded("perseus_client_destroy", [&] { h->client->close(); });
  delete h;  // ~Client only calls the (idempotent) close again
  return s;
}

#define PERSEUS_CHECK_HANDLE(fn)                                                                          \
  do {                                                                                                    \
    if (h == nullptr) return fail(PERSEUS_ERR_INVALID_ARGUMENT, fn ": NULL client");                      \
    if (h->owner != ::getpid())                                                                           \
      return fail(PERSEUS_ERR_STATE, fmt::format(fn ": the client belongs to process {} and this is a "  \
                                                    "fork() of it; create a client in this process",     \
                                                 h->owner));                                              \
  } while (0)

perseus_status perseus_client_step_begin(perseus_client* h) {
  PERSEUS_CHECK_HANDLE("perseus_client_step_begin");
  return guarded("perseus_client_step_begin", [&] { h->client->on_step_begin(); });
}

perseus_status perseus_client_step_end(perseus_client* h) {
  PERSEUS_CHECK_HANDLE("perseus_client_step_end");
  return guarded("perseus_client_step_end", [&] { h->client->on_step_end(); });
}

perseus_status perseus_client_instruction_begin(perseus_client* h, const char* name) {
  PERSEUS_CHECK_HANDLE("perseus_client_instruction_begin");
  if (name == nullptr) return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_instruction_begin: NULL name");
  return guarded("perseus_client_instruction_begin", [&] {
    h->running.clear();
    try {
      h->client->on_instruction_begin(name);
    } catch (const ClientError& e) {
      if (e.code() == ClientErrc::kPlanMismatch) h->running = name;  // begin took effect anyway
      throw;
    }
    h->running = name;
  });
}

perseus_status perseus_client_instruction_end(perseus_client* h, const char* name) {
  PERSEUS_CHECK_HANDLE("perseus_client_instruction_end");
  if (name == nullptr) return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_instruction_end: NULL name");
  return guarded("perseus_client_instruction_end", [&] {
    h->client->on_instruction_end(name);
    h->running.clear();
  });
}

perseus_status perseus_client_simulate_compute(perseus_client* h, double* time_s) {
  PERSEUS_CHECK_HANDLE("perseus_client_simulate_compute");
  if (!h->sim) {
    return fail(PERSEUS_ERR_UNSUPPORTED, fmt::format("perseus_client_simulate_compute: backend is '{}', not simulated",
                                                     h->client->gpu().name()));
  }
  if (h->running.empty()) {
    return fail(PERSEUS_ERR_STATE, "perseus_client_simulate_compute: no computation running (call instruction_begin)");
  }
  const auto kind = perseus::parse_instruction_kind(h->running);
  if (!kind) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                fmt::format("perseus_client_simulate_compute: {} is not a computation kind",
                            perseus::quote_input(h->running)));
  }
  return guarded("perseus_client_simulate_compute", [&] {
    const double t = h->sim->compute(*kind);
    if (time_s != nullptr) *time_s = t;
  });
}

perseus_status perseus_client_flush(perseus_client* h, double timeout_s) {
  PERSEUS_CHECK_HANDLE("perseus_client_flush");
  // At most kMaxClientDurationS, like every duration of the client: 1e308 s overflowed the
  // deadline, and flush returned at once, "still pending after 1e+308 s".
  if (!(timeout_s >= 0) || !(timeout_s <= perseus::runtime::kMaxClientDurationS)) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT, fmt::format("perseus_client_flush: timeout_s must be in [0, {}] s, got {}",
                                                          perseus::runtime::kMaxClientDurationS, timeout_s));
  }
  return guarded("perseus_client_flush", [&] {
    // Clock requests first (stats read after flush are settled), then reports, within timeout_s
    // in all: a backend call that hangs (a gpud helper not answering) cannot block beyond it.
    const auto start = std::chrono::steady_clock::now();
    if (!h->client->controller().flush_for(timeout_s)) {
      throw ClientError(ClientErrc::kGpu, fmt::format("clock requests still pending after {} s (the GPU backend has "
                                                      "not answered; last error: {})",
                                                      timeout_s, h->client->controller().last_error()));
    }
    const double left = timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!h->client->flush_reports(std::max(0.0, left))) {
      const auto s = h->client->stats();
      throw ClientError(ClientErrc::kServer,
                        fmt::format("{} report(s) still pending after {} s ({})", s.reports_pending, timeout_s,
                                    s.last_server_error.empty()
                                        ? "no error from the server yet: the timeout ran out first"
                                        : "last error: " + s.last_server_error));
    }
  });
}

perseus_status perseus_client_get_stats(perseus_client* h, perseus_client_stats* out) {
  PERSEUS_CHECK_HANDLE("perseus_client_get_stats");
  if (out == nullptr || out->struct_size < offsetof(perseus_client_stats, gpu_failures) ||
      out->struct_size > sizeof(perseus_client_stats)) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                "perseus_client_get_stats: NULL stats or bad struct_size (set it to sizeof(perseus_client_stats))");
  }
  return guarded("perseus_client_get_stats", [&] {
    const auto s = h->client->stats();
    perseus_client_stats full{};
    full.struct_size = out->struct_size;
    full.iterations = s.iterations;
    full.plan_version = s.plan_version;
    full.plan_updates = s.plan_updates;
    full.reports_sent = s.reports_sent;
    full.reports_pending = s.reports_pending;
    full.reports_dropped = s.reports_dropped;
    full.server_failures = s.server_failures;
    full.gpu_failures = s.gpu_failures;
    full.applied_mhz = h->client->controller().applied_mhz();
    full.latest_plan_version = s.latest_plan_version;
    full.plans_refused = s.plans_refused;
    full.clocks_snapped = s.clocks_snapped;
    full.energy_unknown = s.energy_unknown;
    full.reports_rejected = s.reports_rejected;
    full.reports_foreign_duplicates = s.reports_foreign_duplicates;
    std::memcpy(out, &full, out->struct_size);
  });
}

perseus_status perseus_client_get_plan(perseus_client* h, perseus_plan_info* info, perseus_plan_instruction* out,
                                       size_t capacity) {
  PERSEUS_CHECK_HANDLE("perseus_client_get_plan");
  // Version 1 of both structs is the whole of them: every field below is written unconditionally.
  // A later version that appends fields must check struct_size / instruction_size per field.
  if (info == nullptr || info->struct_size != sizeof(perseus_plan_info) || (out == nullptr && capacity > 0) ||
      (capacity > 0 && info->instruction_size != sizeof(perseus_plan_instruction))) {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT,
                "perseus_client_get_plan: NULL info, bad info->struct_size or info->instruction_size (set them to "
                "sizeof(perseus_plan_info) and sizeof(perseus_plan_instruction)), or NULL out with capacity > 0");
  }
  return guarded("perseus_client_get_plan", [&] {
    const perseus::runtime::RankPlan plan = h->client->plan();
    info->version = plan.version;
    info->iteration_time_s = plan.iteration_time_s;
    info->energy_j = plan.energy_j;
    info->num_instructions = plan.instructions.size();
    for (std::size_t k = 0; k < std::min(capacity, plan.instructions.size()); ++k) {
      const auto& i = plan.instructions[k];
      const auto kind = perseus::parse_instruction_kind(i.instruction);  // the client parsed it: always known
      out[k] = {kind ? static_cast<int32_t>(*kind) : -1, i.stage, i.microbatch, i.freq_mhz, i.planned_freq_mhz};
    }
  });
}

perseus_status perseus_client_write_freq_log(perseus_client* h, const char* path) {
  PERSEUS_CHECK_HANDLE("perseus_client_write_freq_log");
  if (path == nullptr) return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_write_freq_log: NULL path");
  if (*path == '\0') {
    return fail(PERSEUS_ERR_INVALID_ARGUMENT, "perseus_client_write_freq_log: expected a file path, got an empty one");
  }
  return guarded("perseus_client_write_freq_log", [&] {
    h->client->controller().flush();
    try {
      h->client->controller().write_log(path);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());
    }
  });
}

const char* perseus_last_error(void) { return g_last_error.c_str(); }

const char* perseus_status_string(perseus_status s) {
  switch (s) {
    case PERSEUS_OK: return "PERSEUS_OK";
    case PERSEUS_ERR_INVALID_ARGUMENT: return "PERSEUS_ERR_INVALID_ARGUMENT";
    case PERSEUS_ERR_SERVER: return "PERSEUS_ERR_SERVER";
    case PERSEUS_ERR_PLAN_MISMATCH: return "PERSEUS_ERR_PLAN_MISMATCH";
    case PERSEUS_ERR_GPU: return "PERSEUS_ERR_GPU";
    case PERSEUS_ERR_STATE: return "PERSEUS_ERR_STATE";
    case PERSEUS_ERR_INTERNAL: return "PERSEUS_ERR_INTERNAL";
    case PERSEUS_ERR_UNSUPPORTED: return "PERSEUS_ERR_UNSUPPORTED";
    case PERSEUS_ERR_CANCELLED: return "PERSEUS_ERR_CANCELLED";
  }
  return "PERSEUS_ERR_UNKNOWN";
}

int perseus_client_abi_version(void) { return PERSEUS_CLIENT_ABI_VERSION; }

}  // extern "C"
