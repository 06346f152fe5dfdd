#include "tern/server/compute_priority.h"

#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "tern/core/error.h"

namespace tern::server {
namespace {

// With a thread id, PRIO_PROCESS names one thread on Linux (not POSIX's whole process), as the
// kernel schedules threads as tasks.
id_t this_thread_id() { return static_cast<id_t>(::syscall(SYS_gettid)); }

int set_thread_nice(int nice) {
  return ::setpriority(PRIO_PROCESS, this_thread_id(), nice) == 0 ? 0 : errno;
}

}  // namespace

void check_compute_nice(int nice) {
  if (nice < 0 || nice > kMaxComputeNice)
    throw Error("--compute-nice must be 0 to " + std::to_string(kMaxComputeNice) + ", got " +
                std::to_string(nice));
}

void set_compute_nice(int nice) {
  check_compute_nice(nice);
  std::atomic<int> failure{set_thread_nice(nice)};
#pragma omp parallel
  {
    if (const int e = set_thread_nice(nice)) failure = e;
  }
  if (const int e = failure.load())
    throw Error("--compute-nice " + std::to_string(nice) + ": " + std::strerror(e));
}

int thread_nice() { return ::getpriority(PRIO_PROCESS, this_thread_id()); }

}  // namespace tern::server
