// Plan JSON and Zeus plan files: one writer each, and the one plan JSON reader.
#include "perseus/plan_files.hpp"

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

using nlohmann::json;

std::string plan_json_file_name(std::size_t index) { return fmt::format("plan_{:05d}.json", index); }
std::string zeus_plan_file_name(std::size_t index) { return fmt::format("freqs_pipeline_{:05d}.py", index); }

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

std::string zeus_plan_text(const Dag& dag, const FrequencyPlan& plan, std::size_t index) {
  std::string out = "[\n";
  for (int r = 0; r < dag.num_ranks(); ++r) {
    out += "    [";
    bool first = true;
    for (int id : dag.rank_ops(r)) {
      out += fmt::format("{}(\"{}\", {})", first ? "" : ", ", to_string(dag.op(id).kind), plan.freq_mhz[id]);
      first = false;
    }
    out += "],\n";
  }
  out += fmt::format("]\n# Plan {}: iteration time {:.6f} s, energy {:.3f} J (perseus optimize)\n", index,
                     plan.timeline.time_s, plan.total_energy_j());
  return out;
}

std::vector<int> plan_frequencies_from_json(const json& p, const Dag& dag, const std::string& where_prefix) {
  const auto where = [&](std::string_view what) { return fmt::format("{}: {}", where_prefix, what); };
  if (!p.is_object()) throw InputError(where("must be an object"));
  auto rit = p.find("ranks");
  const auto ranks = static_cast<std::size_t>(dag.num_ranks());
  if (rit == p.end() || !rit->is_array() || rit->size() != ranks)
    throw InputError(where(fmt::format("\"ranks\" must be an array of {} per-rank lists", ranks)));
  std::vector<int> freq(dag.num_ops(), 0);
  for (int r = 0; r < dag.num_ranks(); ++r) {
    const json* list = &(*rit)[r];
    if (list->is_object()) {  // plan file form: {"rank": r, "instructions": [...]}
      auto rank = list->find("rank");
      if (rank != list->end() && (!rank->is_number_integer() || rank->get<std::int64_t>() != r))
        throw InputError(where(fmt::format("ranks[{}]: \"rank\" must be {}", r, r)));
      auto ins = list->find("instructions");
      if (ins == list->end()) throw InputError(where(fmt::format("ranks[{}]: missing \"instructions\"", r)));
      list = &*ins;
    }
    const auto& ops = dag.rank_ops(r);
    if (!list->is_array() || list->size() != ops.size())
      throw InputError(where(fmt::format("ranks[{}] must list {} computations, as the schedule runs on that rank", r, ops.size())));
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const json& e = (*list)[k];
      const auto bad = [&](std::string_view what) {
        return InputError(where(fmt::format("ranks[{}][{}]: {}", r, k, what)));
      };
      if (!e.is_object()) throw bad("must be an object");
      auto f = e.find("freq_mhz");
      if (f == e.end()) f = e.find("frequency_mhz");
      if (f == e.end() || !f->is_number_integer() || f->get<std::int64_t>() <= 0 || f->get<std::int64_t>() > 100000)
        throw bad("\"freq_mhz\" (or \"frequency_mhz\") must be a positive integer");
      int op = ops[k];
      auto ins = e.find("instruction");
      auto mb = e.find("microbatch");
      if (ins != e.end() || mb != e.end()) {
        if (ins == e.end() || !ins->is_string()) throw bad("\"instruction\" must be a string");
        auto kind = parse_instruction_kind(ins->get<std::string>());
        if (!kind) throw bad(fmt::format("unknown instruction \"{}\"", ins->get<std::string>()));
        if (mb == e.end() || !mb->is_number_integer()) throw bad("\"microbatch\" must be an integer");
        int stage = dag.op(op).stage;
        if (auto st = e.find("stage"); st != e.end()) {
          if (!st->is_number_integer()) throw bad("\"stage\" must be an integer");
          stage = st->get<int>();
        }
        const int found = dag.find(Computation{stage, mb->get<int>(), *kind});
        if (found < 0 || dag.rank_of(found) != r)
          throw bad(fmt::format("no computation {} of microbatch {} on stage {} of this rank",
                                ins->get<std::string>(), mb->get<int>(), stage));
        op = found;
      }
      if (freq[op] != 0) throw bad("computation listed twice");
      freq[op] = f->get<int>();
    }
  }
  return freq;
}

}  // namespace perseus
