// The control plane's hard limits on a job (docs/http-api.md, "Limits"), one definition for
// both sides: the server refuses a job beyond them (422), and the client does not believe a
// registration answer beyond them (the job's shape bounds the plan bytes it accepts).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace perseus::runtime {

inline constexpr std::int64_t kMaxJobPp = 1024;               ///< Pipeline stages (GPUs per pipeline).
inline constexpr std::int64_t kMaxJobDp = 65536;              ///< Data-parallel pipelines.
inline constexpr std::int64_t kMaxJobTp = 1024;               ///< Tensor-parallel GPUs per stage.
inline constexpr std::int64_t kMaxJobWorld = 1 << 20;         ///< GPUs in all: pp × dp × tp.
inline constexpr std::int64_t kMaxJobMicrobatches = 4096;     ///< Microbatches per iteration.
inline constexpr std::int64_t kMaxJobChunks = 64;             ///< Model chunks per GPU (interleaving).
inline constexpr std::int64_t kMaxJobComputations = 4'000'000;  ///< Bound on pp × chunks × microbatches × 3.
/// Largest plan version a client accepts (versions are integers a JSON double holds exactly).
inline constexpr std::uint64_t kMaxPlanVersion = std::uint64_t{1} << 53;

/// Whether a bearer token can be sent as "Authorization: Bearer TOKEN" by every Perseus client:
/// printable ASCII, no space (a control character, CR/LF above all, would inject headers; RFC
/// 6750's b64token is a subset). The clients refuse another token at construction, the server
/// another admin token at start.
inline bool is_sendable_token(std::string_view token) {
  return std::all_of(token.begin(), token.end(), [](char c) { return c >= '!' && c <= '~'; });
}

}  // namespace perseus::runtime
