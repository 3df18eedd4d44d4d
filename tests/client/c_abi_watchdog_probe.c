/* Creates one client through the C ABI with the watchdog on (dry-run backend), runs one step and
 * destroys it. Usage: perseus_c_abi_watchdog_probe URL TOKEN JOB. Prints the file the C ABI was
 * loaded from ("library: PATH"), so a test can check that it ran the copy it meant. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "perseus/client.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s URL TOKEN JOB\n", argv[0]);
    return 2;
  }
  Dl_info info;
  perseus_status (*create)(const perseus_client_config*, perseus_client**) = perseus_client_create;
  void* address = NULL;
  memcpy(&address, &create, sizeof address); /* ISO C has no function-to-object pointer cast */
  if (dladdr(address, &info) != 0 && info.dli_fname != NULL) {
    printf("library: %s\n", info.dli_fname);
    fflush(stdout);
  }
  perseus_client_config cfg;
  perseus_client_config_init(&cfg);
  cfg.server_url = argv[1];
  cfg.token = argv[2];
  cfg.job_id = argv[3];
  cfg.backend = "dry-run";
  cfg.enable_watchdog = 1;
  cfg.handle_signals = 0;
  perseus_client* c = NULL;
  if (perseus_client_create(&cfg, &c) != PERSEUS_OK) {
    fprintf(stderr, "create: %s\n", perseus_last_error());
    return 1;
  }
  int bad = perseus_client_step_begin(c) != PERSEUS_OK;
  bad |= perseus_client_instruction_begin(c, "forward") != PERSEUS_OK;
  bad |= perseus_client_instruction_end(c, "forward") != PERSEUS_OK;
  bad |= perseus_client_instruction_begin(c, "backward") != PERSEUS_OK;
  bad |= perseus_client_instruction_end(c, "backward") != PERSEUS_OK;
  bad |= perseus_client_step_end(c) != PERSEUS_OK;
  if (bad) fprintf(stderr, "step: %s\n", perseus_last_error());
  return perseus_client_destroy(c) == PERSEUS_OK && !bad ? 0 : 1;
}
