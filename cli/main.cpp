// `perseus`: command-line entry point. Thin: parsing and printing only; the work is in the libraries.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Perseus: remove energy bloat from pipeline-parallel training by planning GPU frequencies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "perseus 0.1.0");
  perseus::cli::register_optimize(app);
  perseus::cli::register_emulate(app);
  perseus::cli::register_validate(app);
  perseus::cli::register_report(app);
  perseus::cli::register_schedule(app);
#ifdef HAVE_PERSEUS_SERVER
  perseus::cli::register_serve(app);
#endif
#ifdef HAVE_PERSEUS_CLIENT
  perseus::cli::register_monitor(app);
#endif
#ifdef HAVE_PERSEUS_GPUD
  perseus::cli::register_gpud(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // usage errors: exit status 2
  } catch (const perseus::InputError& e) {
    fmt::print(stderr, "perseus: error: {}\n", e.phrased(perseus::cli::flag_for_field));
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
