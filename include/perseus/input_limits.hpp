// Input limits shared by every reader (profile CSV, schedule CSV, plan files, CLI options,
// the server's job fields): values outside are rejected with an InputError, so no input can
// make Perseus allocate without bound or compute with absurd numbers.
#pragma once

#include <cstddef>

namespace perseus::limits {

inline constexpr long kMaxProfileStages = 1 << 16;   ///< Profile stage ids 0..kMaxProfileStages-1.
/// Schedule CSV stage and microbatch ids 0..this: a schedule holds at most 2^20 (stage,
/// microbatch) pairs (--stages and --microbatches go to 2^20), so every id a generated
/// schedule can hold reads back.
inline constexpr int kMaxScheduleStageId = (1 << 20) - 1;
inline constexpr int kMaxMicrobatchId = (1 << 20) - 1;
inline constexpr long kMaxFrequencyMhz = 100000;     ///< SM clocks 1..this MHz.
/// Frequencies (rows) of one (stage, instruction) in a profile: the planner indexes a
/// computation's clocks with 16 bits.
inline constexpr std::size_t kMaxProfileClocks = 65535;
/// One computation of one microbatch: time in [kMinOpTimeS, kMaxOpTimeS] s. A kernel launch
/// alone takes microseconds; below that, starts and ends of a long pipeline's computations
/// would round to the same double.
inline constexpr double kMinOpTimeS = 1e-6;
inline constexpr double kMaxOpTimeS = 1e5;
/// A measured iteration: time in (0, this] s (about 4 months).
inline constexpr double kMaxIterationTimeS = 1e7;
inline constexpr double kMaxOpEnergyJ = 1e12;        ///< One computation: energy in [0, this] J.
inline constexpr double kMaxPBlockW = 1e5;           ///< P_block in [0, this] W.
/// An input file (profile, schedule, plan, validation CSVs, JSON) read whole: at most this
/// many bytes, 256 MiB (files and streams alike; see read_input_file()).
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;

}  // namespace perseus::limits
