// Zeus plan files: the writer, and a tiny tokenizer/parser for their Python list literals
// that accepts data only.
#include "perseus/zeus_plan_file.hpp"

#include <cctype>
#include <limits>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

namespace {

class Parser {
 public:
  Parser(std::string_view text, const std::string& source, std::size_t max_entries)
      : s_(text), source_(source), max_entries_(max_entries) {}

  ZeusPlan parse() {
    ZeusPlan plan;
    expect('[', "'[' opening the list of stages");
    while (true) {
      skip();
      if (peek() == ']') { ++pos_; break; }
      plan.push_back(parse_stage());
      skip();
      if (peek() == ',') { ++pos_; continue; }
      expect(']', "',' or ']' after a stage");
      break;
    }
    skip();
    if (pos_ != s_.size()) fail("unexpected text after the closing ']'");
    if (plan.empty()) fail("the plan has no stages");
    return plan;
  }

 private:
  std::string_view s_;
  const std::string& source_;
  std::size_t max_entries_;
  std::size_t pos_ = 0;
  std::size_t entries_ = 0;

  /// "SOURCE:LINE: Zeus plan, column C: WHAT", LINE and C (in bytes) from 1, as the CSV readers.
  [[noreturn]] void fail(std::string_view what) const {
    const auto [line, column] = line_and_column(s_, pos_);
    throw InputError(fmt::format("{}:{}: Zeus plan, column {}: {}", source_, line, column, what));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  void expect(char c, std::string_view what) {
    skip();
    if (peek() != c) fail(fmt::format("expected {}", what));
    ++pos_;
  }

  std::vector<ZeusPlanEntry> parse_stage() {
    std::vector<ZeusPlanEntry> stage;
    expect('[', "'[' opening a stage's list");
    while (true) {
      skip();
      if (peek() == ']') { ++pos_; break; }
      if (++entries_ > max_entries_) fail(fmt::format("more than {} entries", max_entries_));
      stage.push_back(parse_entry());
      skip();
      if (peek() == ',') { ++pos_; continue; }
      expect(']', "',' or ']' after an entry");
      break;
    }
    // (A stage without entries left the job's microbatches at 0, reported as a JSON field.)
    if (stage.empty()) fail("a stage has no (instruction, frequency) entries; expected one per computation it runs");
    return stage;
  }

  ZeusPlanEntry parse_entry() {
    skip();
    const char c = peek();
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++pos_;
      ZeusPlanEntry e;
      skip();
      e.instruction = parse_string();
      expect(',', "',' between instruction name and frequency");
      skip();
      e.freq_mhz = parse_int();
      skip();
      if (peek() == ',') ++pos_;  // trailing comma inside the tuple
      expect(close, "the end of an (instruction, frequency) pair");
      return e;
    }
    return ZeusPlanEntry{std::nullopt, parse_int()};
  }

  int parse_int() {
    const std::size_t start = pos_;
    long long v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      v = v * 10 + (s_[pos_] - '0');
      if (v > std::numeric_limits<int>::max()) fail("frequency too large");
      ++pos_;
    }
    if (pos_ == start) fail("expected a positive integer frequency (MHz)");
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '_'))
      fail("frequencies must be plain integers (MHz)");
    if (v <= 0) fail("frequency must be > 0 MHz");
    return static_cast<int>(v);
  }

  std::string parse_string() {
    const char q = peek();
    if (q != '"' && q != '\'') fail("expected a quoted instruction name");
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      const char c = s_[pos_++];
      if (c == '\\' || c == '\n') fail("escapes and newlines are not allowed in instruction names");
      out.push_back(c);
      if (out.size() > 64) fail("instruction name longer than 64 bytes");
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
};

}  // namespace

ZeusPlan parse_zeus_plan(std::string_view text, const std::string& source, std::size_t max_entries) {
  return Parser(text, source, max_entries).parse();
}

std::string zeus_plan_file_name(std::size_t index) { return fmt::format("freqs_pipeline_{:05d}.py", index); }

std::string zeus_plan_text(const ZeusPlan& plan, std::string_view comment) {
  std::string out = "[\n";
  for (const auto& stage : plan) {
    out += "    [";
    for (std::size_t i = 0; i < stage.size(); ++i) {
      const auto& e = stage[i];
      if (i) out += ", ";
      if (e.instruction) out += fmt::format("(\"{}\", {})", *e.instruction, e.freq_mhz);
      else out += std::to_string(e.freq_mhz);
    }
    out += "],\n";
  }
  out += "]\n";
  for (std::size_t pos = 0; pos < comment.size();) {
    const auto nl = comment.find('\n', pos);
    const auto line = comment.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    out += fmt::format("# {}\n", line);
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return out;
}

std::string zeus_plan_text(const Dag& dag, const FrequencyPlan& plan, std::size_t index) {
  ZeusPlan z(dag.num_ranks());
  for (int r = 0; r < dag.num_ranks(); ++r)
    for (int id : dag.rank_ops(r)) z[r].push_back({std::string(to_string(dag.op(id).kind)), plan.freq_mhz[id]});
  return zeus_plan_text(z, fmt::format("Plan {}: iteration time {:.6f} s, energy {:.3f} J (perseus optimize)", index,
                                       plan.timeline.time_s, plan.total_energy_j()));
}

}  // namespace perseus
