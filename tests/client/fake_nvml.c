/* A fake libnvidia-ml.so.1 for tests: exports the NVML symbols the Perseus client uses and
 * appends one line per call, "<pid> <function> <args...>", to the file named by
 * $FAKE_NVML_LOG (if set). Behaviour knobs (environment):
 *   FAKE_NVML_DEVICES      number of GPUs (default 1)
 *   FAKE_NVML_INIT_RESULT  return code of nvmlInit_v2 (default 0 = success)
 *   FAKE_NVML_SET_RESULT   return code of nvmlDeviceSetGpuLockedClocks (default 0)
 *   FAKE_NVML_NO_ENERGY    if set, the energy counter is NOT_SUPPORTED
 * Energy: 100 W constant, i.e. CLOCK_MONOTONIC milliseconds x 100 mJ (same in every process).
 * Clocks: memory 1593 and 405 MHz; graphics 1410..210 step 15 at 1593, {405, 390} at 405. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlDevice_st { unsigned index; };

static struct nvmlDevice_st g_devices[16];

static void record(const char* fmt, ...) {
  const char* path = getenv("FAKE_NVML_LOG");
  if (path == NULL || *path == '\0') return;
  char line[512];
  int n = snprintf(line, sizeof line, "%d ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  line[n++] = '\n';
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)n); /* one write per line: atomic with O_APPEND */
  (void)w;
  close(fd);
}

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return (v != NULL && *v != '\0') ? atoi(v) : dflt;
}

static unsigned device_index(nvmlDevice_t d) { return d != NULL ? d->index : 9999u; }

nvmlReturn_t nvmlInit_v2(void) {
  record("nvmlInit_v2");
  return env_int("FAKE_NVML_INIT_RESULT", 0);
}

nvmlReturn_t nvmlShutdown(void) {
  record("nvmlShutdown");
  return 0;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0: return "Success";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  record("nvmlDeviceGetCount_v2");
  *count = (unsigned)env_int("FAKE_NVML_DEVICES", 1);
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  record("nvmlDeviceGetHandleByIndex_v2 %u", index);
  if (index >= (unsigned)env_int("FAKE_NVML_DEVICES", 1) || index >= 16) return 2;
  g_devices[index].index = index;
  *device = &g_devices[index];
  return 0;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int min_mhz, unsigned int max_mhz) {
  record("nvmlDeviceSetGpuLockedClocks %u %u %u", device_index(d), min_mhz, max_mhz);
  return env_int("FAKE_NVML_SET_RESULT", 0);
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
  record("nvmlDeviceResetGpuLockedClocks %u", device_index(d));
  return 0;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int* count, unsigned int* clocks) {
  record("nvmlDeviceGetSupportedMemoryClocks %u %u", device_index(d), *count);
  if (*count < 2) {
    *count = 2;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  clocks[0] = 1593;
  clocks[1] = 405;
  *count = 2;
  return 0;
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int mem_mhz, unsigned int* count,
                                                  unsigned int* clocks) {
  record("nvmlDeviceGetSupportedGraphicsClocks %u %u", device_index(d), mem_mhz);
  if (mem_mhz == 405) {
    if (*count < 2) { *count = 2; return 7; }
    clocks[0] = 405;
    clocks[1] = 390;
    *count = 2;
    return 0;
  }
  if (mem_mhz != 1593) return 2;
  unsigned n = (1410 - 210) / 15 + 1;
  if (*count < n) { *count = n; return 7; }
  for (unsigned i = 0; i < n; ++i) clocks[i] = 1410 - 15 * i;
  *count = n;
  return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* energy_mj) {
  (void)d;
  if (getenv("FAKE_NVML_NO_ENERGY") != NULL) return 3;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const unsigned long long ms = (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
  *energy_mj = ms * 100ull; /* 100 W */
  return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* power_mw) {
  (void)d;
  *power_mw = 100000;
  return 0;
}
