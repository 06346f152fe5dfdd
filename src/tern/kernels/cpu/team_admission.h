// Which of a team's workers the machine leaves room for: the thread team's policy, apart from
// its threads so that it can be followed step by step with made-up times.
//
// A worker the OS stops in the middle of a step (its core is shared with another program)
// costs the caller the rest of the other program's time slice, milliseconds, every time. A
// stall alone may be the OS's own work or the hypervisor's; a second within kRecurrence is a
// busy core, and admits one worker fewer; after a backoff one more is admitted again, to see
// whether its core is free. Stalls in quick succession double the backoff (up to kMaxBackoff), and
// each probe that saw none halves it: on a busy machine the team shrinks to the cores that are
// free, and it grows back within about a second once they are. Which worker stays out is whichever
// joins a job last: a descheduled one.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

namespace tern::cpu {

class TeamAdmission {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kRecurrence{100}, kMinBackoff{10}, kMaxBackoff{1000};

  // How many of `workers` a job started at `now` admits.
  int admitted(int workers, Clock::time_point now) {
    if (allowed_ >= workers) return workers;
    if (now >= probe_at_) {
      if (last_shrink_ < last_probe_)
        backoff_ = std::max<Clock::duration>(kMinBackoff, backoff_ / 2);
      ++allowed_;
      last_probe_ = now;
      probe_at_ = now + backoff_;
    }
    return std::min(allowed_, workers);
  }

  // A job that admitted `workers` waited at `now` for one the OS had stopped mid-step.
  void stalled(int workers, Clock::time_point now) {
    const bool recurring = now - last_stall_ < kRecurrence;
    last_stall_ = now;
    if (!recurring) return;
    allowed_ = std::max(0, workers - 1);
    backoff_ = now - last_shrink_ < 4 * backoff_
                   ? std::min<Clock::duration>(kMaxBackoff, 2 * backoff_)
                   : Clock::duration(kMinBackoff);
    last_shrink_ = now;
    probe_at_ = now + backoff_;
  }

  Clock::duration backoff() const { return backoff_; }

 private:
  int allowed_ = std::numeric_limits<int>::max();
  Clock::duration backoff_ = kMinBackoff;
  Clock::time_point probe_at_{}, last_probe_{}, last_stall_{}, last_shrink_{};
};

}  // namespace tern::cpu
