/*
 * Perseus client C ABI: the one stable interface of the in-training client.
 *
 * A training process creates one client per GPU (rank), then calls the hooks around every
 * forward/backward computation of every iteration:
 *
 *     perseus_client_config cfg;
 *     perseus_client_config_init(&cfg);
 *     cfg.server_url = "http://127.0.0.1:7787"; cfg.token = token; cfg.job_id = job;
 *     cfg.rank = 5; cfg.dp_rank = 1; cfg.pp_rank = 1; cfg.device_index = 1;
 *     perseus_client* c = NULL;
 *     if (perseus_client_create(&cfg, &c) != PERSEUS_OK) fprintf(stderr, "%s\n", perseus_last_error());
 *     for (each iteration) {
 *       perseus_client_step_begin(c);
 *       for (each computation) {
 *         perseus_client_instruction_begin(c, "forward");   // sets the planned SM clock
 *         ... run it ...
 *         perseus_client_instruction_end(c, "forward");     // records time and energy
 *       }
 *       perseus_client_step_end(c);                          // queues the iteration report
 *     }
 *     perseus_client_destroy(c);                             // flushes, resets clocks
 *
 * Rules: every function returns a perseus_status; on anything but PERSEUS_OK,
 * perseus_last_error() returns a message for the calling thread. No C++ exception ever
 * crosses this interface. Units: seconds (_s), joules (_j), watts (_w), MHz (_mhz).
 * Hooks of one client must not be called concurrently. The client runs background threads
 * (plan refresh, reporting, clock setting) and, with the NVML backend, a perseus-watchdog
 * process that resets the clocks if the trainer dies (see docs/client.md).
 *
 * ABI stability: the config and stats structs start with struct_size; new fields are only
 * appended. Always initialize them with perseus_client_config_init() / by setting
 * struct_size = sizeof(...).
 */
#ifndef PERSEUS_CLIENT_H_
#define PERSEUS_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this ABI; bumped on incompatible changes (never so far). */
#define PERSEUS_CLIENT_ABI_VERSION 1

/** Result of every call. */
typedef enum perseus_status {
  PERSEUS_OK = 0,
  PERSEUS_ERR_INVALID_ARGUMENT = 1, /**< NULL pointer, bad config value, unknown backend. */
  PERSEUS_ERR_SERVER = 2,           /**< The server refused for good (bad token, unknown job/rank). */
  PERSEUS_ERR_PLAN_MISMATCH = 3,    /**< The instruction order differs from the plan. */
  PERSEUS_ERR_GPU = 4,              /**< GPU backend failure (NVML missing, no permission...). */
  PERSEUS_ERR_STATE = 5,            /**< Hooks out of order (end without begin...). */
  PERSEUS_ERR_INTERNAL = 6,         /**< Unexpected failure (a bug): see the message. */
  PERSEUS_ERR_UNSUPPORTED = 7,      /**< Not available with this backend. */
  PERSEUS_ERR_CANCELLED = 8         /**< create() was cancelled by config.startup_cancelled. */
} perseus_status;

/** Opaque client handle. */
typedef struct perseus_client perseus_client;

/** Client settings. Initialize with perseus_client_config_init(), then set fields; fields
 *  beyond the caller's struct_size (an older caller) keep config_init's values. A zero/NULL
 *  field does NOT always mean its default: request_timeout_s, plan_poll_interval_s,
 *  max_buffered_reports and sim_time_scale take their defaults at 0, but enable_watchdog,
 *  handle_signals and coalesce_clock_requests are off at 0, and startup_timeout_s and
 *  clock_snap_tolerance_mhz are used as 0; each field below says. */
typedef struct perseus_client_config {
  uint32_t struct_size;          /**< sizeof(perseus_client_config); set by config_init. */
  const char* server_url;        /**< "http://host:port" of `perseus serve` (required; a trailing '/' is
                                      allowed, a path is not: INVALID_ARGUMENT, as a bad host or port). */
  const char* token;             /**< Bearer token, or NULL; printable ASCII without spaces (else
                                      INVALID_ARGUMENT: CR/LF would inject HTTP headers). */
  const char* job_id;            /**< Job id from POST /v1/jobs (required). */
  int32_t rank;                  /**< Global rank (>= 0). */
  int32_t dp_rank;               /**< Data-parallel rank = pipeline id (>= 0). */
  int32_t pp_rank;               /**< Pipeline stage (>= 0). */
  int32_t tp_rank;               /**< Tensor-parallel rank (>= 0). */
  int32_t device_index;          /**< nvml: CUDA device ordinal (cuda:N, >= 0), mapped to the NVML
                                      device through CUDA_VISIBLE_DEVICES; see device_uuid. */
  const char* backend;           /**< "nvml" (default), "rocm-smi" (AMD), "gpud" (clocks through the
                                      privileged `perseus gpud` helper: no privilege needed here),
                                      "simulated" or "dry-run". */
  const char* nvml_library_path; /**< nvml: library to dlopen; NULL or "" = $PERSEUS_NVML_LIBRARY if
                                      set, else "libnvidia-ml.so.1". */
  const char* profile_path;      /**< simulated: profile CSV; the GPU runs stage pp_rank. */
  double sim_time_scale;         /**< simulated: real s slept per simulated s (default 1; 0 = 1;
                                      negative, NaN, in (0, 1e-6) or > 1e6: INVALID_ARGUMENT). */
  double sim_blocking_power_w;   /**< simulated: idle power, W (default 0; negative, NaN or > 1e5:
                                      INVALID_ARGUMENT). */
  const char* dry_run_log_path;  /**< dry-run: call log file, appended to (a character device such as /dev/null is fine); NULL = stderr. */
  const char* freq_log_path;     /**< Clock log written at destroy (.json or .csv); NULL = none. */
  double request_timeout_s;      /**< Per HTTP request (default 5; 0 = 5; negative, NaN or > 1e6:
                                      INVALID_ARGUMENT). */
  double startup_timeout_s;      /**< create() waits this long for an unreachable server (default 10).
                                      0 or < 0 is used as 0 (one try, its requests cut off at
                                      10 ms), not as the default; NaN or > 1e6: INVALID_ARGUMENT. */
  double plan_poll_interval_s;   /**< Background plan refresh period (default 1; 0 = 1; negative,
                                      NaN, > 1e6 or in (0, 1e-3): INVALID_ARGUMENT). */
  uint32_t max_buffered_reports; /**< Unsent iteration reports kept (default 4096; 0 = 4096; more
                                      than 2^20: INVALID_ARGUMENT). */
  int32_t enable_watchdog;       /**< 1 (default): spawn perseus-watchdog for the nvml, rocm-smi and
                                      dry-run backends (gpud and simulated need none); 0 = off. */
  const char* watchdog_path;     /**< NULL = $PERSEUS_WATCHDOG or search beside the program. */
  int32_t handle_signals;        /**< 1 (default): reset clocks on SIGTERM/SIGINT (default action);
                                      0 = off. */
  int64_t first_iteration;       /**< Number of the first step (when resuming; default 0). */
  int32_t coalesce_clock_requests; /**< 1 (default): when clock requests pile up, apply only the
                                        newest; 0: apply every request in order (exact logs). */
  const char* device_uuid;       /**< nvml: the GPU's UUID "GPU-..." (e.g. from torch); NULL = use
                                      device_index. Overrides device_index and device_pci_bus_id. */
  const char* device_pci_bus_id; /**< nvml: the GPU's PCI bus id "0000:41:00.0"; NULL = unused. */
  int32_t device_index_is_nvml;  /**< 1: device_index is NVML's index (no CUDA_VISIBLE_DEVICES mapping). */
  double clock_snap_tolerance_mhz; /**< A plan clock within this of a supported clock is snapped to
                                        it; farther ones are refused (default 15). 0 is used as 0
                                        (exact clocks only), not as the default; negative, NaN or
                                        > 1e5: INVALID_ARGUMENT. */
  const char* gpud_socket_path;  /**< gpud: the helper's Unix socket; NULL = $PERSEUS_GPUD_SOCKET, else
                                      /run/perseus/gpud.sock. device_index etc. select the GPU as for nvml. */
  const char* rocm_smi_library_path; /**< rocm-smi: library to dlopen; NULL = $PERSEUS_ROCM_SMI_LIBRARY,
                                          else "librocm_smi64.so". device_index is ROCm SMI's index. */
  /** Optional: while create() waits for an unreachable server (startup_timeout_s), it calls
   *  startup_cancelled(startup_cancelled_user) before each attempt and at least every 50 ms of
   *  its back-off and of a request in flight (the request then runs on a helper thread and is
   *  cut off; a connection attempt to a host that drops packets may still take up to
   *  request_timeout_s); a nonzero return ends create() with PERSEUS_ERR_CANCELLED and no
   *  client (Ctrl-C in a binding). NULL:
   *  never cancelled. Called on the thread that called create(). */
  int (*startup_cancelled)(void* user);
  void* startup_cancelled_user;   /**< Passed to startup_cancelled. */
} perseus_client_config;

/** Counters (see perseus_client_get_stats). */
typedef struct perseus_client_stats {
  uint32_t struct_size;    /**< sizeof(perseus_client_stats); set by the caller. */
  int64_t iterations;      /**< Completed steps. */
  int64_t plan_version;    /**< Plan in use, -1 = none yet. */
  int64_t plan_updates;    /**< Newer plans that replaced the one in use (the first plan is not counted). */
  int64_t reports_sent;    /**< Iteration reports accepted by the server. */
  int64_t reports_pending; /**< Buffered, not yet accepted. */
  int64_t reports_dropped; /**< Dropped (buffer full or refused by the server). */
  int64_t server_failures; /**< Failed requests. */
  int32_t gpu_failures;    /**< Failed clock changes. */
  int32_t applied_mhz;     /**< SM clock in force as far as the client knows (0 = unlocked). */
  int64_t latest_plan_version; /**< Newest plan fetched, switched in at the next step begin (-1 = none). */
  int64_t plans_refused;   /**< Plan versions refused (a clock the GPU lacks, too big a plan). */
  int64_t clocks_snapped;  /**< Plan clocks snapped to the nearest supported clock. */
  int64_t energy_unknown;  /**< Computations and steps reported with unknown energy. */
  int64_t reports_rejected; /**< Reports the server refused one by one. */
  int64_t reports_foreign_duplicates; /**< First posts the server already had (another process as this rank?). */
} perseus_client_stats;

/** One computation of the plan in use (see perseus_client_get_plan). Fields are only appended
 *  in later versions; perseus_plan_info.instruction_size tells the library the caller's size. */
typedef struct perseus_plan_instruction {
  int32_t kind;             /**< 0 forward, 1 backward, 2 backward_input, 3 backward_weight. */
  int32_t stage;            /**< Pipeline stage. */
  int32_t microbatch;       /**< Microbatch index within the iteration, 0-based. */
  int32_t freq_mhz;         /**< SM clock the client applies for it, MHz (a supported clock). */
  int32_t planned_freq_mhz; /**< The server's clock when it was snapped to freq_mhz, MHz (0 = not snapped). */
} perseus_plan_instruction;

/** The plan in use, as the client validated it (see perseus_client_get_plan). */
typedef struct perseus_plan_info {
  uint32_t struct_size;     /**< sizeof(perseus_plan_info); set by the caller. */
  uint32_t instruction_size;/**< sizeof(perseus_plan_instruction); set by the caller: out[] is
                                 written with this stride (needed only when capacity > 0). */
  int64_t version;          /**< Plan version, -1 = none yet. */
  double iteration_time_s;  /**< Its predicted iteration time, s (0 = unknown). */
  double energy_j;          /**< Its predicted energy of one iteration of the pipeline, J (0 = unknown). */
  uint64_t num_instructions;/**< Computations of one step of this rank, in execution order. */
} perseus_plan_info;

/** Fills *info with the plan in use (the one switched in at the last step begin, or the first
 *  plan before any step) and copies its first min(capacity, info->num_instructions)
 *  computations into out[] (out may be NULL when capacity is 0: ask for the count first). No
 *  network or driver call: the copy the client already checked. Thread-safe (may be called
 *  from a monitoring thread while the training thread runs the hooks). Errors:
 *  INVALID_ARGUMENT (NULL or bad info->struct_size, out NULL with capacity > 0, or capacity
 *  > 0 with a bad info->instruction_size). */
perseus_status perseus_client_get_plan(perseus_client* client, perseus_plan_info* info, perseus_plan_instruction* out,
                                       size_t capacity);

/** Fills *config with defaults (all pointers NULL, backend "nvml"). No-op on NULL. */
void perseus_client_config_init(perseus_client_config* config);

/** Creates a client: loads the GPU backend, starts the clock controller and watchdog,
 *  registers the rank and fetches its plan (waiting up to startup_timeout_s while the server
 *  is unreachable; after that it keeps trying in the background). On success *out is set.
 *  Errors: INVALID_ARGUMENT, GPU, SERVER (e.g. 401 bad token, 404 unknown job), CANCELLED
 *  (config.startup_cancelled returned nonzero), INTERNAL. */
perseus_status perseus_client_create(const perseus_client_config* config, perseus_client** out);

/** Flushes pending reports (bounded by request_timeout_s), resets the GPU clocks, stops the
 *  threads and frees the client. NULL is accepted. Always PERSEUS_OK unless a bug.
 *  In a fork()ed child of the creating process the handle is the parent's: destroy does nothing
 *  there, and every other call fails with PERSEUS_ERR_STATE (the client's threads do not exist
 *  in the child and its GPU clocks are the parent's to reset). */
perseus_status perseus_client_destroy(perseus_client* client);

/** Starts an iteration; switches in a newer plan if one was fetched. Errors: INVALID_ARGUMENT
 *  (NULL client), STATE (inside a step), SERVER (at every step once the server refused this
 *  rank's registration for good, e.g. 409: its slot is registered with other coordinates; the
 *  clocks are then never touched), INTERNAL. */
perseus_status perseus_client_step_begin(perseus_client* client);
/** Ends the iteration and queues its report (asynchronous). Errors: INVALID_ARGUMENT (NULL
 *  client), STATE, PLAN_MISMATCH (fewer computations than planned; the report is still
 *  queued), INTERNAL. */
perseus_status perseus_client_step_end(perseus_client* client);
/** A computation named `name` ("forward", "backward", "backward_input", "backward_weight")
 *  starts: checks it against the plan and requests its clock (non-blocking).
 *  Errors: INVALID_ARGUMENT (NULL client or name), STATE, PLAN_MISMATCH (the rest of the step
 *  then runs without clock changes), INTERNAL. */
perseus_status perseus_client_instruction_begin(perseus_client* client, const char* name);
/** The computation ended: records its time and energy. Errors: INVALID_ARGUMENT (NULL client
 *  or name), STATE, INTERNAL. */
perseus_status perseus_client_instruction_end(perseus_client* client, const char* name);

/** Simulated backend only: runs the current computation on the simulated GPU (sleeps its
 *  profile time x sim_time_scale at the current clock). *time_s (may be NULL) receives the
 *  simulated duration, s. Errors: UNSUPPORTED (other backends), STATE (no computation running),
 *  INVALID_ARGUMENT (NULL client, or the running computation's name is not forward, backward,
 *  backward_input or backward_weight), GPU (the profile has no points for it on this stage),
 *  INTERNAL. */
perseus_status perseus_client_simulate_compute(perseus_client* client, double* time_s);

/** Waits until the clock controller handled every queued clock request (so applied_mhz in
 *  perseus_client_get_stats is settled), then until every queued report is accepted, within
 *  timeout_s (s, in [0, 1e6]) in all. Errors: INVALID_ARGUMENT (NULL client; timeout_s negative,
 *  NaN or > 1e6); GPU when a clock request is still running at the timeout (a backend that does
 *  not answer); SERVER when some reports are still pending; INTERNAL. */
perseus_status perseus_client_flush(perseus_client* client, double timeout_s);

/** Fills *stats (set stats->struct_size first). Errors: INVALID_ARGUMENT. */
perseus_status perseus_client_get_stats(perseus_client* client, perseus_client_stats* stats);

/** Waits until the clock controller handled every request, then writes its log (CSV, or
 *  JSON when path ends in ".json"; columns in docs/client.md). Errors: INVALID_ARGUMENT
 *  (cannot write). */
perseus_status perseus_client_write_freq_log(perseus_client* client, const char* path);

/** Message of the last failed call on this thread ("" if none). Valid until the next call
 *  on this thread. Never NULL. */
const char* perseus_last_error(void);

/** Static name of a status ("PERSEUS_OK", ...). */
const char* perseus_status_string(perseus_status status);

/** PERSEUS_CLIENT_ABI_VERSION of the library actually linked. */
int perseus_client_abi_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PERSEUS_CLIENT_H_ */
