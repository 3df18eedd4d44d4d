// Idle expiry (docs/http-api.md, "Idle expiry"): a job idle for longer than the TTL is deleted,
// and idleness is measured on the monotonic clock (session 21's trial: a wall clock stepped
// forward by two hours deleted every job that had been quiet for seconds).
#include <gtest/gtest.h>

#include "clocks.hpp"
#include "perseus/server/api_error.hpp"
#include "perseus/server/job_manager.hpp"
#include "perseus/server/store.hpp"
#include "test_util.hpp"

namespace perseus::server {
namespace {

using namespace testing;

TEST(IdleExpiry, IdlenessIsMeasuredOnTheMonotonicClock) {
  Store store(":memory:");
  ManagerOptions opt;
  opt.job_idle_ttl_s = 600;
  JobManager manager(store, opt);
  const auto created = manager.create_job(profile_job(1, 8));
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = nlohmann::json::parse(created.body)["job_id"];
  const double now = monotonic_s();
  EXPECT_EQ(manager.expire_idle(now).size(), 0u);
  EXPECT_EQ(manager.expire_idle(now + 599).size(), 0u) << "idle for less than the TTL";
  // The job's wall-clock activity is only stored and shown: a stepped wall clock is no input.
  EXPECT_EQ(manager.get_job(id).status, 200);  // a request: idle from here
  const double touched = monotonic_s();
  EXPECT_EQ(manager.expire_idle(touched + 599).size(), 0u);
  EXPECT_EQ(manager.expire_idle(touched + 601), std::vector<std::string>{id}) << "idle for longer than the TTL";
  try {
    manager.get_job(id);
    ADD_FAILURE() << "an expired job still answers";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
  }
}

TEST(IdleExpiry, ATtlOfZeroNeverExpires) {
  Store store(":memory:");
  ManagerOptions opt;
  opt.job_idle_ttl_s = 0;
  JobManager manager(store, opt);
  ASSERT_EQ(manager.create_job(profile_job(1, 8)).status, 201);
  EXPECT_EQ(manager.expire_idle(monotonic_s() + 1e9).size(), 0u);
}

}  // namespace
}  // namespace perseus::server
