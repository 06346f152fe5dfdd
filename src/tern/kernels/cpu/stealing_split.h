// How a memory-bound matmul shares its steps between threads. Equal static shares left the
// decode GEMV's two threads finishing on average 17% of a call apart (Qwen3-1.7B Q4_0: mean
// |difference| 34 µs of 205): the cores of a shared host do not read memory at the same speed
// from moment to moment, so whichever is slower decides the call. Here each thread walks its
// own share from the front, keeping its streams sequential, and a thread that has finished
// takes steps from the back of the share with the most left (same model: difference 10 µs,
// call 225 → 221 µs). Which thread computes a step never changes its bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "tern/kernels/cpu/thread_team.h"

namespace tern::cpu {

class StealingSplit {
 public:
  // Steps [t · per_thread, (t + 1) · per_thread) are thread t's, for t < threads; the `extra`
  // steps after them go to whoever asks first once its own are done. Steps < 2^32. Made before the
  // parallel region: a thread that never shows up (a smaller team) has its share taken by the
  // others.
  StealingSplit(int threads, int64_t per_thread, int64_t extra)
      : heap_(threads > kInlineThreads ? new Share[static_cast<size_t>(threads)] : nullptr),
        ranges_(heap_ ? heap_.get() : inline_),
        threads_(threads),
        owned_(threads * per_thread),
        extra_end_(threads * per_thread + extra),
        next_extra_(threads * per_thread) {
    for (int t = 0; t < threads; ++t)
      ranges_[t].bounds.store(pack(t * per_thread, (t + 1) * per_thread),
                              std::memory_order_relaxed);
  }

  // `steps` shared evenly by up to `threads` threads (never more threads than steps).
  static StealingSplit even(int threads, int64_t steps) {
    const int t = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, steps)));
    return StealingSplit(t, steps / t, steps % t);
  }
  int threads() const { return threads_; }

  // Steps [first, first + count) for `thread`: up to `want` consecutive ones from the front
  // of its own share while it lasts, then one at a time, the extras first; count 0 when every
  // step is taken. The calling thread's t_team_steps counts them.
  struct Range {
    int64_t first = 0;
    int count = 0;
  };
  Range next(int thread, int want = 1) {
    if (thread < threads_) {
      std::atomic<uint64_t>& own = ranges_[thread].bounds;
      uint64_t v = own.load(std::memory_order_relaxed);
      while (front(v) < back(v)) {
        const int64_t n = std::min<int64_t>(want, back(v) - front(v));
        if (own.compare_exchange_weak(v, pack(front(v) + n, back(v)), std::memory_order_relaxed)) {
          t_team_steps += n;
          return {front(v), static_cast<int>(n)};
        }
      }
    }
    if (next_extra_.load(std::memory_order_relaxed) < extra_end_) {
      const int64_t s = next_extra_.fetch_add(1, std::memory_order_relaxed);
      if (s < extra_end_) {
        ++t_team_steps;
        return {s, 1};
      }
    }
    for (;;) {  // steal from the back of the share with the most left
      int victim = -1;
      int64_t most = 0;
      for (int t = 0; t < threads_; ++t) {
        const uint64_t v = ranges_[t].bounds.load(std::memory_order_relaxed);
        if (back(v) - front(v) > most) most = back(v) - front(v), victim = t;
      }
      if (victim < 0) return {};
      std::atomic<uint64_t>& theirs = ranges_[victim].bounds;
      uint64_t v = theirs.load(std::memory_order_relaxed);
      while (front(v) < back(v))
        if (theirs.compare_exchange_weak(v, pack(front(v), back(v) - 1),
                                         std::memory_order_relaxed)) {
          ++t_team_steps;
          return {back(v) - 1, 1};
        }
    }
  }

  int64_t owned_steps() const { return owned_; }  // steps below this are shares', above extras

 private:
  // A share's steps not yet taken, [front, back), in one word so that its owner and a thief
  // never both take the last one.
  struct alignas(64) Share {
    std::atomic<uint64_t> bounds{0};
  };
  static uint64_t pack(int64_t f, int64_t b) {
    return static_cast<uint64_t>(b) << 32 | static_cast<uint32_t>(f);
  }
  static int64_t front(uint64_t v) { return static_cast<int64_t>(v & 0xffffffffu); }
  static int64_t back(uint64_t v) { return static_cast<int64_t>(v >> 32); }

  // Every decode matmul makes one: up to kInlineThreads without touching the heap.
  static constexpr int kInlineThreads = 16;
  Share inline_[kInlineThreads];
  std::unique_ptr<Share[]> heap_;
  Share* ranges_;
  int threads_;
  int64_t owned_, extra_end_;
  alignas(64) std::atomic<int64_t> next_extra_;
};

// body(step) for every step in [0, steps), shared by the team: each member walks its own
// contiguous share from the front (what schedule(static) gave: neighbouring steps on one
// thread), then takes single steps from the back of the share with the most left. Which member
// runs a step never changes what the step computes. `parallel` false: serially, in order.
template <class Body>
void parallel_for(int64_t steps, Body&& body, bool parallel = true) {
  if (!parallel || steps <= 1) {  // no worker could join: nothing for the team to weigh
    for (int64_t s = 0; s < steps; ++s) body(s);
    t_team_steps += steps;
    return;
  }
  const int threads = team_threads();
  if (threads <= 1) {  // still a job: its time alone is what a worker is weighed against
    run_team(1, [&](int) {
      for (int64_t s = 0; s < steps; ++s) body(s);
      t_team_steps += steps;
    });
    return;
  }
  StealingSplit split = StealingSplit::even(threads, steps);
  run_team(split.threads(), [&](int member) {
    for (StealingSplit::Range r; (r = split.next(member)).count > 0;) body(r.first);
  });
}

// The decode GEMVs' schedule: `items` (rows, or groups of rows) shared by the team. A thread
// cuts its share into kStreams streams and reads them in step, item i of every stream at once
// — read(at, kStreams), at[s] the item of stream s — because the hardware prefetcher keeps
// more lines in flight for several streams than for one (matmul.cpp); `member` is the team
// member reading (0 .. max_team_threads() - 1). Done with its own, it
// takes the items past the streams, then single items from the back of the share with the
// most left — read(at, n) with n < kStreams, each item alone — so that the threads finish
// at most one item apart rather than one step of kStreams items.
template <int kStreams, class Read>
void read_in_streams(int64_t items, Read read) {
  const int threads = team_threads();
  const int64_t stream_len = items / (threads * kStreams),
                in_streams = threads * kStreams * stream_len;
  // Within a share, step j is item j / kStreams of stream j % kStreams.
  StealingSplit split(threads, kStreams * stream_len, items - in_streams);
  auto item_of = [=](int64_t step) {
    if (step >= in_streams) return step;  // the extras, numbered after the shares
    const int64_t share = step / (kStreams * stream_len), j = step % (kStreams * stream_len);
    return (share * kStreams + j % kStreams) * stream_len + j / kStreams;
  };
  run_team(threads, [&](int member) {
    for (StealingSplit::Range r; (r = split.next(member, kStreams)).count > 0;) {
      int64_t at[kStreams];
      for (int j = 0; j < r.count; ++j) at[j] = item_of(r.first + j);
      read(at, r.count, member);
    }
  });
}

}  // namespace tern::cpu
