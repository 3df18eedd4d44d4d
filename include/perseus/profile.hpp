// Per-stage time/energy profile of forward/backward computations at each GPU frequency.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/input_limits.hpp"

namespace perseus {

/// Kind of a pipeline computation ("instruction" in Perseus/Zeus terms).
/// kBackwardInput / kBackwardWeight are the two halves of a split backward used by
/// zero-bubble schedules (input-gradient "I" and weight-gradient "W").
enum class InstructionKind : std::uint8_t { kForward = 0, kBackward = 1, kBackwardInput = 2, kBackwardWeight = 3 };
inline constexpr int kNumInstructionKinds = 4;

/// Largest P2P blocking power (W) any input may give: a GPU draws at most a few kW, and the bound
/// keeps every energy sum (W x s) finite. The planner, emulation and the simulated GPU refuse more.
/// The same limit as limits::kMaxPBlockW (the readers' name for it).
inline constexpr double kMaxBlockingPowerW = limits::kMaxPBlockW;

/// Profile/plan name of a kind: "forward", "backward", "backward_input", "backward_weight".
std::string_view to_string(InstructionKind kind);
/// One-letter code used by torch.distributed.pipelining action lists: F, B, I, W.
char to_letter(InstructionKind kind);
/// Inverse of to_string(); std::nullopt for anything else (case-sensitive).
std::optional<InstructionKind> parse_instruction_kind(std::string_view name);

/// One measured operating point of one computation (one microbatch, one GPU).
struct OperatingPoint {
  int freq_mhz = 0;       ///< GPU SM clock, MHz.
  double time_s = 0.0;    ///< Duration of one microbatch's computation, seconds (> 0).
  double energy_j = 0.0;  ///< Energy of that computation on one GPU, joules (>= 0).
};

/// Time/energy profile: for each (stage, instruction kind), the operating points at every
/// profiled frequency. Stages are dense ids 0..num_stages()-1.
/// Source: Perseus (SOSP'24) §4.1 "Profiling"; file format of the Perseus/Zeus planner
/// (columns stage,instruction,frequency,time,energy).
class Profile {
 public:
  /// Number of stages (max stage id + 1).
  int num_stages() const { return static_cast<int>(points_.size()); }
  /// True when the profile has at least one operating point for (stage, kind).
  bool has(int stage, InstructionKind kind) const;
  /// Operating points of (stage, kind), sorted by frequency, highest first. Empty if absent.
  const std::vector<OperatingPoint>& points(int stage, InstructionKind kind) const;
  /// The operating point of (stage, kind) at freq_mhz (MHz), or nullptr when there is none.
  /// O(log points): a binary search of the sorted points (a linear scan per computation made
  /// `perseus report` take minutes on a profile of 60,000 clocks, session 32's trial).
  const OperatingPoint* find(int stage, InstructionKind kind, int freq_mhz) const;
  /// Highest frequency (MHz) among all points of (stage, kind); 0 when absent.
  int max_freq_mhz(int stage, InstructionKind kind) const;
  /// Highest frequency (MHz) in the whole profile.
  int max_freq_mhz() const;
  /// Adds one operating point (kept sorted by frequency, highest first). Does not check
  /// duplicates or the point's values: load_profile_csv() does. Throws InputError (field
  /// "stage") for a stage outside 0..limits::kMaxScheduleStageId, the largest stage id of a
  /// schedule (a negative one indexed out of bounds; a huge one allocated a table per stage
  /// up to it).
  void add(int stage, InstructionKind kind, const OperatingPoint& point);
  /// Where the profile came from (file path or a description), for messages.
  std::string source;

 private:
  std::vector<std::vector<std::vector<OperatingPoint>>> points_;  // [stage][kind] -> points
};

/// Reads a profile CSV with header columns stage,instruction,frequency,time,energy (any
/// order; extra columns such as rank,pp_rank are ignored; quoted fields are not supported).
/// instruction is forward, backward, backward_input or backward_weight.
/// Units: frequency MHz (integer), time s, energy J, of ONE microbatch on ONE GPU.
/// 3D jobs: with a dp_rank and/or tp_rank column, the file may hold one row per GPU; the rows
/// of one (stage, instruction, frequency) merge into one point with the slowest GPU's time
/// (one clock per stage across its TP GPUs and DP replicas; docs/validation.md "3D runs") and
/// the mean energy (still one GPU's).
/// expected_stages: when set, the profile must have exactly that many stages.
/// The file is read with read_input_file() (perseus/input_file.hpp): a pipe or /dev/stdin is
/// read to its end, at most limits::kMaxInputFileBytes.
/// Throws InputError naming file, line and field on: unreadable or too large file, missing column,
/// non-numeric/NaN/inf value, time <= 0, energy < 0, frequency <= 0, unknown instruction,
/// negative dp_rank/tp_rank, duplicate (stage, instruction, frequency[, dp_rank, tp_rank]),
/// a stage without forward or backward rows
/// (a split backward_input + backward_weight pair counts as backward), gaps in stage ids,
/// fewer/more stages than expected_stages.
Profile load_profile_csv(const std::string& path, std::optional<int> expected_stages = std::nullopt);

/// Same as load_profile_csv() but parses CSV text held in memory (e.g. an HTTP request
/// body); `source_name` is used in error messages in place of a file name.
Profile parse_profile_csv(std::string_view text, const std::string& source_name,
                          std::optional<int> expected_stages = std::nullopt);

/// Bounds of one GPU's average power while computing, W. Outside them a profile row's units are
/// almost surely wrong: times in ms (0.3 W), energy in kJ, or power in the energy column
/// (10 kW). The upper bound is the runtime's telemetry bound (docs/client.md).
inline constexpr double kMinComputePowerW = 1.0;
inline constexpr double kMaxComputePowerW = 3000.0;
/// profile_unit_warnings() names at most this many operating points (then a count of the rest).
inline constexpr std::size_t kMaxUnitWarnings = 5;

/// Warnings about the units of a profile that parsed: operating points whose energy / time (W)
/// is outside [kMinComputePowerW, kMaxComputePowerW] ("SOURCE: stage S KIND at F MHz: energy E J
/// over time T s implies P W per GPU, outside the plausible 1..3000 W (...)"; at most
/// kMaxUnitWarnings, then "... and N more"), and P_block (`p_block_w`, W) above the lowest
/// computation power of the profile (a GPU blocked on communication draws less than one
/// computing: P_block typed in mW, as NVML reports power, is 1000 x too high). Empty when
/// plausible; does not throw. `perseus optimize` prints them (--strict: errors), Python's
/// optimize() raises them as UserWarning, both list them in summary `warnings`.
std::vector<std::string> profile_unit_warnings(const Profile& profile, double p_block_w);

/// Writes a profile in the same CSV format (stage,instruction,frequency,time,energy),
/// atomically (write_file_atomically). Throws InputError naming the reason when the file
/// cannot be written.
void write_profile_csv(const Profile& profile, const std::string& path);

/// The profile CSV text write_profile_csv() writes (the one profile writer): header
/// stage,instruction,frequency,time,energy, then every point by stage, instruction and
/// frequency (highest first), times and energies with 17 significant digits (exact round trip).
std::string format_profile_csv(const Profile& profile);

}  // namespace perseus
