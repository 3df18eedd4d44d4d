// Atomic file and folder output (see perseus/output_folder.hpp).
#include "perseus/output_folder.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "perseus/error.hpp"

namespace perseus {

namespace fs = std::filesystem;

namespace {

/// The start of a temporary sibling's name, `.NAME.KIND-` (the PID follows). Where that would
/// pass the file-name limit (255 bytes) NAME is cut, at a character boundary, and a hash of the
/// whole name (FNV-1a) follows the cut: an output name of any legal length gets its temporary
/// (a 241-byte name could not be written; session 30's trial), and two long names sharing their
/// first 200 bytes get different ones.
std::string temp_prefix(const std::string& name, std::string_view kind) {
  constexpr std::size_t kNameMax = 255, kPidRoom = 10;
  std::string prefix = fmt::format(".{}.{}-", name, kind);
  if (prefix.size() + kPidRoom <= kNameMax) return prefix;
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  const std::string tag = fmt::format("~{:016x}", h);
  std::size_t keep = kNameMax - kPidRoom - tag.size() - kind.size() - 3;  // ".", ".", "-"
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;  // not inside a character
  return fmt::format(".{}{}.{}-", name.substr(0, keep), tag, kind);
}

/// Removes `.NAME.partial-PID` / `.NAME.old-PID` folders left by runs that were killed
/// (Ctrl-C, kill -9) before they could clean up: only those whose process is gone.
void remove_stale_temporaries(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  std::vector<fs::path> stale;  // removed after the listing, not while iterating
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string file = entry.path().filename().string();
    for (const std::string& prefix : {temp_prefix(name, "partial"), temp_prefix(name, "old")}) {
      if (file.rfind(prefix, 0) != 0) continue;
      const std::string pid_text = file.substr(prefix.size());
      int pid = 0;
      const auto [ptr, err] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
      if (err != std::errc() || ptr != pid_text.data() + pid_text.size() || pid <= 0) continue;
      if (::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(entry.path());
    }
  }
  for (const auto& path : stale) fs::remove_all(path, ec);
}

/// This process's unfinished atomic writes (temporary paths), for remove_unfinished_outputs().
/// The mutex is also held across OutputFolder::commit()'s renames, so a removal never sees a
/// half-committed folder.
std::mutex g_unfinished_mutex;
std::vector<std::pair<fs::path, fs::path>> g_unfinished;  // (temporary, the output it becomes)
bool g_exiting = false;  // under the mutex: remove_unfinished_outputs() ran

/// Creates a temporary (`create`: a file or folder at `tmp`) and registers it, both under the
/// mutex: after remove_unfinished_outputs() no temporary can appear (it throws InputError
/// instead), so none is left behind when the process exits right after.
template <class Create>
void create_unfinished(const fs::path& tmp, const fs::path& output, Create create) {
  const std::lock_guard lock(g_unfinished_mutex);
  if (g_exiting) throw InputError(fmt::format("{}: not written: the process is exiting (interrupted)", output.string()));
  g_unfinished.emplace_back(tmp, output);
  create();
}

/// Forgets temporary `tmp`. Caller holds g_unfinished_mutex.
void erase_unfinished_locked(const fs::path& tmp) {
  const auto it = std::find_if(g_unfinished.begin(), g_unfinished.end(), [&](const auto& u) { return u.first == tmp; });
  if (it != g_unfinished.end()) g_unfinished.erase(it);
}

void unregister_unfinished(const fs::path& tmp) {
  const std::lock_guard lock(g_unfinished_mutex);
  erase_unfinished_locked(tmp);
}

bool numbered(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() < prefix.size() + suffix.size() + 5 || !name.starts_with(prefix) || !name.ends_with(suffix))
    return false;
  const auto digits = std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// What a path that exists but is neither a regular file nor a folder is, for messages
/// ("a symbolic link", "a device", ...); empty for a regular file, a folder or no path.
/// Throws InputError (with `field`, if any) when the path cannot be looked at: a folder on the
/// way to it that cannot be entered, a symbolic link loop, a name too long.
std::string special_kind(const fs::path& path, const std::string& field = "") {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) {
    if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return "";
    const std::string what =
        fmt::format("{}: cannot be looked at ({}){}", path.string(), ec.message(),
                    ec == std::errc::permission_denied ? ": a folder on the way to it cannot be entered" : "");
    throw field.empty() ? InputError(what) : InputError(field, what);
  }
  switch (st.type()) {
    case fs::file_type::regular:
    case fs::file_type::directory:
      return "";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

/// An output folder path may be a folder or nothing: a symbolic link (even a dangling one)
/// would be renamed away instead of written through, a device or FIFO replaced.
void check_not_special(const std::string& path, const std::string& field) {
  if (const std::string kind = special_kind(path, field); !kind.empty()) {
    throw InputError(field, fmt::format("{}: is {}, not a folder; refusing to replace it (give a folder; for a link, "
                                        "its target's path)",
                                        path, kind));
  }
}

}  // namespace

void remove_unfinished_outputs() {
  const std::lock_guard lock(g_unfinished_mutex);  // waits for a commit in progress
  g_exiting = true;
  std::error_code ec;
  // Another thread may still be writing into a temporary folder (its files appear while it is
  // being removed, and the last rmdir then fails): retry until it is gone. Once it is, nothing
  // recreates it (files are opened inside it, never with their parents).
  for (const auto& entry : g_unfinished) {
    const fs::path& tmp = entry.first;
    for (int attempt = 0; attempt < 1000 && fs::exists(fs::symlink_status(tmp, ec)); ++attempt) fs::remove_all(tmp, ec);
  }
  g_unfinished.clear();
}

bool outputs_interrupted() {
  const std::lock_guard lock(g_unfinished_mutex);
  return g_exiting;
}

void check_output_file(const std::string& path, bool force, const std::string& field) {
  if (const std::string kind = special_kind(path, field); !kind.empty()) {
    throw InputError(field, fmt::format("{}: is {}, not a regular file; refusing to replace it (give a file name; "
                                        "for a link, its target's path)",
                                        path, kind));
  }
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(field, fmt::format("{}: is a folder; give a file name", path));
  if (fs::exists(path, ec) && !force) throw InputError(field, fmt::format("{}: exists; pass --force to replace it", path));
}

void check_output_file_writable(const std::string& path, bool force, const std::string& field) {
  check_output_file(path, force, field);
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const fs::path probe = folder / fmt::format("{}{}", temp_prefix(target.filename().string(), "tmp"), ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(field, fmt::format("{}: cannot write there: {}", path, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

/// `path` as the user knows it: inside an unfinished output's temporary folder, the path it
/// will have in the output (the temporary is an implementation detail).
std::string user_path(const fs::path& path) {
  const std::lock_guard lock(g_unfinished_mutex);
  for (const auto& [tmp, output] : g_unfinished) {
    const fs::path rel = path.lexically_relative(tmp);
    if (!rel.empty() && *rel.begin() != "..") return (output / rel).string();
  }
  return path.string();
}

void write_file(const fs::path& path, const std::string& text) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  int err = f ? 0 : errno;
  if (f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) err = errno;
    if (std::fclose(f) != 0 && err == 0) err = errno;
  }
  if (err != 0 || !f) {
    throw InputError(fmt::format("{}: cannot write the file: {}", user_path(path),
                                 err != 0 ? std::strerror(err) : "unknown error"));
  }
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(path, ec))) {
    throw InputError(fmt::format("{}: cannot write the file: it is a folder", path.string()));
  }
  if (const std::string kind = special_kind(path); !kind.empty()) {
    throw InputError(fmt::format("{}: cannot write the file: it is {}, not a regular file; refusing to replace it",
                                 path.string(), kind));
  }
  const fs::path tmp = path.parent_path() / fmt::format("{}{}", temp_prefix(path.filename().string(), "tmp"), ::getpid());
  int fd = -1, open_errno = 0;
  create_unfinished(tmp, path, [&] {
    // A new file, never an existing name: the temporary name is predictable, and a link planted
    // there was written through (and truncated) by a root `perseus gpud` (session 22's trial).
    // A name left over (a crash of a process with this pid, or planted) is removed, not opened.
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      open_errno = fd < 0 ? errno : 0;
      if (fd < 0 && open_errno == EEXIST) ::unlink(tmp.c_str());
    }
  });
  struct Unregister {
    const fs::path& tmp;
    ~Unregister() { unregister_unfinished(tmp); }
  } unregister{tmp};
  {
    int err = open_errno;
    for (std::size_t done = 0; fd >= 0 && err == 0 && done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n > 0) done += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EINTR) err = errno;
    }
    if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
    if (fd < 0 || err != 0) {
      if (fd >= 0) fs::remove(tmp, ec);
      // The reason: a missing folder, no permission, a full disk ...
      throw InputError(fmt::format("{}: cannot write the file{}", path.string(),
                                   err != 0 ? std::string(": ") + std::strerror(err) : ""));
    }
  }
  {
    const std::lock_guard lock(g_unfinished_mutex);  // not while remove_unfinished_outputs() runs
    if (g_exiting) {
      fs::remove(tmp, ec);
      throw InputError(fmt::format("{}: not written: the process is exiting (interrupted)", path.string()));
    }
    fs::rename(tmp, path, ec);
  }
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw InputError(fmt::format("{}: cannot move the file into place: {}", path.string(), why));
  }
}

void check_output_folder_writable(const std::string& path, const std::string& field) {
  if (path.empty()) throw InputError(field, "is required: give an output folder");
  check_not_special(path, field);
  std::error_code ec;
  fs::path dir = fs::absolute(path, ec).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  fs::path existing = dir;
  while (!fs::exists(existing, ec) && existing.has_parent_path() && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    throw InputError(field, existing == dir ? fmt::format("{}: exists and is not a folder", path)
                                            : fmt::format("{}: cannot create the output folder: {} is not a folder",
                                                          path, existing.string()));
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw InputError(field, existing == dir ? fmt::format("{}: cannot write in the folder: {}", path, std::strerror(err))
                                            : fmt::format("{}: cannot create the output folder in {}: {}", path,
                                                          existing.string(), std::strerror(err)));
  }
  if (existing != dir) {
    // access() lets root pass where no folder can be made at all (/proc/x, a read-only mount
    // for some file systems): make one and remove it, so the failure comes before the work
    // (`perseus emulate --out /proc/x` ran the whole emulation first; session 26's trial).
    const fs::path probe = existing / fmt::format(".perseus-probe-{}", ::getpid());
    if (::mkdir(probe.c_str(), 0700) != 0 && errno != EEXIST) {  // EEXIST: left by a killed run of this pid
      const int err = errno;
      throw InputError(field, fmt::format("{}: cannot create the output folder in {}: {}", path, existing.string(),
                                          std::strerror(err)));
    }
    ::rmdir(probe.c_str());
  }
}

bool is_optimize_output(const fs::path& relative, bool is_directory) {
  const std::string first = relative.begin() == relative.end() ? "" : relative.begin()->string();
  const std::string name = relative.filename().string();
  if (relative.has_parent_path()) {  // only plans/ has contents, and only plan files
    return first == "plans" && relative.parent_path() == "plans" && !is_directory &&
           (numbered(name, "plan_", ".json") || numbered(name, "freqs_pipeline_", ".py"));
  }
  if (is_directory) return name == "plans";
  return name == "summary.json" || name == "frontier.csv" || name == "schedule.csv" || name == "profile.csv" ||
         name == "report.html" ||
         name == "frontier.svg" || name == "timeline_fastest.svg" || name == "timeline_lowest_energy.svg";
}

void check_folder_is_ours(const std::string& path, const OutputFolder::Ours& ours, const std::string& field) {
  check_not_special(path, field);
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  if (!fs::is_directory(path, ec)) throw InputError(field, fmt::format("{}: exists and is not a folder", path));
  // Never replace a folder that holds anything Perseus did not write (the user's files). Names
  // alone do not tell: a user's own profile.csv or summary.json has one (a folder of them was
  // replaced; session 22's trial). A folder Perseus wrote holds its marker file.
  bool any = false, marked = false;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(path);
    const bool is_dir = it->is_directory(ec) && !it->is_symlink(ec);
    any = true;
    if (rel == kOutputFolderMarker && it->is_regular_file(ec) && !it->is_symlink(ec)) {
      marked = true;
      continue;
    }
    if (!ours(rel, is_dir)) {
      throw InputError(field, fmt::format("{}: folder holds '{}', which this command does not write (a user's file, or "
                                          "another perseus command's output); refusing to replace it (choose another "
                                          "output folder, or move that file)",
                                          path, rel.generic_string()));
    }
  }
  if (ec) throw InputError(field, fmt::format("{}: cannot list the folder: {}", path, ec.message()));
  if (any && !marked) {
    throw InputError(field, fmt::format("{}: folder was not written by perseus (it has no {} file; files of the same "
                                        "names may be yours); refusing to replace it (choose another output folder; "
                                        "a folder written before this check: remove it first)",
                                        path, kOutputFolderMarker));
  }
}

bool is_emulation_output(const fs::path& relative, bool is_directory) {
  const std::string name = relative.filename().string();
  return !is_directory && !relative.has_parent_path() &&
         (name == "emulation.csv" || name == "emulation.json" || name == "emulation.html");
}

OutputFolder::OutputFolder(const std::string& path, Ours ours, const std::string& field) {
  if (path.empty()) throw InputError(field, "is required: give an output folder");
  check_folder_is_ours(path, ours, field);
  std::error_code ec;
  // Replacing the folder the process works in (`--out .`, or a folder above it) renamed the
  // user's shell out from under it (session 22's trial). (Adding files there, as emulate does
  // into an optimize folder, is fine: only a replacement is refused.)
  if (const fs::path cwd = fs::current_path(ec); !ec && fs::exists(path, ec)) {
    const fs::path target = fs::weakly_canonical(path, ec);
    const auto rel = cwd.lexically_relative(target);
    if (!ec && !rel.empty() && *rel.begin() != "..") {
      throw InputError(field, fmt::format("{}: is the current folder or holds it; refusing to replace it (give a folder "
                                          "of its own, e.g. {}/out)",
                                          path, path));
    }
  }
  ec.clear();
  out_ = fs::absolute(path).lexically_normal();
  if (out_.filename().empty()) out_ = out_.parent_path();
  const fs::path parent = out_.parent_path();
  fs::create_directories(parent, ec);
  tmp_ = parent / fmt::format("{}{}", temp_prefix(out_.filename().string(), "partial"), ::getpid());
  remove_stale_temporaries(parent, out_.filename().string());
  fs::remove_all(tmp_, ec);
  bool created = false;
  create_unfinished(tmp_, out_, [&] { created = fs::create_directories(tmp_, ec); });
  if (!created || ec) {
    unregister_unfinished(tmp_);
    throw InputError(fmt::format("{}: cannot create output folder: cannot create its temporary folder {} beside it "
                                 "(the parent folder must be writable): {}",
                                 out_.string(), tmp_.filename().string(), ec.message()));
  }
  write_file(tmp_ / kOutputFolderMarker,
             "This folder was written by perseus; the next run into it replaces it whole.\n");
}

OutputFolder::~OutputFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  unregister_unfinished(tmp_);
}

void OutputFolder::commit() {
  std::error_code ec;
  const fs::path old = out_.parent_path() / fmt::format("{}{}", temp_prefix(out_.filename().string(), "old"), ::getpid());
  {
    // Both renames under the registry's mutex: an interruption (remove_unfinished_outputs())
    // finds the earlier folder in place or the new one, never the earlier one moved aside.
    const std::lock_guard lock(g_unfinished_mutex);
    if (g_exiting) throw InputError(fmt::format("{}: not written: the process is exiting (interrupted)", out_.string()));
    if (fs::exists(out_, ec)) {
      fs::rename(out_, old, ec);
      if (ec) throw InputError(fmt::format("{}: cannot replace existing folder", out_.string()));
    }
    fs::rename(tmp_, out_, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::rename(old, out_, ec);  // put the earlier folder back
      throw InputError(fmt::format("{}: cannot move output into place: {}", out_.string(), why));
    }
    committed_ = true;
    erase_unfinished_locked(tmp_);
    fs::remove_all(old, ec);  // still under the mutex: an interruption never leaves .NAME.old-PID
  }
}

}  // namespace perseus
