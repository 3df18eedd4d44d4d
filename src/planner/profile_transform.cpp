// Approximate chunk and split-backward profiles from per-GPU forward/backward profiles.
#include "perseus/profile_transform.hpp"

#include <algorithm>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"

namespace perseus {

namespace {
/// A derived computation shorter than a profile may hold (limits::kMinOpTimeS) would plan, then
/// be refused when its written profile.csv is read back: refused here, naming where it came from.
void check_derived_time(const Profile& from, int stage, InstructionKind kind, const OperatingPoint& op, double share,
                        const std::string& derived, const char* advice) {
  const double t = op.time_s * share;
  if (t >= limits::kMinOpTimeS) return;
  throw InputError(fmt::format("{}: stage {} {} at {} MHz takes {:g} s; {} takes {:g} s, below the {:g} s a "
                               "computation of a profile must take ({})",
                               from.source, stage, to_string(kind), op.freq_mhz, op.time_s, derived, t,
                               limits::kMinOpTimeS, advice));
}
}  // namespace

Profile split_profile_over_stages(const Profile& per_gpu, const std::vector<int>& stage_rank) {
  const int p = per_gpu.num_stages();
  if (stage_rank.empty()) throw InputError("split_profile_over_stages: no stages to place");
  std::vector<int> chunks_of(p, 0);
  for (std::size_t s = 0; s < stage_rank.size(); ++s) {
    if (stage_rank[s] < 0 || stage_rank[s] >= p) {
      throw InputError(fmt::format("{}: stage {} runs on rank {}, but the per-GPU profile has stages 0..{} only",
                                   per_gpu.source, s, stage_rank[s], p - 1));
    }
    ++chunks_of[stage_rank[s]];
  }
  Profile out;
  out.source = fmt::format("{} (each GPU's stage split evenly over its chunks)", per_gpu.source);
  for (std::size_t s = 0; s < stage_rank.size(); ++s) {
    const int r = stage_rank[s];
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const auto kind = static_cast<InstructionKind>(k);
      for (const OperatingPoint& op : per_gpu.points(r, kind)) {
        if (chunks_of[r] > 1)
          check_derived_time(per_gpu, r, kind, op, 1.0 / chunks_of[r],
                             fmt::format("split evenly over the GPU's {} chunks, a chunk", chunks_of[r]),
                             "use fewer chunks, or a profile with one stage per chunk");
        out.add(static_cast<int>(s), kind, {op.freq_mhz, op.time_s / chunks_of[r], op.energy_j / chunks_of[r]});
      }
    }
  }
  return out;
}

Profile split_profile_into_chunks(const Profile& per_gpu, int chunks) {
  if (chunks < 1) throw InputError(fmt::format("split_profile_into_chunks: chunks must be >= 1, got {}", chunks));
  const int p = per_gpu.num_stages();
  if (p < 1) throw InputError(fmt::format("{}: profile has no stages to split into chunks", per_gpu.source));
  std::vector<int> stage_rank(static_cast<std::size_t>(p) * chunks);
  for (int c = 0; c < chunks; ++c)
    for (int r = 0; r < p; ++r) stage_rank[c * p + r] = r;
  Profile out = split_profile_over_stages(per_gpu, stage_rank);
  if (chunks == 1) out.source = per_gpu.source;
  return out;
}

Profile split_backward_profile(const Profile& profile, double input_fraction) {
  if (!(input_fraction > 0.0 && input_fraction < 1.0)) {
    throw InputError(fmt::format("backward input fraction must be in (0, 1), got {}", input_fraction));
  }
  Profile out = profile;
  bool changed = false;
  for (int s = 0; s < profile.num_stages(); ++s) {
    if (profile.has(s, InstructionKind::kBackwardInput) && profile.has(s, InstructionKind::kBackwardWeight)) continue;
    if (!profile.has(s, InstructionKind::kBackward)) {
      throw InputError(fmt::format("{}: stage {} has no backward rows to split into backward_input/backward_weight",
                                   profile.source, s));
    }
    if (profile.has(s, InstructionKind::kBackwardInput) || profile.has(s, InstructionKind::kBackwardWeight)) {
      throw InputError(fmt::format("{}: stage {} has only one of backward_input/backward_weight; give both or neither",
                                   profile.source, s));
    }
    for (const OperatingPoint& op : profile.points(s, InstructionKind::kBackward)) {
      const double smaller = std::min(input_fraction, 1 - input_fraction);
      check_derived_time(profile, s, InstructionKind::kBackward, op, smaller,
                         fmt::format("with backward input fraction {}, {}", input_fraction,
                                     smaller == input_fraction ? "backward_input" : "backward_weight"),
                         "use a fraction further from 0 and 1, or a profile with backward_input/backward_weight rows");
      out.add(s, InstructionKind::kBackwardInput,
              {op.freq_mhz, op.time_s * input_fraction, op.energy_j * input_fraction});
      out.add(s, InstructionKind::kBackwardWeight,
              {op.freq_mhz, op.time_s * (1 - input_fraction), op.energy_j * (1 - input_fraction)});
    }
    changed = true;
  }
  if (changed)
    out.source =
        fmt::format("{} (backward split {:g}/{:g} into I/W)", profile.source, input_fraction, 1 - input_fraction);
  return out;
}

Profile fit_profile_to_schedule(Profile profile, const Schedule& schedule, double backward_input_fraction,
                                std::vector<std::string>* approximations) {
  if (profile.num_stages() != schedule.num_stages) {
    if (profile.num_stages() != schedule.num_ranks()) {
      throw InputError(fmt::format(
          "{}: profile has {} stages, but schedule '{}' has {} stages on {} ranks; give one profile stage per "
          "schedule stage, or one per rank (then each rank's stage is split evenly over its chunks)",
          profile.source, profile.num_stages(), schedule.name, schedule.num_stages, schedule.num_ranks()));
    }
    const std::string source = profile.source;
    profile = split_profile_over_stages(profile, schedule.stage_rank);
    profile.source = source;
    if (approximations) {
      approximations->push_back(fmt::format(
          "per-GPU profile ({} stages) split evenly over {} chunk stages: each chunk gets its GPU's time and energy "
          "divided by the GPU's chunk count",
          schedule.num_ranks(), schedule.num_stages));
    }
  }
  if (schedule.split_backward) {
    std::vector<int> lacking;  // stages without backward_input/backward_weight rows
    for (int s = 0; s < profile.num_stages(); ++s) {
      if (!profile.has(s, InstructionKind::kBackwardInput) || !profile.has(s, InstructionKind::kBackwardWeight))
        lacking.push_back(s);
    }
    if (!lacking.empty()) {
      const std::string source = profile.source;
      profile = split_backward_profile(profile, backward_input_fraction);
      profile.source = source;
      if (approximations) {
        const bool all = static_cast<int>(lacking.size()) == profile.num_stages();
        approximations->push_back(fmt::format(
            "{} no backward_input/backward_weight rows: backward split {:g}/{:g} into I/W (time and energy)",
            all ? std::string("profile has")
                : fmt::format("stage{} {} of the profile {}", lacking.size() > 1 ? "s" : "", fmt::join(lacking, ", "),
                              lacking.size() > 1 ? "have" : "has"),
            backward_input_fraction, 1 - backward_input_fraction));
      }
    }
  }
  return profile;
}

}  // namespace perseus
