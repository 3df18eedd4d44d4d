// End to end: the real `perseus serve` + 8 trainer processes (2 DP x 4 PP) on simulated GPUs.
// Checks that every rank applied exactly its plan's clocks in order (controller logs), that a
// straggler report switches the other pipeline's plan at the first step boundary after its
// client fetched it, that all measurements reach the server, and that a server outage does not
// stop training. Events are ordered with the trainers' pause gates (--pause-at/--gate), never
// with wall-clock margins, so the tests hold on a loaded machine.
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


std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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
    write_first_stages(std::string(PERSEUS_EXAMPLES_DIR) + "/stage_profile_gpt3-175b_a100_sxm.csv", kPp, dir_.file("profile4.csv"));
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
                           {"p2p_power_w", 83.64}, {"profile_csv", read_file(dir_.file("profile4.csv"))},
                           // Wall-clock iteration times here are machine noise: no closed loop
                           // (straggler_e2e_test.cpp tests it in virtual time).
                           {"straggler_detection", {{"enabled", false}, {"verify", false}}}},
                          201);
    job_id_ = job.value("job_id", "");
    job_token_ = job.value("job_token", "");  // the trainers use the job's own token, not the admin's
    ASSERT_FALSE(job_id_.empty());
    ASSERT_FALSE(job_token_.empty());
    ASSERT_TRUE(wait_for([&] { return get("/v1/jobs/" + job_id_)["status"] != "planning"; }, 60));
    ASSERT_EQ(get("/v1/jobs/" + job_id_)["status"], "ready");
  }

  // Trainers pause before each iteration in `pause_at` until resume(k) (see test_trainer.cpp).
  // gpud_socket: when given, every rank drives GPU `rank` of the fake NVML through the
  // `perseus gpud` helper on that socket instead of a simulated GPU.
  void start_trainers(double time_scale, const std::string& pause_at = "", const std::string& gpud_socket = "") {
    for (int dp = 0; dp < kDp; ++dp) {
      for (int pp = 0; pp < kPp; ++pp) {
        const int rank = dp * kPp + pp;
        const std::vector<std::string> gpu =
            gpud_socket.empty()
                ? std::vector<std::string>{"--backend", "simulated", "--profile", dir_.file("profile4.csv"),
                                           "--time-scale", std::to_string(time_scale)}
                : std::vector<std::string>{"--backend", "gpud", "--gpud-socket", gpud_socket, "--device",
                                           std::to_string(rank)};
        std::vector<std::string> argv = {TEST_TRAINER, "--url", url(), "--token", job_token_, "--job", job_id_, "--rank",
                                         std::to_string(rank), "--dp", std::to_string(dp), "--pp", std::to_string(pp),
                                         "--stages", std::to_string(kPp), "--microbatches", std::to_string(kMicrobatches),
                                         "--iterations", std::to_string(kIterations)};
        argv.insert(argv.end(), gpu.begin(), gpu.end());
        trainers_.push_back(spawn(
            concat(argv, {"--poll", "0.02",
             "--no-coalesce", "--freq-log", dir_.file("freq_" + std::to_string(rank) + ".csv"), "--progress",
             dir_.file("progress_" + std::to_string(rank)), "--plan-dir", dir_.file(""), "--pause-at",
             pause_at.empty() ? std::to_string(kIterations) : pause_at, "--gate", dir_.file("")}),
            {{"PERSEUS_LOCK_DIR", dir_.file("locks")}}, dir_.file("trainer_" + std::to_string(rank) + ".log")));
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
  // The newest plan version rank's client had fetched while paused before iteration k, or -2
  // while the rank has not reached the gate.
  long paused_version(int rank, int k) const {
    const std::string text = read_file(dir_.file("paused_" + std::to_string(rank) + "_" + std::to_string(k)));
    return text.empty() ? -2 : std::stol(text);
  }
  bool all_paused(int k) const {
    for (int r = 0; r < kDp * kPp; ++r) {
      if (paused_version(r, k) == -2) return false;
    }
    return true;
  }
  void resume(int k) { std::ofstream(dir_.file("resume_" + std::to_string(k))) << "go\n"; }
  std::vector<Progress> progress(int rank) const {
    std::vector<Progress> out;
    for (const auto& l : nonempty_lines(read_file(dir_.file("progress_" + std::to_string(rank))))) {
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
    for (const auto& l : nonempty_lines(read_file(dir_.file("plan_" + std::to_string(rank) + "_v" + std::to_string(version) + ".txt")))) {
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
    const auto rows = nonempty_lines(read_file(dir_.file("freq_" + std::to_string(rank) + ".csv")));
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
  std::string job_id_, job_token_;
  std::vector<pid_t> trainers_;
};


TEST_F(ServeE2E, EightRanksFollowPlansAndAStragglerSwitchesTheOtherPipeline) {
  constexpr int kGate = 5;
  create_job();
  start_trainers(/*time_scale=*/0.25, std::to_string(kGate));
  // Every rank ran kGate iterations and waits; report the straggler while they wait.
  ASSERT_TRUE(wait_for([&] { return all_paused(kGate); }, 120)) << "trainers did not reach the gate";
  std::vector<long> v_before(kDp * kPp);
  for (int r = 0; r < kDp * kPp; ++r) v_before[r] = progress(r).back().version;
  const json decision = post("/v1/jobs/" + job_id_ + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.2}}, 200);
  // Pipeline 1's clients fetch the new plan in the background while their trainers wait.
  for (int pp = 0; pp < kPp; ++pp) {
    const int r = 1 * kPp + pp;
    ASSERT_TRUE(wait_for([&] { return paused_version(r, kGate) > v_before[r]; }, 120))
        << "rank " << r << " never fetched a new plan; decision: " << decision.dump();
  }
  resume(kGate);
  wait_trainers();
  check_applied_equals_plan();

  // Pipeline 1 (not the straggler) switched at the first step boundary after the fetch, and
  // stayed on the new plan.
  for (int pp = 0; pp < kPp; ++pp) {
    const int r = 1 * kPp + pp;
    const auto prog = progress(r);
    ASSERT_EQ(prog.size(), static_cast<std::size_t>(kIterations));
    EXPECT_EQ(prog[kGate - 1].version, v_before[r]) << "rank " << r;
    const long v_new = prog[kGate].version;
    EXPECT_EQ(v_new, paused_version(r, kGate)) << "rank " << r;
    for (int it = kGate; it < kIterations; ++it) EXPECT_EQ(prog[it].version, v_new) << "rank " << r;
    EXPECT_NE(plan_freqs(r, v_new), plan_freqs(r, v_before[r])) << "rank " << r;
  }
  // All measurements reach the server (the trainers flushed them before exiting).
  EXPECT_TRUE(wait_for([&] { return measurement_count() == kDp * kPp * kIterations; }, 60))
      << measurement_count();
}

TEST_F(ServeE2E, TrainingContinuesThroughAServerOutageAndReportsArriveAfterRestart) {
  constexpr int kDown = 3;   // the server is killed while every rank waits here
  constexpr int kUp = 10;    // ... and restarted while every rank waits here
  create_job();
  start_trainers(/*time_scale=*/0.25, std::to_string(kDown) + "," + std::to_string(kUp));
  ASSERT_TRUE(wait_for([&] { return all_paused(kDown); }, 120)) << "trainers did not reach the first gate";
  stop_server();  // kill -9: the server's state is in SQLite
  resume(kDown);
  // Iterations kDown..kUp-1 run with no server at all.
  ASSERT_TRUE(wait_for([&] { return all_paused(kUp); }, 120)) << "training stalled during the outage";
  for (int r = 0; r < kDp * kPp; ++r) ASSERT_EQ(progress(r).size(), static_cast<std::size_t>(kUp)) << "rank " << r;
  start_server(port_);
  resume(kUp);
  wait_trainers();  // each trainer flushes its buffered reports before exiting
  check_applied_equals_plan();
  EXPECT_TRUE(wait_for([&] { return measurement_count() == kDp * kPp * kIterations; }, 60))
      << measurement_count();
}

// The same 8 ranks with no privilege of their own: every clock change goes through the
// `perseus gpud` helper, which drives 8 GPUs of the fake NVML (one per rank) and logs each
// change; after the run every GPU is unlocked again.
TEST_F(ServeE2E, EightRanksSetTheirClocksThroughTheGpudHelper) {
  std::filesystem::create_directories(dir_.file("nvml_state"));
  std::ofstream(dir_.file("gpud.conf")) << "socket " << dir_.file("gpud.sock") << "\nstate_dir "
                                        << dir_.file("gpud_state") << "\nlibrary " << FAKE_NVML_PATH
                                        << "\nallow * uid:" << ::getuid() << "\n";
  const pid_t gpud = spawn({PERSEUS_BINARY, "gpud", "--config", dir_.file("gpud.conf")},
                           {{"FAKE_NVML_DEVICES", "8"}, {"FAKE_NVML_STATE_DIR", dir_.file("nvml_state")},
                            {"FAKE_NVML_LOG", dir_.file("nvml.log")}},
                           dir_.file("gpud.log"));
  ASSERT_TRUE(wait_for([&] { return read_file(dir_.file("gpud.log")).find("serving GPUs") != std::string::npos; }, 60))
      << read_file(dir_.file("gpud.log"));
  create_job();
  start_trainers(/*time_scale=*/0.25, "", dir_.file("gpud.sock"));
  wait_trainers();
  check_applied_equals_plan();
  const std::string log = read_file(dir_.file("gpud.log"));
  const std::string nvml = read_file(dir_.file("nvml.log"));
  for (int r = 0; r < kDp * kPp; ++r) {
    EXPECT_NE(log.find("GPU " + std::to_string(r) + ": locked at "), std::string::npos) << "rank " << r << "\n" << log;
    EXPECT_NE(log.find("GPU " + std::to_string(r) + ": unlocked by "), std::string::npos) << "rank " << r;
    EXPECT_FALSE(std::filesystem::exists(dir_.file("nvml_state/locked_" + std::to_string(r)))) << "rank " << r;
  }
  // Only the helper touched the driver's clock calls: every such call came from its pid.
  for (const auto& l : nonempty_lines(nvml)) {
    if (l.find("GpuLockedClocks") != std::string::npos) {
      EXPECT_EQ(l.substr(0, l.find(' ')), std::to_string(gpud)) << l;
    }
  }
  EXPECT_TRUE(wait_for([&] { return measurement_count() == kDp * kPp * kIterations; }, 60)) << measurement_count();
  ::kill(gpud, SIGTERM);
  wait_exit(gpud, 30);
}

}  // namespace
