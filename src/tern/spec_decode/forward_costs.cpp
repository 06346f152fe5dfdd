// ForwardCosts: an exponential moving average per size bucket, interpolated between buckets.
#include "tern/spec_decode/forward_costs.h"

#include <algorithm>
#include <bit>
#include <iterator>

namespace tern {
namespace {

// A new measurement's weight: recent enough to follow a host whose speed changes, smooth
// enough that one descheduled step does not swing the policy.
constexpr double kNewWeight = 0.25;

}  // namespace

int64_t ForwardCosts::bucket(int64_t n) {
  if (n <= 64) return std::max<int64_t>(n, 1);
  const int shift = std::bit_width(static_cast<uint64_t>(n)) - 1 - 3;
  return ((n + (int64_t{1} << (shift - 1))) >> shift) << shift;
}

void ForwardCosts::record(int64_t num_tokens, double seconds) {
  if (num_tokens < 1 || !(seconds >= 0.0)) return;
  const auto [it, inserted] = by_size_.try_emplace(bucket(num_tokens), seconds);
  if (!inserted) it->second += kNewWeight * (seconds - it->second);
}

double ForwardCosts::estimate(int64_t num_tokens) const {
  if (by_size_.empty()) return 0.0;
  const double n = static_cast<double>(num_tokens);
  auto hi = by_size_.lower_bound(num_tokens);
  if (hi != by_size_.end() && hi->first == num_tokens) return hi->second;
  if (hi == by_size_.begin()) return hi->second;
  if (hi == by_size_.end()) {
    const auto last = std::prev(by_size_.end());
    if (last == by_size_.begin()) return last->second * n / static_cast<double>(last->first);
    const auto before = std::prev(last);
    const double slope = std::max(
        0.0, (last->second - before->second) / static_cast<double>(last->first - before->first));
    return last->second + slope * (n - static_cast<double>(last->first));
  }
  const auto lo = std::prev(hi);
  const double f =
      (n - static_cast<double>(lo->first)) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

double ForwardCosts::upper_estimate(int64_t num_tokens) const {
  if (by_size_.empty()) return 0.0;
  const auto last = std::prev(by_size_.end());
  if (num_tokens <= last->first) return estimate(num_tokens);
  return last->second * static_cast<double>(num_tokens) / static_cast<double>(last->first);
}

}  // namespace tern
