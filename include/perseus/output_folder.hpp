// Writing outputs atomically: single files (temporary file + rename) and whole folders
// (temporary sibling folder + rename), used by every command that writes files.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace perseus {

/// Writes `text` to `path` through a temporary file in the same folder
/// (`.NAME.tmp-PID`) renamed into place, so a reader never sees a half-written file.
/// Throws InputError (naming the path) when it cannot be written or moved, or when `path`
/// exists and is not a regular file (a folder, symbolic link, device, FIFO or socket: the
/// rename would replace it, e.g. /dev/null, with a file; check_output_file()).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

/// Removes the temporaries of this process's unfinished atomic writes (OutputFolder's
/// `.NAME.partial-PID` folders, write_file_atomically()'s `.NAME.tmp-PID` files), after any
/// commit in progress has finished, and keeps them from being recreated. For a front end about
/// to exit on SIGINT/SIGTERM: call it from a thread that took the signal with sigwait(), then
/// _exit() (it takes a mutex, so it is not for a signal handler itself). Thread-safe.
void remove_unfinished_outputs();

/// True once remove_unfinished_outputs() ran: the process is about to exit on a signal, and a
/// write that failed meanwhile (its temporary folder removed under it) is not an error to
/// report. Thread-safe.
bool outputs_interrupted();

/// Writes `text` to `path` (no rename: for files inside an OutputFolder's temporary folder).
/// Throws InputError "PATH: cannot write the file: REASON" (PATH as it will be in the output
/// folder, not the temporary one).
void write_file(const std::filesystem::path& path, const std::string& text);

/// Throws InputError for `field` when file output to `path` may not replace what is there:
/// "PATH: is a folder; give a file name", "PATH: is a symbolic link / a device / a FIFO / a
/// socket (...); refusing to replace it", or, unless `force`, "PATH: exists; pass --force to
/// replace it". Does nothing when `path` does not exist. Changes nothing.
void check_output_file(const std::string& path, bool force, const std::string& field);

/// Checks, before a long run whose result goes to the file `path`, that write_file_atomically()
/// will be able to write it: check_output_file(path, force, field), then a temporary file is
/// created in its folder and removed. Throws InputError for `field`: "PATH: cannot write there:
/// REASON" (a missing folder, no permission, a read-only file system) or check_output_file()'s.
void check_output_file_writable(const std::string& path, bool force, const std::string& field);

/// Checks, before any work is done, that `path` is a folder this process may write into or
/// one it can create (its nearest existing ancestor is a folder it may write into). Creates
/// nothing. Throws InputError for `field` naming the path and the reason (exists and is not
/// a folder, an ancestor that is a file, no permission).
void check_output_folder_writable(const std::string& path, const std::string& field = "out_dir");

/// A folder written atomically: files are written under dir(), a temporary sibling
/// `.NAME.partial-PID`; commit() moves an existing folder aside (`.NAME.old-PID`), renames
/// the temporary folder into place and removes the old one. An interrupted run never
/// leaves a folder that looks complete; temporaries of runs whose process is gone are
/// removed. Destruction without commit() removes the temporary folder.
///
/// An existing folder is replaced only when EVERYTHING inside it, recursively, is a path
/// `ours(relative_path)` accepts (files Perseus writes there): a user's file anywhere inside,
/// sub-folders included, makes the constructor throw and nothing is touched.
class OutputFolder {
 public:
  /// Accepts a path relative to the folder (e.g. "plans/plan_00001.json") as one Perseus writes.
  using Ours = std::function<bool(const std::filesystem::path& relative, bool is_directory)>;

  /// Checks `path` (may not exist; must not be a file; check_folder_is_ours(); never the current
  /// folder or one holding it, which would be renamed away) and creates the temporary folder.
  /// `field` names the input that gave the path in InputErrors (e.g. "out_dir").
  /// Throws InputError when the path is empty, is not a folder, holds a file `ours`
  /// rejects, or the temporary folder cannot be created.
  OutputFolder(const std::string& path, Ours ours, const std::string& field = "out_dir");
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// The temporary folder to write into.
  const std::filesystem::path& dir() const { return tmp_; }
  /// Renames the temporary folder into place (replacing an earlier output). Throws InputError.
  void commit();

 private:
  std::filesystem::path out_, tmp_;
  bool committed_ = false;
};

/// Every output folder holds this file (written by OutputFolder): a non-empty folder without it
/// is never replaced, whatever the names of its files.
inline constexpr const char* kOutputFolderMarker = ".perseus-output";

/// Throws InputError for `field` when `path` exists and is not a folder ("PATH: exists and is not
/// a folder"), is a folder holding, anywhere inside
/// (sub-folders included), a path `ours` rejects ("PATH: folder holds 'REL', which this command
/// does not write ...; refusing to replace it"), is a non-empty folder without the
/// kOutputFolderMarker file (not written by perseus), or cannot be listed. Does nothing when
/// `path` does not exist. Changes nothing.
/// (OutputFolder's constructor applies it; commands call it to fail before long work.)
void check_folder_is_ours(const std::string& path, const OutputFolder::Ours& ours, const std::string& field = "out_dir");

/// The files `perseus optimize` and `perseus report` write into an output folder
/// (summary.json, frontier.csv, schedule.csv, profile.csv, report.html, its .svg files, plans/ with
/// plan_NNNNN.json and freqs_pipeline_NNNNN.py): the OutputFolder::Ours of optimize.
bool is_optimize_output(const std::filesystem::path& relative, bool is_directory);

/// The files `perseus emulate` writes into its output folder: emulation.csv, emulation.json and
/// (with --report) emulation.html, at the top level: the OutputFolder::Ours of emulate.
bool is_emulation_output(const std::filesystem::path& relative, bool is_directory);

}  // namespace perseus
