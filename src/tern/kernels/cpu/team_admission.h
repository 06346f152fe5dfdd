// Which of a team's workers the machine leaves room for: the thread team's policy, apart from
// its threads so that it can be followed step by step with made-up times.
//
// Two rules leave a worker out. A worker the OS stops in the middle of a step (its core is
// shared with another program) makes the caller wait for the rest of the other program's time
// slice, milliseconds. A stall alone may be the OS's own work or the hypervisor's; a second within
// kRecurrence is a busy core, and admits one worker fewer. That rule shrinks a large team; it
// cannot say whether the last worker still pays, since a worker on a shared core stalls now and
// then yet may still do a third of the work, and also takes time from the caller. So the last
// worker is weighed: each kind of job (where it is started, and how many steps) keeps the time it
// took with the caller alone, and a window of kWindow of jobs run with the worker is set against
// those times; jobs that took more than kWorthIt of them admit the worker no longer. The times
// alone are taken whenever the caller runs alone, and for kAloneWindow every recheck interval
// (which doubles, up to kMaxRecheck, while the worker keeps paying: on an idle machine the
// windows alone cost a few tenths of a percent): more threads must not be slower than one.
//
// A worker left out is admitted again after a backoff, to see whether its core is free. Shrinks in
// quick succession double the backoff (up to kMaxBackoff), and each probe that saw none halves
// it: on a busy machine the team shrinks to the cores that pay, and grows back within about a
// second once they are free. Which worker stays out is whichever joins a job last: a descheduled
// one.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>

namespace tern::cpu {

class TeamAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kRecurrence{100}, kMinBackoff{10}, kMaxBackoff{1000},
      kWindow{20}, kAloneWindow{10}, kMinRecheck{100}, kMaxRecheck{4000};
  // A little below 1, so that a worker stays only where it clearly pays (a window's times vary by
  // a few percent from the machine alone).
  static constexpr double kWorthIt = 0.95;
  // A wait for the workers is a stall when it exceeds the caller's own part by this much (a worker
  // woken from sleep starts tens of microseconds late).
  static constexpr std::chrono::microseconds kStallSlack{100};

  // How many of `workers` a job started at `now` admits.
  int admitted(int workers, Clock::time_point now) {
    int n = workers;
    if (allowed_ < workers) {
      if (now >= probe_at_) {
        if (last_shrink_ < last_probe_)
          backoff_ = std::max<Clock::duration>(kMinBackoff, backoff_ / 2);
        if (allowed_ == 0) recheck_at_ = now + recheck_;  // the caller has just run alone
        ++allowed_;
        last_probe_ = now;
        probe_at_ = now + backoff_;
        restart_window();
      }
      n = std::min(allowed_, workers);
    }
    if (n == 1 && !timing_alone_ && now >= recheck_at_) {
      timing_alone_ = true;  // the times alone are due: a window without the worker
      alone_window_ = {};
    }
    return n == 1 && timing_alone_ ? 0 : n;
  }

  // A job the caller ran alone, of kind `kind` (nonzero), took `took`, ending at `now`.
  void ran_alone(uint64_t kind, Clock::duration took, Clock::time_point now) {
    Clock::duration& t = time_alone(kind);
    // Preemption only ever lengthens a job, by a time slice (milliseconds), and a time alone
    // inflated by one would keep a worker that does not pay until the next window alone (up to
    // kMaxRecheck away). So the time falls fast and rises by at most 1/32 a job, less than
    // kWorthIt's margin: towards what the caller takes undisturbed, while a kind's real growth
    // (attention over a longer context) still shows within a few dozen jobs.
    if (t == Clock::duration{})
      t = took;
    else if (took < t)
      t = (t + took) / 2;
    else
      t += std::min(took - t, t) / 32;
    if (!timing_alone_) return;
    alone_window_ += took;
    if (alone_window_ < kAloneWindow) return;
    timing_alone_ = false;
    recheck_at_ = now + recheck_;
    restart_window();
  }

  // What a job with workers measured: of kind `kind`, it admitted `workers`, some of which
  // joined (`joined`), and lasted `job`, of which the caller's own part took `own`.
  struct Job {
    uint64_t kind = 0;
    int workers = 0;
    bool joined = false;
    Clock::duration job{}, own{};
  };

  // A job with workers ended at `now`.
  void finished(const Job& j, Clock::time_point now) {
    if (j.workers >= 2 && j.joined && j.job - j.own > j.own + kStallSlack) stalled(j.workers, now);
    if (j.workers != 1) return;
    const Clock::duration alone = time_alone(j.kind);
    if (alone == Clock::duration{}) return;  // never run alone yet
    window_job_ += j.job;
    window_alone_ += alone;
    if (window_job_ < kWindow) return;
    const bool pays = window_job_ <= kWorthIt * window_alone_;
    restart_window();
    if (pays) {
      recheck_ = std::min<Clock::duration>(kMaxRecheck, 2 * recheck_);
    } else {
      recheck_ = kMinRecheck;
      shrink(j.workers, now);
    }
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

  void restart_window() { window_job_ = window_alone_ = {}; }

  // The time alone of a kind of job, in a table of kKinds (open addressing; once it is full, new
  // kinds share the last slot probed, which only blurs their times).
  static constexpr size_t kKinds = 256;
  Clock::duration& time_alone(uint64_t kind) {
    size_t i = static_cast<size_t>(kind >> 56) % kKinds;  // kinds come hashed (job_kind)
    for (size_t probes = 0; probes + 1 < kKinds; ++probes, i = (i + 1) % kKinds) {
      if (kinds_[i].kind == kind) break;
      if (kinds_[i].kind == 0) {
        kinds_[i].kind = kind;
        break;
      }
    }
    return kinds_[i].alone;
  }
  struct KindTime {
    uint64_t kind = 0;
    Clock::duration alone{};
  };
  std::array<KindTime, kKinds> kinds_{};

  int allowed_ = std::numeric_limits<int>::max();
  Clock::duration backoff_ = kMinBackoff;
  Clock::time_point probe_at_{}, last_probe_{}, last_stall_{}, last_shrink_{};
  // The last worker's weighing: the window's job time and the same jobs' times alone; whether a
  // window alone is being timed, how long it has run, and when the next is due.
  Clock::duration window_job_{}, window_alone_{};
  bool timing_alone_ = false;
  Clock::duration alone_window_{}, recheck_ = kMinRecheck;
  Clock::time_point recheck_at_{};
};

}  // namespace tern::cpu
