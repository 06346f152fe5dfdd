// The team: workers that wait for jobs, one job open at a time, joined through one atomic word.
#include "tern/kernels/cpu/thread_team.h"

#include <omp.h>
#include <sched.h>
#include <strings.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tern/kernels/cpu/team_admission.h"

namespace tern::cpu {
namespace {

// Inside a job (as its caller or as a worker): jobs started here run serially.
thread_local bool t_in_job = false;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long an idle worker watches for the next job before it sleeps. A decode step's jobs follow
// each other within microseconds, and waking a sleeping worker costs tens of them; between steps
// and requests the workers sleep. OMP_WAIT_POLICY=passive (what the tests run under, many
// processes on two cores) makes them sleep at once, as it does OpenMP's.
std::chrono::microseconds worker_spin() {
  static const std::chrono::microseconds spin = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    return std::chrono::microseconds(policy != nullptr && strcasecmp(policy, "passive") == 0 ? 0
                                                                                             : 200);
  }();
  return spin;
}

// A kind of job, as the team's admission weighs it: where it was started (the erased call is
// one function per call site) and how many steps it had. Never 0. Fibonacci-hashed here, once,
// so that its top bits pick the admission's table slot.
uint64_t job_kind(void (*call)(void*, int), int64_t steps) {
  return ((reinterpret_cast<uintptr_t>(call) ^ static_cast<uint64_t>(steps) << 40) *
          0x9e3779b97f4a7c15u) |
         1;
}

class Team {
 public:
  using Clock = TeamAdmission::Clock;

  Team() = default;
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  ~Team() {
    stop_.store(true, std::memory_order_seq_cst);
    bell_.fetch_add(1, std::memory_order_seq_cst);
    bell_.notify_all();
    for (std::thread& w : workers_) w.join();
  }

  TeamAdmission& admission() { return admission_; }

  // Starts workers until there are `n`: all of them when the team is made, though the first
  // jobs run alone (team_admission.h), so that a thread's workers are there from its start.
  void start_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) workers_.emplace_back([this] { work(); });
  }

  // Runs a job with threads - 1 workers admitted (threads: from team_threads()).
  void run(int threads, void (*call)(void*, int), void* context) {
    const Clock::time_point start = Clock::now();
    const int admit = threads - 1;
    start_workers(admit);
    call_ = call;
    context_ = context;
    worker_steps_.store(0, std::memory_order_relaxed);  // published with the state below
    ++epoch_;
    // Publishing the state (seq_cst) before reading sleepers_ pairs with a worker counting
    // itself asleep before it reads the state: one of the two sees the other.
    state_.store(pack(epoch_, admit, true, 0), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      bell_.fetch_add(1, std::memory_order_seq_cst);
      bell_.notify_all();
    }
    const int64_t steps_before = t_team_steps;
    t_in_job = true;
    try {
      call(context, 0);
    } catch (...) {  // the workers' part still ends before the job's memory goes
      t_in_job = false;
      close_and_wait();
      throw;
    }
    t_in_job = false;
    const Clock::time_point own_part = Clock::now();
    TeamAdmission::Job job;
    job.workers = admit;
    const bool waited = close_and_wait();
    const Clock::time_point end = Clock::now();
    const int64_t worker_steps = worker_steps_.load(std::memory_order_relaxed);
    job.kind = job_kind(call, t_team_steps - steps_before + worker_steps);
    job.joined = waited || worker_steps > 0;
    job.job = end - start;
    job.own = own_part - start;
    admission_.finished(job, end);
  }

 private:
  // No worker joins from now on; those that have joined finish the steps they have begun.
  // Whether any had to be waited for.
  bool close_and_wait() {
    uint64_t s = state_.fetch_and(~kOpen, std::memory_order_acq_rel);
    if (joined(s) == 0) return false;
    for (int spins = 0; joined(s) != 0; ++spins) {
      if (spins < 4096)
        cpu_relax();
      else
        sched_yield();  // a joined worker may share this core
      s = state_.load(std::memory_order_acquire);
    }
    return true;
  }

  // state_: the job's epoch (bits 32-63), how many workers may join it (16-30), whether it is
  // open (15) and how many have joined and not yet returned (0-14). One word, so that joining
  // checks all of them at once: a worker never joins a closed job, nor one that is full.
  static constexpr uint64_t kOpen = uint64_t{1} << 15;
  static uint64_t pack(uint64_t epoch, int limit, bool open, int joined) {
    return epoch << 32 | static_cast<uint64_t>(limit) << 16 | (open ? kOpen : 0) |
           static_cast<uint64_t>(joined);
  }
  static uint64_t epoch_of(uint64_t s) { return s >> 32; }
  static int limit(uint64_t s) { return static_cast<int>(s >> 16 & 0x7fff); }
  static bool open(uint64_t s) { return (s & kOpen) != 0; }
  static int joined(uint64_t s) { return static_cast<int>(s & 0x7fff); }

  // A job this worker has not yet looked at, open and with room.
  static bool joinable(uint64_t s, uint64_t seen) {
    return epoch_of(s) != seen && open(s) && joined(s) < limit(s);
  }

  void work() {
    t_in_job = true;  // a worker's own kernels never start jobs of their own
    uint64_t seen = 0;
    for (;;) {
      uint64_t s = state_.load(std::memory_order_acquire);
      if (!joinable(s, seen)) {
        s = wait_for_job(seen);
        if (stop_.load(std::memory_order_acquire)) return;
        if (!joinable(s, seen)) continue;
      }
      if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire)) continue;
      seen = epoch_of(s);
      const int64_t steps_before = t_team_steps;
      call_(context_, joined(s) + 1);
      worker_steps_.fetch_add(t_team_steps - steps_before, std::memory_order_relaxed);
      state_.fetch_sub(1, std::memory_order_release);  // publishes worker_steps_ to the caller
    }
  }

  // Spins for worker_spin(), then sleeps on the bell until a job is published (or the team
  // stops); returns the state last seen.
  uint64_t wait_for_job(uint64_t seen) {
    const auto until = std::chrono::steady_clock::now() + worker_spin();
    for (int i = 1;; ++i) {
      const uint64_t s = state_.load(std::memory_order_acquire);
      if (joinable(s, seen) || stop_.load(std::memory_order_relaxed)) return s;
      if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
      cpu_relax();
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t bell = bell_.load(std::memory_order_seq_cst);
    uint64_t s = state_.load(std::memory_order_seq_cst);
    if (!joinable(s, seen) && !stop_.load(std::memory_order_seq_cst)) {
      bell_.wait(bell, std::memory_order_seq_cst);
      s = state_.load(std::memory_order_acquire);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return s;
  }

  // The open job; written by the caller before it publishes state_, read by a worker after it
  // has joined, and not changed before every joined worker has returned.
  void (*call_)(void*, int) = nullptr;
  void* context_ = nullptr;
  uint64_t epoch_ = 0;  // the caller's count of jobs
  TeamAdmission admission_;
  alignas(64) std::atomic<uint64_t> state_{0};
  alignas(64) std::atomic<uint32_t> bell_{0};  // rung (bumped and notified) to wake sleepers
  std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int64_t> worker_steps_{0};  // the open job's, by the workers returned
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

thread_local std::unique_ptr<Team> t_team;

}  // namespace

int max_team_threads() { return t_in_job || omp_in_parallel() ? 1 : omp_get_max_threads(); }

int team_threads() {
  const int most = max_team_threads();
  if (most <= 1) return most;
  if (!t_team) {
    t_team = std::make_unique<Team>();
    t_team->start_workers(most - 1);
  }
  return 1 + t_team->admission().admitted(most - 1, TeamAdmission::Clock::now());
}

void run_team_erased(int threads, void (*call)(void*, int), void* context) {
  if (threads <= 1 || t_in_job) {
    const bool outer = t_in_job;
    // A job of a thread that has a team, run alone: its time is what the team's last worker is
    // weighed against.
    const bool timed = !outer && t_team;
    const TeamAdmission::Clock::time_point start =
        timed ? TeamAdmission::Clock::now() : TeamAdmission::Clock::time_point{};
    const int64_t steps_before = t_team_steps;
    t_in_job = true;
    call(context, 0);
    t_in_job = outer;
    if (timed) {
      const TeamAdmission::Clock::time_point end = TeamAdmission::Clock::now();
      t_team->admission().ran_alone(job_kind(call, t_team_steps - steps_before), end - start, end);
    }
    return;
  }
  if (!t_team) t_team = std::make_unique<Team>();
  t_team->run(threads, call, context);
}

void release_thread_team() { t_team.reset(); }

}  // namespace tern::cpu
