// Seconds since a steady-clock instant: what request metrics, benchmarks and logs measure.
#pragma once

#include <chrono>

namespace tern {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tern
