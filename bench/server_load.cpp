// Load test of `perseus serve`: N ranks register and fetch their plans concurrently.
// Reports throughput and latency percentiles. Usage: see bench/server_load.sh and docs/http-api.md.
//
//   perseus_server_load --port P --token-file F --profile examples/stage_profile_gpt3-175b_a100_sxm.csv
//                       [--ranks 4096] [--pp 8] [--connections 64] [--rounds 10] [--microbatches 8]
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string host = "127.0.0.1";
  int port = 7787;
  std::string token_file, profile;
  int ranks = 4096, pp = 8, connections = 64, rounds = 10, microbatches = 8;
};

std::string read_file(const std::string& p) {
  std::ifstream in(p);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

struct Stats {
  std::vector<double> lat_s;
  std::uint64_t errors = 0;
};

std::uint64_t total_errors = 0;  // every phase's errors; the exit status is 1 unless this is 0

void report(const char* phase, std::vector<Stats>& per_thread, double wall_s) {
  std::vector<double> all;
  std::uint64_t errors = 0;
  for (auto& s : per_thread) {
    all.insert(all.end(), s.lat_s.begin(), s.lat_s.end());
    errors += s.errors;
  }
  total_errors += errors;
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(q * all.size()))]; };
  std::printf("%-10s requests %8zu  errors %llu  wall %.3f s  throughput %9.0f req/s  "
              "p50 %.3f ms  p99 %.3f ms  max %.3f ms\n",
              phase, all.size(), static_cast<unsigned long long>(errors), wall_s, all.size() / wall_s, pct(0.5) * 1e3,
              pct(0.99) * 1e3, all.empty() ? 0.0 : all.back() * 1e3);
}

/// Runs fn(client, rank, stats) for every rank owned by each of `connections` threads.
template <class Fn>
double run_phase(const Args& a, const httplib::Headers& h, std::vector<Stats>& stats, Fn fn) {
  stats.assign(a.connections, {});
  std::vector<std::thread> ts;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  for (int t = 0; t < a.connections; ++t)
    ts.emplace_back([&, t] {
      httplib::Client cli(a.host, a.port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);
      cli.set_default_headers(h);
      cli.set_connection_timeout(10);
      cli.set_read_timeout(30);
      ready++;
      while (!go) std::this_thread::yield();
      fn(cli, t, stats[t]);
    });
  while (ready < a.connections) std::this_thread::yield();
  const auto t0 = Clock::now();
  go = true;
  for (auto& t : ts) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--host") a.host = v;
    else if (k == "--port") a.port = std::stoi(v);
    else if (k == "--token-file") a.token_file = v;
    else if (k == "--profile") a.profile = v;
    else if (k == "--ranks") a.ranks = std::stoi(v);
    else if (k == "--pp") a.pp = std::stoi(v);
    else if (k == "--connections") a.connections = std::stoi(v);
    else if (k == "--rounds") a.rounds = std::stoi(v);
    else if (k == "--microbatches") a.microbatches = std::stoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.token_file.empty() || a.profile.empty() || a.ranks % a.pp) {
    std::fprintf(stderr, "need --token-file and --profile; --ranks must be a multiple of --pp\n");
    return 2;
  }
  const httplib::Headers h = {{"Authorization", "Bearer " + trim(read_file(a.token_file))}};
  httplib::Client cli(a.host, a.port);
  cli.set_default_headers(h);
  cli.set_read_timeout(120);
  const int dp = a.ranks / a.pp;
  json body = {{"name", "load-test"}, {"pp", a.pp}, {"dp", dp}, {"tp", 1}, {"microbatches", a.microbatches},
               {"schedule", "1f1b"}, {"p2p_power_w", 83.64}, {"unit_time_s", 0.01},
               {"profile_csv", read_file(a.profile)}};
  auto c = cli.Post("/v1/jobs", body.dump(), "application/json");
  if (!c || c->status != 201) {
    std::fprintf(stderr, "create job failed: %s\n", c ? c->body.c_str() : "no connection");
    return 1;
  }
  const std::string job = json::parse(c->body)["job_id"];
  const std::string base = "/v1/jobs/" + job;
  // The ranks use the job's own token, as real trainers do (docs/http-api.md, "Authority").
  const httplib::Headers rank_headers = {{"Authorization", "Bearer " + json::parse(c->body)["job_token"].get<std::string>()}};
  for (int i = 0; i < 6000; ++i) {  // wait for planning (<= 60 s)
    auto g = cli.Get(base.c_str());
    if (g && g->status == 200 && json::parse(g->body)["status"] == "ready") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("job %s: %d ranks (dp %d x pp %d), %d microbatches, %d client connections\n", job.c_str(), a.ranks, dp,
              a.pp, a.microbatches, a.connections);

  std::vector<Stats> stats;
  double wall = run_phase(a, rank_headers, stats, [&](httplib::Client& cl, int t, Stats& st) {
    for (int r = t; r < a.ranks; r += a.connections) {
      json rb = {{"rank", r}, {"dp_rank", r / a.pp}, {"pp_rank", r % a.pp}, {"tp_rank", 0}};
      const auto t0 = Clock::now();
      auto res = cl.Post((base + "/ranks").c_str(), rb.dump(), "application/json");
      st.lat_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      if (!res || res->status != 201) st.errors++;
    }
  });
  report("register", stats, wall);

  wall = run_phase(a, rank_headers, stats, [&](httplib::Client& cl, int t, Stats& st) {
    for (int round = 0; round < a.rounds; ++round)
      for (int r = t; r < a.ranks; r += a.connections) {
        const std::string path = base + "/ranks/" + std::to_string(r) + "/plan";
        const auto t0 = Clock::now();
        auto res = cl.Get(path.c_str());
        st.lat_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (!res || res->status != 200 || res->body.size() < 100) st.errors++;
      }
  });
  report("fetch", stats, wall);

  wall = run_phase(a, rank_headers, stats, [&](httplib::Client& cl, int t, Stats& st) {
    for (int round = 0; round < a.rounds; ++round)
      for (int r = t; r < a.ranks; r += a.connections) {
        const std::string path = base + "/ranks/" + std::to_string(r) + "/plan?since_version=1000000";
        const auto t0 = Clock::now();
        auto res = cl.Get(path.c_str());
        st.lat_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (!res || res->status != 304) st.errors++;
      }
  });
  report("fetch-304", stats, wall);
  cli.Delete(base.c_str());
  if (total_errors) std::fprintf(stderr, "FAILED: %llu request(s) failed\n", static_cast<unsigned long long>(total_errors));
  return total_errors == 0 ? 0 : 1;
}
