// Small helpers on Job: ids, time, assignments, and the profiling-sweep glue.
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <fmt/core.h>
#include <openssl/evp.h>

#include "job.hpp"
#include "perseus/error.hpp"

namespace perseus::server {

using nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void release_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::string new_job_id() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string id = "job-";
  for (int i = 0; i < 3; ++i) id += fmt::format("{:08x}", rd());
  return id;
}

std::string new_job_token() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string token = "pjt-";
  for (int i = 0; i < 8; ++i) token += fmt::format("{:08x}", rd());
  return token;
}

std::string token_sha256(std::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), digest, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL EVP_Digest)");
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

std::string freqs_json(const std::vector<int>& freq_mhz) { return json(freq_mhz).dump(); }

std::vector<StoredAssignment> stored_assignments(const Job& job) {
  std::vector<StoredAssignment> out;
  for (int d = 0; d < static_cast<int>(job.pipelines.size()); ++d)
    out.push_back({d, job.pipelines[d].plan_index, job.pipelines[d].version});
  return out;
}

std::unique_ptr<Sweep> make_sweep(const Job& job) {
  std::vector<int> grid = job.spec.freqs_mhz;
  if (grid.empty()) {
    const StoredRank* first = nullptr;
    for (const auto& [r, info] : job.ranks)
      if (!info.supported_freqs_mhz.empty() && (!first || info.seq < first->seq)) first = &info;
    if (!first) return nullptr;
    grid = first->supported_freqs_mhz;
  }
  std::erase_if(grid, [&](int f) { return f < job.spec.min_freq_mhz; });
  if (grid.empty()) throw InputError(fmt::format("no supported frequency is >= min_freq_mhz = {}", job.spec.min_freq_mhz));
  std::set<SweepKey> keys;
  const Dag& dag = *job.model.dag;
  for (int op = 0; op < dag.num_ops(); ++op)
    keys.insert({dag.op(op).stage, static_cast<int>(dag.op(op).kind)});
  SweepOptions opt{grid, job.spec.profile_samples, job.spec.max_energy_rises};
  return std::make_unique<Sweep>(opt, std::vector<SweepKey>(keys.begin(), keys.end()));
}

std::shared_ptr<const ServedPlan> render_sweep_plan(const Job& job, const Sweep& sweep) {
  const Dag& dag = *job.model.dag;
  std::vector<int> freq(dag.num_ops());
  for (int op = 0; op < dag.num_ops(); ++op)
    freq[op] = sweep.freq_mhz({dag.op(op).stage, static_cast<int>(dag.op(op).kind)});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return render_plan(dag, kSweepPlanIndex, {nan, nan}, std::move(freq));
}

bool feed_sweep(Sweep& sweep, const Job& job, const StoredRank& rank, const json& m) {
  auto it = m.find("instructions");
  if (it == m.end() || !it->is_array()) return false;
  struct Acc { int n = 0; double t = 0, e = 0; };
  std::map<std::tuple<int, int, int>, Acc> groups;  // (stage, kind, freq)
  const auto& stage_rank = job.model.schedule->stage_rank;
  for (const auto& e : *it) {
    auto kind = parse_instruction_kind(e.value("instruction", std::string()));
    auto en = e.find("energy_j");
    if (!kind || en == e.end() || !en->is_number()) continue;
    int stage = rank.pp_rank;
    if (auto st = e.find("stage"); st != e.end() && st->is_number_integer()) {
      stage = st->get<int>();
      if (stage < 0 || stage >= static_cast<int>(stage_rank.size()) || stage_rank[stage] != rank.pp_rank) continue;
    } else if (job.spec.chunks != 1) {
      continue;
    }
    Acc& a = groups[{stage, static_cast<int>(*kind), e["freq_mhz"].get<int>()}];
    ++a.n;
    a.t += e["time_s"].get<double>();
    a.e += en->get<double>();
  }
  bool stepped = false;
  for (const auto& [k, a] : groups)
    stepped |= sweep.add_sample({std::get<0>(k), std::get<1>(k)}, std::get<2>(k), a.t / a.n, a.e / a.n);
  return stepped;
}

}  // namespace perseus::server
