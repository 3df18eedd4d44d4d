/* A fake libnvidia-ml.so.1 for tests: exports the NVML symbols the Perseus client uses and
 * appends one line per call, "<pid> <function> <args...>", to the file named by
 * $FAKE_NVML_LOG (if set). Behaviour knobs (environment):
 *   FAKE_NVML_DEVICES      number of GPUs (default 1)
 *   FAKE_NVML_INIT_RESULT  return code of nvmlInit_v2 (default 0 = success)
 *   FAKE_NVML_SET_RESULT   return code of nvmlDeviceSetGpuLockedClocks (default 0)
 *   FAKE_NVML_NO_ENERGY    if set, the energy counter is NOT_SUPPORTED
 *   FAKE_NVML_STATE_DIR    if set, the lock state of GPU i is kept in the file
 *                          <dir>/locked_<i> (holds the locked MHz; absent = unlocked), so that
 *                          tests can see clocks that outlive the process that set them
 *   FAKE_NVML_SCENARIO     a scenario file (below) that plays one misbehaviour
 * Defaults: energy 100 W constant, i.e. CLOCK_MONOTONIC milliseconds x 100 mJ (same in every
 * process); power 100 W; memory clocks 1593 and 405 MHz; graphics 1410..210 step 15 at 1593,
 * {405, 390} at 405; UUID GPU-00000000-0000-0000-0000-00000000000<i>; PCI bus id
 * 00000000:0<i+1>:00.0; name "Fake A100".
 *
 * Scenario file: one directive per line, '#' starts a comment. DEV is a device index or '*'
 * (all devices). READ counts nvmlDeviceGetTotalEnergyConsumption calls on that device since
 * the last nvmlInit_v2 of this process, from 1. The scenario is read at every nvmlInit_v2.
 *   devices N                 number of GPUs (overrides FAKE_NVML_DEVICES)
 *   uuid DEV UUID             the device's UUID ("GPU-..." or a MIG-enabled GPU's UUID)
 *   pci DEV BUSID             the device's PCI bus id, e.g. 00000000:41:00.0
 *   name DEV TEXT             the device's product name (rest of the line)
 *   clocks DEV F1 F2 ...      supported graphics clocks at the highest memory clock, MHz
 *   energy_offset DEV READ MJ from read READ on, add MJ millijoules (may be negative; a later
 *                             directive for a later READ replaces an earlier one)
 *   energy_value DEV READ MJ  from read READ on, the counter reads MJ + (elapsed ms since that
 *                             read) x power (e.g. a value just below 2^32 to play a wrap)
 *   power DEV MW              power draw, mW (also the slope of the energy counter)
 *   not_supported FUNC        FUNC answers NVML_ERROR_NOT_SUPPORTED (3)
 *   missing FUNC              FUNC answers NVML_ERROR_FUNCTION_NOT_FOUND (13), as a driver that
 *                             lacks it
 *   lost DEV READ             from energy read READ on (that read included), every call on
 *                             DEV answers NVML_ERROR_GPU_IS_LOST (15)
 *   delay_ms FUNC MS          FUNC sleeps MS milliseconds before answering (logging "FUNC delayed MS
 *                             ms" when the sleep starts; other calls go on meanwhile, as NVML is
 *                             thread-safe)
 *   block_until FUNC PATH     FUNC waits until the file PATH exists before answering (logging
 *                             "FUNC blocked" when the wait starts): a test's event, not a time
 *   reset_fails_after_set on  nvmlDeviceResetGpuLockedClocks answers NVML_ERROR_UNKNOWN (999) in a
 *                             process that has locked a clock (the trainer), not in one that
 *                             only resets (the watchdog) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct nvmlDevice_st { unsigned index; };

/* nvml.h's nvmlPciInfo_t (v3 layout). */
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

#define MAX_DEV 16
#define MAX_RULES 64
#define MAX_CLOCKS 256

enum { R_OFFSET, R_VALUE };
struct energy_rule { int dev; int kind; unsigned long long read; long long mj; };
struct name_rule { char func[64]; int ms; };

static struct nvmlDevice_st g_devices[MAX_DEV];
static int g_loaded = 0;
static int g_num_devices = 1;
static char g_uuid[MAX_DEV][96];
static char g_pci[MAX_DEV][32];
static char g_name[MAX_DEV][96];
static unsigned g_clocks[MAX_DEV][MAX_CLOCKS];
static unsigned g_num_clocks[MAX_DEV];
static unsigned g_power_mw[MAX_DEV];
static unsigned long long g_lost_call[MAX_DEV];
static unsigned long long g_reads[MAX_DEV];
static struct energy_rule g_rules[MAX_RULES];
static int g_num_rules = 0;
static struct name_rule g_not_supported[MAX_RULES], g_missing[MAX_RULES], g_delay[MAX_RULES];
static int g_num_not_supported = 0, g_num_missing = 0, g_num_delay = 0;
static long long g_value_anchor_ms[MAX_DEV];

static void record(const char* fmt, ...) {
  const char* path = getenv("FAKE_NVML_LOG");
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
  ssize_t w = write(fd, line, (size_t)n); /* one write per line: atomic with O_APPEND */
  (void)w;
  close(fd);
}

static char g_block_func[8][96], g_block_path[8][512]; /* scenario: block_until FUNC PATH */
static int g_num_block = 0;
static int g_reset_fails_after_set = 0; /* scenario: reset_fails_after_set on */
static int g_has_set = 0;               /* this process called nvmlDeviceSetGpuLockedClocks */

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return (v != NULL && *v != '\0') ? atoi(v) : dflt;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000ll + (long long)ts.tv_nsec / 1000000ll;
}

static void for_dev(const char* dev, void (*fn)(int, void*), void* arg) {
  if (strcmp(dev, "*") == 0) {
    for (int i = 0; i < MAX_DEV; ++i) fn(i, arg);
  } else {
    int i = atoi(dev);
    if (i >= 0 && i < MAX_DEV) fn(i, arg);
  }
}
static void set_uuid(int i, void* a) { snprintf(g_uuid[i], sizeof g_uuid[i], "%s", (const char*)a); }
static void set_pci(int i, void* a) { snprintf(g_pci[i], sizeof g_pci[i], "%s", (const char*)a); }
static void set_name(int i, void* a) { snprintf(g_name[i], sizeof g_name[i], "%s", (const char*)a); }
static void set_power(int i, void* a) { g_power_mw[i] = *(unsigned*)a; }
static void set_lost(int i, void* a) { g_lost_call[i] = *(unsigned long long*)a; }
struct clock_list { unsigned n; unsigned v[MAX_CLOCKS]; };
static void set_clocks(int i, void* a) {
  const struct clock_list* c = (const struct clock_list*)a;
  g_num_clocks[i] = c->n;
  memcpy(g_clocks[i], c->v, sizeof c->v);
}

static void add_name_rule(struct name_rule* rules, int* n, const char* func, int ms) {
  if (*n >= MAX_RULES) return;
  snprintf(rules[*n].func, sizeof rules[*n].func, "%s", func);
  rules[*n].ms = ms;
  ++*n;
}

static void load(void) {
  if (g_loaded) return;
  g_loaded = 1;
  g_num_devices = env_int("FAKE_NVML_DEVICES", 1);
  for (int i = 0; i < MAX_DEV; ++i) {
    snprintf(g_uuid[i], sizeof g_uuid[i], "GPU-00000000-0000-0000-0000-%012d", i);
    snprintf(g_pci[i], sizeof g_pci[i], "00000000:%02X:00.0", i + 1);
    snprintf(g_name[i], sizeof g_name[i], "Fake A100");
    g_num_clocks[i] = 0;
    for (unsigned f = 1410; f >= 210; f -= 15) g_clocks[i][g_num_clocks[i]++] = f;
    g_power_mw[i] = 100000;
  }
  const char* path = getenv("FAKE_NVML_SCENARIO");
  if (path == NULL || *path == '\0') return;
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "fake NVML: cannot open scenario %s\n", path);
    return;
  }
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    char* hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char* save = NULL;
    char* key = strtok_r(line, " \t\r\n", &save);
    if (key == NULL) continue;
    char* dev = strtok_r(NULL, " \t\r\n", &save);
    if (dev == NULL) continue;
    if (strcmp(key, "devices") == 0) {
      g_num_devices = atoi(dev);
    } else if (strcmp(key, "uuid") == 0 || strcmp(key, "pci") == 0) {
      char* v = strtok_r(NULL, " \t\r\n", &save);
      if (v != NULL) for_dev(dev, key[0] == 'u' ? set_uuid : set_pci, v);
    } else if (strcmp(key, "name") == 0) {
      char* v = strtok_r(NULL, "\r\n", &save);
      if (v != NULL) for_dev(dev, set_name, v);
    } else if (strcmp(key, "clocks") == 0) {
      struct clock_list c;
      c.n = 0;
      char* v;
      while ((v = strtok_r(NULL, " \t\r\n", &save)) != NULL && c.n < MAX_CLOCKS) c.v[c.n++] = (unsigned)atoi(v);
      for_dev(dev, set_clocks, &c);
    } else if (strcmp(key, "energy_offset") == 0 || strcmp(key, "energy_value") == 0) {
      char* r = strtok_r(NULL, " \t\r\n", &save);
      char* v = strtok_r(NULL, " \t\r\n", &save);
      if (r == NULL || v == NULL || g_num_rules >= MAX_RULES) continue;
      struct energy_rule* e = &g_rules[g_num_rules++];
      e->dev = strcmp(dev, "*") == 0 ? -1 : atoi(dev);
      e->kind = key[7] == 'o' ? R_OFFSET : R_VALUE;
      e->read = strtoull(r, NULL, 10);
      e->mj = strtoll(v, NULL, 10);
    } else if (strcmp(key, "power") == 0) {
      unsigned mw = (unsigned)strtoul(strtok_r(NULL, " \t\r\n", &save) ?: "0", NULL, 10);
      for_dev(dev, set_power, &mw);
    } else if (strcmp(key, "lost") == 0) {
      unsigned long long c = strtoull(strtok_r(NULL, " \t\r\n", &save) ?: "1", NULL, 10);
      for_dev(dev, set_lost, &c);
    } else if (strcmp(key, "not_supported") == 0) {
      add_name_rule(g_not_supported, &g_num_not_supported, dev, 0);
    } else if (strcmp(key, "missing") == 0) {
      add_name_rule(g_missing, &g_num_missing, dev, 0);
    } else if (strcmp(key, "reset_fails_after_set") == 0) {
      g_reset_fails_after_set = strcmp(dev, "on") == 0;
    } else if (strcmp(key, "block_until") == 0) {
      char* v = strtok_r(NULL, " \t\r\n", &save);
      if (v != NULL && g_num_block < 8) {
        snprintf(g_block_func[g_num_block], sizeof g_block_func[0], "%s", dev);
        snprintf(g_block_path[g_num_block], sizeof g_block_path[0], "%s", v);
        ++g_num_block;
      }
    } else if (strcmp(key, "delay_ms") == 0) {
      char* v = strtok_r(NULL, " \t\r\n", &save);
      add_name_rule(g_delay, &g_num_delay, dev, v != NULL ? atoi(v) : 0);
    } else {
      fprintf(stderr, "fake NVML: unknown scenario directive '%s'\n", key);
    }
  }
  fclose(f);
}

static const struct name_rule* find_rule(const struct name_rule* rules, int n, const char* func) {
  for (int i = 0; i < n; ++i)
    if (strcmp(rules[i].func, func) == 0) return &rules[i];
  return NULL;
}

/* The fake's state (scenario, counters) is shared by the threads of a client, as NVML's is. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* Common prologue of every function: scenario rules by name. Returns -1 to go on. The delay
 * is slept outside the lock, so other threads' calls are not held up by it. */
static int scripted(const char* func) {
  pthread_mutex_lock(&g_mu);
  load();
  const struct name_rule* d = find_rule(g_delay, g_num_delay, func);
  const int delay_ms = d != NULL ? d->ms : 0;
  int rc = -1;
  if (find_rule(g_missing, g_num_missing, func) != NULL) rc = 13;
  else if (find_rule(g_not_supported, g_num_not_supported, func) != NULL) rc = 3;
  char block_path[512] = "";
  for (int k = 0; k < g_num_block; ++k)
    if (strcmp(g_block_func[k], func) == 0) snprintf(block_path, sizeof block_path, "%s", g_block_path[k]);
  pthread_mutex_unlock(&g_mu);
  if (block_path[0] != '\0') {
    record("%s blocked", func);
    while (access(block_path, F_OK) != 0) usleep(1000);
  }
  if (delay_ms > 0) {
    record("%s delayed %d ms", func, delay_ms);
    usleep((useconds_t)delay_ms * 1000u);
  }
  return rc;
}

/* Prologue of device functions: counts the call and plays "lost". */
static int device_call(nvmlDevice_t d, const char* func) {
  int rc = scripted(func);
  if (d == NULL || d->index >= MAX_DEV) return 2;
  const unsigned i = d->index;
  pthread_mutex_lock(&g_mu);
  if (strcmp(func, "nvmlDeviceGetTotalEnergyConsumption") == 0) ++g_reads[i];
  if (g_lost_call[i] > 0 && g_reads[i] >= g_lost_call[i]) rc = 15;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static unsigned device_index(nvmlDevice_t d) { return d != NULL ? d->index : 9999u; }

static int num_devices(void) {
  pthread_mutex_lock(&g_mu);
  load();
  const int n = g_num_devices;
  pthread_mutex_unlock(&g_mu);
  return n;
}

nvmlReturn_t nvmlInit_v2(void) {
  /* Every session re-reads the scenario (tests change it between clients of one process). */
  pthread_mutex_lock(&g_mu);
  g_loaded = 0;
  g_num_rules = g_num_not_supported = g_num_missing = g_num_delay = g_num_block = 0;
  g_reset_fails_after_set = 0;
  memset(g_reads, 0, sizeof g_reads);
  memset(g_lost_call, 0, sizeof g_lost_call);
  load();
  pthread_mutex_unlock(&g_mu);
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
    case 6: return "Not Found";
    case 9: return "Driver Not Loaded";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  record("nvmlDeviceGetCount_v2");
  int rc = scripted("nvmlDeviceGetCount_v2");
  if (rc >= 0) return rc;
  *count = (unsigned)num_devices();
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  record("nvmlDeviceGetHandleByIndex_v2 %u", index);
  int rc = scripted("nvmlDeviceGetHandleByIndex_v2");
  if (rc >= 0) return rc;
  if (index >= (unsigned)num_devices() || index >= MAX_DEV) return 2;
  g_devices[index].index = index;
  *device = &g_devices[index];
  return 0;
}

static nvmlReturn_t copy_string(const char* value, char* out, unsigned length) {
  if (out == NULL || strlen(value) + 1 > length) return 7;
  memcpy(out, value, strlen(value) + 1);
  return 0;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  record("nvmlDeviceGetUUID %u", device_index(d));
  int rc = device_call(d, "nvmlDeviceGetUUID");
  if (rc >= 0) return rc;
  return copy_string(g_uuid[d->index], uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  record("nvmlDeviceGetName %u", device_index(d));
  int rc = device_call(d, "nvmlDeviceGetName");
  if (rc >= 0) return rc;
  return copy_string(g_name[d->index], name, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  record("nvmlDeviceGetPciInfo_v3 %u", device_index(d));
  int rc = device_call(d, "nvmlDeviceGetPciInfo_v3");
  if (rc >= 0) return rc;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", g_pci[d->index]);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", g_pci[d->index] + 4);
  return 0;
}

static char* lock_file(unsigned i, char* buf, size_t n) {
  const char* dir = getenv("FAKE_NVML_STATE_DIR");
  if (dir == NULL || *dir == '\0') return NULL;
  snprintf(buf, n, "%s/locked_%u", dir, i);
  return buf;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int min_mhz, unsigned int max_mhz) {
  record("nvmlDeviceSetGpuLockedClocks %u %u %u", device_index(d), min_mhz, max_mhz);
  g_has_set = 1;
  int rc = device_call(d, "nvmlDeviceSetGpuLockedClocks");
  if (rc >= 0) return rc;
  rc = env_int("FAKE_NVML_SET_RESULT", 0);
  char path[512];
  if (rc == 0 && lock_file(d->index, path, sizeof path) != NULL) {
    FILE* f = fopen(path, "w");
    if (f != NULL) {
      fprintf(f, "%u\n", max_mhz);
      fclose(f);
    }
  }
  return rc;
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
  record("nvmlDeviceResetGpuLockedClocks %u", device_index(d));
  int rc = device_call(d, "nvmlDeviceResetGpuLockedClocks");
  if (rc >= 0) return rc;
  if (g_reset_fails_after_set && g_has_set) return 999; /* NVML_ERROR_UNKNOWN */
  char path[512];
  if (lock_file(d->index, path, sizeof path) != NULL) unlink(path);
  return 0;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int* count, unsigned int* clocks) {
  record("nvmlDeviceGetSupportedMemoryClocks %u %u", device_index(d), *count);
  int rc = device_call(d, "nvmlDeviceGetSupportedMemoryClocks");
  if (rc >= 0) return rc;
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
  int rc = device_call(d, "nvmlDeviceGetSupportedGraphicsClocks");
  if (rc >= 0) return rc;
  if (mem_mhz == 405) {
    if (*count < 2) { *count = 2; return 7; }
    clocks[0] = 405;
    clocks[1] = 390;
    *count = 2;
    return 0;
  }
  if (mem_mhz != 1593) return 2;
  const unsigned n = g_num_clocks[d->index];
  if (*count < n) { *count = n; return 7; }
  for (unsigned i = 0; i < n; ++i) clocks[i] = g_clocks[d->index][i];
  *count = n;
  return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* energy_mj) {
  int rc = device_call(d, "nvmlDeviceGetTotalEnergyConsumption");
  if (rc >= 0) return rc;
  if (getenv("FAKE_NVML_NO_ENERGY") != NULL) return 3;
  const unsigned i = d->index;
  pthread_mutex_lock(&g_mu);
  const unsigned long long read = g_reads[i];
  const long long ms = now_ms();
  long long value = ms * (long long)(g_power_mw[i] / 1000u);
  const struct energy_rule* best = NULL;
  for (int k = 0; k < g_num_rules; ++k) {
    const struct energy_rule* r = &g_rules[k];
    if ((r->dev == -1 || r->dev == (int)i) && r->read <= read && (best == NULL || r->read >= best->read)) best = r;
  }
  if (best != NULL && best->kind == R_OFFSET) value += best->mj;
  if (best != NULL && best->kind == R_VALUE) {
    if (read == best->read) g_value_anchor_ms[i] = ms;
    value = best->mj + (ms - g_value_anchor_ms[i]) * (long long)(g_power_mw[i] / 1000u);
  }
  *energy_mj = (unsigned long long)value;
  pthread_mutex_unlock(&g_mu);
  if (g_num_rules > 0) record("nvmlDeviceGetTotalEnergyConsumption %u read %llu -> %llu", i, read, *energy_mj);
  return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int* power_mw) {
  int rc = device_call(d, "nvmlDeviceGetPowerUsage");
  if (rc >= 0) return rc;
  *power_mw = g_power_mw[d->index];
  return 0;
}
