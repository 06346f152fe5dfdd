// Gamma / Poisson arrival schedules for the serving benchmark.
#include "tern/bench/arrivals.h"

#include <cmath>
#include <random>

#include "tern/core/error.h"

namespace tern::bench {

std::vector<double> arrival_times(int64_t count, double request_rate, double burstiness,
                                  uint64_t seed) {
  if (!(request_rate > 0)) throw Error("--request-rate must be positive (or inf)");
  if (!(burstiness > 0)) throw Error("--burstiness must be positive");
  std::vector<double> times(static_cast<size_t>(std::max<int64_t>(count, 0)), 0.0);
  if (times.empty() || std::isinf(request_rate)) return times;
  std::mt19937_64 engine(seed);
  double t = 0;
  for (double& time : times) {
    if (std::isinf(burstiness)) {
      t += 1.0 / request_rate;
    } else {
      std::gamma_distribution<double> gap(burstiness, 1.0 / (request_rate * burstiness));
      t += gap(engine);
    }
    time = t;
  }
  if (times.back() > 0) {
    const double scale = static_cast<double>(count) / request_rate / times.back();
    for (double& time : times) time *= scale;
  }
  return times;
}

}  // namespace tern::bench
