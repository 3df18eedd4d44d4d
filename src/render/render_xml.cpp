// XML text escaping for the SVG/HTML writers.
// Why our own: the SVG and HTML here are generated as text with a fixed structure, and the
// only untrusted content is short labels (file names, method names, titles). The XML writer
// libraries in Debian (libxml2's xmlTextWriter, a C API) would add a link dependency and
// buffer management for the one function we need: escaping character data and attribute
// values. This escaper is tested directly (tests/unit/render_test.cpp) and every picture is
// checked for well-formedness with xmllint in the tests.
#include <string>

#include "perseus/render.hpp"
#include "render_svg.hpp"

namespace perseus {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += "\xEF\xBF\xBD";  // U+FFFD: XML 1.0 forbids C0 controls even as references.
        } else {
          out += ch;
        }
    }
  }
  return out;
}

namespace render_detail {

std::string html_page_open(std::string_view title) {
  const std::string t = xml_escape(title);
  return fmt::format(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>{0}</title>\n<style>{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n",
      t, kReportCss);
}

}  // namespace render_detail
}  // namespace perseus
