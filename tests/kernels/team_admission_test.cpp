// The thread team's admission policy, followed with made-up times.
#include "tern/kernels/cpu/team_admission.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tern::cpu {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = TeamAdmission::Clock;
using Job = TeamAdmission::Job;

constexpr uint64_t kKind = 3, kOtherKind = 5;

// A job with workers of kind kKind (100 µs alone, as time_alone makes it) that took `took`.
Job with_worker(microseconds took, int workers = 1) {
  return {kKind, workers, true, took, microseconds(50)};
}
// One that waited milliseconds for a worker the OS stopped mid-step.
Job stalling(int workers) { return with_worker(milliseconds(3), workers); }

// Runs kKind jobs alone at 100 µs each until the window alone is over.
void time_alone(TeamAdmission& a, Clock::time_point now) {
  for (Clock::duration sum{}; sum < TeamAdmission::kAloneWindow; sum += microseconds(100))
    a.ran_alone(kKind, microseconds(100), now);
}

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
  EXPECT_EQ(a.admitted(3, t0 + milliseconds(1)), 3);
  a.finished(stalling(3), t0 + milliseconds(200));  // long after the first
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

// Stalls shrink a team one worker at a time, down to one worker, whose stalls alone leave it
// in: whether it pays is weighed, and that starts with the caller's times alone.
TEST(TeamAdmission, StallsShrinkTheTeamToOneWorker) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.finished(stalling(2), t0);
  a.finished(stalling(2), t0 + microseconds(500));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(1)), 0);  // the last worker: first, times alone
  time_alone(a, t0 + milliseconds(1));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(2)), 1);
  a.finished(stalling(1), t0 + milliseconds(2));
  a.finished(stalling(1), t0 + milliseconds(3));
  EXPECT_EQ(a.admitted(2, t0 + milliseconds(4)), 1);
}

// The last worker stays while jobs with it take clearly less than the same kinds of job alone,
// and leaves for a backoff once they do not; the probe after it lets it back in.
TEST(TeamAdmission, TheLastWorkerStaysWhileItPays) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(a.admitted(1, t0), 0);
  time_alone(a, t0);
  EXPECT_EQ(a.admitted(1, t0), 1);
  fill_window(a, with_worker(microseconds(60)), t0);
  EXPECT_EQ(a.admitted(1, t0), 1);
  fill_window(a, with_worker(microseconds(97)), t0);  // not by enough
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 0);
  EXPECT_EQ(a.admitted(1, t0 + TeamAdmission::kMinBackoff), 1);
}

// A job alone that the OS preempted (a time slice, 3 ms, in a 100 µs job) barely moves its
// kind's time alone, so a worker that does not pay still leaves.
TEST(TeamAdmission, APreemptedJobAloneDoesNotMakeAWorkerThatDoesNotPayLookWorthIt) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(a.admitted(1, t0), 0);
  time_alone(a, t0);
  a.ran_alone(kKind, milliseconds(3), t0);
  fill_window(a, with_worker(microseconds(100)), t0);  // no faster than alone
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 0);
}

// A worker on a shared core stalls now and then, yet does much of the work: it stays.
TEST(TeamAdmission, AWorkerThatStallsNowAndThenYetPaysStays) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.admitted(1, t);
  time_alone(a, t);
  for (int i = 0; i < 10; ++i, t += milliseconds(10)) {
    a.finished(stalling(1), t);
    for (int j = 0; j < 150; ++j) a.finished(with_worker(microseconds(60)), t);
    ASSERT_EQ(a.admitted(1, t), 1) << "window " << i;
  }
}

// Each kind of job is weighed against its own time alone, and kinds never run alone not at all.
TEST(TeamAdmission, EachKindIsWeighedAgainstItsOwnTimeAlone) {
  TeamAdmission a;
  const Clock::time_point t0 = Clock::now();
  a.admitted(1, t0);
  a.ran_alone(kOtherKind, milliseconds(1), t0);
  time_alone(a, t0);
  // kOtherKind with the worker: 0.5 ms of 1 alone; kKind: 150 µs of 100. Together they pay.
  for (Clock::duration sum{}; sum < TeamAdmission::kWindow; sum += microseconds(650)) {
    a.finished({kOtherKind, 1, true, microseconds(500), microseconds(250)}, t0);
    a.finished(with_worker(microseconds(150)), t0);
  }
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 1);
  const Job unknown{7, 1, true, milliseconds(5), microseconds(100)};
  fill_window(a, unknown, t0);
  EXPECT_EQ(a.admitted(1, t0 + milliseconds(1)), 1);
}

// While the worker pays, the times alone are taken again at a doubling interval.
TEST(TeamAdmission, TheTimesAloneAreTakenAgainWhileTheWorkerPays) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.admitted(1, t);
  time_alone(a, t);
  for (Clock::duration interval = TeamAdmission::kMinRecheck;
       interval <= TeamAdmission::kMaxRecheck; interval *= 2) {
    fill_window(a, with_worker(microseconds(60)), t);
    EXPECT_EQ(a.admitted(1, t + interval - milliseconds(1)), 1);
    t += interval;
    EXPECT_EQ(a.admitted(1, t), 0) << "after " << interval.count() << " ns";
    time_alone(a, t);
    EXPECT_EQ(a.admitted(1, t), 1);
  }
}

// Shrinks in quick succession double the backoff up to its cap; probes that see none halve it.
TEST(TeamAdmission, BackoffDoublesWhileProbesFailAndHalvesWhenTheyPass) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.admitted(1, t);
  time_alone(a, t);
  fill_window(a, with_worker(microseconds(150)), t);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
  for (int i = 0; i < 12; ++i) {  // each probe's window loses
    t += a.backoff();
    ASSERT_EQ(a.admitted(1, t), 1) << "probe " << i;
    fill_window(a, with_worker(microseconds(150)), t);
  }
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff);
  EXPECT_EQ(a.admitted(1, t + milliseconds(999)), 0);
  // The other program has gone: the next probe passes, and each later one halves the backoff.
  t += a.backoff();
  EXPECT_EQ(a.admitted(1, t), 1);
  fill_window(a, with_worker(microseconds(60)), t);
  EXPECT_EQ(a.admitted(2, t + milliseconds(1)), 1);  // a second worker waits for its own probe
  t += a.backoff();
  EXPECT_EQ(a.admitted(2, t), 2);
  EXPECT_EQ(a.backoff(), TeamAdmission::kMaxBackoff / 2);
}

// Recurring stalls long after the last shrink start again from the shortest backoff.
TEST(TeamAdmission, ALaterBurstOfStallsBacksOffBriefly) {
  TeamAdmission a;
  Clock::time_point t = Clock::now();
  a.finished(stalling(3), t);
  a.finished(stalling(3), t + milliseconds(1));
  t += milliseconds(1) + a.backoff();
  a.admitted(3, t);
  a.finished(stalling(3), t);  // 10 ms after the last: a recurrence
  EXPECT_EQ(a.backoff(), 2 * TeamAdmission::kMinBackoff);
  t += std::chrono::seconds(10);
  a.finished(stalling(3), t);
  a.finished(stalling(3), t + milliseconds(1));
  EXPECT_EQ(a.backoff(), TeamAdmission::kMinBackoff);
}

}  // namespace
}  // namespace tern::cpu
