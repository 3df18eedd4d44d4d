// Request validation that a new-user trial found loose: unknown fields on the routes that
// configure or decide (jobs, ranks, stragglers), numbers outside a double, ranks beyond 64 bits.
// Every refusal names the field and what was expected, and changes nothing.
#include <gtest/gtest.h>

#include <string>

#include "perseus/server/job_spec.hpp"
#include "test_util.hpp"

namespace perseus::server::testing {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A solved job with one pipeline of 8 registered ranks.
std::string ready_job(Api& api) {
  auto r = api.post("/v1/jobs", profile_job(1, 8));
  EXPECT_EQ(r.status, 201) << r.body;
  const std::string job = r.j["job_id"];
  wait_status(api, job, "ready");
  for (int p = 0; p < 8; ++p)
    EXPECT_EQ(api.post("/v1/jobs/" + job + "/ranks", {{"rank", p}, {"dp_rank", 0}, {"pp_rank", p}, {"tp_rank", 0}})
                  .status,
              201);
  return job;
}

// P_block typed in mW (NVML's unit) was planned without a word (session 22's trial): the job is
// created (the numbers are the operator's), and its answer and JSON carry the warning that
// `perseus optimize` prints; a plausible job has none.
TEST(RequestFields, ImplausibleUnitsAreWarnedAboutInTheJob) {
  TempDir dir;
  LocalServer srv(dir.file("f.db"));
  Api api(srv.port());
  json body = profile_job(1, 8);
  body["p2p_power_w"] = 83640.0;
  auto r = api.post("/v1/jobs", body);
  ASSERT_EQ(r.status, 201) << r.body;
  ASSERT_EQ(r.j["warnings"].size(), 1u) << r.body;
  EXPECT_NE(r.j["warnings"][0].get<std::string>().find("profile_csv: P_block 83640 W is above the power of stage"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(api.get("/v1/jobs/" + r.j["job_id"].get<std::string>()).j["warnings"], r.j["warnings"]);
  auto ok = api.post("/v1/jobs", profile_job(1, 8));
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.j["warnings"], json::array());
}

// The job-size bound names the fields, the product, the limit and the value (before: "pp*chunks*
// microbatches is too large for one job", naming neither).
TEST(RequestFields, JobSizeBoundNamesTheProductAndTheLimit) {
  TempDir dir;
  LocalServer srv(dir.file("f.db"));
  Api api(srv.port());
  json body = profile_job(1, 8);
  body["pp"] = 1024;
  body["microbatches"] = 4096;
  auto r = api.post("/v1/jobs", body);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "invalid_field") << r.body;
  EXPECT_EQ(r.j["error"]["message"],
            "fields \"pp\", \"chunks\", \"microbatches\": pp*chunks*microbatches*3 (the computations of one "
            "pipeline iteration) must be at most 4000000, got 1024*1*4096*3 = 12582912")
      << r.body;
  EXPECT_EQ(api.get("/v1/jobs").j["jobs"].size(), 0u);
}

TEST(RequestFields, UnknownFieldsOfControlRoutesAreRefused) {
  TempDir dir;
  LocalServer srv(dir.file("f.db"));
  Api api(srv.port());
  const std::string job = ready_job(api);

  // Stragglers: a typo must not be ignored.
  auto r = api.post("/v1/jobs/" + job + "/stragglers", {{"pipeline", 0}, {"slowdown", 1.2}, {"slowdwn", 2}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "invalid_field") << r.body;
  EXPECT_EQ(r.j["error"]["message"],
            "unknown field \"slowdwn\"; accepted fields: pipeline, slowdown, iteration_time_s") << r.body;
  EXPECT_EQ(api.get("/v1/jobs/" + job).j["decisions_total"], 0) << "nothing decided";

  // Rank registration.
  r = api.post("/v1/jobs/" + job + "/ranks", {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"gpu", 1}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_TRUE(has(r.j["error"]["message"], "unknown field \"gpu\"")) << r.body;

  // Job creation: "unit_time" for "unit_time_s" would silently plan with the default quantum.
  json spec = profile_job(1, 8);
  spec["unit_time"] = 0.5;
  r = api.post("/v1/jobs", spec);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_TRUE(has(r.j["error"]["message"], "unknown field \"unit_time\"; accepted fields: ")) << r.body;
  EXPECT_TRUE(has(r.j["error"]["message"], "unit_time_s")) << r.body;
  EXPECT_EQ(api.get("/v1/jobs").j["jobs"].size(), 1u) << "no job created";

  // Measurements are telemetry: unknown fields are ignored (and never stored), as documented.
  r = api.post("/v1/jobs/" + job + "/ranks/0/measurements", {{"iteration", 1}, {"time_s", 1.0}, {"gpu_temp_c", 60}});
  EXPECT_EQ(r.status, 202) << r.body;
}

// Every field the server stores for a job (any plan source) is accepted when posted back.
TEST(RequestFields, EveryStoredJobFieldIsARequestField) {
  const auto& fields = JobSpec::request_fields();
  for (PlanSource source : {PlanSource::kProfile, PlanSource::kPlans, PlanSource::kZeusPlans, PlanSource::kProfiling}) {
    JobSpec s;
    s.source = source;
    s.profile_csv = "stage,instruction,frequency,time,energy\n";
    s.plans = json::array({json::object()});
    s.zeus_plans = {"[[1410]]"};
    const json stored = s.to_json();
    for (const auto& [k, v] : stored.items())
      EXPECT_NE(std::find(fields.begin(), fields.end(), k), fields.end()) << k << " (" << to_string(source) << ")";
  }
}

TEST(RequestFields, NumberOutsideDoubleNamesTheField) {
  TempDir dir;
  LocalServer srv(dir.file("f.db"));
  Api api(srv.port());
  const std::string job = ready_job(api);
  auto r = api.post_raw("/v1/jobs/" + job + "/stragglers", "{\"pipeline\": 0,\n \"slowdown\": 1e400}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "number_out_of_range") << r.body;
  EXPECT_EQ(r.j["error"]["message"], "request body, line 2, column 18: field \"slowdown\": number 1e400 is outside "
                                     "the range of a double (±1.8e308); expected a finite number")
      << r.body;
  r = api.post_raw("/v1/jobs/" + job + "/stragglers", "{\"pipeline\": 0, \"slowdown\": }");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"]["code"], "malformed_json") << r.body;
  EXPECT_TRUE(has(r.body, "request body, line 1: field \\\"slowdown\\\": malformed JSON at column 29")) << r.body;
  EXPECT_FALSE(has(r.body, "json.exception")) << r.body;
}

TEST(RequestFields, RankBeyond64BitsNamesTheRange) {
  TempDir dir;
  LocalServer srv(dir.file("f.db"));
  Api api(srv.port());
  const std::string job = ready_job(api);
  auto r = api.post_raw("/v1/jobs/" + job + "/ranks",
                        R"({"rank": 99999999999999999999, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["message"],
            "field \"rank\" must be an integer in [0, 7], got 1e+20 (beyond the 64-bit integer range)")
      << r.body;
  r = api.post_raw("/v1/jobs/" + job + "/ranks", R"({"rank": 18446744073709551615, "dp_rank": 0, "pp_rank": 0})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.j["error"]["message"], "field \"rank\" must be an integer in [0, 7], got 18446744073709551615") << r.body;
  r = api.get("/v1/jobs/" + job + "/ranks/99999999999999999999/plan");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.j["error"]["message"],
            "rank must be a non-negative integer (at most 9223372036854775807), got '99999999999999999999' (beyond "
            "64 bits)")
      << r.body;
}

}  // namespace
}  // namespace perseus::server::testing
