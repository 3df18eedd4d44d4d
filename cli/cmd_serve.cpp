// `perseus serve`: run the control-plane HTTP server (see docs/http-api.md).
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/core.h>

#include "commands.hpp"
#include "option_checks.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/profile.hpp"
#include "perseus/runtime/job_limits.hpp"
#include "perseus/server/server.hpp"
#include "perseus/server/store.hpp"
#include "perseus/zeus_plan_file.hpp"

namespace perseus::cli {

namespace {

std::string read_text(const std::string& path, const char* what) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  const auto ws = " \t\r\n";
  s.erase(s.find_last_not_of(ws) + 1);
  s.erase(0, s.find_first_not_of(ws));
  return s;
}

/// A warning when group or others may read `path` (a secret accepted as it is: a group may be
/// meant to read it; session 22's trial found a 0644 token and a restored 0644 database silent).
void warn_if_readable_by_others(const std::string& path, const char* what, const char* why) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH)))
    fmt::print(stderr, "perseus serve: WARNING: {} {} is readable by group or others (mode {:04o}): {}; chmod 600 it\n",
               what, path, st.st_mode & 0777, why);
}

/// Refuses a token file another user owns or that group/others may write: whoever can change it
/// can make the server accept their token.
void check_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(fmt::format("{}: cannot read token file: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw InputError(fmt::format("{}: the token file is not a regular file", path));
  if (st.st_uid != ::geteuid())
    throw InputError(fmt::format("{}: token file is owned by uid {}, not by this server (uid {}); refusing it", path,
                                 st.st_uid, ::geteuid()));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw InputError(fmt::format("{}: token file is group- or world-writable (mode {:o}); chmod 600 it", path,
                                 st.st_mode & 0777));
  warn_if_readable_by_others(path, "token file", "whoever reads it has the admin token");
}

/// A token every client can send (runtime::is_sendable_token; `source` names where it came
/// from), else InputError naming the first character no client can send.
void check_token_characters(const std::string& token, const std::string& source) {
  if (runtime::is_sendable_token(token)) return;
  const auto bad = std::find_if(token.begin(), token.end(), [](char c) { return !runtime::is_sendable_token({&c, 1}); });
  throw InputError(fmt::format("{} holds a token with a {} at character {}: no Perseus client can send it (a token is "
                               "printable ASCII without spaces, e.g. `openssl rand -hex 32`)",
                               source, *bad == ' ' ? "space" : "control character or non-ASCII byte",
                               bad - token.begin() + 1));
}

/// The token in the file at `path` (checked by check_token_file()), trimmed; an empty one is
/// named as such, not reported later as "no token given".
std::string token_from_file(const std::string& path) {
  check_token_file(path);
  std::string token = trim(read_text(path, "token file"));
  if (token.empty()) {
    throw InputError(fmt::format("{}: the token file is empty; expected a bearer token of at least 16 characters", path));
  }
  if (token.size() < 16)
    throw InputError(fmt::format("{}: the token in the file has {} characters; expected a bearer token of at least 16",
                                 path, token.size()));
  check_token_characters(token, fmt::format("{}:", path));
  return token;
}

/// Token from --token-file, else $PERSEUS_TOKEN, else the file <db>.token (created with a
/// random token, mode 0600, when missing). Never from argv. Existing token files must pass
/// check_token_file(). An in-memory database (--db :memory:) has no <db>.token: it needs
/// --token-file or $PERSEUS_TOKEN (a usage error otherwise; nothing is written).
/// `*generated` receives the path of a token file this call created ("" otherwise).
std::string resolve_token(const std::string& token_file, const std::string& db_path, std::string* generated) {
  if (!token_file.empty()) return token_from_file(token_file);
  if (const char* env = std::getenv("PERSEUS_TOKEN"); env && *env) {
    std::string token = trim(env);
    if (token.empty()) throw InputError("PERSEUS_TOKEN holds only white space; expected a bearer token of at least 16 characters");
    if (token.size() < 16)
      throw InputError(fmt::format("PERSEUS_TOKEN holds a token of {} characters; expected a bearer token of at least 16",
                                   token.size()));
    check_token_characters(token, "PERSEUS_TOKEN");
    return token;
  }
  if (db_path == ":memory:") {
    throw CLI::ValidationError("--db", ":memory: keeps nothing on disk, so there is no <db>.token to generate the "
                                       "token into; give --token-file FILE or set PERSEUS_TOKEN");
  }
  const std::string path = db_path + ".token";
  if (std::filesystem::exists(path)) {
    std::string token = token_from_file(path);
    fmt::print(stderr, "perseus serve: using the token in {}\n", path);
    return token;
  }
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 8; ++i) token += fmt::format("{:08x}", rd());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw InputError(fmt::format("{}: cannot create the token file: {}", path, std::strerror(errno)));
  const std::string line = token + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!ok) throw InputError(fmt::format("{}: cannot write the token file", path));
  *generated = path;
  return token;
}

/// The texts of the Zeus plan file, or of the folder's *.py files sorted by name; `names`
/// receives their paths.
std::vector<std::string> read_zeus_plans(const std::string& path, std::vector<std::string>& names) {
  std::vector<std::string> texts;
  if (path.empty()) return texts;
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      names.push_back(f.string());
      texts.push_back(read_text(f.string(), "Zeus plan"));
      parse_zeus_plan(texts.back(), f.string());  // a bad file stops the start, naming its line
    }
    if (texts.empty()) throw InputError(fmt::format("{}: no .py plan files", path));
  } else {
    names.push_back(path);
    texts.push_back(read_text(path, "Zeus plan"));
    parse_zeus_plan(texts.back(), path);  // not at the first POST /register_job (500)
  }
  return texts;
}

struct ServeArgs {
  server::ServerOptions opt;
  std::string token_file, zeus_plan, zeus_profile, port_file;
  double max_body_mb = 16;
  std::size_t max_header_kb = 16;
  bool zeus_no_auth = false;
  double zeus_anonymous_max_mb = 64;
};

/// Removes a token file generated by this run unless the server came up: a failed start
/// leaves no <db>.token behind.
struct GeneratedTokenGuard {
  std::string path;
  bool keep = false;
  ~GeneratedTokenGuard() {
    if (!keep && !path.empty()) ::unlink(path.c_str());
  }
};

/// Removes a database this run created (and its -wal and -shm files), and a lock file it
/// created, unless the server came up: a start that fails (e.g. the port is taken, or --db is
/// not a database) leaves no new files behind.
struct CreatedDatabaseGuard {
  std::string path;       // "" when the database existed before (or is :memory:)
  std::string lock_path;  // "" when the lock file existed before
  bool keep = false;
  ~CreatedDatabaseGuard() {
    if (keep) return;
    if (!path.empty())
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
    if (!lock_path.empty()) ::unlink(lock_path.c_str());
  }
};

void run_serve(ServeArgs& a) {
  // A port file that cannot be written stops a server that already came up (and keeps its new
  // database): found now, before anything is created (session 27's trial).
  if (!a.port_file.empty()) check_output_file_writable(a.port_file, /*force=*/true, "port-file");
  a.opt.zeus_plan_texts = read_zeus_plans(a.zeus_plan, a.opt.zeus_plan_names);
  if (!a.zeus_profile.empty()) {
    a.opt.zeus_profile_csv = read_text(a.zeus_profile, "profile");
    parse_profile_csv(a.opt.zeus_profile_csv, a.zeus_profile);  // file, line, field now, not at register_job
  }
  std::error_code ec;
  // A missing folder named the token file, the first thing created there (session 31's trial).
  if (a.opt.db_path != ":memory:") {
    const auto folder = std::filesystem::path(a.opt.db_path).parent_path();
    if (!folder.empty() && !std::filesystem::is_directory(folder, ec))
      throw CLI::ValidationError(
          "--db", fmt::format("{}: {} (the database, its lock and its .token file are created there)", a.opt.db_path,
                              std::filesystem::exists(folder, ec) ? folder.string() + " is not a folder"
                                                                  : "the folder " + folder.string() + " does not exist"));
  }
  CreatedDatabaseGuard created;  // declared before the server: removed after it closed the files
  if (a.opt.db_path != ":memory:" && !std::filesystem::exists(std::filesystem::symlink_status(a.opt.db_path, ec)))
    created.path = a.opt.db_path;
  if (a.opt.db_path != ":memory:") {
    const std::string lock = server::database_lock_path(a.opt.db_path);
    if (!std::filesystem::exists(std::filesystem::symlink_status(lock, ec))) created.lock_path = lock;
  }
  GeneratedTokenGuard generated;
  a.opt.token = resolve_token(a.token_file, a.opt.db_path, &generated.path);
  a.opt.zeus_require_token = !a.zeus_no_auth;
  a.opt.zeus_anonymous_max_bytes = static_cast<std::int64_t>(a.zeus_anonymous_max_mb * 1024 * 1024);
  a.opt.max_body_bytes = static_cast<std::size_t>(std::max(0.001, a.max_body_mb) * 1024 * 1024);
  a.opt.max_header_bytes = a.max_header_kb * 1024;

  // Signals are handled by one thread (sigwait); every other thread blocks them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal: a clean stop too (it died, leaving its port file)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  int port = -1;
  // Once the stored jobs are loaded (the listener answers 503 "starting" until then): the port
  // file says the server serves every route. Requests are served from this moment on, so the
  // database and a generated token are kept even if the port file then cannot be written (exit
  // 1): they may hold jobs already acknowledged.
  a.opt.on_ready = [&](std::size_t jobs, double seconds) {
    generated.keep = created.keep = true;
    // Before the port file: a port file that cannot be written stops the server, and the token
    // it keeps must have been named (session 22's trial).
    if (!generated.path.empty())
      fmt::print(stderr, "perseus serve: generated a bearer token in {} (mode 0600)\n", generated.path);
    if (!a.port_file.empty()) write_file_atomically(a.port_file, fmt::format("{}\n", port));
    fmt::print(stderr, "perseus serve: {} job(s) reloaded in {:.2f} s; serving every route\n", jobs, seconds);
  };
  server::Server srv(a.opt);
  if (a.opt.db_path != ":memory:") {
    warn_if_readable_by_others(a.opt.db_path, "database",
                               "it holds the job-token hashes, plans and measurements (its -wal and -shm files get "
                               "the same mode)");
  }
  port = srv.bind();
  // An IPv6 literal in brackets (RFC 3986 section 3.2.2), so the URL can be pasted as it is.
  const bool ipv6 = a.opt.host.find(':') != std::string::npos;
  fmt::print(stderr, "perseus serve: listening on http://{}{}{}:{} (db {}); loading stored jobs\n", ipv6 ? "[" : "",
             a.opt.host, ipv6 ? "]" : "", port, a.opt.db_path);
  if (a.opt.host != "127.0.0.1" && a.opt.host != "localhost" && a.opt.host != "::1")
    fmt::print(stderr, "perseus serve: WARNING: bound to {}, reachable from the network; use TLS termination\n",
               a.opt.host);
  if (!a.opt.zeus_require_token)
    fmt::print(stderr, "perseus serve: WARNING: Zeus routes accept requests without a token\n");
  std::thread sig([&srv, set] {
    int s = 0;
    sigwait(&set, &s);
    fmt::print(stderr, "perseus serve: signal {}, stopping\n", s);
    srv.stop();
  });
  sig.detach();
  const bool ran = srv.run();
  // The port is free again: a port file left behind would send the next reader to it. Removed
  // only while it still names this server's port (another server may have written it since).
  if (!a.port_file.empty()) {
    std::ifstream in(a.port_file);
    int written = -1;
    if (in >> written && written == port) ::unlink(a.port_file.c_str());
  }
  if (!ran) throw InputError("the HTTP listener failed");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "Run the control-plane HTTP server (plans, measurements, stragglers)");
  cmd->option_defaults()->always_capture_default();  // --help shows each default, as the other subcommands' do
  auto& o = args->opt;
  cmd->add_option("--host", o.host, "Bind address (default 127.0.0.1; 0.0.0.0 exposes it)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            // An empty value (e.g. an unset shell variable) would bind every interface.
            return text.empty() ? "expected a bind address such as 127.0.0.1, got an empty one" : "";
          },
          "ADDRESS"));
  cmd->add_option("--port", o.port, "TCP port (0: any free port; see --port-file)")->check(integer_in(0, 65535));
  cmd->add_option("--port-file", args->port_file, "Write the bound port to this file (atomically, once listening)")
      ->check(non_empty_path("a file for the port"));
  cmd->add_option("--db", o.db_path, "SQLite database file (created if missing)")
      ->check(non_empty_path("a database file (or :memory:)"));
  cmd->add_option("--token-file", args->token_file,
                  "File holding the admin bearer token (else $PERSEUS_TOKEN, else <db>.token, generated; "
                  "--db :memory: needs one of the first two); each job also gets its own")
      ->check(non_empty_path("a token file"));
  cmd->add_flag("--sync-full", o.sync_full, "SQLite synchronous=FULL: survive power loss, not only kill -9");
  cmd->add_option("--threads", o.threads, "HTTP event-loop threads (each serves many connections)")
      ->check(integer_in(1, 256));
  cmd->add_option("--max-body-mb", args->max_body_mb, "Largest request body, MiB, any transfer encoding (bigger: 413)")
      ->check(positive_number_up_to(4096, "MiB"));
  cmd->add_option("--max-header-kb", args->max_header_kb, "Request line + headers per connection, KiB (bigger: 431)")
      ->check(integer_in(4, 1024));
  cmd->add_option("--request-deadline-s", o.request_deadline_s,
                  "A request must be complete within this, s (counted from connect or the previous answer)")
      ->check(number_in(0.01, 3600, "s"));
  cmd->add_option("--max-connections", o.max_connections, "Open connections in total")->check(integer_in(1, 1000000));
  cmd->add_option("--max-connections-per-ip", o.max_connections_per_ip, "Open connections per client address (0: unlimited)")
      ->check(integer_in(0, 1000000));
  cmd->add_option("--listen-backlog", o.listen_backlog, "listen() backlog (capped by net.core.somaxconn)")
      ->check(integer_in(16, 1 << 20));
  cmd->add_option("--rate-limit-rps", o.rate_limit_rps, "Requests/s per client address (0: off)")
      ->check(number_in(0, 1e9));
  cmd->add_option("--rate-limit-burst", o.rate_limit_burst, "Burst size per client address, requests")
      ->check(number_in(1, 1e9));
  cmd->add_option("--keep-alive-s", o.keep_alive_s, "Close connections silent for this long, s (idle keep-alive)")
      ->check(integer_in(1, 3600));
  cmd->add_option("--job-idle-ttl-s", o.job_idle_ttl_s, "Delete jobs idle for longer, s (0: never; default 7 days)")
      ->check(number_in(0, 3.2e9, "s"));
  cmd->add_option("--expiry-interval-s", o.expiry_interval_s, "How often to look for idle jobs, s")
      ->check(number_in(0.05, 86400, "s"));
  cmd->add_option("--planner-threads", o.planner_threads, "Background frontier solvers")->check(integer_in(1, 256));
  cmd->add_option("--max-jobs", o.max_jobs, "Live job limit")->check(integer_in(1, 100000000));
  cmd->add_option("--zeus-plan", args->zeus_plan,
                  "Zeus freqs_pipeline_*.py file or directory served to jobs registered via POST /register_job")
      ->check(non_empty_path("a Zeus plan file or folder"));
  CLI::Option* zeus_profile =
      cmd->add_option("--zeus-profile", args->zeus_profile, "Profile CSV giving the Zeus plans their times/energies")
          ->check(non_empty_path("a profile CSV file"));
  cmd->add_option("--zeus-schedule", o.zeus_schedule, "Schedule the Zeus plans follow (default 1f1b)");
  // Required with --zeus-profile, the only case that plans with it (the straggler switch): a
  // silent 0 W is refused for /v1 jobs too (session 25's trial).
  CLI::Option* zeus_p_block =
      cmd->add_option("--zeus-p2p-power-w", o.zeus_p2p_power_w,
                      "P2P blocking power for Zeus jobs, W (required with --zeus-profile)")
          ->check(number_in(0, 1e5, "W"));
  zeus_profile->needs(zeus_p_block);
  cmd->add_flag("--zeus-no-auth", args->zeus_no_auth,
                "Let Zeus routes work without a token (unchanged Zeus clients); they reach only Zeus jobs");
  cmd->add_option("--zeus-no-auth-max-jobs", o.zeus_anonymous_max_jobs, "Live jobs made without a token (quota)")
      ->check(integer_in(0, 1000000));
  cmd->add_option("--zeus-no-auth-max-ranks", o.zeus_anonymous_max_ranks,
                  "Ranks (sum of world sizes) of the jobs made without a token (quota)")
      ->check(integer_in(0, 1 << 30));
  cmd->add_option("--zeus-no-auth-max-mb", args->zeus_anonymous_max_mb,
                  "Measurements the jobs made without a token may store in total, MiB (quota)")
      ->check(number_in(0, 1e6, "MiB"));
  cmd->add_flag("--log-requests", o.log_requests, "Access log on stderr (never bodies or tokens)");
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace perseus::cli
