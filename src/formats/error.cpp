// InputError: structured bad-input errors and their default phrasing.
#include "perseus/error.hpp"

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

InputError::InputError(const std::string& message)
    : std::runtime_error(render_refs(message, identity)), message_(message) {}

InputError::InputError(std::string field, std::string message)
    : InputError(std::move(field), {}, 0, std::move(message), false) {}

InputError::InputError(std::string field, std::string source, long line, std::string message, bool in_file)
    : std::runtime_error(render(field, source, line, message, in_file, identity)),
      field_(std::move(field)),
      source_(std::move(source)),
      message_(std::move(message)),
      line_(line),
      in_file_(in_file) {}

InputError InputError::in_file(std::string source, long line, std::string field, std::string message) {
  return InputError(std::move(field), std::move(source), line, std::move(message), true);
}

std::string InputError::phrased(const Phrase& phrase) const {
  return render(field_, source_, line_, message_, in_file_, phrase ? phrase : Phrase(identity));
}

}  // namespace perseus
