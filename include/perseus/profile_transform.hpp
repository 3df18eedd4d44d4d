// Approximate profiles for schedules the measured profile does not match (chunks, split backward).
#pragma once

#include <string>
#include <vector>

#include "perseus/profile.hpp"
#include "perseus/schedule.hpp"

namespace perseus {

/// Builds a chunk (virtual stage) profile from a per-GPU profile, for interleaved schedules
/// when only one profile row set per GPU was measured. Shapes: `per_gpu` has p stages (one per
/// GPU rank r); the result has p·chunks stages, and stage c·p + r (chunk c of rank r, the
/// placement of make_interleaved_1f1b()) gets rank r's operating points with time_s and
/// energy_j divided by `chunks` (same frequencies; every kind present is split).
/// APPROXIMATION: it assumes a GPU's layers split into equal chunks whose time and energy
/// scale linearly with the layer count; real chunks differ (e.g. the embedding and the LM head
/// stay in the first/last chunk, small kernels run less efficiently). Profile the chunks
/// themselves when you can (docs/schedules.md).
/// Throws InputError when chunks < 1 or the profile has no stages.
Profile split_profile_into_chunks(const Profile& per_gpu, int chunks);

/// The general form of split_profile_into_chunks() for any stage placement (e.g. the V shape
/// of ZB-V, where rank r holds stages r and 2p−1−r): stage s gets the operating points of
/// per-GPU stage stage_rank[s] with time_s and energy_j divided by the number of stages that
/// rank holds. Same APPROXIMATION as above.
/// Throws InputError when stage_rank is empty or names a rank outside 0..per_gpu.num_stages()-1.
Profile split_profile_over_stages(const Profile& per_gpu, const std::vector<int>& stage_rank);

/// Adds backward_input (I) and backward_weight (W) operating points to every stage that has a
/// full backward but not both halves, for zero-bubble schedules when only forward/backward
/// were measured: at each frequency, I gets `input_fraction` of the backward's time and energy
/// and W the rest. Stages that already have I and W are kept as they are; backward rows stay.
/// APPROXIMATION: for a transformer layer the input-gradient and weight-gradient matmuls have
/// about the same FLOPs (Qi et al., ICLR'24 §2, T_B ≈ T_W), hence the usual 0.5; attention and
/// element-wise backward work falls in I, so measured splits differ (docs/schedules.md).
/// Throws InputError when input_fraction is not in (0, 1), or a stage has neither a backward
/// nor both I and W.
Profile split_backward_profile(const Profile& profile, double input_fraction = 0.5);

/// Fits a profile to a schedule's stages and kinds, as `perseus optimize` does: a per-GPU
/// profile (one stage per rank) of a chunked schedule is split evenly over the chunk stages
/// (split_profile_over_stages), and a split-backward schedule on a profile without I/W rows
/// gets its backward split by `backward_input_fraction` (split_backward_profile). Each
/// approximation applied is described in `*approximations` when given.
/// Throws InputError (naming profile.source) when the stage count fits neither the schedule's
/// stages nor its ranks.
Profile fit_profile_to_schedule(Profile profile, const Schedule& schedule, double backward_input_fraction = 0.5,
                                std::vector<std::string>* approximations = nullptr);

}  // namespace perseus
