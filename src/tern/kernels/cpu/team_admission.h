// Which of a team's workers the machine leaves room for: the thread team's policy, apart from
// its threads so that it can be followed step by step with made-up times.
//
// Two rules leave a worker out. A worker the OS stops in the middle of a step (its core is
// shared with another program) makes the caller wait for the rest of the other program's time
// slice, milliseconds. A stall alone may be the OS's own work or the hypervisor's; a second within
// kRecurrence is a busy core, and admits one worker fewer. That rule shrinks a large team; it
// cannot say whether the last worker still pays, since a worker on a shared core stalls now and
// then yet may still do a third of the work. So the jobs themselves are weighed: over a window of
// kWindow of job time, the time the jobs took against the time the caller alone would have taken
// (its own part, scaled by all the steps over the steps it took). Jobs that took more than
// kWorthIt of that admit one worker fewer: more threads must never be slower than one.
//
// After a backoff one more worker is admitted again, to see whether its core is free. Shrinks in
// quick succession double the backoff (up to kMaxBackoff), and each probe that saw none halves
// it: on a busy machine the team shrinks to the cores that pay, and grows back within about a
// second once they are free. Which worker stays out is whichever joins a job last: a descheduled
// one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

namespace tern::cpu {

class TeamAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kRecurrence{100}, kMinBackoff{10}, kMaxBackoff{1000},
      kWindow{20};
  // The caller alone runs each step faster than it does beside a worker (they share the memory
  // bus: two threads decode about 1.85× one on an idle Zen 5), so its scaled-up own part
  // overstates the time alone by up to ~8%; the margin keeps a worker only where it clearly pays.
  static constexpr double kWorthIt = 0.9;
  // A wait for the workers is a stall when it exceeds the caller's own part by this much (a worker
  // woken from sleep starts tens of microseconds late).
  static constexpr std::chrono::microseconds kStallSlack{100};

  // How many of `workers` a job started at `now` admits.
  int admitted(int workers, Clock::time_point now) {
    if (allowed_ >= workers) return workers;
    if (now >= probe_at_) {
      if (last_shrink_ < last_probe_)
        backoff_ = std::max<Clock::duration>(kMinBackoff, backoff_ / 2);
      ++allowed_;
      last_probe_ = now;
      probe_at_ = now + backoff_;
      restart_window();
    }
    return std::min(allowed_, workers);
  }

  // What a job measured: it admitted `workers`, some of which joined (`joined`), lasted `job`,
  // of which the caller's own part took `own`; the caller took `own_steps` of the `steps` the
  // members took in all.
  struct Job {
    int workers = 0;
    bool joined = false;
    Clock::duration job{}, own{};
    int64_t own_steps = 0, steps = 0;
  };

  // A job ended at `now`.
  void finished(const Job& j, Clock::time_point now) {
    if (!j.joined || j.own_steps <= 0) return;  // the caller alone: nothing to weigh
    if (j.workers >= 2 && j.job - j.own > j.own + kStallSlack) stalled(j.workers, now);
    window_job_ += j.job;
    window_alone_ += std::chrono::duration<double>(j.own).count() * static_cast<double>(j.steps) /
                     static_cast<double>(j.own_steps);
    if (window_job_ < kWindow) return;
    const bool pays =
        std::chrono::duration<double>(window_job_).count() <= kWorthIt * window_alone_;
    restart_window();
    if (!pays) shrink(j.workers, now);
  }

  Clock::duration backoff() const { return backoff_; }

 private:
  // A job that admitted `workers` waited at `now` for one the OS had stopped mid-step.
  void stalled(int workers, Clock::time_point now) {
    const bool recurring = now - last_stall_ < kRecurrence;
    last_stall_ = now;
    if (recurring) shrink(workers, now);
  }

  void shrink(int workers, Clock::time_point now) {
    allowed_ = std::max(0, workers - 1);
    backoff_ = now - last_shrink_ < 4 * backoff_
                   ? std::min<Clock::duration>(kMaxBackoff, 2 * backoff_)
                   : Clock::duration(kMinBackoff);
    last_shrink_ = now;
    probe_at_ = now + backoff_;
    restart_window();
  }

  void restart_window() {
    window_job_ = {};
    window_alone_ = 0;
  }

  int allowed_ = std::numeric_limits<int>::max();
  Clock::duration backoff_ = kMinBackoff;
  Clock::time_point probe_at_{}, last_probe_{}, last_stall_{}, last_shrink_{};
  Clock::duration window_job_{};  // the window's job time, and the caller's time alone (s)
  double window_alone_ = 0;
};

}  // namespace tern::cpu
