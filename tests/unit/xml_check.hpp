// Test helper: XML well-formedness of generated SVG/HTML.
// Always runs a small built-in checker (tags balanced, attributes quoted, only known
// entities); also runs `xmllint --noout` (Debian package libxml2-utils) when it is on PATH.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace perseus::testing {

/// Empty string when `text` is well-formed XML, else a description of the first problem.
inline std::string xml_problem_builtin(const std::string& text) {
  std::vector<std::string> stack;
  std::size_t i = 0, roots = 0;
  auto fail = [&](const std::string& what) { return what + " at byte " + std::to_string(i); };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '&') {
      const auto semi = text.find(';', i);
      if (semi == std::string::npos) return fail("bare &");
      const std::string ent = text.substr(i + 1, semi - i - 1);
      const bool known =
          ent == "amp" || ent == "lt" || ent == "gt" || ent == "quot" || ent == "apos" ||
          (ent.size() > 1 && ent[0] == '#' && ent.find_first_not_of("0123456789", 1) == std::string::npos);
      if (!known) return fail("unknown entity &" + ent + ";");
      i = semi + 1;
      continue;
    }
    if (c != '<') {
      ++i;
      continue;
    }
    if (text.compare(i, 4, "<!--") == 0) {
      const auto e = text.find("-->", i);
      if (e == std::string::npos) return fail("unterminated comment");
      i = e + 3;
      continue;
    }
    if (text.compare(i, 2, "<!") == 0 || text.compare(i, 2, "<?") == 0) {
      const auto e = text.find('>', i);
      if (e == std::string::npos) return fail("unterminated declaration");
      i = e + 1;
      continue;
    }
    const bool closing = text[i + 1] == '/';
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t name_start = j;
    while (j < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '-' || text[j] == ':' || text[j] == '_'))
      ++j;
    const std::string name = text.substr(name_start, j - name_start);
    if (name.empty()) return fail("bad tag name");
    // Attributes: name="value" with no '<' inside values.
    bool self_closing = false;
    while (true) {
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
      if (j >= text.size()) return fail("unterminated tag <" + name);
      if (text[j] == '>') break;
      if (text.compare(j, 2, "/>") == 0) {
        self_closing = true;
        ++j;
        break;
      }
      if (closing) return fail("attributes in closing tag </" + name);
      const std::size_t a0 = j;
      while (j < text.size() && text[j] != '=' && !std::isspace(static_cast<unsigned char>(text[j])) && text[j] != '>')
        ++j;
      if (j == a0 || j >= text.size() || text[j] != '=') return fail("attribute without value in <" + name);
      ++j;
      if (text[j] != '"' && text[j] != '\'') return fail("unquoted attribute in <" + name);
      const char q = text[j];
      const auto e = text.find(q, j + 1);
      if (e == std::string::npos) return fail("unterminated attribute in <" + name);
      if (text.substr(j + 1, e - j - 1).find('<') != std::string::npos) return fail("'<' in attribute of <" + name);
      j = e + 1;
    }
    if (closing) {
      if (stack.empty() || stack.back() != name) return fail("mismatched </" + name + ">");
      stack.pop_back();
    } else if (!self_closing) {
      if (stack.empty()) ++roots;
      stack.push_back(name);
    } else if (stack.empty()) {
      ++roots;
    }
    i = j + 1;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "expected one root element, found " + std::to_string(roots);
  return "";
}

/// Built-in check, then xmllint when available. Writes `text` to `scratch_path`.
inline std::string xml_problem(const std::string& text, const std::string& scratch_path) {
  if (auto p = xml_problem_builtin(text); !p.empty()) return "built-in check: " + p;
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) return "";
  std::ofstream(scratch_path) << text;
  const std::string cmd = "xmllint --noout '" + scratch_path + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = p ? ::pclose(p) : -1;
  return rc == 0 ? "" : "xmllint: " + out;
}

}  // namespace perseus::testing
