// When each benchmark request arrives, as vLLM's get_request schedules them.
#pragma once

#include <cstdint>
#include <vector>

namespace tern::bench {

// Arrival times in seconds from the start for `count` requests. An infinite rate sends all at
// 0. Otherwise the gaps are gamma-distributed with shape = burstiness and mean 1/rate
// (burstiness 1 = a Poisson process; < 1 burstier, > 1 more even; infinite = evenly spaced),
// and the times are then scaled so the last arrives at count/rate exactly, as vLLM does to
// steady throughput across seeds. tern::Error for a rate or burstiness <= 0.
std::vector<double> arrival_times(int64_t count, double request_rate, double burstiness,
                                  uint64_t seed);

}  // namespace tern::bench
