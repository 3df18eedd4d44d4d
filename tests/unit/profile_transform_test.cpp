// Approximate chunk / split-backward profiles.
#include <functional>

#include <gtest/gtest.h>

#include "perseus/error.hpp"
#include "perseus/profile_transform.hpp"
#include "perseus/schedule.hpp"
#include "test_util.hpp"

namespace perseus {
namespace {

Profile two_gpus() {
  Profile p;
  p.source = "p.csv";
  p.add(0, InstructionKind::kForward, {1410, 1.0, 10.0});
  p.add(0, InstructionKind::kForward, {1000, 1.5, 8.0});
  p.add(0, InstructionKind::kBackward, {1410, 2.0, 20.0});
  p.add(1, InstructionKind::kForward, {1410, 3.0, 30.0});
  p.add(1, InstructionKind::kBackward, {1410, 4.0, 40.0});
  return p;
}

using testing::input_error_of;

TEST(ProfileTransform, SplitIntoChunks) {
  const Profile c = split_profile_into_chunks(two_gpus(), 2);
  ASSERT_EQ(c.num_stages(), 4);  // stage c*p + r
  for (int chunk = 0; chunk < 2; ++chunk) {
    const auto& f0 = c.points(chunk * 2 + 0, InstructionKind::kForward);
    ASSERT_EQ(f0.size(), 2u);
    EXPECT_EQ(f0[0].freq_mhz, 1410);
    EXPECT_DOUBLE_EQ(f0[0].time_s, 0.5);
    EXPECT_DOUBLE_EQ(f0[0].energy_j, 5.0);
    EXPECT_DOUBLE_EQ(f0[1].time_s, 0.75);
    EXPECT_DOUBLE_EQ(f0[1].energy_j, 4.0);
    EXPECT_DOUBLE_EQ(c.points(chunk * 2 + 1, InstructionKind::kBackward)[0].time_s, 2.0);
    EXPECT_DOUBLE_EQ(c.points(chunk * 2 + 1, InstructionKind::kBackward)[0].energy_j, 20.0);
  }
  EXPECT_NE(c.source.find("split evenly"), std::string::npos);
  EXPECT_EQ(split_profile_into_chunks(two_gpus(), 1).points(1, InstructionKind::kForward)[0].time_s, 3.0);
}

TEST(ProfileTransform, SplitOverVShape) {
  // Rank 0 holds stages 0 and 3, rank 1 holds 1 and 2; rank 1 gets a third stage 4 too.
  const Profile c = split_profile_over_stages(two_gpus(), {0, 1, 1, 0, 1});
  ASSERT_EQ(c.num_stages(), 5);
  EXPECT_DOUBLE_EQ(c.points(3, InstructionKind::kForward)[0].time_s, 0.5);  // rank 0: 2 chunks
  EXPECT_DOUBLE_EQ(c.points(4, InstructionKind::kForward)[0].time_s, 1.0);  // rank 1: 3 chunks
  EXPECT_DOUBLE_EQ(c.points(2, InstructionKind::kBackward)[0].energy_j, 40.0 / 3);
}

TEST(ProfileTransform, SplitBackward) {
  const Profile s = split_backward_profile(two_gpus(), 0.25);
  for (int st = 0; st < 2; ++st) {
    const double t = two_gpus().points(st, InstructionKind::kBackward)[0].time_s;
    const double e = two_gpus().points(st, InstructionKind::kBackward)[0].energy_j;
    EXPECT_DOUBLE_EQ(s.points(st, InstructionKind::kBackwardInput)[0].time_s, 0.25 * t);
    EXPECT_DOUBLE_EQ(s.points(st, InstructionKind::kBackwardInput)[0].energy_j, 0.25 * e);
    EXPECT_DOUBLE_EQ(s.points(st, InstructionKind::kBackwardWeight)[0].time_s, 0.75 * t);
    EXPECT_DOUBLE_EQ(s.points(st, InstructionKind::kBackwardWeight)[0].energy_j, 0.75 * e);
    EXPECT_TRUE(s.has(st, InstructionKind::kBackward));  // kept
  }
  EXPECT_NE(s.source.find("backward split 0.25/0.75"), std::string::npos);
  // Measured I/W are kept as they are.
  Profile m = two_gpus();
  m.add(0, InstructionKind::kBackwardInput, {1410, 1.5, 1.0});
  m.add(0, InstructionKind::kBackwardWeight, {1410, 0.5, 1.0});
  const Profile k = split_backward_profile(m);
  EXPECT_DOUBLE_EQ(k.points(0, InstructionKind::kBackwardInput)[0].time_s, 1.5);
  EXPECT_DOUBLE_EQ(k.points(1, InstructionKind::kBackwardInput)[0].time_s, 2.0);
}

// The note of a split names the stages it split: a profile whose stage 0 has measured I/W rows
// is not a profile without them.
TEST(ProfileTransform, SplitNoteNamesTheStagesSplit) {
  const Schedule zb = make_schedule("zb-h1", 2, 2, 1);
  std::vector<std::string> notes;
  (void)fit_profile_to_schedule(two_gpus(), zb, 0.5, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "profile has no backward_input/backward_weight rows: backward split 0.5/0.5 into I/W (time and energy)");
  Profile m = two_gpus();
  m.add(0, InstructionKind::kBackwardInput, {1410, 1.5, 1.0});
  m.add(0, InstructionKind::kBackwardWeight, {1410, 0.5, 1.0});
  notes.clear();
  (void)fit_profile_to_schedule(m, zb, 0.5, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0], "stage 1 of the profile has no backward_input/backward_weight rows: backward split 0.5/0.5 into I/W "
                      "(time and energy)");
}

TEST(ProfileTransform, Errors) {
  EXPECT_EQ(input_error_of([] { split_profile_into_chunks(two_gpus(), 0); }),
            "split_profile_into_chunks: chunks must be >= 1, got 0");
  EXPECT_EQ(input_error_of([] { split_profile_into_chunks(Profile{}, 2); }), ": profile has no stages to split into chunks");
  EXPECT_EQ(input_error_of([] {
              split_profile_over_stages(two_gpus(), {0, 2});
            }),
            "p.csv: stage 1 runs on rank 2, but the per-GPU profile has stages 0..1 only");
  EXPECT_EQ(input_error_of([] { split_backward_profile(two_gpus(), 1.0); }), "backward input fraction must be in (0, 1), got 1");
  EXPECT_EQ(input_error_of([] { split_backward_profile(two_gpus(), 0.0); }), "backward input fraction must be in (0, 1), got 0");
  Profile half = two_gpus();
  half.add(1, InstructionKind::kBackwardInput, {1410, 1.0, 1.0});
  EXPECT_EQ(input_error_of([&] { split_backward_profile(half); }),
            "p.csv: stage 1 has only one of backward_input/backward_weight; give both or neither");
  Profile nob;
  nob.source = "n.csv";
  nob.add(0, InstructionKind::kForward, {1410, 1.0, 1.0});
  EXPECT_EQ(input_error_of([&] { split_backward_profile(nob); }),
            "n.csv: stage 0 has no backward rows to split into backward_input/backward_weight");
}

// A derived computation below the profile format's 1 us was planned, then refused when the
// written profile.csv was read back (`perseus report` of the output failed): refused up front.
TEST(ProfileTransform, ADerivedComputationTooShortToTimeIsRefused) {
  EXPECT_EQ(input_error_of([] { split_backward_profile(two_gpus(), 1e-7); }),
            "p.csv: stage 0 backward at 1410 MHz takes 2 s; with backward input fraction 1e-07, backward_input takes "
            "2e-07 s, below the 1e-06 s a computation of a profile must take (use a fraction further from 0 and 1, or "
            "a profile with backward_input/backward_weight rows)");
  EXPECT_NE(input_error_of([] { split_backward_profile(two_gpus(), 1 - 1e-7); }).find("backward_weight takes"), std::string::npos);
  Profile tiny;
  tiny.source = "t.csv";
  tiny.add(0, InstructionKind::kForward, {1410, 1.5e-6, 1e-4});
  tiny.add(0, InstructionKind::kBackward, {1410, 3e-6, 2e-4});
  EXPECT_EQ(input_error_of([&] { split_profile_into_chunks(tiny, 2); }),
            "t.csv: stage 0 forward at 1410 MHz takes 1.5e-06 s; split evenly over the GPU's 2 chunks, a chunk takes "
            "7.5e-07 s, below the 1e-06 s a computation of a profile must take (use fewer chunks, or a profile with "
            "one stage per chunk)");
  EXPECT_NO_THROW(split_profile_into_chunks(tiny, 1));
  EXPECT_NO_THROW(split_backward_profile(two_gpus(), 1e-6));  // 2e-6 s: at the limit, kept
}

}  // namespace
}  // namespace perseus
