// `perseus`: command-line entry point. Thin: parsing and printing only; the work is in the libraries.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string_view>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "usage_hints.hpp"

namespace {

/// Commands that write output files: on SIGINT, SIGTERM or SIGHUP they exit (status 128 +
/// signal) without leaving a hidden `.NAME.partial-PID` folder or `.NAME.tmp-PID` file behind.
/// The signals are blocked in every thread and taken by one thread with sigwait(), which
/// removes the unfinished outputs (after a commit in progress) and ends the process. Commands
/// with their own signal handling (serve, gpud, monitor) are left alone.
void exit_cleanly_on_signals(int argc, char** argv) {
  if (argc < 2) return;
  const std::string_view cmd = argv[1];
  if (cmd != "optimize" && cmd != "emulate" && cmd != "report" && cmd != "schedule" && cmd != "validate") return;
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which the output code
  // reports and cleans up after, instead of ending the process mid-write.
  ::signal(SIGXFSZ, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;  // then the default action, as before
  std::thread([set] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    perseus::remove_unfinished_outputs();
    const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    const std::string msg = fmt::format("perseus: interrupted ({}); unfinished output removed\n", name);
    (void)!::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(128 + sig);
  }).detach();
}

/// A failure after a signal began the exit (a plan file written into the temporary folder the
/// signal thread just removed) is a consequence of the interruption, not an error: leave the
/// message and the exit status to that thread, which _exit()s right after the removal.
void wait_if_interrupted() {
  if (!perseus::outputs_interrupted()) return;
  for (;;) ::pause();
}

/// Exit status once a command is done: 1 when anything it wrote to stdout did not arrive
/// (`--out -` into a full disk or a closed pipe), which would otherwise pass as success.
int stdout_status() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout)) return 0;
  fmt::print(stderr, "perseus: error: cannot write to standard output: {}\n",
             err != 0 ? std::strerror(err) : "a write failed");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  exit_cleanly_on_signals(argc, argv);
  CLI::App app{"Perseus: remove energy bloat from pipeline-parallel training by planning GPU frequencies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "perseus 0.1.0");
  // CLI11 quotes no value it echoes (a file name in "File does not exist: ..."): escaped here.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return perseus::terminal_safe(CLI::FailureMessage::simple(a, e));
  });
  app.footer("docs/*.md named in this help: the source tree's docs/, installed to <prefix>/share/doc/perseus/");
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
    // An option given twice: CLI11 says "--stages: At Most 1 required but received 2".
    if (const auto twice = perseus::cli::repeated_option_message(e.what())) {
      fmt::print(stderr, "perseus {}: error: {}\nRun perseus {} --help for the options.\n", argv[1], *twice, argv[1]);
      return 2;
    }
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
    wait_if_interrupted();
    fmt::print(stderr, "perseus: error: {}\n", perseus::terminal_safe(perseus::cli::phrase_input_error(e)));
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // Not a bug: an input path the file system refuses to resolve (a symbolic-link loop, a
    // name too long, no permission on a folder) where a reader asked about it without
    // expecting that.
    wait_if_interrupted();
    fmt::print(stderr, "perseus: error: {}: {}\n", perseus::quote_input(e.path1().string(), 200),
               e.code().message());
    return 1;
  } catch (const std::bad_alloc&) {
    // Not a bug: the documented ranges allow problems larger than this machine's memory.
    wait_if_interrupted();
    fmt::print(stderr, "perseus: error: out of memory: the problem needs more memory than this process may "
                       "use; use fewer microbatches or stages (or raise the memory limit)\n");
    return 1;
  } catch (const std::exception& e) {
    wait_if_interrupted();
    fmt::print(stderr, "perseus: internal error: {}\n", perseus::terminal_safe(e.what()));
    return 3;
  }
  return stdout_status();
}
