// Plan JSON: the one writer and the one reader.
#include "perseus/plan_files.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "perseus/error.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/json_input.hpp"

namespace perseus {

using nlohmann::json;

std::string plan_json_file_name(std::size_t index) { return fmt::format("plan_{:05d}.json", index); }

json plan_json(const Dag& dag, const FrequencyPlan& plan, std::optional<std::size_t> index) {
  json ranks = json::array();
  for (int r = 0; r < dag.num_ranks(); ++r) {
    json instrs = json::array();
    for (int id : dag.rank_ops(r)) {
      const Computation& c = dag.op(id);
      instrs.push_back({{"instruction", to_string(c.kind)},
                        {"stage", c.stage},
                        {"microbatch", c.microbatch},
                        {"frequency_mhz", plan.freq_mhz[id]},
                        {"start_s", plan.timeline.start_s[id]},
                        {"end_s", plan.timeline.end_s[id]}});
    }
    ranks.push_back({{"rank", r}, {"instructions", std::move(instrs)}});
  }
  return {{"plan", index ? json(*index) : json(nullptr)},
          {"time_s", plan.timeline.time_s},
          {"energy_j", plan.total_energy_j()},
          {"compute_energy_j", plan.compute_energy_j},
          {"blocking_energy_j", plan.blocking_energy_j},
          {"ranks", std::move(ranks)}};
}

std::string plan_json_text(const Dag& dag, const FrequencyPlan& plan, std::size_t index) {
  return plan_json(dag, plan, index).dump(1) + "\n";
}

std::vector<int> plan_frequencies_from_json(const json& p, const Dag& dag, const std::string& where_prefix,
                                            std::vector<double>* durations_s) {
  const auto where = [&](std::string_view what) { return fmt::format("{}: {}", where_prefix, what); };
  if (!p.is_object()) throw InputError(where("must be an object"));
  auto rit = p.find("ranks");
  const auto ranks = static_cast<std::size_t>(dag.num_ranks());
  if (rit == p.end() || !rit->is_array() || rit->size() != ranks)
    throw InputError(where(fmt::format("\"ranks\" must be an array of {} per-rank lists", ranks)));
  std::vector<int> freq(dag.num_ops(), 0);
  if (durations_s) durations_s->assign(dag.num_ops(), 0.0);
  const auto name_of = [&](int op) {
    const Computation& c = dag.op(op);
    return fmt::format("{} of microbatch {} on stage {}", to_string(c.kind), c.microbatch, c.stage);
  };
  constexpr std::size_t kUnlisted = SIZE_MAX;
  std::vector<std::size_t> listed_at(dag.num_ops(), kUnlisted);  // op id -> the entry k of its rank's list naming it
  for (int r = 0; r < dag.num_ranks(); ++r) {
    const json* list = &(*rit)[r];
    const bool plan_file = list->is_object();
    if (plan_file) {  // plan file form: {"rank": r, "instructions": [...]}
      auto rank = list->find("rank");
      if (rank != list->end() && (!rank->is_number_integer() || rank->get<std::int64_t>() != r))
        throw InputError(where(fmt::format("ranks[{}]: \"rank\" must be {}", r, r)));
      auto ins = list->find("instructions");
      if (ins == list->end()) throw InputError(where(fmt::format("ranks[{}]: missing \"instructions\"", r)));
      list = &*ins;
    }
    const auto& ops = dag.rank_ops(r);
    std::optional<std::pair<std::size_t, int>> twice;               // the first entry naming a listed op, and the op
    if (!list->is_array() || list->size() != ops.size())
      throw InputError(where(fmt::format("ranks[{}] must list {} computations, as the schedule runs on that rank", r, ops.size())));
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const json& e = (*list)[k];
      const auto bad = [&](std::string_view what) {
        return InputError(where(fmt::format("ranks[{}][{}]: {}", r, k, what)));
      };
      if (!e.is_object()) throw bad("must be an object");
      auto f = e.find("freq_mhz");
      if (f != e.end() && e.contains("frequency_mhz"))  // one was served, the other described the plan
        throw bad("gives both \"freq_mhz\" and \"frequency_mhz\"; give one");
      if (f == e.end()) f = e.find("frequency_mhz");
      if (f == e.end() || !f->is_number_integer() || f->get<std::int64_t>() <= 0 ||
          f->get<std::int64_t>() > limits::kMaxFrequencyMhz)
        throw bad(fmt::format("\"freq_mhz\" (or \"frequency_mhz\") must be an integer in [1, {}] MHz, got {}",
                              limits::kMaxFrequencyMhz, f == e.end() ? std::string("none") : describe_json_value(*f)));
      int op = ops[k];  // an entry without a name is the rank's next computation
      auto ins = e.find("instruction");
      auto mb = e.find("microbatch");
      if (ins != e.end() || mb != e.end()) {
        if (ins == e.end() || !ins->is_string()) throw bad("\"instruction\" must be a string");
        auto kind = parse_instruction_kind(ins->get<std::string>());
        if (!kind) throw bad(fmt::format("unknown instruction {}", quote_input(ins->get<std::string>())));
        // get<int>() would wrap 2^40 to 0, a real stage or microbatch: the range is checked first.
        auto index = [&](const nlohmann::json* v, const char* name) {
          if (v == nullptr || !v->is_number_integer()) throw bad(fmt::format("\"{}\" must be an integer", name));
          const bool fits = v->is_number_unsigned() ? v->get<std::uint64_t>() <= std::numeric_limits<int>::max()
                                                    : v->get<std::int64_t>() >= 0 &&
                                                          v->get<std::int64_t>() <= std::numeric_limits<int>::max();
          if (!fits) throw bad(fmt::format("\"{}\" must be an integer in [0, {}], got {}", name,
                                           std::numeric_limits<int>::max(), describe_json_value(*v)));
          return v->get<int>();
        };
        const int microbatch = index(mb == e.end() ? nullptr : &*mb, "microbatch");
        int stage = dag.op(op).stage;
        if (auto st = e.find("stage"); st != e.end()) stage = index(&*st, "stage");
        const int found = dag.find(Computation{stage, microbatch, *kind});
        if (found < 0 || dag.rank_of(found) != r)
          throw bad(fmt::format("no computation {} of microbatch {} on stage {} of this rank",
                                ins->get<std::string>(), microbatch, stage));
        // A plan file lists them in execution order: an entry out of place is another schedule's
        // plan, unless it names a computation listed already (a repeat, reported as such below).
        if (plan_file && found != op && listed_at[found] == kUnlisted) {
          const Computation& want = dag.op(op);
          throw bad(fmt::format("names {} of microbatch {} on stage {}, but this rank's computation #{} in the "
                                "schedule's execution order is {} of microbatch {} on stage {}: the plan is for "
                                "another schedule",
                                ins->get<std::string>(), microbatch, stage, k, to_string(want.kind),
                                want.microbatch, want.stage));
        }
        op = found;  // the entry sets the clock of the computation it names, wherever it stands
      }
      if (listed_at[op] != kUnlisted) {  // named twice: reported after the list, with what it lacks
        if (!twice) twice = std::pair{k, op};
        continue;
      }
      listed_at[op] = k;
      freq[op] = f->get<int>();
      if (durations_s) {
        const auto start = e.find("start_s"), end = e.find("end_s");
        if (start == e.end() || end == e.end() || !start->is_number() || !end->is_number() ||
            !std::isfinite(start->get<double>()) || !std::isfinite(end->get<double>()) ||
            !(end->get<double>() > start->get<double>()))
          throw bad("\"start_s\" and \"end_s\" must be numbers (s) with end_s > start_s");
        (*durations_s)[op] = end->get<double>() - start->get<double>();
      }
    }
    if (twice) {
      // The list has as many entries as the rank has computations: one named twice means
      // another is missing.
      const auto [k, op] = *twice;
      std::vector<std::string> missing;
      std::size_t unlisted = 0;
      for (int o : ops)
        if (listed_at[o] == kUnlisted && unlisted++ < 5) missing.push_back(name_of(o));
      if (unlisted > missing.size()) missing.push_back(fmt::format("{} more", unlisted - missing.size()));
      throw InputError(where(fmt::format(
          "ranks[{}][{}]: {} is listed twice (also at ranks[{}][{}]), and the list lacks {}; every computation of "
          "the rank must appear exactly once",
          r, k, name_of(op), r, listed_at[op], fmt::join(missing, ", "))));
    }
  }
  return freq;
}

}  // namespace perseus
