// parse_gpud_config(): the helper's config file, one directive a line.
#include "perseus/gpud/config.hpp"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <fmt/core.h>

#include "perseus/error.hpp"
#include "perseus/input_file.hpp"
#include "perseus/gpud/protocol.hpp"

namespace perseus::gpud {
namespace {

struct LineParser {
  const std::string& source;
  int line;
  std::string directive;
  std::vector<std::string> words;

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    // The field is a directive as written: escaped and cut like any quoted input.
    throw InputError::in_file(source, line, escape_input(field, 64), message);
  }
  void want(std::size_t lo, std::size_t hi, const char* usage) const {
    if (words.size() < lo || words.size() > hi) fail(directive, fmt::format("expected '{}'", usage));
  }
  long long integer(const std::string& w, const std::string& field, long long lo, long long hi, int base = 10) const {
    long long v = 0;
    const auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), v, base);
    const bool whole = p == w.data() + w.size();  // beyond long long: out of range, still an integer
    if (!whole || (ec != std::errc() && ec != std::errc::result_out_of_range))
      fail(field, fmt::format("{} is not an integer", quote_input(w)));
    if (ec != std::errc() || v < lo || v > hi) fail(field, fmt::format("{} is out of range {}..{}", escape_input(w), lo, hi));
    return v;
  }
  double number(const std::string& w, const std::string& field) const {
    try {
      std::size_t used = 0;
      const double v = std::stod(w, &used);
      if (used == w.size() && v > 0 && v < 1e6) return v;
    } catch (const std::exception&) {
    }
    fail(field, fmt::format("{} is not a positive number below 1e6", quote_input(w)));
  }
  unsigned user_id(const std::string& name, const std::string& field) const {
    if (name.find_first_not_of("0123456789") == std::string::npos && !name.empty()) {
      return static_cast<unsigned>(integer(name, field, 0, 0xfffffffe));
    }
    const passwd* p = ::getpwnam(name.c_str());
    if (p == nullptr) fail(field, fmt::format("unknown user {}", quote_input(name)));
    return p->pw_uid;
  }
  unsigned group_id(const std::string& name, const std::string& field) const {
    if (name.find_first_not_of("0123456789") == std::string::npos && !name.empty()) {
      return static_cast<unsigned>(integer(name, field, 0, 0xfffffffe));
    }
    const group* g = ::getgrnam(name.c_str());
    if (g == nullptr) fail(field, fmt::format("unknown group {}", quote_input(name)));
    return g->gr_gid;
  }
  Principal principal(const std::string& w) const {
    const auto colon = w.find(':');
    const std::string kind = w.substr(0, colon);
    const std::string value = colon == std::string::npos ? "" : w.substr(colon + 1);
    if (colon == std::string::npos || value.empty() ||
        (kind != "user" && kind != "uid" && kind != "group" && kind != "gid")) {
      fail("allow", fmt::format("{} is not a principal (expected user:NAME, uid:N, group:NAME or gid:N)", quote_input(w)));
    }
    Principal p;
    p.text = w;
    if (kind == "uid" || kind == "gid") {
      p.id = static_cast<unsigned>(integer(value, "allow", 0, 0xfffffffe));
    } else {
      p.id = kind == "user" ? user_id(value, "allow") : group_id(value, "allow");
    }
    p.kind = (kind == "user" || kind == "uid") ? Principal::Kind::kUser : Principal::Kind::kGroup;
    return p;
  }
};

}  // namespace

bool GpudConfig::allows(int gpu, const PeerCredentials& peer) const {
  for (const auto& r : rules) {
    if (r.gpu != -1 && r.gpu != gpu) continue;
    for (const auto& p : r.who) {
      if (p.kind == Principal::Kind::kUser && p.id == peer.uid) return true;
      if (p.kind == Principal::Kind::kGroup &&
          (p.id == peer.gid || std::find(peer.groups.begin(), peer.groups.end(), p.id) != peer.groups.end())) {
        return true;
      }
    }
  }
  return false;
}

GpudConfig parse_gpud_config(std::string_view text, const std::string& source) {
  GpudConfig c;
  c.source = source;
  std::istringstream in{std::string(text)};
  int line_no = 0;
  std::map<std::string, int> first_line;  // single-value directive -> the line that gave it
  for (std::string raw; std::getline(in, raw);) {
    ++line_no;
    // A NUL would cut every message quoting the line (and the path it names) short.
    if (raw.find('\0') != std::string::npos)
      throw InputError::in_file(source, line_no, "config", "the line contains a NUL byte");
    if (const auto hash = raw.find('#'); hash != std::string::npos) raw.erase(hash);
    std::istringstream words(raw);
    LineParser p{source, line_no, "", {}};
    if (!(words >> p.directive)) continue;
    for (std::string w; words >> w;) p.words.push_back(w);
    const auto& w = p.words;
    const std::string& d = p.directive;
    // Every directive but allow sets one value: a second one would silently win. (An unknown
    // directive is refused at its first line, below, so it never reaches this check twice.)
    if (d != "allow") {
      if (const auto [it, fresh] = first_line.emplace(d, line_no); !fresh)
        p.fail(d, fmt::format("given twice (first on line {}); give it once", it->second));
    }
    if (d == "socket") {
      p.want(1, 1, "socket PATH");
      if (w[0].front() != '/') p.fail(d, fmt::format("{} must be an absolute path", quote_input(w[0])));
      if (w[0].size() > 100) p.fail(d, "a Unix socket path must be at most 100 characters");
      c.socket_path = w[0];
    } else if (d == "socket_mode") {
      p.want(1, 1, "socket_mode OCTAL (e.g. 0660)");
      c.socket_mode = static_cast<unsigned>(p.integer(w[0], d, 0, 0777, 8));
      if ((c.socket_mode & 0007) != 0) {
        p.fail(d, fmt::format("{} gives access to every user of the machine; use 0660 or stricter (access is "
                              "granted through socket_group and allow rules)", w[0]));
      }
      if ((c.socket_mode & 0200) == 0) p.fail(d, fmt::format("{} leaves the socket unusable even by its owner", w[0]));
    } else if (d == "socket_group") {
      p.want(1, 1, "socket_group NAME|GID");
      c.socket_group = w[0];
      c.socket_gid = p.group_id(w[0], d);
    } else if (d == "state_dir") {
      p.want(1, 1, "state_dir PATH");
      if (w[0].front() != '/') p.fail(d, fmt::format("{} must be an absolute path", quote_input(w[0])));
      c.state_dir = w[0];
    } else if (d == "backend") {
      p.want(1, 1, "backend nvml|rocm-smi|dry-run");
      if (w[0] != "nvml" && w[0] != "rocm-smi" && w[0] != "dry-run") {
        p.fail(d, fmt::format("unknown backend {} (expected nvml, rocm-smi or dry-run)", quote_input(w[0])));
      }
      c.backend = w[0];
    } else if (d == "library") {
      p.want(1, 1, "library PATH");
      c.library = w[0];
    } else if (d == "dry_run_log") {
      p.want(1, 1, "dry_run_log PATH");
      c.dry_run_log = w[0];
    } else if (d == "gpus") {
      p.want(1, kMaxGpuIndex + 1, "gpus I J ...");
      c.gpus.clear();
      for (const auto& g : w) c.gpus.push_back(static_cast<int>(p.integer(g, d, 0, kMaxGpuIndex)));
      std::sort(c.gpus.begin(), c.gpus.end());
      if (std::adjacent_find(c.gpus.begin(), c.gpus.end()) != c.gpus.end()) p.fail(d, "a GPU is listed twice");
    } else if (d == "rate_limit") {
      p.want(2, 2, "rate_limit PER_SECOND BURST");
      c.rate_per_s = p.number(w[0], "rate_limit");
      c.rate_burst = p.number(w[1], "rate_limit");
      if (c.rate_burst < 1) p.fail(d, "BURST must be at least 1");
    } else if (d == "max_clients") {
      p.want(1, 1, "max_clients N");
      c.max_clients = static_cast<int>(p.integer(w[0], d, 1, 4096));
    } else if (d == "allow") {
      p.want(2, 64, "allow GPU|* user:NAME|uid:N|group:NAME|gid:N ...");
      AllowRule r;
      r.line = line_no;
      r.gpu = w[0] == "*" ? -1 : static_cast<int>(p.integer(w[0], "allow", 0, kMaxGpuIndex));
      for (std::size_t i = 1; i < w.size(); ++i) r.who.push_back(p.principal(w[i]));
      c.rules.push_back(std::move(r));
    } else {
      p.fail(d, "unknown directive (expected socket, socket_mode, socket_group, state_dir, backend, library, "
                "dry_run_log, gpus, rate_limit, max_clients or allow)");
    }
  }
  if (c.rules.empty()) {
    throw InputError::in_file(source, 0, "allow", "no allow rule: nobody could use the helper (add e.g. "
                                                  "'allow * group:perseus')");
  }
  if (c.backend == "dry-run" && c.gpus.empty()) {  // here, so that --check says it too
    throw InputError::in_file(source, 0, "gpus",
                              "backend dry-run needs a 'gpus' list (it has no devices to count), e.g. 'gpus 0 1'");
  }
  if (!c.gpus.empty()) {
    for (const auto& r : c.rules) {
      if (r.gpu >= 0 && !std::binary_search(c.gpus.begin(), c.gpus.end(), r.gpu)) {
        throw InputError::in_file(source, r.line, "allow",
                                  fmt::format("GPU {} is not in the 'gpus' list this helper serves", r.gpu));
      }
    }
  }
  return c;
}

GpudConfig load_gpud_config(const std::string& path) {
  // A root daemon's configuration is a regular file: /dev/zero was read without end (900 MB in
  // 6 s) and a FIFO blocked for ever (session 32's trial). read_input_file() names a folder and
  // caps the size.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) && !std::filesystem::is_directory(st)) {
    throw InputError::in_file(path, 0, "",
                              "cannot read the gpud config file: it is not a regular file (a device, FIFO or socket)");
  }
  return parse_gpud_config(read_input_file(path, "the gpud config file", kMaxGpudConfigBytes), path);
}

}  // namespace perseus::gpud
