// Check against reality: measured real-GPU plans vs our DAG + simulator predictions.
#include "perseus/validation.hpp"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "perseus/error.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

const char* kWorkloads[] = {"a100_pp4_gpt3-xl",          "a100_pp4_bert-huge-uncased", "a100_pp4_t5-3b",
                            "a40_pp8_gpt3-2.7b",         "a40_pp8_bert-huge-uncased",  "a40_pp8_t5-3b"};

// docs/validation.md: computation-only simulation + one overhead constant per workload,
// calibrated on the all-max warm-up plans only. Measured: overall median |error| 0.21%.
TEST(Validation, RealGpuMedianError) {
  std::vector<RealGpuValidation> all;
  for (const char* w : kWorkloads) all.push_back(validate_real_gpu(testing::test_data(std::string("real_gpu/") + w)));
  std::size_t scored = 0;
  for (const auto& r : all) {
    for (const auto& p : r.plans) scored += p.all_max ? 0 : 1;
    // Computation alone never explains the whole iteration: the DAG-only time is shorter.
    EXPECT_LT(r.median_dag_error_pct, 0.0) << r.workload;
    EXPECT_GT(r.overhead_s, 0.0) << r.workload;
  }
  EXPECT_EQ(scored, 190u);
  EXPECT_LE(overall_median_abs_error_pct(all), 1.0);
  // Long-iteration GPT workloads are dominated by computation: tight.
  EXPECT_LE(all[0].median_abs_error_pct, 0.5);
  EXPECT_LE(all[3].median_abs_error_pct, 0.5);
  EXPECT_NE(validation_markdown(all).find("| **all** | | | 190 |"), std::string::npos);
}

// A 2-stage, 2-microbatch workload with hand-checkable numbers.
struct TinyWorkload {
  testing::TempDir dir;
  TinyWorkload(const std::string& plans_extra = "", const std::string& profile_extra = "") {
    dir.write("info.json", R"({"pp": 2, "num_microbatches": 2})");
    dir.write("time_profile.csv",
              "stage,instruction,frequency,time,time_std,samples,plans\n"
              "0,forward,1000,1.0,0,1,1\n0,backward,1000,2.0,0,1,1\n1,forward,1000,1.0,0,1,1\n"
              "1,backward,1000,2.0,0,1,1\n0,forward,500,2.0,0,1,1\n" + profile_extra);
    // Plan 0 all-max (DAG time 9 s, measured 10 s); plan 1: F(0,1) at 500 MHz -> F1 [1,3],
    // B0 [4,6]: still 9 s; measured 10.5 s.
    std::string plans = "plan,stage,order,instruction,microbatch,frequency_mhz,time_s\n";
    for (int p = 0; p < 2; ++p) {
      plans += fmt::format("{0},0,0,forward,0,1000,1\n{0},0,1,forward,1,{1},1\n{0},0,2,backward,0,1000,2\n"
                           "{0},0,3,backward,1,1000,2\n{0},1,0,forward,0,1000,1\n{0},1,1,backward,0,1000,2\n"
                           "{0},1,2,forward,1,1000,1\n{0},1,3,backward,1,1000,2\n",
                           p, p == 0 ? 1000 : 500);
    }
    dir.write("perseus_plans.csv", plans + plans_extra);
    dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5,1,0\n");
  }
  std::string path() const { return dir.path().string(); }
};

TEST(Validation, TinyWorkloadByHand) {
  TinyWorkload w;
  const RealGpuValidation r = validate_real_gpu(w.path());
  EXPECT_EQ(r.num_ranks, 2);
  ASSERT_EQ(r.plans.size(), 2u);
  EXPECT_DOUBLE_EQ(r.plans[0].dag_time_s, 9.0);
  EXPECT_DOUBLE_EQ(r.overhead_s, 1.0);
  EXPECT_DOUBLE_EQ(r.plans[1].dag_time_s, 9.0);
  EXPECT_DOUBLE_EQ(r.plans[1].predicted_time_s, 10.0);
  EXPECT_DOUBLE_EQ(r.plans[1].error_pct, 100.0 * (10.0 - 10.5) / 10.5);
  EXPECT_DOUBLE_EQ(r.median_abs_error_pct, 100.0 * 0.5 / 10.5);
}

void expect_error(const std::string& dir, const std::string& what) {
  try {
    validate_real_gpu(dir);
    FAIL() << what;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(Validation, Errors) {
  {
    TinyWorkload w("2,0,0,forward,0,700,1\n");
    expect_error(w.path(), "perseus_plans.csv:18: field 'frequency_mhz': 700 MHz is not in time_profile.csv for stage 0 forward");
  }
  {
    TinyWorkload w("2,1,0,backward,0,1000,1\n");
    expect_error(w.path(), "perseus_plans.csv:18: field 'order': stage 1 backward microbatch 0 is at position 1");
  }
  {
    TinyWorkload w("2,5,0,forward,0,1000,1\n");
    expect_error(w.path(), "field 'stage': stage 5 forward microbatch 0 is not in the 2-stage, 2-microbatch 1F1B schedule");
  }
  {
    TinyWorkload w("", "0,forward,900,abc,0,1,1\n");
    expect_error(w.path(), "time_profile.csv:7: field 'time': expected a number, got 'abc'");
  }
  {
    TinyWorkload w;
    std::filesystem::remove(w.dir.path() / "time_profile.csv");
    expect_error(w.path(), "time_profile.csv: file not found");
  }
  {
    TinyWorkload w;
    w.dir.write("info.json", R"({"pp": "x"})");
    expect_error(w.path(), "expected integer fields 'pp' and 'num_microbatches'");
  }
  {
    TinyWorkload w("3,0,0,forward,0,1000,1\n");
    expect_error(w.path(), "perseus_frontier.csv: no measured time for plan 3");
  }
  // Issue 22: header and file errors list the expected columns and the folder format.
  {
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan;time_s;all_max_frequency\n0;10.0;1\n");
    expect_error(w.path(), "perseus_frontier.csv:1: the header has no column 'plan' (expected columns "
                           "plan,time_s,all_max_frequency, in any order, extra columns ignored; got "
                           "'plan;time_s;all_max_frequency'); the file is separated by ';'");
  }
  {
    TinyWorkload w;
    w.dir.write("perseus_plans.csv", "plan,stage,order,instruction,microbatch,frequency_mhz\n0,0,0,forward\n");
    expect_error(w.path(), "perseus_plans.csv:2: too few columns: expected one field per header column "
                           "(plan,stage,order,instruction,microbatch,frequency_mhz and any extra columns)");
  }
  {
    TinyWorkload w;
    w.dir.write("time_profile.csv", "");
    expect_error(w.path(), "time_profile.csv: the file is empty; expected a header line "
                           "stage,instruction,frequency,time, then the data rows");
  }
  {
    TinyWorkload w;
    std::filesystem::remove(w.dir.path() / "perseus_plans.csv");
    expect_error(w.path(), "perseus_plans.csv: file not found (a workload folder holds info.json, time_profile.csv, "
                           "perseus_frontier.csv and perseus_plans.csv; docs/validation.md, \"Folder format\")");
  }
}

}  // namespace
}  // namespace perseus
