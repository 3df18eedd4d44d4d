// read_input_file() and keep_stream_input() (see perseus/input_file.hpp).
#include "perseus/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

namespace {

/// Texts of the streams keep_stream_input() read, by path as given.
struct KeptStreams {
  std::mutex mutex;
  std::map<std::string, std::string, std::less<>> texts;
};

KeptStreams& kept() {
  static KeptStreams k;
  return k;
}

std::optional<std::string> kept_text(const std::string& path) {
  KeptStreams& k = kept();
  const std::lock_guard lock(k.mutex);
  const auto it = k.texts.find(path);
  if (it == k.texts.end()) return std::nullopt;
  return it->second;
}

std::atomic<void (*)()> g_interrupt_hook{nullptr};

/// After an EINTR: the hook (set_input_interrupt_hook()) may throw; then the call is retried.
void interrupted() {
  if (void (*hook)() = g_interrupt_hook.load()) hook();
}

[[noreturn]] void too_large(const std::string& path, std::string_view what, std::size_t max_bytes) {
  const std::string mib = max_bytes % (1 << 20) == 0 ? fmt::format(" ({} MiB)", max_bytes >> 20) : "";
  throw InputError(
      fmt::format("{}: cannot read {}: it is larger than {} bytes{}, the most an input file may have", path, what,
                  max_bytes, mib));
}

/// An open descriptor, closed at scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// Opens `path` for reading; `stat` is filled in. Throws "PATH: cannot open WHAT: REASON".
Fd open_input(const std::string& path, std::string_view what, struct stat& st) {
  // "": open(2) says "No such file or directory" after an empty "PATH:" that names nothing.
  if (path.empty()) throw InputError(fmt::format("cannot open {}: the path is empty (expected a file's path)", what));
  // A folder opens on Linux and reads as empty: say what it is instead of letting a parser
  // report an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(fmt::format("{}: cannot open {}: it is a folder, not a file", path, what));
  }
  Fd f;
  do {
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (f.fd < 0 && errno == EINTR && (interrupted(), true));
  if (f.fd < 0) throw InputError(fmt::format("{}: cannot open {}: {}", path, what, std::strerror(errno)));
  if (::fstat(f.fd, &st) != 0) throw InputError(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
  return f;
}

/// Throws "PATH:LINE: contains a NUL byte (expected text; a binary stream?)" if text[from, to)
/// has a NUL byte (every input is text: CSV or JSON).
void reject_nul(const std::string& text, std::size_t from, std::size_t to, const std::string& path) {
  const auto* nul = static_cast<const char*>(std::memchr(text.data() + from, '\0', to - from));
  if (nul == nullptr) return;
  const long line = 1 + std::count(text.data(), nul, '\n');
  throw InputError::in_file(path, line, "", "contains a NUL byte (expected text; a binary stream?)");
}

/// Reads `fd` to its end, at most `max_bytes` (checked as it reads), straight into the string.
/// A stream (`regular` false) is also refused at its first NUL byte, as it arrives: a binary
/// stream such as /dev/urandom is not read up to the size limit first.
std::string read_all(int fd, const std::string& path, std::string_view what, std::size_t max_bytes,
                     std::size_t size_hint, bool regular) {
  std::string text;
  std::size_t size = 0;
  while (true) {
    if (size == text.size()) {  // full: grow, to at most one byte past the limit
      text.resize(std::min(std::max<std::size_t>({text.size() * 2, size_hint + 1, 1 << 16}), max_bytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + size, text.size() - size);
    if (n < 0 && errno == EINTR) {
      interrupted();
      continue;
    }
    if (n < 0) throw InputError(fmt::format("{}: cannot read {}: {}", path, what, std::strerror(errno)));
    if (n == 0) break;
    if (!regular) reject_nul(text, size, size + static_cast<std::size_t>(n), path);
    size += static_cast<std::size_t>(n);
    if (size > max_bytes) too_large(path, what, max_bytes);
  }
  text.resize(size);
  return text;
}

}  // namespace

std::string read_input_file(const std::string& path, std::string_view what, std::size_t max_bytes) {
  if (auto text = kept_text(path)) {
    if (text->size() > max_bytes) too_large(path, what, max_bytes);
    return std::move(*text);
  }
  struct stat st {};
  const Fd f = open_input(path, what, st);
  const bool regular = S_ISREG(st.st_mode);
  // A regular file's size is known: refuse it before reading (it is checked again as it is read,
  // in case the file grows meanwhile).
  if (regular && static_cast<std::size_t>(st.st_size) > max_bytes) too_large(path, what, max_bytes);
  return read_all(f.fd, path, what, max_bytes, regular ? static_cast<std::size_t>(st.st_size) : 0, regular);
}

void keep_stream_input(const std::string& path, std::string_view what) {
  if (kept_text(path)) return;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status) || std::filesystem::is_regular_file(status) ||
      std::filesystem::is_directory(status)) {
    return;
  }
  std::string text = read_input_file(path, what);
  KeptStreams& k = kept();
  const std::lock_guard lock(k.mutex);
  k.texts.emplace(path, std::move(text));
}

bool is_kept_stream(const std::string& path) {
  KeptStreams& k = kept();
  const std::lock_guard lock(k.mutex);
  return k.texts.find(path) != k.texts.end();  // without copying the text (up to 256 MiB)
}

void set_input_interrupt_hook(void (*hook)()) { g_interrupt_hook.store(hook); }

}  // namespace perseus
