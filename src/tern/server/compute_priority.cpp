#include "tern/server/compute_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/thread_team.h"

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
  // The kernels' workers start with their creator's priority: the team is given back and the
  // next job starts workers at the new one.
  cpu::release_thread_team();
  if (const int e = set_thread_nice(nice))
    throw Error("--compute-nice " + std::to_string(nice) + ": " + std::strerror(e));
}

int thread_nice() { return ::getpriority(PRIO_PROCESS, this_thread_id()); }

}  // namespace tern::server
