// End to end, closed straggler loop: a real `perseus serve` and 16 trainer processes (4
// pipelines x 4 stages) on simulated GPUs with a virtual clock, 1 % seeded jitter per
// computation, and pipeline 2 throttled to 1.2x for a stretch of iterations. The server must
// detect it from the measurements alone, switch the other pipelines, verify the switch, and
// clear it after recovery; a pipeline whose GPUs ignore clocks must be caught by verification.
// The trainers run in lockstep: before every iteration each waits at a gate, and the test opens
// it only after the server processed every measurement of the previous iterations and every
// client fetched its pipeline's current plan. Nothing depends on how fast the machine is, and
// a run is reproducible iteration by iteration (docs/stragglers.md).
#include <gtest/gtest.h>

#include <httplib.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace {

using namespace perseus::testing;
using nlohmann::json;

constexpr int kPp = 4, kDp = 4, kRanks = kPp * kDp, kMicrobatches = 4;
constexpr double kPBlockW = 83.64;
constexpr int kStraggler = 2;
const char* kToken = "straggler-e2e-token-0123456789";


/// One rank-iteration of a trainer's --energy-log.
struct RankIteration {
  long version = 0;
  double time_s = 0, energy_j = 0;
};

/// What one lockstep run recorded.
struct LockstepRun {
  std::string job_id;
  std::vector<json> job_at_gate;                        // GET /v1/jobs/{id} when gate k opened
  std::vector<std::map<int, RankIteration>> by_rank;    // [rank][iteration]
  json final_job;
};

class StragglerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
#if !HAVE_SERVER
    GTEST_SKIP() << "perseus serve is not built";
#endif
    // A 4-stage profile: the first 4 stages of the bundled GPT-3 175B A100 profile.
    write_first_stages(std::string(PERSEUS_EXAMPLES_DIR) + "/stage_profile_gpt3-175b_a100_sxm.csv", kPp, dir_.file("profile4.csv"));
    std::ofstream(dir_.file("token")) << kToken << "\n";
    server_ = spawn({PERSEUS_BINARY, "serve", "--port", "0", "--port-file", dir_.file("port"), "--db",
                     dir_.file("perseus.db"), "--token-file", dir_.file("token")},
                    {}, dir_.file("serve.log"));
    ASSERT_TRUE(wait_for([&] { return !read_file(dir_.file("port")).empty(); }, 30)) << read_file(dir_.file("serve.log"));
    port_ = std::stoi(read_file(dir_.file("port")));
  }
  void TearDown() override {
    for (pid_t p : trainers_) wait_exit(p, 1);
    if (server_ > 0) {
      ::kill(server_, SIGKILL);
      wait_exit(server_, 10);
    }
  }

  httplib::Client http() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_bearer_token_auth(kToken);
    c.set_read_timeout(30, 0);
    return c;
  }
  json get(const std::string& path) const {
    auto res = http().Get(path);
    if (!res || res->status != 200) return json();
    return json::parse(res->body);
  }

  std::string create_job(bool detection) {
    json body = {{"name", "straggler-e2e"}, {"pp", kPp}, {"dp", kDp}, {"microbatches", kMicrobatches},
                 {"p2p_power_w", kPBlockW}, {"profile_csv", read_file(dir_.file("profile4.csv"))},
                 {"straggler_detection", {{"enabled", detection}}}};
    auto res = http().Post("/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 201) << (res ? res->body : "no answer");
    if (!res || res->status != 201) return "";
    const std::string id = json::parse(res->body)["job_id"];
    EXPECT_TRUE(wait_for([&] { return get("/v1/jobs/" + id).value("status", "") != "planning"; }, 120));
    EXPECT_EQ(get("/v1/jobs/" + id).value("status", ""), "ready");
    return id;
  }

  /// Runs `iterations` in lockstep. `slowdown`: FROM:UNTIL:FACTOR for pipeline kStraggler;
  /// `ignore_clocks_pipeline`: a pipeline whose GPUs ignore clock requests (-1: none).
  LockstepRun run(const std::string& name, bool detection, int iterations, const std::string& slowdown,
          int ignore_clocks_pipeline = -1) {
    LockstepRun out;
    out.job_id = create_job(detection);
    if (out.job_id.empty()) return out;
    const std::string gate = dir_.file(name);
    std::filesystem::create_directories(gate);
    std::string pause_at;
    for (int k = 0; k < iterations; ++k) pause_at += (k ? "," : "") + std::to_string(k);
    for (int dp = 0; dp < kDp; ++dp) {
      for (int pp = 0; pp < kPp; ++pp) {
        const int rank = dp * kPp + pp;
        std::vector<std::string> argv = {
            TEST_TRAINER, "--url", "http://127.0.0.1:" + std::to_string(port_), "--token", kToken, "--job",
            out.job_id, "--rank", std::to_string(rank), "--dp", std::to_string(dp), "--pp", std::to_string(pp),
            "--stages", std::to_string(kPp), "--microbatches", std::to_string(kMicrobatches), "--iterations",
            std::to_string(iterations), "--backend", "simulated", "--profile", dir_.file("profile4.csv"),
            "--blocking-power", std::to_string(kPBlockW), "--virtual-clock", "--pipeline-model", "--jitter", "0.01",
            "--seed", "7", "--poll", "0.01", "--energy-log", gate + "/energy_" + std::to_string(rank), "--pause-at",
            pause_at, "--gate", gate};
        if (dp == kStraggler) argv.insert(argv.end(), {"--slowdown", slowdown});
        if (dp == ignore_clocks_pipeline) argv.push_back("--ignore-clocks");
        trainers_.push_back(spawn(argv, {}, gate + "/trainer_" + std::to_string(rank) + ".log"));
      }
    }
    auto paused_version = [&](int rank, int k) {
      const std::string t = read_file(gate + "/paused_" + std::to_string(rank) + "_" + std::to_string(k));
      return t.empty() ? -2L : std::stol(t);
    };
    const std::string job_path = "/v1/jobs/" + out.job_id;
    for (int k = 0; k < iterations; ++k) {
      // Every rank waits before iteration k ...
      EXPECT_TRUE(wait_for([&] {
        for (int r = 0; r < kRanks; ++r)
          if (paused_version(r, k) == -2) return false;
        return true;
      }, 120)) << name << ": trainers did not reach gate " << k;
      // ... the server processed all their measurements of iterations < k (and decided) ...
      json job;
      EXPECT_TRUE(wait_for([&] {
        job = get(job_path);
        return job.is_object() && job["straggler_loop"]["measurements_processed"].get<long>() == long{kRanks} * k;
      }, 120)) << name << ": measurements of gate " << k << " missing: " << job.dump().substr(0, 300);
      // ... and every client fetched its pipeline's current plan.
      EXPECT_TRUE(wait_for([&] {
        for (int r = 0; r < kRanks; ++r)
          if (paused_version(r, k) < job["pipelines"][r / kPp]["version"].get<long>()) return false;
        return true;
      }, 120)) << name << ": plans not fetched at gate " << k;
      out.job_at_gate.push_back(job);
      if (HasFailure()) break;
      std::ofstream(gate + "/resume_" + std::to_string(k)) << "go\n";
    }
    if (HasFailure()) {
      for (int k = 0; k < iterations; ++k) std::ofstream(gate + "/resume_" + std::to_string(k)) << "go\n";
    }
    for (std::size_t r = 0; r < trainers_.size(); ++r) {
      const int status = wait_exit(trainers_[r], 120);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << name << " rank " << r << ": " << read_file(gate + "/trainer_" + std::to_string(r) + ".log");
    }
    trainers_.clear();
    out.by_rank.resize(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (const auto& l : nonempty_lines(read_file(gate + "/energy_" + std::to_string(r)))) {
        std::istringstream in(l);
        int it = 0;
        RankIteration ri;
        if (in >> it >> ri.version >> ri.time_s >> ri.energy_j) out.by_rank[r][it] = ri;
      }
    }
    out.final_job = get(job_path);
    return out;
  }

  /// Cluster energy of iterations [from, until), J: every GPU's own energy plus P_block while
  /// it waits for the slowest pipeline at the gradient synchronization.
  static double cluster_energy_j(const LockstepRun& r, int from, int until) {
    double e = 0;
    for (int it = from; it < until; ++it) {
      double cluster_t = 0;
      for (int rank = 0; rank < kRanks; ++rank) cluster_t = std::max(cluster_t, r.by_rank[rank].at(it).time_s);
      for (int rank = 0; rank < kRanks; ++rank) {
        const auto& ri = r.by_rank[rank].at(it);
        e += ri.energy_j + kPBlockW * (cluster_t - ri.time_s);
      }
    }
    return e;
  }

  /// First gate at which `pred` holds for the job state, or -1.
  static int first_gate(const LockstepRun& r, int from, const std::function<bool(const json&)>& pred) {
    for (int k = from; k < static_cast<int>(r.job_at_gate.size()); ++k)
      if (pred(r.job_at_gate[k])) return k;
    return -1;
  }

  /// perseus emulate's predicted extrinsic saving of Perseus at `slowdown`, %.
  double emulate_extrinsic_saving_pct(double slowdown) {
    const std::string out = dir_.file("emulate");
    const pid_t p = spawn({PERSEUS_BINARY, "emulate", "--profile", dir_.file("profile4.csv"), "--stages",
                           std::to_string(kPp), "--microbatches", std::to_string(kMicrobatches), "--global-batch",
                           std::to_string(kMicrobatches * kDp), "--p2p-power", std::to_string(kPBlockW), "--tp", "1",
                           "--time-scale", "1", "--slowdown", std::to_string(slowdown), "--out", out},
                          {}, dir_.file("emulate.log"));
    const int status = wait_exit(p, 300);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir_.file("emulate.log"));
    for (const auto& l : nonempty_lines(read_file(out + "/emulation.csv"))) {
      std::vector<std::string> f;
      std::istringstream in(l);
      for (std::string c; std::getline(in, c, ',');) f.push_back(c);
      if (f.size() >= 6 && f[0] == "perseus") return std::stod(f[5]);
    }
    ADD_FAILURE() << "no perseus row in " << out << "/emulation.csv";
    return 0;
  }

  TempDir dir_;
  pid_t server_ = 0;
  int port_ = 0;
  std::vector<pid_t> trainers_;
};

bool is_detected_straggler(const json& job, int d) {
  return job["pipelines"][d]["straggler"].get<bool>() &&
         job["straggler_loop"]["pipelines"][d]["straggler_origin"] == "detected";
}

TEST_F(StragglerE2E, DetectsSwitchesVerifiesClearsAndSavesWhatEmulatePredicts) {
  constexpr int kIterations = 50, kSlowFrom = 10, kSlowUntil = 35;
  const std::string slowdown = std::to_string(kSlowFrom) + ":" + std::to_string(kSlowUntil) + ":1.2";
  const LockstepRun with = run("with", true, kIterations, slowdown);
  ASSERT_FALSE(HasFailure());
  const LockstepRun without = run("without", false, kIterations, slowdown);
  ASSERT_FALSE(HasFailure());

  // Detection: the gate at which the server had declared pipeline 2 (from measurements of
  // iterations < gate), and nothing else ever.
  const int detected = first_gate(with, 0, [](const json& j) { return is_detected_straggler(j, kStraggler); });
  ASSERT_GE(detected, kSlowFrom) << "detected before the slowdown";
  EXPECT_LE(detected - kSlowFrom, 5) << "slowed iterations measured before detection";
  const int fastest = with.final_job["frontier"]["fastest_index"];
  const json& at = with.job_at_gate[detected];
  for (int d = 0; d < kDp; ++d) {
    if (d == kStraggler) EXPECT_EQ(at["pipelines"][d]["plan_index"], fastest);
    else EXPECT_NE(at["pipelines"][d]["plan_index"], fastest) << "pipeline " << d << " was not switched";
  }
  // Clearing after recovery.
  const int cleared = first_gate(with, detected, [](const json& j) { return j["stragglers"].empty(); });
  ASSERT_GT(cleared, kSlowUntil);
  EXPECT_LE(cleared - kSlowUntil, 10) << "recovered iterations measured before clearing";
  for (int d = 0; d < kDp; ++d) EXPECT_EQ(with.job_at_gate[cleared]["pipelines"][d]["plan_index"], fastest);
  // Decisions: one detected set, a verification that verified every switched pipeline, one
  // detected clear; the run without detection decided nothing.
  std::map<std::string, int> actions;
  json verification;
  for (const auto& dec : with.final_job["decisions"]) {
    actions[dec["action"]]++;
    if (dec["action"] == "verification" && verification.is_null()) verification = dec;
    if (dec["action"] != "verification") {
      EXPECT_EQ(dec["origin"], "detected") << dec.dump();
    }
  }
  EXPECT_EQ(actions["straggler_set"], 1);
  EXPECT_EQ(actions["straggler_cleared"], 1);
  EXPECT_EQ(actions["replanned"], 0);
  ASSERT_FALSE(verification.is_null());
  EXPECT_EQ(verification["verdicts"].size(), 3u);
  for (const auto& v : verification["verdicts"]) EXPECT_EQ(v["verdict"], "verified") << v.dump();
  EXPECT_TRUE(without.final_job["decisions"].empty());

  // Energy over the iterations the switch was in force, and over the whole run.
  const double e_with = cluster_energy_j(with, detected, kSlowUntil);
  const double e_without = cluster_energy_j(without, detected, kSlowUntil);
  const double measured_pct = 100.0 * (1.0 - e_with / e_without);
  const double total_pct = 100.0 * (1.0 - cluster_energy_j(with, 0, kIterations) / cluster_energy_j(without, 0, kIterations));
  const double predicted_pct = emulate_extrinsic_saving_pct(1.2);
  std::cout << "[straggler e2e] detected at gate " << detected << " (slowed from " << kSlowFrom << "), cleared at gate "
            << cleared << " (recovered at " << kSlowUntil << ")\n"
            << "[straggler e2e] cluster energy, iterations " << detected << ".." << kSlowUntil - 1
            << ": with detection " << e_with << " J, without " << e_without << " J, saving " << measured_pct
            << " %; perseus emulate predicts " << predicted_pct << " %\n"
            << "[straggler e2e] whole run (" << kIterations << " iterations): saving " << total_pct << " %\n"
            << "[straggler e2e] verification: " << verification.dump() << "\n";
  RecordProperty("measured_saving_pct", std::to_string(measured_pct));
  RecordProperty("emulate_saving_pct", std::to_string(predicted_pct));
  EXPECT_LT(e_with, e_without);
  EXPECT_NEAR(measured_pct, predicted_pct, 1.0);
  // /metrics exposes the loop.
  auto res = http().Get("/metrics");
  ASSERT_TRUE(res && res->status == 200);
  EXPECT_NE(res->body.find("perseus_pipeline_straggler{job=\"" + with.job_id + "\",pipeline=\"2\",origin=\"none\"} 0"),
            std::string::npos);
  EXPECT_NE(res->body.find("perseus_job_straggler_decisions_total{job=\"" + with.job_id + "\",action=\"straggler_set\"} 1"),
            std::string::npos);
  // The job report draws the decisions from an export of GET /v1/jobs/{id}.
  const std::string export_path = dir_.file("job_export.json");
  std::ofstream(export_path) << with.final_job.dump();
  const pid_t rp = spawn({PERSEUS_BINARY, "report", "--job", export_path}, {}, dir_.file("report.log"));
  const int rs = wait_exit(rp, 120);
  ASSERT_TRUE(WIFEXITED(rs) && WEXITSTATUS(rs) == 0) << read_file(dir_.file("report.log"));
  const std::string html = read_file(dir_.file("job_export.html"));
  auto occurrences = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto p = html.find(what); p != std::string::npos; p = html.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(occurrences("class=\"marker straggler_set\""), 1u);
  EXPECT_EQ(occurrences("class=\"marker straggler_cleared\""), 1u);
  EXPECT_EQ(occurrences("class=\"marker verification verified\""), 3u);
  EXPECT_EQ(occurrences("class=\"band straggler\""), 1u);
  if (const char* keep = std::getenv("PERSEUS_E2E_KEEP_EXPORT")) {  // docs: the example in docs/stragglers.md
    std::ofstream(std::string(keep) + ".json") << with.final_job.dump(1);
    std::ofstream(std::string(keep) + ".html") << html;
  }
}

TEST_F(StragglerE2E, APipelineWhoseGpusIgnoreClocksIsCaughtAndReverted) {
  constexpr int kIterations = 40, kIgnoring = 1;
  const LockstepRun r = run("ignore", true, kIterations, "5:1000:1.2", kIgnoring);
  ASSERT_FALSE(HasFailure());
  const int fastest = r.final_job["frontier"]["fastest_index"];
  const json& p = r.final_job["pipelines"];
  const json& loop = r.final_job["straggler_loop"]["pipelines"];
  EXPECT_TRUE(is_detected_straggler(r.final_job, kStraggler));
  EXPECT_EQ(loop[kIgnoring]["verification"], "reverted") << loop.dump();
  EXPECT_TRUE(loop[kIgnoring]["reverted"].get<bool>());
  EXPECT_EQ(p[kIgnoring]["plan_index"], fastest);
  for (int d : {0, 3}) {
    EXPECT_EQ(loop[d]["verification"], "verified") << loop.dump();
    EXPECT_NE(p[d]["plan_index"], fastest);
  }
  int retargets = 0;
  for (const auto& dec : r.final_job["decisions"])
    if (dec["action"] == "verification")
      for (const auto& v : dec["verdicts"])
        if (v["pipeline"] == kIgnoring && v["verdict"] == "retargeted") ++retargets;
  EXPECT_EQ(retargets, r.final_job["straggler_loop"]["options"]["max_replans"].get<int>());
  std::cout << "[straggler e2e] ignored clocks: " << loop[kIgnoring].dump() << "\n";
}

}  // namespace
