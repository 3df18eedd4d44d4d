// The wire protocol between `perseus gpud` and its clients: one JSON object per line over a
// Unix stream socket (docs/gpud.md lists every request and reply).
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace perseus::gpud {

/// Protocol version carried by the "hello" reply; bumped on incompatible changes.
inline constexpr int kProtocolVersion = 1;
/// Longest request line accepted, bytes without the '\n'. Anything longer is refused before
/// it is parsed or stored (the daemon's per-connection buffer is this size).
inline constexpr std::size_t kMaxRequestBytes = 512;
/// Longest reply line a client accepts, bytes (a clock list of a few hundred entries fits).
inline constexpr std::size_t kMaxReplyBytes = 64 * 1024;
/// Highest GPU index a request may name (also bounds every per-GPU table).
inline constexpr int kMaxGpuIndex = 255;
/// Range of clocks a lock request may name, MHz (a wider value is not a clock).
inline constexpr int kMaxClockMhz = 100000;

/// What a client asks for. Nothing else exists: no power limits, no memory clocks.
enum class Op {
  kHello,   ///< {"op":"hello"}: protocol version, the caller's identity, the GPUs served.
  kClocks,  ///< {"op":"clocks","gpu":I}: supported SM clocks of GPU I, MHz, highest first.
  kLock,    ///< {"op":"lock","gpu":I,"mhz":F}: lock the SM clock of GPU I to F (a supported clock).
  kUnlock,  ///< {"op":"unlock","gpu":I}: remove the lock (driver default behaviour).
  kEnergy,  ///< {"op":"energy","gpu":I}: energy counter (J) and power draw (W), null = unsupported.
};

/// Name of an op as on the wire ("hello", ...).
const char* to_string(Op op);

/// One validated request.
struct Request {
  Op op = Op::kHello;
  int gpu = -1;  ///< 0..kMaxGpuIndex for every op but hello (-1 there).
  int mhz = 0;   ///< 1..kMaxClockMhz for lock; 0 otherwise.
};

/// A refused request or reply: `code` is the machine-readable error of the reply
/// ("bad_request", "forbidden", "unknown_gpu", "unsupported_clock", "busy", "rate_limited",
/// "gpu_error", "too_many_clients"), what() the human message.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

/// Parses and validates one request line (no '\n'): a JSON object with exactly the keys its
/// op needs ("op", plus "gpu" and "mhz" where required), integer values in range. Throws
/// ProtocolError("bad_request", what is wrong) for anything else, including lines longer
/// than kMaxRequestBytes (checked before parsing).
Request parse_request(std::string_view line);

/// The request as a line (with '\n'), as the client sends it.
std::string format_request(const Request& r);

/// Accumulates bytes from a stream socket and splits them into '\n'-terminated lines, never
/// holding more than `capacity` bytes: a line longer than that sets overflowed() (the caller
/// answers and hangs up).
class LineBuffer {
 public:
  explicit LineBuffer(std::size_t capacity) : capacity_(capacity) {}
  /// Appends `n` bytes; returns false (and sets overflowed) when an unfinished line would
  /// exceed the capacity.
  bool append(const char* data, std::size_t n);
  /// The next complete line without its '\n' (a trailing '\r' is dropped), if any.
  std::optional<std::string> next_line();
  /// True once an append() met an unfinished line longer than the capacity; it stays set, and
  /// every later append() is refused. Complete lines buffered before it stay readable.
  bool overflowed() const { return overflowed_; }
  /// Bytes buffered now: complete lines not yet taken by next_line() plus the unfinished line
  /// (after an overflow, the bytes that did not fit are not kept).
  std::size_t pending_bytes() const { return buf_.size(); }

 private:
  std::size_t capacity_;
  std::string buf_;
  bool overflowed_ = false;
};

}  // namespace perseus::gpud
