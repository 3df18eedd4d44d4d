// InputError: structured bad-input errors and their default phrasing.
#include "perseus/error.hpp"

#include <algorithm>
#include <utility>

namespace perseus {

namespace {

std::string identity(const std::string& field) { return field; }

/// Replaces every `{field:NAME}` in `text` by phrase(NAME).
std::string render_refs(const std::string& text, const InputError::Phrase& phrase) {
  static const std::string kOpen = "{field:";
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t at = text.find(kOpen, pos);
    const std::size_t end = at == std::string::npos ? at : text.find('}', at);
    if (at == std::string::npos || end == std::string::npos) break;
    out.append(text, pos, at - pos);
    out += phrase(text.substr(at + kOpen.size(), end - at - kOpen.size()));
    pos = end + 1;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

std::string render(const std::string& field, const std::string& source, long line, const std::string& message,
                   bool in_file, const InputError::Phrase& phrase) {
  const std::string msg = render_refs(message, phrase);
  if (!in_file) {
    if (field.empty()) return msg;
    return phrase(field) + (msg.starts_with(':') ? "" : " ") + msg;  // "FIELD: what" or "FIELD must ..."
  }
  std::string out = source;
  if (line > 0) out += ":" + std::to_string(line);
  if (!out.empty()) out += ": ";
  if (!field.empty()) out += "field '" + field + "': ";
  return out + msg;
}

}  // namespace

std::string field_ref(const std::string& name) { return "{field:" + name + "}"; }

std::pair<long, long> line_and_column(std::string_view text, std::size_t at) {
  at = std::min(at, text.size());
  const long line = 1 + static_cast<long>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  const std::size_t nl = at == 0 ? std::string_view::npos : text.rfind('\n', at - 1);
  return {line, static_cast<long>(at - (nl == std::string_view::npos ? 0 : nl + 1)) + 1};
}

namespace {

/// Length of the well-formed UTF-8 sequence (RFC 3629: no overlongs, no surrogates, at most
/// U+10FFFF) that starts text[i], or 0 when text[i] does not start one.
std::size_t utf8_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) n = 3, lo = 0xA0;
  else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) n = 3;
  else if (c == 0xED) n = 3, hi = 0x9F;
  else if (c == 0xF0) n = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else if (c == 0xF4) n = 4, hi = 0x8F;
  else return 0;
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

constexpr char kHex[] = "0123456789ABCDEF";

/// Invisible or direction-changing characters of the Basic Multilingual Plane that would hide
/// inside a quoted value or reorder the line around it: zero-width and bidirectional marks
/// (U+200B..U+200F), the line and paragraph separators and bidirectional embeddings/overrides
/// (U+2028..U+202E), word joiner and invisible operators, bidirectional isolates (U+2060..U+206F),
/// and the byte order mark / zero-width no-break space (U+FEFF).
bool invisible(char32_t cp) {
  return (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) ||
         cp == 0xFEFF;
}

/// escape_input(); with `message` newlines and backslashes are kept (terminal_safe()).
std::string escape(std::string_view text, std::size_t max_bytes, bool message) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_length(text, i);
    if (i + std::max<std::size_t>(n, 1) > max_bytes) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (n == 0) {  // not UTF-8
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else if (message && (c == '\\' || c == '\n')) {
      out += static_cast<char>(c);
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {  // C1: U+0080..U+009F
      const auto d = static_cast<unsigned char>(text[i + 1]);
      out += {'\\', 'u', '0', '0', kHex[d >> 4], kHex[d & 15]};
    } else if (const char32_t cp = n == 3 ? ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(text[i + 1]) & 0x3Fu) << 6) |
                                               (static_cast<unsigned char>(text[i + 2]) & 0x3Fu)
                                         : 0;
               invisible(cp)) {
      out += {'\\', 'u', kHex[(cp >> 12) & 15], kHex[(cp >> 8) & 15], kHex[(cp >> 4) & 15], kHex[cp & 15]};
    } else {
      out.append(text.substr(i, n));
    }
    i += std::max<std::size_t>(n, 1);
  }
  if (i < text.size()) out += "\u2026";  // …
  return out;
}

}  // namespace

std::string escape_input(std::string_view text, std::size_t max_bytes) { return escape(text, max_bytes, false); }

std::string terminal_safe(std::string_view message, std::size_t max_bytes) { return escape(message, max_bytes, true); }

std::string quote_input(std::string_view text, std::size_t max_bytes) {
  std::string out = "'" + escape_input(text, max_bytes) + "'";
  if (text.size() > max_bytes) out += " (" + std::to_string(text.size()) + " bytes)";
  return out;
}

InputError::InputError(const std::string& message)
    : std::runtime_error(render_refs(message, identity)), message_(message) {}

InputError::InputError(std::string field, std::string message)
    : InputError(std::move(field), {}, 0, std::move(message), false) {}

InputError::InputError(std::string field, std::string source, long line, std::string message, bool in_file,
                       bool verbatim)
    : std::runtime_error(verbatim ? render_refs(message, identity)
                                  : render(field, source, line, message, in_file, identity)),
      field_(std::move(field)),
      source_(std::move(source)),
      message_(std::move(message)),
      line_(line),
      in_file_(in_file),
      verbatim_(verbatim) {}

InputError InputError::in_file(std::string source, long line, std::string field, std::string message) {
  return InputError(std::move(field), std::move(source), line, std::move(message), true);
}

InputError InputError::located(std::string source, long line, std::string field, std::string message) {
  return InputError(std::move(field), std::move(source), line, std::move(message), true, true);
}

std::string InputError::phrased(const Phrase& phrase) const {
  if (verbatim_) return render_refs(message_, phrase ? phrase : Phrase(identity));
  return render(field_, source_, line_, message_, in_file_, phrase ? phrase : Phrase(identity));
}

}  // namespace perseus
