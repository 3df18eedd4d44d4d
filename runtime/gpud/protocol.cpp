// parse_request(): validation of every request before anything is allocated for it.
#include "perseus/gpud/protocol.hpp"

#include <set>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

namespace perseus::gpud {
namespace {

[[noreturn]] void bad(const std::string& message) { throw ProtocolError("bad_request", message); }

int int_field(const nlohmann::json& j, const char* key, int lo, int hi) {
  const auto it = j.find(key);
  if (it == j.end()) bad(fmt::format("missing field '{}'", key));
  if (!it->is_number_integer()) bad(fmt::format("field '{}' must be an integer, got {}", key, it->dump()));
  const auto v = it->get<long long>();
  if (v < lo || v > hi) bad(fmt::format("field '{}' must be in {}..{}, got {}", key, lo, hi, v));
  return static_cast<int>(v);
}

}  // namespace

const char* to_string(Op op) {
  switch (op) {
    case Op::kHello: return "hello";
    case Op::kClocks: return "clocks";
    case Op::kLock: return "lock";
    case Op::kUnlock: return "unlock";
    case Op::kEnergy: return "energy";
  }
  return "?";
}

Request parse_request(std::string_view line) {
  if (line.size() > kMaxRequestBytes) bad(fmt::format("request longer than {} bytes", kMaxRequestBytes));
  // nlohmann's parser ends the text at a NUL: '{"op":"lock",...}<NUL>junk' was executed as a lock.
  if (const auto nul = line.find('\0'); nul != std::string_view::npos)
    bad(fmt::format("request is not valid JSON: a NUL byte at column {} (one JSON object per line expected)", nul + 1));
  // A repeated key ({"gpu":0,"gpu":1}) would silently keep the last: refused.
  std::vector<std::set<std::string>> seen;  // keys read, per open object
  std::string repeated;
  const nlohmann::json::parser_callback_t note_keys = [&](int, nlohmann::json::parse_event_t event,
                                                          nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) seen.emplace_back();
    if (event == E::object_end && !seen.empty()) seen.pop_back();
    if (event == E::key && !seen.empty() && !seen.back().insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), note_keys, false);
  if (j.is_discarded()) bad("request is not valid JSON (one JSON object per line expected)");
  if (!repeated.empty()) bad(fmt::format("field '{}' appears more than once", repeated.substr(0, 32)));
  if (!j.is_object()) bad("request must be a JSON object");
  const auto op_it = j.find("op");
  if (op_it == j.end() || !op_it->is_string()) bad("field 'op' (a string) is required");
  const std::string op = op_it->get<std::string>();
  Request r;
  std::size_t keys = 1;
  if (op == "hello") {
    r.op = Op::kHello;
  } else if (op == "clocks" || op == "lock" || op == "unlock" || op == "energy") {
    r.op = op == "clocks" ? Op::kClocks : op == "lock" ? Op::kLock : op == "unlock" ? Op::kUnlock : Op::kEnergy;
    r.gpu = int_field(j, "gpu", 0, kMaxGpuIndex);
    ++keys;
    if (r.op == Op::kLock) {
      r.mhz = int_field(j, "mhz", 1, kMaxClockMhz);
      ++keys;
    }
  } else {
    // Control bytes (a NUL would end the message in C strings) shown as \xNN.
    std::string shown;
    for (const char ch : op.substr(0, 32)) {
      const auto c = static_cast<unsigned char>(ch);
      shown += c < 0x20 || c == 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, ch);
    }
    bad(fmt::format("unknown op '{}' (expected hello, clocks, lock, unlock or energy)", shown));
  }
  if (j.size() != keys) {
    for (const auto& [k, v] : j.items()) {
      if (k != "op" && k != "gpu" && !(k == "mhz" && r.op == Op::kLock)) {
        bad(fmt::format("unexpected field '{}' for op '{}'", k.substr(0, 32), op));
      }
    }
  }
  return r;
}

std::string format_request(const Request& r) {
  nlohmann::json j = {{"op", to_string(r.op)}};
  if (r.op != Op::kHello) j["gpu"] = r.gpu;
  if (r.op == Op::kLock) j["mhz"] = r.mhz;
  return j.dump() + "\n";
}

bool LineBuffer::append(const char* data, std::size_t n) {
  if (overflowed_) return false;
  // Bytes after the last '\n' must stay within the capacity.
  std::size_t start = 0;
  const auto last_nl = buf_.rfind('\n');
  std::size_t open = last_nl == std::string::npos ? buf_.size() : buf_.size() - last_nl - 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (data[i] == '\n') {
      open = 0;
      continue;
    }
    if (++open > capacity_) {
      buf_.append(data + start, i - start);  // complete lines before it stay readable
      overflowed_ = true;
      return false;
    }
  }
  buf_.append(data, n);
  return true;
}

std::optional<std::string> LineBuffer::next_line() {
  const auto nl = buf_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = buf_.substr(0, nl);
  buf_.erase(0, nl + 1);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace perseus::gpud
