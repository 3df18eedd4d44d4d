// `perseus serve`: the HTTP control-plane server (routes, auth, limits) over JobManager + Store.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace perseus::server {

class JobManager;

/// Server settings. Defaults are safe for one machine: loopback only, bounded threads/bodies.
struct ServerOptions {
  std::string host = "127.0.0.1";   ///< Bind address; "0.0.0.0" exposes it to the network.
  int port = 7787;                  ///< TCP port; 0 picks a free one (see Server::bind()).
  std::string db_path = "perseus.db";  ///< SQLite file (":memory:" for tests: no durability).
  bool sync_full = false;           ///< SQLite synchronous=FULL (survive power loss, slower).
  std::string token;                ///< The admin bearer token: every route but GET /v1/health takes it;
                                    ///< each job also has its own token (docs/http-api.md). At least 16
                                    ///< printable ASCII characters without spaces, else the constructor
                                    ///< throws InputError.
  int threads = 4;                  ///< HTTP event-loop threads; each serves many connections (epoll).
  std::size_t max_body_bytes = 16u << 20;  ///< Larger bodies (any transfer encoding) are refused, bytes.
  std::size_t max_header_bytes = 16u << 10;  ///< Request line + headers per connection, bytes (431/414).
  double rate_limit_rps = 20000;    ///< Requests/s per client address (token bucket); <= 0: off.
  double rate_limit_burst = 40000;  ///< Bucket size, requests.
  int keep_alive_s = 15;            ///< A connection silent this long is closed, s (idle keep-alive).
  double request_deadline_s = 30;   ///< A request must be complete this long after the previous one, s.
  unsigned max_connections = 16384; ///< Open connections in total (more: refused at accept).
  unsigned max_connections_per_ip = 256;  ///< Open connections per client address (0: unlimited).
  int listen_backlog = 4096;        ///< listen() backlog (capped by net.core.somaxconn).
  double job_idle_ttl_s = 7 * 24 * 3600.0;  ///< Jobs idle longer are deleted, s (<= 0: never).
  double expiry_interval_s = 60;    ///< How often idle jobs are checked, s.
  int planner_threads = 1;          ///< Background frontier solvers.
  std::size_t max_jobs = 1000;      ///< Live job limit.
  /// Straggler decision JSON kept per job, bytes (ManagerOptions::max_decision_bytes).
  std::size_t max_decision_bytes = std::size_t{4} << 20;
  // Zeus PFO compatibility (POST /register_job etc.).
  /// Plan file texts jobs registered the Zeus way run, slowest first (plan index order; `perseus
  /// serve --zeus-plan DIR` sorts the .py files by name). The fastest is served (the last when
  /// zeus_profile_csv is empty and the plans have no times).
  std::vector<std::string> zeus_plan_texts;
  std::vector<std::string> zeus_plan_names;  ///< Their names in messages (the files; optional).
  std::string zeus_profile_csv;     ///< Optional profile giving those plans times/energies.
  /// Schedule the Zeus plans follow (a schedule_names() name, e.g. "1f1b"). With Zeus plans
  /// set, another name makes the constructor throw InputError.
  std::string zeus_schedule = "1f1b";
  /// P2P blocking power P_block of Zeus jobs, W (per GPU), in [0, 1e5]. With Zeus plans set, a
  /// value outside makes the constructor throw InputError (unchecked without Zeus plans).
  double zeus_p2p_power_w = 0;
  bool zeus_require_token = true;   ///< false: Zeus routes work without a token (unchanged clients).
  // Quota of jobs made without a token (zeus_require_token = false), so that an unauthenticated
  // caller cannot fill the server. Over it: ApiError 403 "quota_exceeded" naming the limit.
  /// Live jobs made without a token; POST /register_job is refused when one more would pass it
  /// (0: none may be made).
  std::size_t zeus_anonymous_max_jobs = 16;
  /// Their world sizes in total, ranks; a job whose ranks would pass it is refused.
  std::int64_t zeus_anonymous_max_ranks = 4096;
  /// Measurement text they may store in total, bytes (POST /result is refused when its pairs
  /// would pass it; POST /register_job once it is reached).
  std::int64_t zeus_anonymous_max_bytes = 64ll << 20;
  bool log_requests = false;        ///< Access log on stderr (method, path, status; never bodies).
  /// Called by run() on its thread once the stored jobs are loaded and every route is served,
  /// with their count and the load's wall time, s (`perseus serve` writes its --port-file
  /// here; not called when stop() came during the load). Requests are served from just before
  /// it is called; an exception from it stops the server and leaves run().
  std::function<void(std::size_t jobs, double seconds)> on_ready;
  /// Called by run() after the listener started and before the jobs load (tests hold the
  /// load here to see the server while it is starting).
  std::function<void()> before_load;
  /// ManagerOptions::before_frontier_stored (tests).
  std::function<void(const std::string& job_id)> before_frontier_stored;
};

/// The running server. Construction opens the database; bind() opens the socket; run() starts
/// the listener, then reloads every stored job and serves until stop() (from any thread or a
/// signal-handling thread). While the jobs load (seconds for the largest), GET /v1/health
/// answers {"status": "starting"} and every other request 503 "starting" with Retry-After: 1,
/// so clients and health probes see a live server that asks them to retry.
class Server {
 public:
  /// Throws perseus::InputError for bad options (empty token, Zeus plans that do not fit their
  /// schedule or profile, ...) or an unusable database.
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds host:port; returns the port (useful with port 0). Throws InputError if it cannot.
  int bind();
  /// Serves requests until stop(). Returns false if the listener failed. Throws what loading
  /// the stored jobs or ServerOptions::on_ready threw (the listener is then stopped).
  bool run();
  /// Stops run() and the background threads. Idempotent, thread-safe.
  void stop();
  /// Blocks until run() has loaded the stored jobs (every route served) or the server stops.
  /// Returns whether it is ready.
  bool wait_until_ready();
  /// Jobs reloaded from the database by run() (0 until then).
  std::size_t jobs_loaded() const;
  JobManager& manager();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace perseus::server
