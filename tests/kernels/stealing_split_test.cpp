#include "tern/kernels/cpu/stealing_split.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

namespace tern::cpu {
namespace {

// Every step is handed out exactly once, whoever asks, including when fewer threads than
// planned show up (their shares are taken by the others).
TEST(StealingSplit, EveryStepOnce) {
  for (int planned : {1, 2, 3, 4}) {
    for (int present : {1, 2, 3, 4}) {
      if (present > planned) continue;
      for (int64_t per_thread : {0, 1, 5, 64}) {
        for (int64_t extra : {0, 3}) {
          StealingSplit split(planned, per_thread, extra);
          const int64_t total = planned * per_thread + extra;
          std::vector<std::atomic<int>> taken(static_cast<size_t>(total));
          std::atomic<int> out_of_range{0};
#pragma omp parallel num_threads(present)
          for (int64_t s; (s = split.next(omp_get_thread_num())) >= 0;) {
            if (s < total) {
              taken[static_cast<size_t>(s)].fetch_add(1);
            } else {
              out_of_range.fetch_add(1);
            }
          }
          EXPECT_EQ(out_of_range.load(), 0);
          for (int64_t s = 0; s < total; ++s)
            EXPECT_EQ(taken[static_cast<size_t>(s)].load(), 1)
                << "step " << s << " planned " << planned << " present " << present;
          EXPECT_EQ(split.owned_steps(), planned * per_thread);
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
    for (int64_t s; (s = split.next(t)) >= 0;) ++taken[static_cast<size_t>(s)];
  for (int c : taken) EXPECT_EQ(c, 1);
}

// A thread takes its own share from the front, in order, before anything else.
TEST(StealingSplit, OwnShareFirstInOrder) {
  StealingSplit split(3, 4, 2);
  for (int64_t s = 4; s < 8; ++s) EXPECT_EQ(split.next(1), s);
  EXPECT_EQ(split.next(1), 12);  // then the extras
  EXPECT_EQ(split.next(1), 13);
  EXPECT_EQ(split.next(1), 3);  // then the back of a share with the most left (thread 0's)
  EXPECT_EQ(split.next(0), 0);  // thread 0 still starts at its front
}

}  // namespace
}  // namespace tern::cpu
