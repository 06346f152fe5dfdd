// How busy other programs keep the machine: the CPUs' busy time over a short window (from
// /proc/stat), less this process's own. `tern bench suite` measures it around each section, so
// that figures taken beside a build or a browser are marked as such, not published as an idle
// machine's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace tern::bench {

// Clock ticks of all CPUs together since boot: busy (user, nice, system, irq, softirq, steal)
// and in all (busy, idle and iowait).
struct CpuTicks {
  uint64_t busy = 0;
  uint64_t total = 0;
};

// The aggregate "cpu" line of /proc/stat's text. Throws tern::Error when there is none or it is
// malformed.
CpuTicks parse_proc_stat(std::string_view text);

// How many of `cpus` CPUs were busy on average between two readings (0 when no tick passed).
double busy_cpus(const CpuTicks& before, const CpuTicks& after, int cpus);

// The CPUs other programs kept busy over `window`, this process's own CPU time taken out
// (its children's too, if any finish meanwhile). Sleeps for the window.
double other_programs_busy_cpus(std::chrono::milliseconds window);

// Above this, a measurement was not taken on an idle machine: a quarter of one CPU, well over
// what an idle system's daemons use.
inline constexpr double kIdleBusyCpusLimit = 0.25;

}  // namespace tern::bench
