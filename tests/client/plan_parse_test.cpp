// The client's plan check (parse_plan_json): a plan from the server is checked field by field
// and against the job's shape before any clock of it can reach a GPU (issue: a freq_mhz of
// 2^32 + 1305 wrapped to 1305 and was applied; plans of the wrong shape were applied).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "perseus/runtime/server_connection.hpp"

namespace perseus::runtime {
namespace {

using nlohmann::json;

/// A 1F1B plan of pp_rank `r` (chunks 1): forward and backward of every microbatch.
json plan_of(int r, int microbatches, int freq = 1410) {
  json list = json::array();
  for (int m = 0; m < microbatches; ++m) {
    list.push_back({{"instruction", "forward"}, {"stage", r}, {"microbatch", m}, {"freq_mhz", freq}});
    list.push_back({{"instruction", "backward"}, {"stage", r}, {"microbatch", m}, {"freq_mhz", freq}});
  }
  return {{"version", 1}, {"job_status", "running"}, {"instructions", list}};
}

/// The message parse_plan_json throws for `body`, or "" when it accepts it.
std::string refusal(const json& body, JobShape shape = {2, 1, 4}, int pp_rank = 1) {
  try {
    parse_plan_json(body.dump(), shape, pp_rank);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

TEST(PlanParse, WellFormedPlanIsAccepted) {
  const RankPlan p = parse_plan_json(plan_of(1, 2).dump(), {2, 1, 4}, 1);
  ASSERT_EQ(p.instructions.size(), 4u);
  EXPECT_EQ(p.instructions[3].instruction, "backward");
  EXPECT_EQ(p.instructions[3].freq_mhz, 1410);
  EXPECT_EQ(refusal(plan_of(1, 2)), "");
  // Unknown shape (an older server): the field checks still apply, the shape checks do not.
  EXPECT_EQ(refusal(plan_of(1, 3), JobShape{}), "");
}

TEST(PlanParse, ClockMustBeAnIntegerInRangeNeverNarrowed) {
  for (const json& bad : {json(4294968601LL), json(2147483648LL), json(1e300), json(1200.7), json("1200"), json(nullptr),
                          json(0), json(-5), json(100001), json(true)}) {
    json body = plan_of(1, 2);
    body["instructions"][2]["freq_mhz"] = bad;
    const std::string why = refusal(body);
    EXPECT_NE(why.find("freq_mhz"), std::string::npos) << bad.dump() << ": " << why;
    EXPECT_NE(why.find("#2"), std::string::npos) << bad.dump() << ": " << why;
  }
}

TEST(PlanParse, FieldsAndNamesAreChecked) {
  json body = plan_of(1, 2);
  body["instructions"][0]["instruction"] = "reset";
  EXPECT_NE(refusal(body).find("'reset'"), std::string::npos) << refusal(body);
  body = plan_of(1, 2);
  body["instructions"][1].erase("microbatch");
  EXPECT_NE(refusal(body).find("\"microbatch\""), std::string::npos) << refusal(body);
  body = plan_of(1, 2);
  body["instructions"][1]["stage"] = -1;
  EXPECT_NE(refusal(body).find("\"stage\""), std::string::npos) << refusal(body);
  body = plan_of(1, 2);
  body["instructions"] = json::object();
  EXPECT_NE(refusal(body).find("array"), std::string::npos) << refusal(body);
  EXPECT_THROW(parse_plan_json("{\"version\": 1, \"instructions\": [", {}, -1), std::exception) << "cut off mid-JSON";
  // A raw NUL ends the text for the JSON parser: what follows it was never read (session 20).
  const std::string cut = plan_of(1, 2).dump() + '\0' + "junk";
  try {
    parse_plan_json(cut, {2, 1, 4}, 1);
    ADD_FAILURE() << "a plan answer with a NUL byte was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
  }
}

// Session 32's trial: a null or list answer gave the JSON library's own text; a negative
// iteration time was returned by Client.plan(); another pp_rank's plan passed when its stage
// numbers did.
TEST(PlanParse, TheAnswerItsNumbersAndItsRankAreChecked) {
  EXPECT_EQ(refusal(json(nullptr)), "the plan answer must be a JSON object, got null");
  EXPECT_EQ(refusal(json::array({1, 2, 3})), "the plan answer must be a JSON object, got array");
  for (const char* key : {"iteration_time_s", "energy_j"}) {
    for (const json& bad : {json(-1), json("2"), json(true)}) {
      json body = plan_of(1, 2);
      body[key] = bad;
      EXPECT_NE(refusal(body).find(std::string("\"") + key + "\" must be a finite number >= 0"), std::string::npos)
          << bad.dump() << ": " << refusal(body);
    }
    json body = plan_of(1, 2);
    body[key] = nullptr;  // unknown
    EXPECT_EQ(refusal(body), "");
  }
  json body = plan_of(1, 2);
  body["iteration_time_s"] = 2.5;
  EXPECT_DOUBLE_EQ(parse_plan_json(body.dump(), {2, 1, 4}, 1).iteration_time_s, 2.5);
  body["pp_rank"] = 0;
  EXPECT_EQ(refusal(body), "the plan is for pp_rank 0, this rank's is 1");
  body["pp_rank"] = 1;
  EXPECT_EQ(refusal(body), "");
}

TEST(PlanParse, ShapeMustMatchTheRegistration) {
  EXPECT_NE(refusal(plan_of(1, 3)).find("microbatch 2 is beyond"), std::string::npos) << refusal(plan_of(1, 3));
  EXPECT_NE(refusal(plan_of(1, 4)).find("at most 6"), std::string::npos) << refusal(plan_of(1, 4));
  EXPECT_NE(refusal(plan_of(1, 1)).find("this rank runs 2"), std::string::npos) << refusal(plan_of(1, 1));
  EXPECT_NE(refusal(plan_of(2, 2)).find("not a stage of pp_rank 1"), std::string::npos) << "another rank's plan";
  json body = plan_of(1, 2);
  body["instructions"][2] = body["instructions"][0];  // forward of microbatch 0 twice, none of 1
  EXPECT_NE(refusal(body).find("twice"), std::string::npos) << refusal(body);
  body = plan_of(1, 2);
  body["instructions"][1]["instruction"] = "backward_input";  // mixes full and split backward
  EXPECT_NE(refusal(body).find("mixes full backward and split"), std::string::npos) << refusal(body);
  body = plan_of(1, 2);
  body["instructions"][1]["instruction"] = "backward_weight";  // a weight gradient without its input part
  EXPECT_NE(refusal(body).find("#1: backward_weight of stage 1 microbatch 0 comes before its backward_input"),
            std::string::npos)
      << refusal(body);
}

// A plan no schedule can run: a backward listed before its own forward passed, then every
// step failed with a PlanMismatch blaming the training loop (session 23's trial).
TEST(PlanParse, AComputationBeforeItsPredecessorIsRefused) {
  json body = plan_of(1, 2);
  std::swap(body["instructions"][0], body["instructions"][1]);  // 1B0 before 1F0
  EXPECT_NE(refusal(body).find("#0: backward of stage 1 microbatch 0 comes before its forward"), std::string::npos)
      << refusal(body);
  EXPECT_NE(refusal(body, JobShape{}).find("comes before its forward"), std::string::npos) << "also without a shape";
}

// A key given twice was read as its last value ({"freq_mhz":1410,"freq_mhz":210} applied
// 210 MHz); the server refuses such bodies, and now so does the client (session 23's trial).
TEST(PlanParse, AKeyGivenTwiceIsRefused) {
  std::string text = plan_of(1, 2).dump();
  const std::string first = "\"freq_mhz\":1410";
  text.replace(text.find(first), first.size(), first + ",\"freq_mhz\":210");
  try {
    parse_plan_json(text, {2, 1, 4}, 1);
    ADD_FAILURE() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("key 'freq_mhz' appears more than once"), std::string::npos) << e.what();
  }
  std::string twice = plan_of(1, 2).dump();
  twice.replace(twice.find("\"version\":1"), 11, "\"version\":1,\"version\":101");
  EXPECT_THROW(parse_plan_json(twice, {2, 1, 4}, 1), std::exception);
}

TEST(PlanParse, VersionMustBeAnIntegerInRange) {
  // A version of 3.7 was truncated to 3 and applied; 1e30 was cast out of range (undefined);
  // INT64_MAX froze every later plan (since_version could never be passed).
  for (const json& bad : {json(3.7), json(1e30), json(-1), json((std::int64_t{1} << 53) + 1), json(INT64_MAX),
                          json(UINT64_MAX), json("3"), json(nullptr)}) {
    json body = plan_of(1, 2);
    body["version"] = bad;
    EXPECT_NE(refusal(body).find("\"version\""), std::string::npos) << bad.dump() << ": " << refusal(body);
  }
  json body = plan_of(1, 2);
  body["version"] = std::int64_t{1} << 53;
  EXPECT_EQ(refusal(body), "");
}

TEST(PlanParse, EachComputationOnceEvenWithoutAShape) {
  // An answer without a usable shape (older server, or values beyond the server's limits):
  // the shape checks cannot run, but a computation listed twice is still refused.
  json body = plan_of(1, 2);
  body["instructions"].push_back(body["instructions"][0]);
  const std::string why = refusal(body, JobShape{});
  EXPECT_NE(why.find("#4: forward of stage 1 microbatch 0 appears twice"), std::string::npos) << why;
}

}  // namespace
}  // namespace perseus::runtime
