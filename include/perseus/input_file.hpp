// Reading an input file whole: regular files and streams (pipes, FIFOs, character devices:
// `--profile /dev/stdin`, `--profile <(cmd)`), with one size limit for both.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "perseus/input_limits.hpp"

namespace perseus {

/// The whole content of the file at `path`: a regular file, or a stream (pipe, FIFO,
/// character device, socket) read to its end (a FIFO with no writer blocks until one opens it,
/// as everywhere on Unix). At most `max_bytes` are read, for streams as they are read (an
/// endless stream such as /dev/zero is refused, not read into memory without bound). A path
/// given to keep_stream_input() returns the text kept then. `what` names the file in messages
/// ("the file", "profile", "schedule file"). Throws InputError:
/// "PATH: cannot open WHAT: REASON" (the system's reason, or "it is a folder, not a file"),
/// "cannot open WHAT: the path is empty (expected a file's path)" for "",
/// "PATH: cannot read WHAT: REASON" (a read error), "PATH: cannot read WHAT: it is larger
/// than N bytes (M MiB), the most an input file may have", or, for a stream only, as soon as its
/// first NUL byte arrives, "PATH:LINE: contains a NUL byte (expected text; a binary stream?)"
/// (every input is CSV or JSON text; /dev/urandom is not read up to the limit first; a regular
/// file's parser reports such a byte with its column).
std::string read_input_file(const std::string& path, std::string_view what = "the file",
                            std::size_t max_bytes = limits::kMaxInputFileBytes);

/// A stream can be read only once: a second read of a pipe sees its end ("the file is empty"),
/// of a FIFO blocks. A front end that reads an input in several places (the CLI's optimize
/// checks the profile, then plans it) calls this first: when `path` is a stream it is read now
/// (read_input_file()) and its text kept for this process, so every later read_input_file() of
/// the same path string, and every reader built on it (load_profile_csv(), load_json_file(),
/// schedule CSVs), gets that text. A regular file, a folder or a missing path is left alone
/// (its reader reports it as usual). Thread-safe. Throws InputError as read_input_file().
void keep_stream_input(const std::string& path, std::string_view what = "the file");

/// True when keep_stream_input() read and kept the stream at `path` (the same path string).
bool is_kept_stream(const std::string& path);

/// Sets the function called when a blocking open() or read() of an input is interrupted by a
/// signal (EINTR), before it is retried. It may throw to abandon the read: the Python bindings
/// raise the pending KeyboardInterrupt there, so Ctrl-C ends perseus.load_profile() of a FIFO
/// that has no writer. nullptr (the default) just retries. Process-wide and thread-safe.
void set_input_interrupt_hook(void (*hook)());

}  // namespace perseus
