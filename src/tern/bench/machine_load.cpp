#include "tern/bench/machine_load.h"

#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "tern/core/error.h"

namespace tern::bench {
namespace {

double cpu_seconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double own_cpu_seconds() { return cpu_seconds(RUSAGE_SELF) + cpu_seconds(RUSAGE_CHILDREN); }

CpuTicks read_proc_stat() {
  std::ifstream in("/proc/stat");
  if (!in) throw Error("/proc/stat: cannot read it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_proc_stat(text);
}

}  // namespace

CpuTicks parse_proc_stat(std::string_view text) {
  if (text.substr(0, 4) != "cpu ") throw Error("/proc/stat: no aggregate 'cpu' line first");
  const std::string_view line = text.substr(0, text.find('\n'));
  // user nice system idle iowait irq softirq steal (guest and guest_nice are inside user/nice).
  uint64_t f[8] = {};
  const char* p = line.data() + 4;
  const char* end = line.data() + line.size();
  for (uint64_t& v : f) {
    while (p < end && *p == ' ') ++p;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc()) throw Error("/proc/stat: the 'cpu' line has fewer than 8 counts");
    p = next;
  }
  CpuTicks t;
  t.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  t.total = t.busy + f[3] + f[4];
  return t;
}

double busy_cpus(const CpuTicks& before, const CpuTicks& after, int cpus) {
  if (after.total <= before.total) return 0.0;
  const double busy = static_cast<double>(after.busy - std::min(after.busy, before.busy));
  return busy / static_cast<double>(after.total - before.total) * cpus;
}

double other_programs_busy_cpus(std::chrono::milliseconds window) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const CpuTicks before = read_proc_stat();
  const double own_before = own_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const CpuTicks after = read_proc_stat();
  const double own = own_cpu_seconds() - own_before;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::max(0.0, busy_cpus(before, after, cpus) - own / seconds);
}

}  // namespace tern::bench
