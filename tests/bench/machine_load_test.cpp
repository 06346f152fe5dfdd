// The machine's load as `tern bench suite` measures it around each section.
#include "tern/bench/machine_load.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>

#include "tern/core/error.h"
#include "tern/core/subprocess.h"

namespace tern::bench {
namespace {

TEST(MachineLoad, ProcStatsAggregateLine) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  const CpuTicks t =
      parse_proc_stat("cpu  100 5 20 800 10 1 2 3 7 0\ncpu0 50 2 10 400 5 0 1 1 3 0\nintr 12345\n");
  EXPECT_EQ(t.busy, 100u + 5 + 20 + 1 + 2 + 3);  // guest time is already inside user
  EXPECT_EQ(t.total, t.busy + 800 + 10);
  EXPECT_THROW(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n"), Error);
  EXPECT_THROW(parse_proc_stat("cpu  1 2 3\n"), Error);
  EXPECT_THROW(parse_proc_stat(""), Error);
}

TEST(MachineLoad, BusyCpusAreTheBusyShareOfTheTicksTimesTheCpus) {
  EXPECT_DOUBLE_EQ(busy_cpus({100, 1000}, {150, 1100}, 2), 1.0);
  EXPECT_DOUBLE_EQ(busy_cpus({100, 1000}, {100, 1100}, 2), 0.0);
  EXPECT_DOUBLE_EQ(busy_cpus({100, 1000}, {100, 1000}, 2), 0.0);  // no tick passed
}

// A program spinning beside the measurement shows: the machine is not idle.
TEST(MachineLoad, AProgramKeepingACoreBusyIsSeen) {
  const pid_t spinner = spawn_process({"/bin/sh", "-c", "while :; do :; done"}, -1, -1);
  ASSERT_GT(spinner, 0);
  const double busy = other_programs_busy_cpus(std::chrono::milliseconds(500));
  ::kill(spinner, SIGKILL);
  ::waitpid(spinner, nullptr, 0);
  EXPECT_GT(busy, kIdleBusyCpusLimit);
}

}  // namespace
}  // namespace tern::bench
