// The thread team's admission policy, followed with made-up times.
#include "tern/kernels/cpu/team_admission.h"

#include <gtest/gtest.h>

namespace tern::cpu {
namespace {

using std::chrono::milliseconds;
using Clock = TeamAdmission::Clock;

// Every worker while nothing stalls; one fewer after a stall until the backoff has passed, then
// one more on probation.
TEST(TeamAdmission, AStallLeavesOneWorkerOutUntilTheBackoffHasPassed) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(a.admitted(3, t0), 3);
  a.stalled(3, t0);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(1)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(9)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(10)), 3);  // the probe
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(11)), 3);
}

// A team shrinks to the caller alone while stalls go on, one worker per stall.
TEST(TeamAdmission, StallsShrinkTheTeamToTheCaller) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.stalled(2, t0);
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(1)), 1);
  a.stalled(1, t0 + milliseconds(2));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(3)), 0);
}

// Stalls in quick succession double the backoff up to its cap; probes that see none halve it.
TEST(TeamAdmission, BackoffDoublesUnderStallsAndHalvesWhenProbesPass) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.stalled(1, t);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
  for (int i = 0; i < 12; ++i) {  // every probe stalls at once
    t += a.backoff();
    ASSERT_EQ(a.admitted(1, t), 1) << "probe " << i;
    a.stalled(1, t);
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

// A stall long after the last starts again from the shortest backoff.
TEST(TeamAdmission, AnIsolatedStallBacksOffBriefly) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.stalled(2, t);
  t += a.backoff();
  a.admitted(2, t);
  a.stalled(2, t);
  EXPECT_EQ(a.backoff(), 2 * TeamAdmission::kMinBackoff);
  t += std::chrono::seconds(10);
  a.stalled(2, t);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
}

}  // namespace
}  // namespace tern::cpu
