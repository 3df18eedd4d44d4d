// Blocking P2P sends and per-computation overheads folded into computation durations.
#include "perseus/timeline_overheads.hpp"

#include <cmath>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

namespace {

// True when (stage, kind) sends its output to a stage on another GPU.
bool sends_to_other_gpu(const Schedule& schedule, int stage, InstructionKind kind) {
  const auto& rank = schedule.stage_rank;
  switch (kind) {
    case InstructionKind::kForward:
      return stage + 1 < schedule.num_stages && rank[stage + 1] != rank[stage];
    case InstructionKind::kBackward:
    case InstructionKind::kBackwardInput:
      return stage > 0 && rank[stage - 1] != rank[stage];
    case InstructionKind::kBackwardWeight:
      return false;
  }
  return false;
}

void check_term(const char* field, double v) {
  if (!std::isfinite(v) || v < 0 || v > 3600) {
    throw InputError(field, fmt::format("must be a finite time in [0, 3600] s, got {}", v));
  }
}

}  // namespace

double timeline_overhead_s(const Schedule& schedule, int stage, InstructionKind kind, const TimelineOverheads& o) {
  return o.op_overhead_s + (sends_to_other_gpu(schedule, stage, kind) ? o.p2p_latency_s : 0.0);
}

void check_timeline_overheads(const TimelineOverheads& o) {
  check_term("p2p_latency_s", o.p2p_latency_s);
  check_term("op_overhead_s", o.op_overhead_s);
}

Profile add_timeline_overheads(Profile profile, const Schedule& schedule, const TimelineOverheads& o,
                               double p_block_w) {
  check_timeline_overheads(o);
  if (!o.any()) return profile;
  if (profile.num_stages() != schedule.num_stages) {
    throw InputError(fmt::format("{}: {} profile stages for the {} stages of schedule '{}'", profile.source,
                                 profile.num_stages(), schedule.num_stages, schedule.name));
  }
  Profile out;
  out.source = profile.source;
  for (int s = 0; s < profile.num_stages(); ++s) {
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const auto kind = static_cast<InstructionKind>(k);
      const double extra = timeline_overhead_s(schedule, s, kind, o);
      for (const OperatingPoint& p : profile.points(s, kind)) {
        out.add(s, kind, {p.freq_mhz, p.time_s + extra, p.energy_j + p_block_w * extra});
      }
    }
  }
  return out;
}

}  // namespace perseus
