/* The C ABI from plain C (C11). Usage: perseus_c_abi_test URL TOKEN JOB DIR.
 * The server must give rank 0 the plan [forward 1200, backward 1005]. Exit 0 = all passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perseus/client.h"

static int failures = 0;
#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, \
              #cond, perseus_last_error());                                              \
      ++failures;                                                                        \
    }                                                                                    \
  } while (0)

static perseus_status instr(perseus_client* c, const char* name) {
  perseus_status s = perseus_client_instruction_begin(c, name);
  perseus_status e = perseus_client_instruction_end(c, name);
  return s != PERSEUS_OK ? s : e;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s URL TOKEN JOB DIR\n", argv[0]);
    return 2;
  }
  char gpu_log[1024], freq_log[1024];
  snprintf(gpu_log, sizeof gpu_log, "%s/gpu.log", argv[4]);
  snprintf(freq_log, sizeof freq_log, "%s/freq.csv", argv[4]);

  CHECK(perseus_client_abi_version() == PERSEUS_CLIENT_ABI_VERSION);
  CHECK(strcmp(perseus_status_string(PERSEUS_ERR_PLAN_MISMATCH), "PERSEUS_ERR_PLAN_MISMATCH") == 0);

  perseus_client_config cfg;
  perseus_client_config_init(&cfg);
  perseus_client* c = NULL;
  /* Missing required fields: a status and a message, no crash. */
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(c == NULL);
  CHECK(strlen(perseus_last_error()) > 0);
  CHECK(perseus_client_create(NULL, &c) == PERSEUS_ERR_INVALID_ARGUMENT);

  cfg.server_url = argv[1];
  cfg.token = argv[2];
  cfg.job_id = argv[3];
  cfg.backend = "no-such-backend";
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(strstr(perseus_last_error(), "no-such-backend") != NULL);
  /* An infinite duration or scale is refused by name (a deadline from it would overflow). */
  cfg.backend = "dry-run";
  cfg.startup_timeout_s = 1.0 / 0.0;
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(strstr(perseus_last_error(), "startup_timeout_s must be a number of seconds <= 1e+06") != NULL);
  cfg.startup_timeout_s = 10.0;
  cfg.request_timeout_s = 1e300;
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(strstr(perseus_last_error(), "request_timeout_s must be a number in [0, 1e+06]") != NULL);
  cfg.request_timeout_s = 5.0;
  cfg.sim_time_scale = 1e300;
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(strstr(perseus_last_error(), "sim_time_scale must be a number in [0, 1e+06]") != NULL);
  cfg.sim_time_scale = 1.0;
  cfg.backend = "no-such-backend";

  cfg.backend = "dry-run";
  cfg.dry_run_log_path = gpu_log;
  cfg.plan_poll_interval_s = 0.05;
  cfg.enable_watchdog = 0;
  cfg.handle_signals = 0;
  cfg.coalesce_clock_requests = 0;
  cfg.token = "wrong";
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_ERR_SERVER);
  CHECK(strstr(perseus_last_error(), "401") != NULL);

  cfg.token = argv[2];
  CHECK(perseus_client_create(&cfg, &c) == PERSEUS_OK);
  if (c == NULL) return 1;

  /* One correct step. */
  CHECK(perseus_client_step_begin(c) == PERSEUS_OK);
  CHECK(instr(c, "forward") == PERSEUS_OK);
  CHECK(instr(c, "backward") == PERSEUS_OK);
  CHECK(perseus_client_step_end(c) == PERSEUS_OK);

  /* The plan in use: count first, then copy (forward then backward of microbatch 0). */
  {
    perseus_plan_info info;
    perseus_plan_instruction got[4];
    memset(&info, 0, sizeof info);
    CHECK(perseus_client_get_plan(c, &info, NULL, 1) == PERSEUS_ERR_INVALID_ARGUMENT); /* struct_size unset */
    info.struct_size = sizeof info;
    CHECK(perseus_client_get_plan(c, &info, NULL, 1) == PERSEUS_ERR_INVALID_ARGUMENT); /* NULL out, capacity 1 */
    CHECK(perseus_client_get_plan(c, &info, NULL, 0) == PERSEUS_OK); /* the count needs no instruction_size */
    CHECK(perseus_client_get_plan(c, &info, got, 1) == PERSEUS_ERR_INVALID_ARGUMENT); /* instruction_size unset */
    info.instruction_size = sizeof got[0];
    CHECK(info.version >= 0 && info.num_instructions == 2);
    CHECK(perseus_client_get_plan(c, &info, got, 1) == PERSEUS_OK); /* only the first is copied */
    CHECK(got[0].kind == 0 && got[0].microbatch == 0 && got[0].freq_mhz > 0);
    CHECK(perseus_client_get_plan(c, &info, got, 4) == PERSEUS_OK);
    CHECK(got[1].kind == 1 && got[1].microbatch == 0 && got[1].freq_mhz > 0);
  }

  /* Wrong order: PLAN_MISMATCH with a message naming what the plan expects. */
  CHECK(perseus_client_step_begin(c) == PERSEUS_OK);
  CHECK(perseus_client_instruction_begin(c, "backward") == PERSEUS_ERR_PLAN_MISMATCH);
  CHECK(strstr(perseus_last_error(), "expects 'forward'") != NULL);
  CHECK(perseus_client_instruction_end(c, "backward") == PERSEUS_OK);
  CHECK(perseus_client_step_end(c) == PERSEUS_OK);

  /* Hooks out of order: STATE. */
  CHECK(perseus_client_instruction_end(c, "forward") == PERSEUS_ERR_STATE);
  CHECK(perseus_client_step_end(c) == PERSEUS_ERR_STATE);
  CHECK(perseus_client_instruction_begin(NULL, "forward") == PERSEUS_ERR_INVALID_ARGUMENT);

  /* simulate_compute needs the simulated backend. */
  CHECK(perseus_client_simulate_compute(c, NULL) == PERSEUS_ERR_UNSUPPORTED);

  CHECK(perseus_client_flush(c, 5.0) == PERSEUS_OK);
  perseus_client_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  CHECK(perseus_client_get_stats(c, &st) == PERSEUS_OK);
  CHECK(st.iterations == 2);
  CHECK(st.plan_version == 1);
  CHECK(st.reports_sent == 2);
  CHECK(st.applied_mhz == 1005);
  CHECK(perseus_client_write_freq_log(c, freq_log) == PERSEUS_OK);
  CHECK(perseus_client_write_freq_log(c, "/nonexistent-dir/f.csv") == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(perseus_client_write_freq_log(c, "") == PERSEUS_ERR_INVALID_ARGUMENT);
  CHECK(strstr(perseus_last_error(), "expected a file path, got an empty one") != NULL);
  CHECK(perseus_client_destroy(c) == PERSEUS_OK);
  CHECK(perseus_client_destroy(NULL) == PERSEUS_OK);

  if (failures == 0) printf("c_abi_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
