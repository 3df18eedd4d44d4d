// Check against reality: measured real-GPU plans vs our DAG + simulator predictions.
#include "perseus/validation.hpp"

#include <cmath>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <fstream>

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
  // The overhead model (per-computation overhead calibrated on the all-max plans, no constant),
  // docs/validation.md: issue 19's acceptance on every workload but a40_pp8_t5-3b, whose
  // iteration is dominated by something no DAG model explains (measured times fall while
  // computation grows; documented there).
  for (const auto& r : all) {
    EXPECT_GT(r.overheads.op_overhead_s, 0.0) << r.workload;
    EXPECT_EQ(r.overheads.p2p_latency_s, 0.0) << r.workload;
    if (r.workload == "a40_pp8_t5-3b") continue;
    EXPECT_LT(r.overheads.op_overhead_s, 0.010) << r.workload;  // measured 3.3-7.6 ms
    EXPECT_LE(r.median_abs_model_error_pct, 2.0) << r.workload;
    EXPECT_LE(r.max_abs_model_error_pct, 5.0) << r.workload;
    EXPECT_LE(std::abs(r.median_model_error_pct), 3.0) << r.workload;
    // Calibration reproduces the all-max plans' mean measured time.
    double sim = 0, meas = 0, n = 0;
    for (const auto& p : r.plans) {
      if (p.all_max) sim += p.model_time_s, meas += p.measured_time_s, n += 1;
    }
    EXPECT_NEAR(sim / n, meas / n, 1e-9 * meas) << r.workload;
  }
  EXPECT_LE(overall_median_abs_model_error_pct(all), 0.5);
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

// Per-computation overhead o: the all-max plan's 1F1B time is 9 + 6o (each GPU runs 4
// computations, the critical path 6), so o = 1/6 s for the measured 10 s; plan 1's slower F1 is
// off the critical path: 10 s predicted for 10.5 s measured.
TEST(Validation, TinyWorkloadOverheadByHand) {
  TinyWorkload w;
  const RealGpuValidation r = validate_real_gpu(w.path());
  EXPECT_NEAR(r.overheads.op_overhead_s, 1.0 / 6.0, 1e-12);
  EXPECT_NEAR(r.plans[0].model_time_s, 10.0, 1e-11);
  EXPECT_NEAR(r.plans[1].model_time_s, 10.0, 1e-11);
  EXPECT_NEAR(r.median_model_error_pct, 100.0 * (10.0 - 10.5) / 10.5, 1e-9);
  // A given P2P latency (on F of stage 0 and B of stage 1) leaves less to the per-computation
  // overhead: critical path F0(s0) F0(s1) B0(s1) F1(s1) B1(s1) B1(s0) = 9 + 6o + 3×0.25.
  const RealGpuValidation p = validate_real_gpu(w.path(), {}, 0.25);
  EXPECT_NEAR(p.overheads.op_overhead_s, 0.25 / 6.0, 1e-12);
  EXPECT_NEAR(p.plans[0].model_time_s, 10.0, 1e-11);
  EXPECT_THROW(validate_real_gpu(w.path(), {}, -1.0), InputError);
}

// A DAG already longer than measured: no negative overhead, the model is the bare DAG.
TEST(Validation, NoNegativeOverhead) {
  TinyWorkload w;
  w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,8.0,1,1\n1,8.5,1,0\n");
  const RealGpuValidation r = validate_real_gpu(w.path());
  EXPECT_EQ(r.overheads.op_overhead_s, 0.0);
  EXPECT_DOUBLE_EQ(r.plans[1].model_time_s, 9.0);
}

void expect_error(const std::string& dir, const std::string& what) {
  try {
    validate_real_gpu(dir);
    FAIL() << what;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// A 3D run (dp 2 × pp 2 × tp 2): rows per (dp_rank, tp_rank). Replica 0's stage 1 has a slow
// TP GPU (backward 2.5 s instead of 2 s): its stage takes the slowest GPU, so replica 0 runs
// s1: F0 [1,2] B0 [2,4.5] F1 [4.5,5.5] B1 [5.5,8], s0: B1 [8,10] -> 10 s; replica 1 9 s; the
// iteration is the slowest replica's: 10 s.
struct Tiny3dWorkload {
  testing::TempDir dir;
  explicit Tiny3dWorkload(int tp1_freq_of_f01 = 1000) {
    dir.write("info.json", R"({"pp": 2, "num_microbatches": 2, "dp": 2, "tp": 2})");
    std::string prof = "stage,instruction,frequency,time,dp_rank,tp_rank\n";
    for (int d = 0; d < 2; ++d)
      for (int t = 0; t < 2; ++t) {
        prof += fmt::format("0,forward,1000,1.0,{0},{1}\n0,backward,1000,2.0,{0},{1}\n1,forward,1000,1.0,{0},{1}\n"
                            "1,backward,1000,{2},{0},{1}\n0,forward,500,2.0,{0},{1}\n",
                            d, t, d == 0 && t == 1 ? 2.5 : 2.0);
      }
    dir.write("time_profile.csv", prof);
    std::string plans = "plan,stage,order,instruction,microbatch,frequency_mhz,dp_rank,tp_rank\n";
    for (int p = 0; p < 2; ++p)
      for (int d = 0; d < 2; ++d)
        for (int t = 0; t < 2; ++t) {
          const int f01 = p == 0 ? 1000 : (t == 1 ? tp1_freq_of_f01 : 500);
          plans += fmt::format("{0},0,0,forward,0,1000,{2},{3}\n{0},0,1,forward,1,{1},{2},{3}\n"
                               "{0},0,2,backward,0,1000,{2},{3}\n{0},0,3,backward,1,1000,{2},{3}\n"
                               "{0},1,0,forward,0,1000,{2},{3}\n{0},1,1,backward,0,1000,{2},{3}\n"
                               "{0},1,2,forward,1,1000,{2},{3}\n{0},1,3,backward,1,1000,{2},{3}\n",
                               p, f01, d, t);
        }
    dir.write("perseus_plans.csv", plans);
    dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,11.0,1,1\n1,11.5,1,0\n");
  }
  std::string path() const { return dir.path().string(); }
};

TEST(Validation, ThreeDimensionalRunByHand) {
  Tiny3dWorkload w(500);
  const RealGpuValidation r = validate_real_gpu(w.path());
  EXPECT_EQ(r.dp, 2);
  EXPECT_EQ(r.tp, 2);
  ASSERT_EQ(r.plans.size(), 2u);
  EXPECT_DOUBLE_EQ(r.plans[0].dag_time_s, 10.0);
  EXPECT_DOUBLE_EQ(r.plans[1].dag_time_s, 10.0);  // F(0,1) at 500 MHz is off the critical path
  EXPECT_DOUBLE_EQ(r.overhead_s, 1.0);             // the gradient all-reduce & co., per iteration
}

TEST(Validation, ThreeDimensionalErrors) {
  {
    Tiny3dWorkload w(1000);  // plan 1: tp_rank 0 at 500 MHz, tp_rank 1 at 1000 MHz
    expect_error(w.path(), "one clock per stage across its TP GPUs");
  }
  {
    Tiny3dWorkload w(500);
    w.dir.write("info.json", R"({"pp": 2, "num_microbatches": 2, "dp": 1, "tp": 2})");
    expect_error(w.path(), "time_profile.csv:12: field 'dp_rank': expected 0..0 (info.json 'dp' = 1), got 1");
  }
  {
    Tiny3dWorkload w(500);
    w.dir.write("time_profile.csv", "stage,instruction,frequency,time,tp_rank\n0,forward,1000,1,0\n0,forward,1000,1,0\n");
    expect_error(w.path(), "time_profile.csv:3: field 'frequency': duplicate row for stage 0 forward at 1000 MHz");
  }
  {
    // info.json's pp above the data's stages is named as such, not as a schedule-order error
    // in perseus_plans.csv (session 32's trial).
    Tiny3dWorkload w(500);
    w.dir.write("info.json", R"({"pp": 3, "num_microbatches": 2, "dp": 2, "tp": 2})");
    expect_error(w.path(), "info.json: field 'pp': info.json says 3 stages, but time_profile.csv has no row for stage 2 "
                           "(2 stage(s) have rows): is 'pp' right?");
  }
}


// Absurd measurements are refused with the optimizer's ranges, and a run without the all-max
// plans that calibrate the overheads (or without a plan to score) is an error, not a table of
// 300-digit numbers or a silent overhead of 0.
TEST(Validation, ImpossibleMeasurementsAndMissingCalibrationPlans) {
  // Session 21's trial: an all-max plan measured far faster than its own computations (a negative
  // "constant" overhead resulted) or far slower (an overhead of 6.4e7 ms per computation) was
  // turned into confident results. Refused now with the line, naming the computation-only time.
  for (const char* row : {"0,0.5,1,1", "1,9e6,1,0"}) {
    TinyWorkload w;
    std::string frontier = "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5,1,0\n";
    frontier.replace(frontier.find(row[0] == '0' ? "0,10.0,1,1" : "1,10.5,1,0"), 10, row);
    w.dir.write("perseus_frontier.csv", frontier);
    expect_error(w.path(), std::string("perseus_frontier.csv:") + (row[0] == '0' ? "2" : "3") +
                               ": field 'time_s': plan " + row[0] + " measured ");
    expect_error(w.path(), "expected a time in [0.5, 1000] x that (a time in other units, or of another plan?)");
  }
  {
    TinyWorkload w("", "0,forward,900,1e300,0,1,1\n");
    expect_error(w.path(), "time_profile.csv:7: field 'time': expected a duration in [1e-06, 100000] s");
  }
  {
    TinyWorkload w("", "0,forward,900,1e-300,0,1,1\n");
    expect_error(w.path(), "time_profile.csv:7: field 'time': expected a duration in [1e-06, 100000] s");
  }
  {
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,1e300,1,1\n1,10.5,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:2: field 'time_s': expected an iteration time in [1e-06, 10000000] s");
  }
  {
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,0\n1,10.5,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv: no plan is flagged all_max_frequency = 1");
  }
  {  // plan 0 alone, all-max: nothing to score
    TinyWorkload w;
    std::ifstream in(w.dir.path() / "perseus_plans.csv");
    std::string kept, line;
    while (std::getline(in, line))
      if (line.rfind("plan,", 0) == 0 || line.rfind("0,", 0) == 0) kept += line + "\n";
    w.dir.write("perseus_plans.csv", kept);
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n");
    expect_error(w.path(), "perseus_frontier.csv: every measured plan is flagged all_max_frequency = 1");
  }
  {  // profile rows outside the pipeline or the clock range are named where they are
    TinyWorkload w("", "7,forward,1000,1.0,0,1,1\n");
    expect_error(w.path(), "time_profile.csv:7: field 'stage': expected 0..1 (info.json 'pp' = 2), got 7");
  }
  {
    TinyWorkload w("", "0,forward,-1410,1.0,0,1,1\n");
    expect_error(w.path(), "time_profile.csv:7: field 'frequency': expected a clock in MHz (1..100000), got -1410");
  }
  {  // the same computation of a plan twice: the last row would silently win
    TinyWorkload w("1,0,0,forward,0,1000,1\n");
    expect_error(w.path(), "perseus_plans.csv:18: field 'plan': duplicate row for plan 1 stage 0 forward microbatch 0 "
                           "(first on line 10)");
  }
  {  // a measured plan without its frequencies would be dropped silently
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5,1,0\n9,11,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:4: field 'plan': plan 9 has no rows in perseus_plans.csv");
  }
  {  // a folder or an unreadable file is named as such, not as an empty file
    TinyWorkload w;
    std::filesystem::remove(w.dir.path() / "perseus_plans.csv");
    std::filesystem::create_directory(w.dir.path() / "perseus_plans.csv");
    expect_error(w.path(), "perseus_plans.csv: is a folder, not a CSV file");
  }
}

// A P2P latency longer than the all-max plans' measured gap leaves no per-computation overhead
// to calibrate: the result says so instead of silently clamping it at 0.
TEST(Validation, LatencyBeyondTheMeasuredGapIsAWarning) {
  TinyWorkload w;
  EXPECT_TRUE(validate_real_gpu(w.path(), {}, 0.01).warnings.empty());
  const RealGpuValidation r = validate_real_gpu(w.path(), {}, 5.0);
  EXPECT_EQ(r.overheads.op_overhead_s, 0.0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("the per-computation overhead is 0 and the overhead model overestimates"),
            std::string::npos)
      << r.warnings[0];
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
  {  // a NUL byte cut the line short without a word (session 22's trial); binary bytes named
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv",
                std::string("plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5") + '\0' + "9,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:3: contains a NUL byte (expected CSV text)");
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j\x01\n0,10.0,1\n");
    expect_error(w.path(), "perseus_frontier.csv:1: not a text CSV file: byte 0x01 at column");
  }
  {
    TinyWorkload w;
    w.dir.write("info.json", R"({"pp": "x"})");
    expect_error(w.path(), "info.json: field 'pp': expected an integer in [1, 1048576], got 'x'");
  }
  {
    // Named where the plan is (it named perseus_frontier.csv, without a line; session 20).
    TinyWorkload w("3,0,0,forward,0,1000,1\n");
    expect_error(w.path(), "perseus_plans.csv:18: field 'plan': plan 3 has no measured time in perseus_frontier.csv");
  }
  {
    TinyWorkload w("-1,0,0,forward,0,1000,1\n");
    expect_error(w.path(), "perseus_plans.csv:18: field 'plan': expected a plan number (an integer >= 0), got -1");
  }
  {  // a subnormal time printed as 0 s with an error of inf %
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,4.9e-324,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:3: field 'time_s': expected an iteration time in [1e-06, 10000000] s");
  }
  {  // a plan measured twice: the second row would silently win
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5,1,0\n1,99.0,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:4: field 'plan': duplicate row for plan 1 (first on line 3)");
  }
  {  // flagged all-max but plan 1 runs F(0,1) at 500 MHz: it would calibrate the overhead
    TinyWorkload w;
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,1\n1,10.5,1,1\n");
    expect_error(w.path(), "perseus_frontier.csv:3: field 'all_max_frequency': plan 1 is flagged all-max but runs "
                           "stage 0 forward microbatch 1 at 500 MHz, not the highest profiled clock 1000 MHz");
    w.dir.write("perseus_frontier.csv", "plan,time_s,energy_j,all_max_frequency\n0,10.0,1,2\n1,10.5,1,0\n");
    expect_error(w.path(), "perseus_frontier.csv:2: field 'all_max_frequency': expected 0 or 1, got 2");
  }
  {  // a header and no plans: an error, not a table of zeros
    TinyWorkload w;
    w.dir.write("perseus_plans.csv", "plan,stage,order,instruction,microbatch,frequency_mhz\n");
    expect_error(w.path(), "perseus_plans.csv: no plans (the file has no rows below its header)");
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
