// A fast T_min plan for when the full frontier is not solved yet (perseus serve's first plan).
#pragma once

#include "perseus/dag.hpp"
#include "perseus/plan.hpp"
#include "perseus/profile.hpp"

namespace perseus {

/// The quick T_min plan: every computation at its fastest Pareto clock (time–effective-energy
/// filter with P_block, as the planner's candidates), then slack filling: in one
/// reverse-topological pass every computation off the critical path takes the slowest clock that
/// does not lengthen the iteration (Perseus §4.2's slack reclamation, applied to the all-max
/// plan). Cost O(ops + edges + profile rows): milliseconds where the frontier solve takes minutes.
/// Its iteration time is that of the all-max plan (never more) and its energy never more;
/// the frontier's fastest point is at least as good. `p_block_w`: P_block, W (>= 0).
/// Throws InputError if the profile lacks a (stage, kind) the DAG uses.
FrequencyPlan quick_fastest_plan(const Dag& dag, const Profile& profile, double p_block_w);

}  // namespace perseus
