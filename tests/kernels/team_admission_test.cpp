// The thread team's admission policy, followed with made-up times.
#include "tern/kernels/cpu/team_admission.h"

#include <gtest/gtest.h>

namespace tern::cpu {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = TeamAdmission::Clock;
using Job = TeamAdmission::Job;

// A job the workers sped up: the caller took half the steps in 55 µs, the job took 60 (alone:
// 110).
Job paying(int workers) { return {workers, true, microseconds(60), microseconds(55), 5, 10}; }
// A job that waited milliseconds for a worker the OS stopped mid-step.
Job stalling(int workers) { return {workers, true, milliseconds(3), microseconds(50), 5, 10}; }
// A job no stall slowed, yet slower than the caller alone: it took 8 of 10 steps in 60 µs
// (alone: 75) and waited 40 µs for the worker's last one.
Job losing(int workers) { return {workers, true, microseconds(100), microseconds(60), 8, 10}; }

// Feeds `job` until a window's worth of job time has passed, all at `now`.
void fill_window(TeamAdmission& a, const Job& job, Clock::time_point now) {
  for (Clock::duration sum{}; sum < TeamAdmission::kWindow; sum += job.job) a.finished(job, now);
}

// A stall alone is noise (the OS's own work, the hypervisor's): every worker stays admitted.
TEST(TeamAdmission, AnIsolatedStallChangesNothing) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(a.admitted(3, t0), 3);
  a.finished(stalling(3), t0);
  fill_window(a, paying(3), t0);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(1)), 3);
  a.finished(stalling(3), t0 + milliseconds(200));  // long after the first
  fill_window(a, paying(3), t0 + milliseconds(200));
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(201)), 3);
}

// A recurring stall leaves one worker out until the backoff has passed, then one more is let
// back in on probation.
TEST(TeamAdmission, ARecurringStallLeavesOneWorkerOutUntilTheBackoffHasPassed) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.finished(stalling(3), t0);
  a.finished(stalling(3), t0 + milliseconds(5));
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(6)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(14)), 2);
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(15)), 3);  // the probe
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(16)), 3);
}

// Stalls shrink a team one worker at a time, down to one worker: whether the last one pays is
// weighed, not guessed from its stalls.
TEST(TeamAdmission, StallsShrinkTheTeamToOneWorker) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.finished(stalling(2), t0);
  a.finished(stalling(2), t0 + microseconds(500));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(1)), 1);
  a.finished(stalling(1), t0 + milliseconds(2));
  a.finished(stalling(1), t0 + milliseconds(3));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(4)), 1);
}

// A worker on a shared core stalls now and then, yet does half the steps: it stays.
TEST(TeamAdmission, ALastWorkerThatPaysStaysDespiteItsStalls) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  for (int i = 0; i < 20; ++i, t += milliseconds(10)) {
    a.finished(stalling(1), t);
    for (int j = 0; j < 150; ++j) a.finished(paying(1), t);
    ASSERT_EQ(a.admitted(1, t), 1) << "window " << i;
  }
}

// Jobs slower than the caller alone would have been leave the worker out for a backoff, stall
// or none; the probe after it lets the worker back in.
TEST(TeamAdmission, JobsSlowerThanTheCallerAloneLeaveTheWorkerOut) {
  for (Job job : {losing(1), stalling(1)}) {
    TeamAdmission a;
    const Clock::time_point t0 = Clock::now();
    EXPECT_EQ(a.admitted(1, t0), 1);
    fill_window(a, job, t0);
    EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 0);
    EXPECT_EQ(a.admitted(1, t0 + TeamAdmission::kMinBackoff), 1);
  }
}

// A window is weighed as a whole: a slow job among fast ones is outweighed.
TEST(TeamAdmission, AWindowIsWeighedAsAWhole) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  for (Clock::duration sum{}; sum < TeamAdmission::kWindow; sum += microseconds(160)) {
    a.finished(losing(1), t0);
    a.finished(paying(1), t0);
  }
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 1);
}

// Jobs no worker joined, or in which the caller took no step, tell nothing about the workers.
TEST(TeamAdmission, JobsWithoutBothSidesAreNotWeighed) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  Job alone = losing(1), no_own_steps = losing(1);
  alone.joined = false;
  no_own_steps.own_steps = 0;
  fill_window(a, alone, t0);
  fill_window(a, no_own_steps, t0);
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 1);
}

// Shrinks in quick succession double the backoff up to its cap; probes that see none halve it.
TEST(TeamAdmission, BackoffDoublesWhileProbesFailAndHalvesWhenTheyPass) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  fill_window(a, losing(1), t);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
  for (int i = 0; i < 12; ++i) {  // each probe's window loses
    t += a.backoff();
    ASSERT_EQ(a.admitted(1, t), 1) << "probe " << i;
    fill_window(a, losing(1), t);
  }
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff);
  EXPECT_EQ(a.admitted(1, t + milliseconds(999)), 0);
  // The other program has gone: the next probe passes, and each later one halves the backoff.
  t += a.backoff();
  EXPECT_EQ(a.admitted(1, t), 1);
  fill_window(a, paying(1), t);
  EXPECT_EQ(a.admitted(2, t + milliseconds(1)), 1);  // a second worker waits for its own probe
  t += a.backoff();
  EXPECT_EQ(a.admitted(2, t), 2);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff / 2);
}

// Recurring stalls long after the last shrink start again from the shortest backoff.
TEST(TeamAdmission, ALaterBurstOfStallsBacksOffBriefly) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.finished(stalling(2), t);
  a.finished(stalling(2), t + milliseconds(1));
  t += milliseconds(1) + a.backoff();
  a.admitted(2, t);
  a.finished(stalling(2), t);  // 10 ms after the last: a recurrence
  EXPECT_EQ(a.backoff(), 2 * TeamAdmission::kMinBackoff);
  t += std::chrono::seconds(10);
  a.finished(stalling(2), t);
  a.finished(stalling(2), t + milliseconds(1));
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
}

}  // namespace
}  // namespace tern::cpu
