// The thread team's admission policy, followed with made-up times.
#include "tern/kernels/cpu/team_admission.h"

#include <gtest/gtest.h>

namespace tern::cpu {
namespace {

using std::chrono::milliseconds;
using Clock = TeamAdmission::Clock;

// A stall alone is noise (the OS's own work, the hypervisor's): every worker stays admitted.
TEST(TeamAdmission, AnIsolatedStallChangesNothing) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(a.admitted(3, t0), 3);
  a.stalled(3, t0);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(1)), 3);
  a.stalled(3, t0 + milliseconds(200));  // long after the first
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(201)), 3);
}

// A recurring stall leaves one worker out until the backoff has passed, then one more is let
// back in on probation.
TEST(TeamAdmission, ARecurringStallLeavesOneWorkerOutUntilTheBackoffHasPassed) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.stalled(3, t0);
  a.stalled(3, t0 + milliseconds(5));
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(6)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(14)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(15)), 3);  // the probe
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(16)), 3);
}

// A team shrinks to the caller alone while stalls go on, one worker per stall.
TEST(TeamAdmission, StallsShrinkTheTeamToTheCaller) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.stalled(2, t0);
  a.stalled(2, t0 + milliseconds(1));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(2)), 1);
  a.stalled(1, t0 + milliseconds(3));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(4)), 0);
}

// Stalls in quick succession double the backoff up to its cap; probes that see none halve it.
TEST(TeamAdmission, BackoffDoublesUnderStallsAndHalvesWhenProbesPass) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.stalled(1, t - milliseconds(1));
  a.stalled(1, t);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
  for (int i = 0; i < 12; ++i) {  // each probe stalls twice at once
    t += a.backoff();
    ASSERT_EQ(a.admitted(1, t), 1) << "probe " << i;
    a.stalled(1, t);
    a.stalled(1, t + milliseconds(1));
    t += milliseconds(1);
  }
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff);
  EXPECT_EQ(a.admitted(1, t + milliseconds(999)), 0);
  // The other program has gone: the next probe passes, and each later one halves the backoff.
  t += a.backoff();
  EXPECT_EQ(a.admitted(1, t), 1);
  EXPECT_EQ(a.admitted(2, t + milliseconds(1)), 1);  // a second worker waits for its own probe
  t += a.backoff();
  EXPECT_EQ(a.admitted(2, t), 2);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff / 2);
}

// Recurring stalls long after the last shrink start again from the shortest backoff.
TEST(TeamAdmission, ALaterBurstOfStallsBacksOffBriefly) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.stalled(2, t);
  a.stalled(2, t + milliseconds(1));
  t += milliseconds(1) + a.backoff();
  a.admitted(2, t);
  a.stalled(2, t);  // 10 ms after the last: a recurrence
  EXPECT_EQ(a.backoff(), 2 * TeamAdmission::kMinBackoff);
  t += std::chrono::seconds(10);
  a.stalled(2, t);
  a.stalled(2, t + milliseconds(1));
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
}

}  // namespace
}  // namespace tern::cpu
