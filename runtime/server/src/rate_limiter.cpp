// Token buckets.
#include "perseus/server/rate_limiter.hpp"

#include <algorithm>

namespace perseus::server {

bool RateLimiter::allow(const std::string& key, double now_s) {
  if (rate_ <= 0) return true;
  std::lock_guard lock(mu_);
  if (buckets_.size() > max_keys_) {
    std::erase_if(buckets_, [&](const auto& kv) { return now_s - kv.second.last_s > burst_ / rate_; });
    if (buckets_.size() > max_keys_) buckets_.clear();
  }
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{burst_, now_s});
  Bucket& b = it->second;
  // A clock that steps back refills nothing (it used to drain the bucket for as long as the
  // step: every request refused with 429 until the clock caught up).
  b.tokens = std::min(burst_, b.tokens + std::max(0.0, now_s - b.last_s) * rate_);
  b.last_s = now_s;
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

}  // namespace perseus::server
