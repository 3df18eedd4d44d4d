/* A fake librocm_smi64.so for tests: exports the ROCm SMI symbols the Perseus rocm-smi backend
 * uses (types from Debian's rocm_smi/rocm_smi.h) and appends one line per call,
 * "<pid> <function> <args...>", to $FAKE_RSMI_LOG (if set). Knobs (environment):
 *   FAKE_RSMI_DEVICES     number of GPUs (default 1)
 *   FAKE_RSMI_PERMISSION  if set, the perf-level and clock setters answer RSMI_STATUS_PERMISSION
 *   FAKE_RSMI_NO_ENERGY   if set, rsmi_dev_energy_count_get answers RSMI_STATUS_NOT_SUPPORTED
 *   FAKE_RSMI_STATE_DIR   if set, GPU i's performance state is kept in <dir>/level_<i>: absent =
 *                         AUTO, else "manual <MHz of the single enabled sclk level>" (or
 *                         "manual mask <hex>" for a mask of several levels), so that tests see
 *                         clocks that outlive the process that set them
 * The GPU: sclk DPM levels 500, 800, 1100, 1400, 1700 MHz (reported in Hz, as ROCm SMI does);
 * 100 W constant: the energy counter counts CLOCK_MONOTONIC ms x 100 mJ in units of the
 * resolution 15.259 uJ; average power 100 W (in uW). rsmi_dev_gpu_clk_freq_set fails with
 * RSMI_STATUS_INVALID_ARGS unless the performance level is MANUAL (as the driver refuses a
 * mask in AUTO), or when the mask is 0 or names a level that does not exist. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rocm_smi/rocm_smi.h>

static const uint64_t kLevelsMhz[] = {500, 800, 1100, 1400, 1700};
#define NUM_LEVELS 5
#define RESOLUTION_UJ 15.259f

static void record(const char* fmt, ...) {
  const char* path = getenv("FAKE_RSMI_LOG");
  if (path == NULL || *path == '\0') return;
  char line[512];
  int n = snprintf(line, sizeof line, "%d ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

static int num_devices(void) {
  const char* v = getenv("FAKE_RSMI_DEVICES");
  return (v != NULL && *v != '\0') ? atoi(v) : 1;
}
static int bad_device(uint32_t dv) { return dv >= (uint32_t)num_devices(); }

static int state_path(uint32_t dv, char* buf, size_t n) {
  const char* dir = getenv("FAKE_RSMI_STATE_DIR");
  if (dir == NULL || *dir == '\0') return 0;
  snprintf(buf, n, "%s/level_%u", dir, dv);
  return 1;
}
/* 1 when GPU dv is in MANUAL (state file exists). Without a state dir, per process. */
static int g_manual[64];
static int is_manual(uint32_t dv) {
  char p[512];
  if (state_path(dv, p, sizeof p)) return access(p, F_OK) == 0;
  return dv < 64 && g_manual[dv];
}
static void write_state(uint32_t dv, const char* text) {
  char p[512];
  if (dv < 64) g_manual[dv] = text != NULL;
  if (!state_path(dv, p, sizeof p)) return;
  if (text == NULL) {
    unlink(p);
    return;
  }
  FILE* f = fopen(p, "w");
  if (f != NULL) {
    fprintf(f, "%s\n", text);
    fclose(f);
  }
}

rsmi_status_t rsmi_init(uint64_t flags) {
  record("rsmi_init %llu", (unsigned long long)flags);
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_shut_down(void) {
  record("rsmi_shut_down");
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_status_string(rsmi_status_t status, const char** text) {
  switch (status) {
    case RSMI_STATUS_SUCCESS: *text = "RSMI_STATUS_SUCCESS: The function has been executed successfully."; break;
    case RSMI_STATUS_PERMISSION: *text = "RSMI_STATUS_PERMISSION: The user ID of the calling process does not have sufficient permission"; break;
    case RSMI_STATUS_NOT_SUPPORTED: *text = "RSMI_STATUS_NOT_SUPPORTED: The requested information is not supported"; break;
    case RSMI_STATUS_INVALID_ARGS: *text = "RSMI_STATUS_INVALID_ARGS: Invalid arguments"; break;
    default: *text = "fake: other error"; break;
  }
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_num_monitor_devices(uint32_t* n) {
  *n = (uint32_t)num_devices();
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t* id) {
  if (bad_device(dv)) return RSMI_STATUS_INVALID_ARGS;
  *id = 0xfa4e000000000000ull + dv;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv, rsmi_clk_type_t type, rsmi_frequencies_t* f) {
  record("rsmi_dev_gpu_clk_freq_get %u %d", dv, (int)type);
  if (bad_device(dv) || type != RSMI_CLK_TYPE_SYS) return RSMI_STATUS_INVALID_ARGS;
  memset(f, 0, sizeof *f);
  f->num_supported = NUM_LEVELS;
  for (int i = 0; i < NUM_LEVELS; ++i) f->frequency[i] = kLevelsMhz[i] * 1000000ull;
  f->current = NUM_LEVELS - 1;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_perf_level_set_v1(uint32_t dv, rsmi_dev_perf_level_t level) {
  record("rsmi_dev_perf_level_set_v1 %u %d", dv, (int)level);
  if (bad_device(dv)) return RSMI_STATUS_INVALID_ARGS;
  if (getenv("FAKE_RSMI_PERMISSION") != NULL) return RSMI_STATUS_PERMISSION;
  if (level == RSMI_DEV_PERF_LEVEL_AUTO) {
    write_state(dv, NULL);
  } else if (level == RSMI_DEV_PERF_LEVEL_MANUAL) {
    if (!is_manual(dv)) write_state(dv, "manual");
  } else {
    return RSMI_STATUS_INVALID_ARGS;
  }
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_gpu_clk_freq_set(uint32_t dv, rsmi_clk_type_t type, uint64_t mask) {
  record("rsmi_dev_gpu_clk_freq_set %u %d 0x%llx", dv, (int)type, (unsigned long long)mask);
  if (bad_device(dv) || type != RSMI_CLK_TYPE_SYS) return RSMI_STATUS_INVALID_ARGS;
  if (getenv("FAKE_RSMI_PERMISSION") != NULL) return RSMI_STATUS_PERMISSION;
  if (!is_manual(dv) || mask == 0 || (mask >> NUM_LEVELS) != 0) return RSMI_STATUS_INVALID_ARGS;
  char text[64];
  if ((mask & (mask - 1)) == 0) {
    int level = __builtin_ctzll(mask);
    snprintf(text, sizeof text, "manual %llu", (unsigned long long)kLevelsMhz[level]);
  } else {
    snprintf(text, sizeof text, "manual mask 0x%llx", (unsigned long long)mask);
  }
  write_state(dv, text);
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t* counter, float* resolution, uint64_t* timestamp) {
  if (bad_device(dv)) return RSMI_STATUS_INVALID_ARGS;
  if (getenv("FAKE_RSMI_NO_ENERGY") != NULL) return RSMI_STATUS_NOT_SUPPORTED;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const double ms = (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
  *counter = (uint64_t)(ms * 100.0 * 1000.0 / RESOLUTION_UJ); /* ms x 100 mJ = ms x 1e5 uJ */
  *resolution = RESOLUTION_UJ;
  *timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t* power_uw) {
  if (bad_device(dv) || sensor != 0) return RSMI_STATUS_INVALID_ARGS;
  *power_uw = 100000000ull;
  return RSMI_STATUS_SUCCESS;
}
