// Schedule CSV import/export in torch.distributed.pipelining's action notation, with validation.
#include "perseus/schedule_io.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/core.h>

#include "csv_fields.hpp"
#include "perseus/dag.hpp"
#include "perseus/input_limits.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"

namespace perseus {

namespace {

constexpr int kMaxStageId = limits::kMaxScheduleStageId;
constexpr int kMaxMicrobatchId = limits::kMaxMicrobatchId;

// Communication actions of torch.distributed.pipelining: ignored (the DAG derives communication).
constexpr std::array<std::string_view, 7> kCommActions = {"SEND_F",  "RECV_F",  "SEND_B",     "RECV_B",
                                                          "UNSHARD", "RESHARD", "REDUCE_GRAD"};

// Where an action came from.
struct Where {
  int line = 0;      // 1-based line in the file
  int rank = 0;      // row index among non-comment rows
  int position = 0;  // 1-based field index in the row
};

/// A schedule file error: the message (which says where, e.g. "FILE:LINE (rank R), action P: ...")
/// as the whole text, with source, line (0: none) and field "schedule" for programs (Python's
/// InputError.source / .line / .field).
[[noreturn]] void fail(const std::string& source, long line, std::string message) {
  throw InputError::located(source, line, "schedule", std::move(message));
}

std::string at(const std::string& source, const Where& w) {
  return fmt::format("{}:{} (rank {}), action {}", source, w.line, w.rank, w.position);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool parse_id(std::string_view digits, int max, int& out) {
  if (digits.empty() || digits.size() > 9) return false;
  int v = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

// Parses one field. Returns false for an ignored communication action.
bool parse_action(std::string_view field, const std::string& source, const Where& w, Computation& out) {
  const std::string where = at(source, w);
  std::size_t i = 0;
  while (i < field.size() && field[i] >= '0' && field[i] <= '9') ++i;
  if (field.find("OVERLAP_F_B") != std::string_view::npos) {  // torch's fused "(1F1;1B0)OVERLAP_F_B"
    fail(source, w.line,
         fmt::format("{}: {} is torch's overlapped F/B action, which is not supported: list its forward and "
                     "backward as two actions in this place (e.g. 1F1,1B0)",
                     where, quote_input(field)));
  }
  if (i == 0) {
    fail(source, w.line,
        fmt::format("{}: {} is not an action; expected {{stage}}{{F|B|I|W}}{{microbatch}}, e.g. 2F0", where,
                    quote_input(field)));
  }
  int stage = 0;
  if (!parse_id(field.substr(0, i), kMaxStageId, stage)) {
    fail(source, w.line, fmt::format("{}: {}: stage id must be 0..{}", where, quote_input(field), kMaxStageId));
  }
  std::size_t j = i;
  while (j < field.size() && !(field[j] >= '0' && field[j] <= '9')) ++j;
  const std::string_view kind = field.substr(i, j - i);
  const std::string_view mb = field.substr(j);
  for (std::string_view comm : kCommActions)
    if (kind == comm) return false;
  InstructionKind k{};
  if (kind == "F") {
    k = InstructionKind::kForward;
  } else if (kind == "B") {
    k = InstructionKind::kBackward;
  } else if (kind == "I") {
    k = InstructionKind::kBackwardInput;
  } else if (kind == "W") {
    k = InstructionKind::kBackwardWeight;
  } else if (kind.size() == 2 && kind[1] == '-' && !mb.empty() &&
             std::string_view("FBIW").find(kind[0]) != std::string_view::npos) {
    fail(source, w.line, fmt::format("{}: {}: microbatch id must be an integer 0..{}, not negative", where,
                                     quote_input(field), kMaxMicrobatchId));
  } else {
    fail(source, w.line, fmt::format(
        "{}: {} has unknown kind {}; expected F (forward), B (full backward), I (backward input) or W (backward "
        "weight)",
        where, quote_input(field), quote_input(kind)));
  }
  int microbatch = 0;
  if (mb.empty())
    fail(source, w.line, fmt::format("{}: {} has no microbatch id (e.g. {}{}0)", where, quote_input(field), stage, kind));
  if (!parse_id(mb, kMaxMicrobatchId, microbatch)) {
    const std::size_t sep = mb.find_first_of(";\t|");
    fail(source, w.line, fmt::format(
        "{}: {}: microbatch id must be an integer 0..{}{}", where, quote_input(field), kMaxMicrobatchId,
        sep == std::string_view::npos
            ? std::string()
            : fmt::format("; the row looks separated by {} (a spreadsheet's export): a schedule CSV separates its "
                          "actions with commas",
                          quote_input(mb.substr(sep, 1)))));
  }
  out = {stage, microbatch, k};
  return true;
}

// The cross-rank and same-stage predecessors of c (the data dependencies of Dag::build).
std::vector<Computation> data_dependencies(const Computation& c, int num_stages, bool split) {
  const InstructionKind bwd = split ? InstructionKind::kBackwardInput : InstructionKind::kBackward;
  std::vector<Computation> deps;
  if (c.kind == InstructionKind::kForward) {
    if (c.stage > 0) deps.push_back({c.stage - 1, c.microbatch, InstructionKind::kForward});
  } else if (c.kind == InstructionKind::kBackwardWeight) {
    deps.push_back({c.stage, c.microbatch, InstructionKind::kBackwardInput});
  } else {
    deps.push_back({c.stage, c.microbatch, InstructionKind::kForward});
    if (c.stage + 1 < num_stages) deps.push_back({c.stage + 1, c.microbatch, bwd});
  }
  return deps;
}

// Explains a deadlock: runs every rank as far as the dependencies allow and reports where each
// unfinished rank waits and for which computation.
std::string explain_deadlock(const Schedule& s, const std::map<std::tuple<int, int, int>, Where>& where_of) {
  auto key = [](const Computation& c) { return std::make_tuple(c.stage, static_cast<int>(c.kind), c.microbatch); };
  std::map<std::tuple<int, int, int>, bool> done;
  std::vector<std::size_t> next(s.num_ranks(), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < s.num_ranks(); ++r) {
      while (next[r] < s.order[r].size()) {
        const Computation& c = s.order[r][next[r]];
        bool ready = true;
        for (const Computation& d : data_dependencies(c, s.num_stages, s.split_backward)) ready = ready && done[key(d)];
        if (!ready) break;
        done[key(c)] = true;
        ++next[r];
        progress = true;
      }
    }
  }
  std::string out;
  for (int r = 0; r < s.num_ranks(); ++r) {
    if (next[r] >= s.order[r].size()) continue;
    const Computation& c = s.order[r][next[r]];
    const Where& w = where_of.at(key(c));
    std::string needs;
    for (const Computation& d : data_dependencies(c, s.num_stages, s.split_backward)) {
      if (done[key(d)]) continue;
      const Where& dw = where_of.at(key(d));
      // Its own dependency placed after it on the same rank (e.g. a B before its F) can never run.
      const bool later_here = dw.rank == w.rank && dw.position > w.position;
      needs += fmt::format("{}{} (line {}, action {}{})", needs.empty() ? "" : " and ", format_action(d), dw.line,
                           dw.position, later_here ? ", later on the same rank: it must come first" : "");
    }
    out += fmt::format("\n  line {} (rank {}) waits at action {} '{}', which needs {}", w.line, w.rank, w.position,
                       format_action(c), needs);
  }
  return out;
}

// The ids a file uses consistently: 0..K-1, where K is the first id used by at most half as
// many actions as the most used one (a valid file uses every stage, and every microbatch,
// equally often). `count[id]`: actions with that id.
int consistent_id_range(const std::vector<int>& count) {
  const int most = count.empty() ? 0 : *std::max_element(count.begin(), count.end());
  int k = 0;
  while (k < static_cast<int>(count.size()) && 2 * count[k] > most) ++k;
  return k;
}

// Throws for the first action (in file order) whose stage or microbatch id lies beyond the
// ids the rest of the file uses consistently (a typo such as 0F9 in a 2-microbatch file),
// naming the file, line, action and the valid range: the "missing computation" error such a
// typo would otherwise cause names the wrong action.
void reject_stray_ids(const Schedule& s, const std::vector<std::vector<Where>>& wheres, const std::string& source) {
  std::vector<int> stage_count(s.num_stages, 0), mb_count(s.num_microbatches, 0);
  for (const auto& order : s.order)
    for (const Computation& c : order) {
      ++stage_count[c.stage];
      ++mb_count[c.microbatch];
    }
  const int ranks = s.num_ranks();
  // Every rank runs at least one stage, so stages 0..ranks-1 are always in range.
  const int stages = std::max(consistent_id_range(stage_count), ranks);
  const int microbatches = consistent_id_range(mb_count);
  if (microbatches == 0) return;  // nothing consistent to compare with: the checks below explain
  // A skipped id (0F0,0F2,... without microbatch 1) is not a typo of the actions after it:
  // name the missing microbatch instead.
  const int most = *std::max_element(mb_count.begin(), mb_count.end());
  for (int m = microbatches + 1; m < static_cast<int>(mb_count.size()); ++m) {
    if (2 * mb_count[m] > most) {
      fail(source, 0, fmt::format("{}: microbatch {} is missing: the file runs microbatches up to {} but no action of "
                                   "microbatch {} (microbatch ids must be 0..M-1 with none skipped)",
                                   source, microbatches, static_cast<int>(mb_count.size()) - 1, microbatches));
    }
  }
  const std::string layout =
      stages % ranks == 0 ? fmt::format("{} ranks x {} chunk(s) of stages", ranks, stages / ranks)
                          : fmt::format("{} ranks", ranks);
  for (int r = 0; r < ranks; ++r)
    for (std::size_t i = 0; i < s.order[r].size(); ++i) {
      const Computation& c = s.order[r][i];
      if (c.stage >= stages) {
        fail(source, wheres[r][i].line, fmt::format(
            "{}: '{}': stage {} is out of range; expected a stage id in 0..{}, the stages the rest of the file runs "
            "({})",
            at(source, wheres[r][i]), format_action(c), c.stage, stages - 1, layout));
      }
      if (c.microbatch >= microbatches) {
        // A rank that runs this microbatch's forward and backward is more likely complete than
        // a typo: then the rows without any action of it are named too.
        const auto has = [&](int rank, bool backward) {
          return std::any_of(s.order[rank].begin(), s.order[rank].end(), [&](const Computation& o) {
            return o.microbatch == c.microbatch && o.stage == c.stage && (o.kind != InstructionKind::kForward) == backward;
          });
        };
        std::string lacking;
        if (has(r, false) && has(r, true)) {
          for (int q = 0; q < ranks; ++q)
            if (std::none_of(s.order[q].begin(), s.order[q].end(),
                             [&](const Computation& o) { return o.microbatch == c.microbatch; }))
              lacking += fmt::format("{}line {} (rank {})", lacking.empty() ? "" : ", ", wheres[q].front().line, q);
        }
        fail(source, wheres[r][i].line, fmt::format(
            "{}: '{}': microbatch {} is out of range; expected a microbatch id in 0..{}, the microbatches the rest "
            "of the file runs{}",
            at(source, wheres[r][i]), format_action(c), c.microbatch, microbatches - 1,
            lacking.empty() ? std::string()
                            : fmt::format(" (or, if the file runs microbatch {}, {} has no action of it)", c.microbatch,
                                          lacking)));
      }
    }
}

}  // namespace

std::string format_action(const Computation& c) {
  return fmt::format("{}{}{}", c.stage, to_letter(c.kind), c.microbatch);
}

Schedule parse_schedule_csv(std::string_view text, const std::string& source) {
  csv::reject_non_text(text, source);
  text = csv::strip_bom(text);  // a spreadsheet's BOM would hide inside the first action
  Schedule s;
  s.name = source;
  std::vector<std::vector<Where>> wheres;  // rank -> where each kept action came from
  int line_no = 0;
  std::size_t pos = 0;
  int max_stage = -1, max_mb = -1;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    const std::string_view body = trim(line);
    if (body.empty() || body.front() == '#') continue;
    const int rank = s.num_ranks();
    s.order.emplace_back();
    wheres.emplace_back();
    int position = 0;
    for (const std::string& cell : csv::split_line(line, source, line_no)) {
      const std::string_view field = cell;
      ++position;
      if (field.empty()) continue;  // an idle step
      const Where w{line_no, rank, position};
      Computation c;
      if (!parse_action(field, source, w, c)) continue;
      max_stage = std::max(max_stage, c.stage);
      max_mb = std::max(max_mb, c.microbatch);
      s.order[rank].push_back(c);
      wheres[rank].push_back(w);
    }
    if (s.order[rank].empty()) {
      fail(source, line_no,
          fmt::format("{}:{} (rank {}): the rank has no computations (F/B/I/W actions)", source, line_no, rank));
    }
  }
  if (s.order.empty()) fail(source, 0, fmt::format("{}: no ranks (expected one row of actions per rank)", source));
  s.num_stages = max_stage + 1;
  s.num_microbatches = max_mb + 1;
  reject_stray_ids(s, wheres, source);

  // Stage placement and backward flavour.
  s.stage_rank.assign(s.num_stages, -1);
  std::vector<Where> stage_first(s.num_stages);
  const Where* full_b = nullptr;
  const Where* split_b = nullptr;
  for (int r = 0; r < s.num_ranks(); ++r) {
    for (std::size_t i = 0; i < s.order[r].size(); ++i) {
      const Computation& c = s.order[r][i];
      const Where& w = wheres[r][i];
      if (s.stage_rank[c.stage] < 0) {
        s.stage_rank[c.stage] = r;
        stage_first[c.stage] = w;
      } else if (s.stage_rank[c.stage] != r) {
        const Where& first = stage_first[c.stage];
        fail(source, w.line,
            fmt::format("{}: '{}' puts stage {} on rank {}, but line {} (rank {}) already runs it; a "
                        "stage must stay on one rank",
                        at(source, w), format_action(c), c.stage, r, first.line, first.rank));
      }
      if (c.kind == InstructionKind::kBackward && full_b == nullptr) full_b = &w;
      if ((c.kind == InstructionKind::kBackwardInput || c.kind == InstructionKind::kBackwardWeight) &&
          split_b == nullptr) {
        split_b = &w;
      }
    }
  }
  for (int st = 0; st < s.num_stages; ++st) {
    if (s.stage_rank[st] < 0) {
      fail(source, 0, fmt::format("{}: stage {} has no actions, but stages up to {} appear (stage ids must be 0..{})",
                                   source, st, s.num_stages - 1, s.num_stages - 1));
    }
  }
  if (full_b != nullptr && split_b != nullptr) {
    fail(source, 0,
        fmt::format("{}: mixes full backward B (line {}, action {}) with split backward I/W (line {}, "
                    "action {}); use one or the other for the whole pipeline",
                    source, full_b->line, full_b->position, split_b->line, split_b->position));
  }
  s.split_backward = split_b != nullptr;

  // Each computation exactly once.
  std::map<std::tuple<int, int, int>, Where> where_of;
  for (int r = 0; r < s.num_ranks(); ++r) {
    for (std::size_t i = 0; i < s.order[r].size(); ++i) {
      const Computation& c = s.order[r][i];
      auto [it, fresh] =
          where_of.emplace(std::make_tuple(c.stage, static_cast<int>(c.kind), c.microbatch), wheres[r][i]);
      if (!fresh) {
        fail(source, wheres[r][i].line, fmt::format("{}: '{}' is a duplicate; it already appears at line {}, action {}",
                                     at(source, wheres[r][i]), format_action(c), it->second.line, it->second.position));
      }
    }
  }
  std::vector<InstructionKind> needed = {InstructionKind::kForward};
  if (s.split_backward) {
    needed.push_back(InstructionKind::kBackwardInput);
    needed.push_back(InstructionKind::kBackwardWeight);
  } else {
    needed.push_back(InstructionKind::kBackward);
  }
  for (int st = 0; st < s.num_stages; ++st)
    for (InstructionKind k : needed)
      for (int m = 0; m < s.num_microbatches; ++m)
        if (!where_of.contains(std::make_tuple(st, static_cast<int>(k), m))) {
          fail(source, stage_first[st].line, fmt::format(
              "{}: computation '{}' is missing from line {} (rank {}, which runs stage {}); every stage needs {} of "
              "each microbatch 0..{}",
              source, format_action({st, m, k}), stage_first[st].line, s.stage_rank[st], st,
              s.split_backward ? "F, I and W" : "F and B", s.num_microbatches - 1));
        }

  // Dependencies satisfiable: Dag::build finds cycles; explain them with lines and actions.
  try {
    (void)Dag::build(s);
  } catch (const InputError& e) {
    const std::string why = explain_deadlock(s, where_of);
    if (why.empty()) fail(source, 0, fmt::format("{}: {}", source, e.what()));
    fail(source, 0, fmt::format("{}: the per-rank orders deadlock (dependency cycle):{}", source, why));
  }
  return s;
}

Schedule load_schedule_csv(const std::string& path) {
  return parse_schedule_csv(csv::read_file(path, "schedule file"), path);
}

std::string format_schedule_csv(const Schedule& schedule) {
  std::string out;
  for (const auto& rank : schedule.order) {
    bool first = true;
    for (const Computation& c : rank) {
      if (!first) out += ',';
      out += format_action(c);
      first = false;
    }
    out += '\n';
  }
  return out;
}

void write_schedule_csv(const Schedule& schedule, const std::string& path) {
  write_file_atomically(path, format_schedule_csv(schedule));  // never a half-written file; errors name the reason
}

}  // namespace perseus
