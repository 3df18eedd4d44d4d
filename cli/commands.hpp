// Subcommands of the `perseus` command. Each cmd_<name>.cpp defines one register function
// that adds its CLI11 subcommand and sets its callback. Callbacks report user errors by
// throwing perseus::InputError (exit 1); CLI11 parse errors exit 2 with usage.
#pragma once

#include <CLI/CLI.hpp>

namespace perseus::cli {

void register_optimize(CLI::App& app);
void register_emulate(CLI::App& app);
void register_validate(CLI::App& app);
void register_report(CLI::App& app);
void register_schedule(CLI::App& app);
#ifdef HAVE_PERSEUS_SERVER
void register_serve(CLI::App& app);
#endif
#ifdef HAVE_PERSEUS_CLIENT
void register_monitor(CLI::App& app);
#endif
#ifdef HAVE_PERSEUS_GPUD
void register_gpud(CLI::App& app);
#endif

}  // namespace perseus::cli
