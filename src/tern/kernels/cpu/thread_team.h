// The kernels' threads: a team per calling thread whose jobs never wait for a member that has
// not shown up. OpenMP's parallel regions end in a barrier that every member of the team must
// reach, so on a machine where another program holds a core, each region waited for the member
// the OS had descheduled: Qwen3-0.6B Q4_0 decoded at 30.0 tokens/s with 2 threads beside one
// busy core, against 70.9 with 1 thread (docs/PERFORMANCE.md). Here a job's steps are shared
// through a StealingSplit, the caller takes part, and the job is over when its steps are done: a
// member that wakes late finds it closed and goes back to waiting. The caller waits only for steps
// a member has begun.
//
// The team's size is OpenMP's thread count on the calling thread (omp_get_max_threads():
// --threads sets it through omp_set_num_threads), so the kernels and OpenMP agree on it.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tern::cpu {

// Steps this thread has taken from the splits of jobs (StealingSplit::next counts them): a job
// weighs its workers by the share of its steps the caller took (team_admission.h).
inline thread_local int64_t t_team_steps = 0;

// The most members a job started here can have: 1 inside a job (a nested job runs serially on
// the thread that asks, as OpenMP's nested regions did) and inside an OpenMP parallel region,
// otherwise omp_get_max_threads(). Member numbers are below it (size per-member arrays by it).
int max_team_threads();

// The members a job started now should plan for: max_team_threads(), less the workers the team
// has found not to pay (sharing a core with another program: jobs waited for a worker the OS
// stopped mid-step, or took longer than the caller alone would have; one is let back in after a
// backoff, team_admission.h). Plan a job's split for this count and pass the same count to
// run_team: it may change from one call to the next.
int team_threads();

// Runs work(member) on the calling thread as member 0 and on each of up to threads - 1 workers
// that join before the caller is done with its own part; members are numbered 0 .. threads - 1
// in the order they join. Returns when every member that joined has returned. `work` must share
// its work so that any subset of members completes it (a StealingSplit does:
// stealing_split.h has parallel_for for the common case).
void run_team_erased(int threads, void (*call)(void*, int), void* context);

template <class Work>
void run_team(int threads, Work&& work) {
  using W = std::remove_reference_t<Work>;
  run_team_erased(
      threads, [](void* w, int member) { (*static_cast<W*>(w))(member); },
      const_cast<void*>(static_cast<const void*>(&work)));
}

// Joins the calling thread's workers (a later job starts new ones). A thread that hands its
// computing to another calls this so that idle workers do not outlive their use; a worker starts
// with its creator's scheduling priority, so a thread that changes its own gives its team back
// first.
void release_thread_team();

}  // namespace tern::cpu
