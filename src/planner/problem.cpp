// One planning problem assembled from one spec (see perseus/problem.hpp).
#include "perseus/problem.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/profile_transform.hpp"
#include "perseus/schedule_io.hpp"

namespace perseus {

namespace {

bool is_schedule_name(const std::string& name) {
  const auto names = schedule_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string name_list() {
  std::string list;
  for (const auto& n : schedule_names()) list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

bool schedule_is_file(const std::string& schedule) {
  std::error_code ec;
  return !is_schedule_name(schedule) && (std::filesystem::is_regular_file(schedule, ec) || is_kept_stream(schedule));
}

Schedule resolve_schedule(const ProblemSpec& spec) {
  const bool from_file = schedule_is_file(spec.schedule);
  if (!from_file && !is_schedule_name(spec.schedule)) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(spec.schedule, ec);
    throw InputError("schedule", fmt::format("{}: not a schedule name ({}) nor {}", spec.schedule, name_list(),
                                             exists ? "a schedule CSV file (it exists but is not a regular file)"
                                                    : "an existing schedule CSV file"));
  }
  if (!from_file && spec.num_ranks < 1) {
    throw InputError("num_ranks", spec.num_ranks == 0
                                      ? "is required (GPUs per pipeline) unless " + field_ref("schedule") +
                                            " is a schedule CSV file"
                                      : fmt::format("must be >= 1, got {}", spec.num_ranks));
  }
  if (!from_file && spec.microbatches < 1) {
    throw InputError("microbatches", spec.microbatches == 0
                                         ? "is required unless " + field_ref("schedule") + " is a schedule CSV file"
                                         : fmt::format("must be >= 1, got {}", spec.microbatches));
  }
  if (spec.chunks < 1) throw InputError("chunks", fmt::format("must be >= 1, got {}", spec.chunks));
  if (!from_file) return make_schedule(spec.schedule, spec.num_ranks, spec.microbatches, spec.chunks);
  Schedule s = load_schedule_csv(spec.schedule);
  if (spec.num_ranks > 0 && spec.num_ranks != s.num_ranks()) {
    throw InputError("num_ranks", fmt::format("{} does not match schedule file {}, which has {} ranks (rows)",
                                              spec.num_ranks, spec.schedule, s.num_ranks()));
  }
  if (spec.microbatches > 0 && spec.microbatches != s.num_microbatches) {
    throw InputError("microbatches", fmt::format("{} does not match schedule file {}, which has {} microbatches",
                                                 spec.microbatches, spec.schedule, s.num_microbatches));
  }
  if (spec.chunks > 1 || spec.chunks_given) {
    // Every rank must hold `chunks` stages: 4 stages placed 3 + 1 on 2 ranks are not 2 chunks.
    const std::vector<int> per_rank = stages_per_rank(s);
    const bool even = std::all_of(per_rank.begin(), per_rank.end(), [&](int n) { return n == per_rank.front(); });
    if (!even || per_rank.front() != spec.chunks) {
      std::string file_chunks;
      if (even) {
        file_chunks = fmt::format("{} chunks (stages per rank)", per_rank.front());
      } else {
        for (std::size_t r = 0; r < per_rank.size() && r < 8; ++r)
          file_chunks += fmt::format("{}rank {}: {}", r == 0 ? "" : ", ", r, per_rank[r]);
        file_chunks = fmt::format("an uneven number of stages per rank ({}{}; leave {} out)", file_chunks,
                                  per_rank.size() > 8 ? ", ..." : "", field_ref("chunks"));
      }
      throw InputError("chunks", fmt::format("{} does not match schedule file {}, which has {}: {} stages on {} ranks",
                                             spec.chunks, spec.schedule, file_chunks, s.num_stages, s.num_ranks()));
    }
  }
  return s;
}

Problem make_problem(const ProblemSpec& spec, Schedule schedule, Profile profile) {
  std::vector<std::string> unit_warnings = profile_unit_warnings(profile, spec.p_block_w);
  std::vector<std::string> approximations;
  Profile fitted =
      fit_profile_to_schedule(std::move(profile), schedule, spec.backward_input_fraction, &approximations);
  fitted = add_timeline_overheads(std::move(fitted), schedule, spec.overheads, spec.p_block_w);
  Dag dag = Dag::build(schedule);
  return Problem{std::move(schedule), std::move(dag),           std::move(fitted),
                 spec.p_block_w,      std::move(approximations), std::move(unit_warnings)};
}

namespace {

void check_p_block(double p_block_w) {
  if (!std::isfinite(p_block_w) || p_block_w < 0 || p_block_w > kMaxBlockingPowerW) {
    throw InputError("p_block_w", fmt::format("must be a finite number in [0, {:g}] W, got {}", kMaxBlockingPowerW, p_block_w));
  }
}

}  // namespace

Problem make_problem(const ProblemSpec& spec, Profile profile) {
  check_p_block(spec.p_block_w);
  check_timeline_overheads(spec.overheads);
  return make_problem(spec, resolve_schedule(spec), std::move(profile));
}

Problem load_problem(const ProblemSpec& spec, const std::string& profile_path) {
  check_p_block(spec.p_block_w);
  check_timeline_overheads(spec.overheads);
  Schedule schedule = resolve_schedule(spec);  // sizes are checked before the profile is read
  return make_problem(spec, std::move(schedule), load_profile_csv(profile_path));
}

}  // namespace perseus
