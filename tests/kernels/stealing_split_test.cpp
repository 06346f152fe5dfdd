#include "tern/kernels/cpu/stealing_split.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

namespace tern::cpu {
namespace {

// Every step is handed out exactly once, whoever asks and for however many at a time,
// including when fewer threads than planned show up (their shares are taken by the others).
TEST(StealingSplit, EveryStepOnce) {
  for (int planned : {1, 2, 3, 4}) {
    for (int present : {1, 2, 3, 4}) {
      if (present > planned) continue;
      for (int64_t per_thread : {0, 1, 5, 64}) {
        for (int64_t extra : {0, 3}) {
          for (int want : {1, 4}) {
            StealingSplit split(planned, per_thread, extra);
            const int64_t total = planned * per_thread + extra;
            std::vector<std::atomic<int>> taken(static_cast<size_t>(total));
            std::atomic<int> out_of_range{0}, too_many{0};
#pragma omp parallel num_threads(present)
            for (StealingSplit::Range r; (r = split.next(omp_get_thread_num(), want)).count > 0;) {
              if (r.count > want) too_many.fetch_add(1);
              for (int64_t s = r.first; s < r.first + r.count; ++s) {
                if (s < total) {
                  taken[static_cast<size_t>(s)].fetch_add(1);
                } else {
                  out_of_range.fetch_add(1);
                }
              }
            }
            EXPECT_EQ(out_of_range.load(), 0);
            EXPECT_EQ(too_many.load(), 0);
            for (int64_t s = 0; s < total; ++s)
              EXPECT_EQ(taken[static_cast<size_t>(s)].load(), 1)
                  << "step " << s << " planned " << planned << " present " << present << " want "
                  << want;
            EXPECT_EQ(split.owned_steps(), planned * per_thread);
          }
        }
      }
    }
  }
}

// More threads than the split keeps inline: the same, from the heap.
TEST(StealingSplit, ManyThreads) {
  StealingSplit split(40, 3, 5);
  std::vector<int> taken(125);
  for (int t = 0; t < 40; ++t)
    for (StealingSplit::Range r; (r = split.next(t)).count > 0;)
      ++taken[static_cast<size_t>(r.first)];
  for (int c : taken) EXPECT_EQ(c, 1);
}

// A thread takes its own share from the front, in order, before anything else.
TEST(StealingSplit, OwnShareFirstInOrder) {
  StealingSplit split(3, 4, 2);
  for (int64_t s = 4; s < 8; ++s) EXPECT_EQ(split.next(1).first, s);
  EXPECT_EQ(split.next(1).first, 12);  // then the extras
  EXPECT_EQ(split.next(1).first, 13);
  EXPECT_EQ(split.next(1).first, 3);  // then the back of a share with the most left (thread 0's)
  EXPECT_EQ(split.next(0).first, 0);  // thread 0 still starts at its front
}

// Runs of up to `want` from the own front; a thief takes one step from the back, so the owner's
// last run is what is left.
TEST(StealingSplit, RunsFromTheFrontSingleStepsStolen) {
  StealingSplit split(2, 8, 0);
  auto is = [](StealingSplit::Range r, int64_t first, int count) {
    return r.first == first && r.count == count;
  };
  EXPECT_TRUE(is(split.next(0, 4), 0, 4));
  EXPECT_TRUE(is(split.next(1, 4), 8, 4));
  EXPECT_TRUE(is(split.next(1, 4), 12, 4));
  EXPECT_TRUE(is(split.next(1, 4), 7, 1));  // thread 1 is done: thread 0's last step
  EXPECT_TRUE(is(split.next(0, 4), 4, 3));
  EXPECT_EQ(split.next(0, 4).count, 0);
}

// read_in_streams reads every item once; a full step is item i of each of a share's streams.
TEST(StealingSplit, ReadInStreamsEveryItemOnceStreamsInStep) {
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    for (int64_t items : {0, 5, 37, 64, 301}) {
      omp_set_num_threads(threads);
      std::vector<std::atomic<int>> taken(static_cast<size_t>(items));
      std::atomic<int> bad_steps{0}, bad_members{0};
      // The split is planned for the members the team admits now (a first window runs alone).
      const int64_t stream_len = items / (team_threads() * 4);
      read_in_streams<4>(items, [&](const int64_t* at, int count, int member) {
        bad_members += member < 0 || member >= threads;
        for (int s = 0; s < count; ++s) taken[static_cast<size_t>(at[s])].fetch_add(1);
        if (count == 4)
          for (int s = 1; s < 4; ++s) bad_steps += at[s] - at[s - 1] != stream_len;
      });
      EXPECT_EQ(bad_steps.load(), 0) << items << " items, " << threads << " threads";
      EXPECT_EQ(bad_members.load(), 0);
      for (int64_t i = 0; i < items; ++i)
        EXPECT_EQ(taken[static_cast<size_t>(i)].load(), 1)
            << "item " << i << " of " << items << ", " << threads << " threads";
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace tern::cpu
