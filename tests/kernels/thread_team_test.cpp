#include "tern/kernels/cpu/thread_team.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

class TeamSize {
 public:
  explicit TeamSize(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~TeamSize() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// Every step runs once, on members numbered below the team's size, for any size and any count
// of steps, job after job.
TEST(ThreadTeam, EveryStepOnceOnMembersOfTheTeam) {
  for (int threads : {1, 2, 3, 5}) {
    TeamSize size(threads);
    for (int64_t steps : {0, 1, 2, 7, 64, 1000}) {
      for (int job = 0; job < 20; ++job) {
        std::vector<std::atomic<int>> taken(static_cast<size_t>(steps));
        parallel_for(steps, [&](int64_t s) { taken[static_cast<size_t>(s)].fetch_add(1); });
        for (int64_t s = 0; s < steps; ++s)
          ASSERT_EQ(taken[static_cast<size_t>(s)].load(), 1)
              << "step " << s << " of " << steps << ", " << threads << " threads";
      }
      std::atomic<int> bad_members{0};
      StealingSplit split = StealingSplit::even(team_threads(), steps);
      run_team(split.threads(), [&](int member) {
        bad_members += member < 0 || member >= threads;
        while (split.next(member).count > 0) {
        }
      });
      EXPECT_EQ(bad_members.load(), 0);
    }
  }
  release_thread_team();
}

// Each step a split hands out is counted to the thread that took it, so a job's members' counts
// add up to its steps: the team weighs its workers by them (team_admission.h).
TEST(ThreadTeam, StepsAreCountedToTheThreadThatTookThem) {
  TeamSize size(3);
  for (int64_t steps : {1, 7, 1000}) {
    std::atomic<int64_t> counted{0};
    StealingSplit split = StealingSplit::even(team_threads(), steps);
    run_team(split.threads(), [&](int member) {
      const int64_t before = t_team_steps;
      while (split.next(member, 3).count > 0) {
      }
      counted += t_team_steps - before;
    });
    EXPECT_EQ(counted.load(), steps);
  }
  release_thread_team();
}

// A job started inside a job runs serially on the member that starts it, as OpenMP's nested
// regions did: team_threads() is 1 there.
TEST(ThreadTeam, NestedJobsRunOnTheMemberThatStartsThem) {
  TeamSize size(2);
  std::atomic<int> nested_sizes{0}, inner_steps{0};
  parallel_for(64, [&](int64_t) {
    nested_sizes += team_threads() != 1;
    const std::thread::id me = std::this_thread::get_id();
    parallel_for(8, [&](int64_t) { inner_steps += std::this_thread::get_id() == me; });
  });
  EXPECT_EQ(nested_sizes.load(), 0);
  EXPECT_EQ(inner_steps.load(), 64 * 8);
  release_thread_team();
}

// What the team is for: a member the OS does not run (here: held in a signal handler, as a
// descheduled thread would be) never holds up a job; the caller does its steps. OpenMP's
// barrier waited for it in every region.
std::atomic<bool> g_hold{false};
std::atomic<pid_t> g_held_tid{0};
void hold_here(int) {
  g_held_tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  while (g_hold.load()) {
    const timespec ms{0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
}

TEST(ThreadTeam, AMemberThatDoesNotRunHoldsUpNoJob) {
  TeamSize size(2);
  // Start the worker and learn its thread id.
  std::atomic<pid_t> worker{0};
  run_team(2, [&](int member) {
    if (member == 1) worker = static_cast<pid_t>(::syscall(SYS_gettid));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (member == 0 && worker.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
  });
  ASSERT_NE(worker.load(), 0) << "the worker never joined";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // back to waiting for a job

  struct sigaction action = {};
  action.sa_handler = hold_here;
  struct sigaction previous = {};
  ASSERT_EQ(::sigaction(SIGUSR2, &action, &previous), 0);
  g_hold = true;
  ASSERT_EQ(::syscall(SYS_tgkill, ::getpid(), worker.load(), SIGUSR2), 0);
  for (int i = 0; i < 1000 && g_held_tid.load() != worker.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(g_held_tid.load(), worker.load());

  // The held worker is this thread's team's. A watchdog lets it go after 20 s, so that a team
  // that waits for it fails the test instead of hanging it.
  std::atomic<bool> done{false}, waited_for_it{false};
  std::thread watchdog([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!done.load()) waited_for_it = true;
    g_hold = false;
  });
  int64_t sum = 0;
  for (int job = 0; job < 1000; ++job) {
    std::vector<int64_t> out(256);
    parallel_for(256, [&](int64_t s) { out[static_cast<size_t>(s)] = s; });
    for (int64_t v : out) sum += v;
  }
  done = true;
  watchdog.join();
  EXPECT_FALSE(waited_for_it.load()) << "a job waited for the member that was not running";
  EXPECT_EQ(sum, 1000 * (255 * 256 / 2));
  g_hold = false;
  ::sigaction(SIGUSR2, &previous, nullptr);
}

}  // namespace
}  // namespace tern::cpu
