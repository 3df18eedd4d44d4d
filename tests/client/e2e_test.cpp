// End to end: the real `perseus serve` + 8 trainer processes (2 DP x 4 PP) on simulated GPUs.
// Checks that every rank applied exactly its plan's clocks in order (controller logs), that a
// straggler report switches the other pipeline's plan within about one iteration, that all
// measurements reach the server, and that a server outage does not stop training.
#include <gtest/gtest.h>

#include <httplib.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace {

using namespace perseus::testing;
using nlohmann::json;

constexpr int kPp = 4;
constexpr int kDp = 2;
constexpr int kMicrobatches = 4;
constexpr int kIterations = 20;
const char* kToken = "e2e-token-0123456789abcdef";

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// One line of a trainer's progress file.
struct Progress {
  int iteration;
  long version;
  double start_unix_s;
};

class ServeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
#if !HAVE_SERVER
    GTEST_SKIP() << "perseus serve is not built";
#endif
    // A 4-stage profile: the first 4 stages of the bundled GPT-3 175B A100 profile.
    std::ofstream prof(dir_.file("profile4.csv"));
    for (const auto& l : lines(read_file(std::string(PERSEUS_EXAMPLES_DIR) + "/stage_profile_gpt3-175b_a100_sxm.csv"))) {
      if (l.rfind("stage", 0) == 0 || std::stoi(l.substr(0, l.find(','))) < kPp) prof << l << "\n";
    }
    prof.close();
    std::ofstream(dir_.file("token")) << kToken << "\n";
    start_server(0);
  }
  void TearDown() override {
    for (pid_t p : trainers_) wait_exit(p, 1);
    stop_server();
  }

  void start_server(int port) {
    std::filesystem::remove(dir_.file("port"));
    server_ = spawn({PERSEUS_BINARY, "serve", "--port", std::to_string(port), "--port-file", dir_.file("port"), "--db",
                     dir_.file("perseus.db"), "--token-file", dir_.file("token")},
                    {}, dir_.file("serve.log"));
    int status = 0;
    ASSERT_TRUE(wait_for([&] {
      return !read_file(dir_.file("port")).empty() || ::waitpid(server_, &status, WNOHANG) == server_;
    }, 20)) << read_file(dir_.file("serve.log"));
    ASSERT_FALSE(read_file(dir_.file("port")).empty()) << read_file(dir_.file("serve.log"));
    port_ = std::stoi(read_file(dir_.file("port")));
  }
  void stop_server() {
    if (server_ > 0) {
      ::kill(server_, SIGKILL);
      wait_exit(server_, 10);
      server_ = 0;
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  httplib::Client http() const {
    httplib::Client c(url());
    c.set_bearer_token_auth(kToken);
    c.set_read_timeout(30, 0);
    return c;
  }
  json get(const std::string& path) {
    auto res = http().Get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    return json::parse(res->body);
  }
  json post(const std::string& path, const json& body, int want) {
    auto res = http().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, want) << path << ": " << res->body;
    return res->body.empty() ? json() : json::parse(res->body);
  }

  void create_job() {
    const json job = post("/v1/jobs",
                          {{"name", "client-e2e"}, {"pp", kPp}, {"dp", kDp}, {"microbatches", kMicrobatches},
                           {"p2p_power_w", 83.64}, {"profile_csv", read_file(dir_.file("profile4.csv"))}},
                          201);
    job_id_ = job.value("job_id", "");
    ASSERT_FALSE(job_id_.empty());
    ASSERT_TRUE(wait_for([&] { return get("/v1/jobs/" + job_id_)["status"] != "planning"; }, 60));
    ASSERT_EQ(get("/v1/jobs/" + job_id_)["status"], "ready");
  }

  void start_trainers(double time_scale) {
    for (int dp = 0; dp < kDp; ++dp) {
      for (int pp = 0; pp < kPp; ++pp) {
        const int rank = dp * kPp + pp;
        trainers_.push_back(spawn(
            {TEST_TRAINER, "--url", url(), "--token", kToken, "--job", job_id_, "--rank", std::to_string(rank), "--dp",
             std::to_string(dp), "--pp", std::to_string(pp), "--stages", std::to_string(kPp), "--microbatches",
             std::to_string(kMicrobatches), "--iterations", std::to_string(kIterations), "--backend", "simulated",
             "--profile", dir_.file("profile4.csv"), "--time-scale", std::to_string(time_scale), "--poll", "0.02",
             "--no-coalesce", "--freq-log", dir_.file("freq_" + std::to_string(rank) + ".csv"), "--progress",
             dir_.file("progress_" + std::to_string(rank)), "--plan-dir", dir_.file("")},
            {}, dir_.file("trainer_" + std::to_string(rank) + ".log")));
      }
    }
  }
  void wait_trainers() {
    for (std::size_t r = 0; r < trainers_.size(); ++r) {
      const int status = wait_exit(trainers_[r], 60);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "rank " << r << ": " << read_file(dir_.file("trainer_" + std::to_string(r) + ".log"));
    }
    trainers_.clear();
  }
  std::vector<Progress> progress(int rank) const {
    std::vector<Progress> out;
    for (const auto& l : lines(read_file(dir_.file("progress_" + std::to_string(rank))))) {
      std::istringstream in(l);
      Progress p{};
      if (in >> p.iteration >> p.version >> p.start_unix_s) out.push_back(p);
    }
    return out;
  }
  int min_iterations_done() const {
    int m = kIterations;
    for (int r = 0; r < kDp * kPp; ++r) m = std::min(m, static_cast<int>(progress(r).size()));
    return m;
  }
  // Plan frequencies the trainer ran for a version (written with --plan-dir).
  std::vector<int> plan_freqs(int rank, long version) const {
    std::vector<int> out;
    for (const auto& l : lines(read_file(dir_.file("plan_" + std::to_string(rank) + "_v" + std::to_string(version) + ".txt")))) {
      std::istringstream in(l);
      std::string name;
      int mb = 0, f = 0;
      in >> name >> mb >> f;
      out.push_back(f);
    }
    return out;
  }
  // Requested clocks per iteration from the controller log; checks every one was applied.
  std::map<int, std::vector<int>> applied_by_iteration(int rank) const {
    std::map<int, std::vector<int>> out;
    const auto rows = lines(read_file(dir_.file("freq_" + std::to_string(rank) + ".csv")));
    EXPECT_GT(rows.size(), 1u) << "rank " << rank;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      std::vector<std::string> f;
      std::istringstream in(rows[i]);
      for (std::string c; std::getline(in, c, ',');) f.push_back(c);
      if (f.size() < 7 || f[6] == "reset") continue;
      EXPECT_TRUE(f[6] == "applied" || f[6] == "redundant") << "rank " << rank << ": " << rows[i];
      EXPECT_EQ(f[4], f[5]) << "rank " << rank << ": requested != applied: " << rows[i];
      out[std::stoi(f[2])].push_back(std::stoi(f[4]));
    }
    return out;
  }
  // Every iteration of every rank ran exactly the plan of the version it used.
  void check_applied_equals_plan() {
    for (int r = 0; r < kDp * kPp; ++r) {
      const auto applied = applied_by_iteration(r);
      const auto prog = progress(r);
      ASSERT_EQ(prog.size(), static_cast<std::size_t>(kIterations)) << "rank " << r;
      for (const auto& p : prog) {
        const auto want = plan_freqs(r, p.version);
        ASSERT_EQ(want.size(), 2u * kMicrobatches) << "rank " << r << " v" << p.version;
        EXPECT_EQ(applied.at(p.iteration), want) << "rank " << r << " iteration " << p.iteration;
      }
      // The last version the trainer ran is what the server serves now.
      const json now = get(fmt("/v1/jobs/{}/ranks/{}/plan", r));
      std::vector<int> served;
      for (const auto& i : now["instructions"]) served.push_back(i["freq_mhz"].get<int>());
      EXPECT_EQ(served, plan_freqs(r, prog.back().version)) << "rank " << r;
    }
  }
  std::string fmt(const char* pattern, int rank) const {
    std::string s = pattern;
    s.replace(s.find("{}"), 2, job_id_);
    s.replace(s.find("{}"), 2, std::to_string(rank));
    return s;
  }
  long measurement_count() { return get("/v1/jobs/" + job_id_)["measurements"]["count"].get<long>(); }

  TempDir dir_;
  pid_t server_ = 0;
  int port_ = 0;
  std::string job_id_;
  std::vector<pid_t> trainers_;
};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST_F(ServeE2E, EightRanksFollowPlansAndAStragglerSwitchesTheOtherPipeline) {
  create_job();
  start_trainers(/*time_scale=*/0.25);  // ~0.14 s real per iteration
  ASSERT_TRUE(wait_for([&] { return min_iterations_done() >= 5; }, 60));
  const double t_post = unix_now();
  const json decision = post("/v1/jobs/" + job_id_ + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.2}}, 200);
  wait_trainers();
  check_applied_equals_plan();

  // Pipeline 1 (not the straggler) switched to a new plan version within about one iteration.
  for (int pp = 0; pp < kPp; ++pp) {
    const int r = 1 * kPp + pp;
    const auto prog = progress(r);
    int at_post = -1;  // last iteration begun before the straggler report
    for (const auto& p : prog) {
      if (p.start_unix_s <= t_post) at_post = p.iteration;
    }
    ASSERT_GE(at_post, 0);
    ASSERT_LT(at_post, kIterations - 3) << "the run ended too soon after the report";
    const long v_before = prog[at_post].version;
    int first_new = -1;
    for (const auto& p : prog) {
      if (p.iteration > at_post && p.version != v_before) {
        first_new = p.iteration;
        break;
      }
    }
    ASSERT_NE(first_new, -1) << "rank " << r << " never got a new plan; decision: " << decision.dump();
    // The switch lands at the next step boundary after the poll (<= 1 iteration in practice;
    // one more iteration of slack keeps the test from being timing-sensitive).
    EXPECT_LE(first_new, at_post + 2) << "rank " << r;
    for (const auto& p : prog) {
      if (p.iteration >= first_new) EXPECT_EQ(p.version, prog[first_new].version) << "rank " << r;
    }
    EXPECT_NE(plan_freqs(r, prog[first_new].version), plan_freqs(r, v_before)) << "rank " << r;
  }
  // All measurements reached the server.
  EXPECT_TRUE(wait_for([&] { return measurement_count() == kDp * kPp * kIterations; }, 10))
      << measurement_count();
}

TEST_F(ServeE2E, TrainingContinuesThroughAServerOutageAndReportsArriveAfterRestart) {
  create_job();
  start_trainers(/*time_scale=*/0.25);
  ASSERT_TRUE(wait_for([&] { return min_iterations_done() >= 3; }, 60));
  stop_server();  // kill -9: the server's state is in SQLite
  const int done_at_stop = min_iterations_done();
  ASSERT_TRUE(wait_for([&] { return min_iterations_done() >= done_at_stop + 4; }, 60)) << "training stalled";
  ASSERT_LT(min_iterations_done(), kIterations) << "the run ended during the outage; make it longer";
  start_server(port_);
  wait_trainers();  // each trainer flushes its buffered reports before exiting
  check_applied_equals_plan();
  EXPECT_TRUE(wait_for([&] { return measurement_count() == kDp * kPp * kIterations; }, 10))
      << measurement_count();
}

}  // namespace
