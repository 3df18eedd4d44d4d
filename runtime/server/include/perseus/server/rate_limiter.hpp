// Per-client token-bucket rate limiting.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

namespace perseus::server {

/// Token bucket per key (client address): `rate_per_s` tokens/s up to `burst`. Thread-safe.
/// Memory is bounded: idle buckets are dropped when the table grows past `max_keys`.
class RateLimiter {
 public:
  /// `rate_per_s`: refill rate, requests (tokens) per second; <= 0 turns limiting off.
  /// `burst`: bucket size, requests; a new key starts with a full bucket. `max_keys`: keys
  /// kept; past it, buckets idle long enough to be full again (burst / rate_per_s s) are
  /// dropped, and all of them when that is not enough. Arguments are not validated.
  RateLimiter(double rate_per_s, double burst, std::size_t max_keys = 100000)
      : rate_(rate_per_s), burst_(burst), max_keys_(max_keys) {}
  /// Takes one token for `key` at time now_s (s, a monotonic clock: the server passes
  /// monotonic_s()); false when the bucket is empty (answer 429). A now_s earlier than the
  /// key's last call refills nothing and refuses nothing more. Always true when rate_per_s <= 0.
  bool allow(const std::string& key, double now_s);

 private:
  struct Bucket {
    double tokens = 0, last_s = 0;
  };
  double rate_, burst_;
  std::size_t max_keys_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace perseus::server
