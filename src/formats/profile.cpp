// Profile CSV reading/writing and validation.
#include "perseus/profile.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/core.h>

#include "csv_fields.hpp"
#include "csv_header.hpp"
#include "perseus/error.hpp"
#include "perseus/output_folder.hpp"
#include "perseus/input_limits.hpp"

namespace perseus {

namespace {

constexpr std::string_view kKindNames[kNumInstructionKinds] = {"forward", "backward", "backward_input",
                                                                "backward_weight"};
constexpr char kKindLetters[kNumInstructionKinds] = {'F', 'B', 'I', 'W'};

const std::vector<OperatingPoint>& empty_points() {
  static const std::vector<OperatingPoint> kEmpty;
  return kEmpty;
}

// Standard CSV quoting ("forward", as pandas' QUOTE_ALL writes); blank lines are skipped.
using Reader = io::CSVReader<7, io::trim_chars<' ', '\t', '\r'>, io::double_quote_escape<',', '"'>,
                             io::throw_on_overflow, io::empty_line_comment>;

struct RowContext {
  const std::string& source;
  int line;
};

[[noreturn]] void fail(const RowContext& ctx, std::string_view field, const std::string& what) {
  csv::fail(ctx.source, ctx.line, field, what);
}

double parse_double(const RowContext& ctx, std::string_view field, const char* text) {
  return csv::to_double(ctx.source, ctx.line, field, text);
}

long parse_int(const RowContext& ctx, std::string_view field, const char* text) {
  return csv::to_int(ctx.source, ctx.line, field, text);
}

/// A clock in MHz: an integer (integral floats such as "1410.0" too). A fraction such as 1.41
/// gets a hint that it looks like GHz; the range check (1..kMaxFrequencyMhz) is the caller's.
long parse_frequency(const RowContext& ctx, const char* text) {
  char* end = nullptr;
  const double d = std::strtod(text, &end);
  if (end != text && *end == '\0' && std::isfinite(d) && d != std::floor(d)) {
    fail(ctx, "frequency",
         fmt::format("expected a clock in MHz (an integer 1..{}), got {}{}", limits::kMaxFrequencyMhz, quote_input(text),
                     d > 0 && d < 10 ? fmt::format(" (GHz? {} GHz is {} MHz)", d, std::lround(d * 1000)) : ""));
  }
  return parse_int(ctx, "frequency", text);
}

constexpr const char* kColumns = "stage,instruction,frequency,time,energy";

Profile read_rows(Reader& reader, const std::string& source, std::optional<int> expected_stages, std::string_view text) {
  constexpr const char* kRequired[] = {"stage", "instruction", "frequency", "time", "energy"};
  try {
    reader.read_header(io::ignore_extra_column | io::ignore_missing_column, "stage", "instruction", "frequency", "time",
                       "energy", "dp_rank", "tp_rank");
  } catch (const io::error::base& e) {
    csv::throw_header_error(e, source, text, kColumns);
  }
  for (const char* c : kRequired) {
    if (!reader.has_column(c)) csv::throw_missing_column(c, source, text, kColumns);
  }
  // 3D profiles (one row per GPU: dp_rank and/or tp_rank columns): the rows of one (stage,
  // instruction, frequency) from the stage's TP GPUs and DP replicas merge into one point, time
  // = the slowest GPU's (one clock per stage; TP collectives and the DP gradient sync wait for
  // it), energy = their mean (the profile's energy is one GPU's).
  const bool per_gpu = reader.has_column("dp_rank") || reader.has_column("tp_rank");
  struct Merged {
    double time = 0, energy_sum = 0;
    int rows = 0;
  };
  std::map<std::tuple<long, int, long>, Merged> merged;
  struct Row {
    int stage;
    InstructionKind kind;
    OperatingPoint point;
  };
  std::vector<Row> rows;
  Profile profile;
  profile.source = source;
  std::map<std::tuple<long, int, long, long, long>, int> seen;  // (stage, kind, freq, dp, tp) -> line
  char *stage_s = nullptr, *instr_s = nullptr, *freq_s = nullptr, *time_s = nullptr, *energy_s = nullptr,
       *dp_s = nullptr, *tp_s = nullptr;
  constexpr long kMaxStages = limits::kMaxProfileStages;
  while (true) {
    bool more = false;
    try {
      more = reader.read_row(stage_s, instr_s, freq_s, time_s, energy_s, dp_s, tp_s);
    } catch (const io::error::base& e) {
      csv::throw_row_error(e, source, kColumns);
    }
    if (!more) break;
    const RowContext ctx{source, static_cast<int>(reader.get_file_line())};
    const long stage = parse_int(ctx, "stage", stage_s);
    if (stage < 0 || stage >= kMaxStages) fail(ctx, "stage", fmt::format("expected 0..{}, got {}", kMaxStages - 1, stage));
    const auto kind = parse_instruction_kind(instr_s);
    if (!kind) {
      fail(ctx, "instruction",
           fmt::format("expected forward, backward, backward_input or backward_weight, got {}", quote_input(instr_s)));
    }
    const long freq = parse_frequency(ctx, freq_s);
    if (freq <= 0 || freq > limits::kMaxFrequencyMhz) {
      fail(ctx, "frequency", fmt::format("expected a clock in MHz (1..{}), got {}{}", limits::kMaxFrequencyMhz, freq,
                                         freq > limits::kMaxFrequencyMhz && freq % 1'000'000 == 0
                                             ? fmt::format(" (Hz? {} Hz is {} MHz)", freq, freq / 1'000'000)
                                             : ""));
    }
    const double time = parse_double(ctx, "time", time_s);
    if (!(time >= limits::kMinOpTimeS && time <= limits::kMaxOpTimeS)) {
      fail(ctx, "time", fmt::format("expected a duration in [{}, {}] s (one computation of one microbatch), got {}",
                                    limits::kMinOpTimeS, limits::kMaxOpTimeS, time));
    }
    const double energy = parse_double(ctx, "energy", energy_s) + 0.0;  // + 0.0: "-0" is 0 J, not -0 J
    if (energy < 0 || energy > limits::kMaxOpEnergyJ) {
      fail(ctx, "energy", fmt::format("expected an energy in [0, 1e12] J, got {}", energy));
    }
    const long dp = dp_s ? parse_int(ctx, "dp_rank", dp_s) : 0;
    const long tp = tp_s ? parse_int(ctx, "tp_rank", tp_s) : 0;
    if (dp < 0 || dp >= (1L << 20)) fail(ctx, "dp_rank", fmt::format("expected a rank >= 0, got {}", dp));
    if (tp < 0 || tp >= (1L << 20)) fail(ctx, "tp_rank", fmt::format("expected a rank >= 0, got {}", tp));
    if (auto [it, inserted] = seen.emplace(std::make_tuple(stage, static_cast<int>(*kind), freq, dp, tp), ctx.line);
        !inserted) {
      fail(ctx, "frequency",
           fmt::format("duplicate row for stage {} {} at {} MHz{} (first on line {})", stage, to_string(*kind), freq,
                       per_gpu ? fmt::format(" on dp_rank {} tp_rank {}", dp, tp) : std::string(), it->second));
    }
    if (!per_gpu) {
      rows.push_back({static_cast<int>(stage), *kind, OperatingPoint{static_cast<int>(freq), time, energy}});
      continue;
    }
    Merged& m = merged[std::make_tuple(stage, static_cast<int>(*kind), freq)];
    m.time = std::max(m.time, time);
    m.energy_sum += energy;
    ++m.rows;
  }
  // Every GPU of a stage measured every (instruction, frequency) of the stage: a point merged
  // from fewer GPUs than the others would be of another kind (the slowest of fewer clocks).
  std::map<long, std::set<std::pair<long, long>>> replicas;  // stage -> its (dp_rank, tp_rank)s
  for (const auto& entry : seen) replicas[std::get<0>(entry.first)].insert({std::get<3>(entry.first), std::get<4>(entry.first)});
  for (const auto& [key, m] : merged) {
    const auto [stage, kind, freq] = key;
    const auto& gpus = replicas[stage];
    if (static_cast<std::size_t>(m.rows) == gpus.size()) continue;
    for (const auto& [dp, tp] : gpus) {
      if (seen.count(std::make_tuple(stage, kind, freq, dp, tp))) continue;
      throw InputError::in_file(
          source, 0, "frequency",
          fmt::format("stage {} {} at {} MHz has no row for dp_rank {} tp_rank {}, which has rows for other operating "
                      "points of stage {}: each of a stage's GPUs needs a row for every (instruction, frequency) of "
                      "the stage ({} of its {} GPUs have this one)",
                      stage, to_string(static_cast<InstructionKind>(kind)), freq, dp, tp, stage, m.rows, gpus.size()));
    }
  }
  for (const auto& [key, m] : merged) {
    const auto [stage, kind, freq] = key;
    rows.push_back({static_cast<int>(stage), static_cast<InstructionKind>(kind),
                    OperatingPoint{static_cast<int>(freq), m.time, m.energy_sum / m.rows}});
  }
  // Added in (stage, kind, highest clock first) order, each add() appends: O(n log n) for any row
  // order (inserting rows listed slowest clock first one by one was quadratic).
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tuple(a.stage, static_cast<int>(a.kind), -a.point.freq_mhz) <
           std::tuple(b.stage, static_cast<int>(b.kind), -b.point.freq_mhz);
  });
  for (const auto& r : rows) profile.add(r.stage, r.kind, r.point);
  if (profile.num_stages() == 0) {
    throw InputError(fmt::format("{}: no data rows after the header; expected one row per operating point "
                                 "(stage, instruction, frequency)", source));
  }
  for (int s = 0; s < profile.num_stages(); ++s) {
    const bool any = std::any_of(std::begin(kKindNames), std::end(kKindNames), [&](std::string_view n) {
      return profile.has(s, *parse_instruction_kind(n));
    });
    if (!any) {
      throw InputError::in_file(source, 0, "stage",
                                fmt::format("stage ids must be contiguous from 0, but stage {} has no rows (max stage is {})",
                                            s, profile.num_stages() - 1));
    }
    if (!profile.has(s, InstructionKind::kForward)) {
      throw InputError::in_file(source, 0, "instruction", fmt::format("stage {} has no forward rows", s));
    }
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const std::size_t clocks = profile.points(s, static_cast<InstructionKind>(k)).size();
      if (clocks > limits::kMaxProfileClocks)
        throw InputError::in_file(source, 0, "frequency",
                                  fmt::format("stage {} {} has {} frequencies; at most {} per (stage, instruction) "
                                              "(a GPU has a few hundred)",
                                              s, kKindNames[k], clocks, limits::kMaxProfileClocks));
    }
    const bool split = profile.has(s, InstructionKind::kBackwardInput) && profile.has(s, InstructionKind::kBackwardWeight);
    if (!profile.has(s, InstructionKind::kBackward) && !split) {
      throw InputError::in_file(source, 0, "instruction",
                                fmt::format("stage {} has no backward rows (nor backward_input + backward_weight)", s));
    }
  }
  if (expected_stages && profile.num_stages() != *expected_stages) {
    throw InputError::in_file(source, 0, "stage",
                              fmt::format("expected {} stages (0..{}), the profile has {}", *expected_stages,
                                          *expected_stages - 1, profile.num_stages()));
  }
  return profile;
}

}  // namespace

std::string_view to_string(InstructionKind kind) { return kKindNames[static_cast<int>(kind)]; }
char to_letter(InstructionKind kind) { return kKindLetters[static_cast<int>(kind)]; }

std::optional<InstructionKind> parse_instruction_kind(std::string_view name) {
  for (int k = 0; k < kNumInstructionKinds; ++k) {
    if (name == kKindNames[k]) return static_cast<InstructionKind>(k);
  }
  return std::nullopt;
}

bool Profile::has(int stage, InstructionKind kind) const { return !points(stage, kind).empty(); }

const std::vector<OperatingPoint>& Profile::points(int stage, InstructionKind kind) const {
  if (stage < 0 || stage >= num_stages()) return empty_points();
  return points_[stage][static_cast<int>(kind)];
}

int Profile::max_freq_mhz(int stage, InstructionKind kind) const {
  const auto& p = points(stage, kind);
  return p.empty() ? 0 : p.front().freq_mhz;
}

int Profile::max_freq_mhz() const {
  int best = 0;
  for (const auto& stage : points_)
    for (const auto& kind : stage)
      if (!kind.empty()) best = std::max(best, kind.front().freq_mhz);
  return best;
}

const OperatingPoint* Profile::find(int stage, InstructionKind kind, int freq_mhz) const {
  const auto& v = points(stage, kind);  // highest frequency first
  const auto it = std::lower_bound(v.begin(), v.end(), freq_mhz,
                                   [](const OperatingPoint& p, int f) { return p.freq_mhz > f; });
  return it != v.end() && it->freq_mhz == freq_mhz ? &*it : nullptr;
}

void Profile::add(int stage, InstructionKind kind, const OperatingPoint& point) {
  // The largest stage id any schedule can hold (profile fitting adds one per schedule stage;
  // a profile CSV is held to limits::kMaxProfileStages by its reader).
  if (stage < 0 || stage > limits::kMaxScheduleStageId) {
    throw InputError("stage", fmt::format("must be in [0, {}], got {}", limits::kMaxScheduleStageId, stage));
  }
  if (stage >= num_stages()) points_.resize(stage + 1, std::vector<std::vector<OperatingPoint>>(kNumInstructionKinds));
  auto& v = points_[stage][static_cast<int>(kind)];
  const auto pos = std::upper_bound(v.begin(), v.end(), point.freq_mhz,
                                    [](int f, const OperatingPoint& p) { return f > p.freq_mhz; });
  v.insert(pos, point);
}

Profile load_profile_csv(const std::string& path, std::optional<int> expected_stages) {
  return parse_profile_csv(csv::read_file(path, "profile"), path, expected_stages);  // names why it cannot be read
}

Profile parse_profile_csv(std::string_view text, const std::string& source_name, std::optional<int> expected_stages) {
  if (expected_stages && *expected_stages < 1) {  // a caller's value, not the file's fault
    throw InputError("expected_stages", fmt::format("must be >= 1, got {}", *expected_stages));
  }
  csv::reject_non_text(text, source_name);
  text = csv::strip_bom(text);
  Reader reader(source_name, text.data(), text.data() + text.size());
  return read_rows(reader, source_name, expected_stages, text);
}

std::string format_profile_csv(const Profile& profile) {
  std::string out = "stage,instruction,frequency,time,energy\n";
  for (int s = 0; s < profile.num_stages(); ++s) {
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const auto kind = static_cast<InstructionKind>(k);
      for (const auto& p : profile.points(s, kind)) {
        out += fmt::format("{},{},{},{:.17g},{:.17g}\n", s, to_string(kind), p.freq_mhz, p.time_s, p.energy_j);
      }
    }
  }
  return out;
}

void write_profile_csv(const Profile& profile, const std::string& path) {
  write_file_atomically(path, format_profile_csv(profile));  // never a half-written file; errors name the reason
}

std::vector<std::string> profile_unit_warnings(const Profile& profile, double p_block_w) {
  std::vector<std::string> out;
  const std::string source = profile.source.empty() ? "profile" : profile.source;
  std::size_t implausible = 0;
  double min_power = std::numeric_limits<double>::infinity();
  std::string min_at;
  for (int s = 0; s < profile.num_stages(); ++s) {
    for (int k = 0; k < kNumInstructionKinds; ++k) {
      const auto kind = static_cast<InstructionKind>(k);
      for (const OperatingPoint& p : profile.points(s, kind)) {
        if (!(p.time_s > 0)) continue;
        const double w = p.energy_j / p.time_s;
        const std::string at = fmt::format("stage {} {} at {} MHz", s, to_string(kind), p.freq_mhz);
        if (!(w >= kMinComputePowerW && w <= kMaxComputePowerW) && implausible++ < kMaxUnitWarnings) {
          out.push_back(fmt::format("{}: {}: energy {} J over time {} s implies {:.4g} W per GPU, outside the "
                                    "plausible {}..{} W (time in ms? energy in kJ? power in the energy column?)",
                                    source, at, p.energy_j, p.time_s, w, kMinComputePowerW, kMaxComputePowerW));
        }
        if (w < min_power) {
          min_power = w;
          min_at = at;
        }
      }
    }
  }
  if (implausible > kMaxUnitWarnings)
    out.push_back(fmt::format("{}: ... and {} more operating points outside {}..{} W", source,
                              implausible - kMaxUnitWarnings, kMinComputePowerW, kMaxComputePowerW));
  if (!min_at.empty() && p_block_w > min_power) {
    out.push_back(fmt::format("{}: P_block {} W is above the power of {} ({:.4g} W); a GPU blocked on "
                              "communication draws less than one computing (is P_block in W?)",
                              source, p_block_w, min_at, min_power));
  }
  return out;
}

}  // namespace perseus
