// InputError: structured fields and how front ends phrase them.
#include <gtest/gtest.h>

#include "perseus/error.hpp"

namespace perseus {
namespace {

std::string as_flag(const std::string& field) { return field == "num_ranks" ? "--stages" : "--" + field; }

TEST(InputError, FreeText) {
  const InputError e("profile.csv: cannot read the file");
  EXPECT_STREQ(e.what(), "profile.csv: cannot read the file");
  EXPECT_EQ(e.field(), "");
  EXPECT_EQ(e.source(), "");
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.phrased(as_flag), "profile.csv: cannot read the file");
}

TEST(InputError, FieldIsPhrasedByTheFrontEnd) {
  const InputError e("num_ranks", "must be >= 1, got 0");
  EXPECT_STREQ(e.what(), "num_ranks must be >= 1, got 0");
  EXPECT_EQ(e.field(), "num_ranks");
  EXPECT_EQ(e.message(), "must be >= 1, got 0");
  EXPECT_EQ(e.phrased(as_flag), "--stages must be >= 1, got 0");
  EXPECT_EQ(e.phrased([](const std::string& f) { return f == "num_ranks" ? "stages" : f; }),
            "stages must be >= 1, got 0");
}

TEST(InputError, ReferencesToOtherFields) {
  const InputError e("global_batch", "100 is not a multiple of " + field_ref("microbatches") + " 12");
  EXPECT_STREQ(e.what(), "global_batch 100 is not a multiple of microbatches 12");
  EXPECT_EQ(e.phrased(as_flag), "--global_batch 100 is not a multiple of --microbatches 12");
  const InputError colon("slowdowns", ": give at least one");
  EXPECT_STREQ(colon.what(), "slowdowns: give at least one");
}

TEST(InputError, FileFieldKeepsItsColumnName) {
  const auto e = InputError::in_file("p.csv", 7, "time", "expected a number, got 'x'");
  EXPECT_STREQ(e.what(), "p.csv:7: field 'time': expected a number, got 'x'");
  EXPECT_EQ(e.source(), "p.csv");
  EXPECT_EQ(e.line(), 7);
  EXPECT_EQ(e.field(), "time");
  EXPECT_EQ(e.phrased(as_flag), e.what());  // a CSV column is not a flag
  EXPECT_STREQ(InputError::in_file("p.csv", 0, "", "empty file").what(), "p.csv: empty file");
}

}  // namespace
}  // namespace perseus
