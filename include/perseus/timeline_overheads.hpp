// Non-computation time the GPUs of a pipeline spend on their own timeline: blocking P2P sends
// and the per-computation host overhead. Modelled as part of each computation's duration.
#pragma once

#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

/// Time a GPU is held by work that is not forward/backward computation but sits on its
/// execution stream next to a computation, so the next computation of that GPU cannot start
/// before it ends. The paper's iteration model (Perseus, SOSP'24 §3) counts computation only;
/// both terms default to 0, which is exactly that model. Measured evidence and calibration:
/// docs/validation.md ("What the DAG leaves out").
///
/// Treatment (the same in the planner, simulate() and `perseus validate`, because it is applied
/// to the durations every one of them reads): a computation's duration is its profiled time
/// plus timeline_overhead_s(); its energy is its profiled energy plus P_block × that time (the
/// GPU waits at blocking power meanwhile). A profile with both terms 0 is left unchanged.
struct TimelineOverheads {
  /// Blocking point-to-point transfer, s (>= 0): after a computation whose output goes to a
  /// stage on another GPU (a forward of every stage but the last, a backward or
  /// backward_input of every stage but the first), the sending GPU's stream is busy for this
  /// long (DeepSpeed/Merak-style synchronous send), and the receiver sees the data when it ends.
  double p2p_latency_s = 0;
  /// Per-computation overhead, s (>= 0): host-side work that stalls the GPU around every
  /// computation (instruction dispatch, clock setting, timing synchronization).
  double op_overhead_s = 0;
  /// True when either term is non-zero.
  bool any() const { return p2p_latency_s != 0 || op_overhead_s != 0; }
};

/// The overhead (s) added to computation (stage, kind) of `schedule`: op_overhead_s, plus
/// p2p_latency_s when the computation sends to another GPU (see TimelineOverheads). `stage`
/// must be a stage of the schedule (unchecked beyond that).
double timeline_overhead_s(const Schedule& schedule, int stage, InstructionKind kind, const TimelineOverheads& o);

/// Throws InputError (field "p2p_latency_s" or "op_overhead_s") unless both terms are finite,
/// >= 0 and at most 3600 s.
void check_timeline_overheads(const TimelineOverheads& o);

/// `profile` (fitted to `schedule`: one profile stage per schedule stage) with every
/// operating point of (stage, kind) lengthened by timeline_overhead_s() and its energy raised
/// by p_block_w (P_block, W) × that time. Returns `profile` unchanged when !o.any().
/// Throws InputError on bad terms (check_timeline_overheads()) or a stage-count mismatch.
Profile add_timeline_overheads(Profile profile, const Schedule& schedule, const TimelineOverheads& o,
                               double p_block_w);

}  // namespace perseus
