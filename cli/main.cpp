// `perseus`: command-line entry point. Thin: parsing and printing only; the work is in the libraries.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "usage_hints.hpp"

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
  // `perseus frobnicate --help` would print the general help and exit 0: name the command first.
  if (const auto unknown = perseus::cli::unknown_subcommand_message(app, argc, argv)) {
    fmt::print(stderr, "perseus: error: {}\n", *unknown);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // Unknown options: name each, with "did you mean" for a typo (CLI11 lists them as
    // "arguments were not expected", values included).
    const auto unknown = perseus::cli::unknown_option_messages(app, argc, argv);
    if (unknown.empty()) {
      app.exit(e);
    } else {
      for (const auto& m : unknown) fmt::print(stderr, "perseus {}: error: {}\n", argv[1], m);
      fmt::print(stderr, "Run perseus {} --help for the options.\n", argv[1]);
    }
    return 2;  // usage errors: exit status 2
  } catch (const perseus::InputError& e) {
    fmt::print(stderr, "perseus: error: {}\n", perseus::cli::phrase_input_error(e));
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "perseus: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
