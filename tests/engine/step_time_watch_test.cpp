// StepTimeWatch: a step is compared with the fastest its shape (tokens, context) ran before;
// the first run of a shape, or a shape much longer in context, is not.
#include "tern/engine/step_time_watch.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(StepTimeWatch, ComparesEachStepWithTheFastestOfItsShapeBefore) {
  StepTimeWatch w;
  w.record(1, 100, 0.004);  // first of its shape: paging weights in, say
  EXPECT_EQ(w.times().steps, 0);
  w.record(1, 101, 0.001);  // the same bucket
  w.record(1, 102, 0.002);
  EXPECT_EQ(w.times().steps, 2);
  EXPECT_DOUBLE_EQ(w.times().seconds, 0.003);
  EXPECT_DOUBLE_EQ(w.times().reference_seconds, 0.004 + 0.001);
  // Another shape: a batch of 8, or the same token at 8x the context, is new.
  w.record(8, 100, 0.010);
  w.record(1, 800, 0.010);
  EXPECT_EQ(w.times().steps, 2);
  // Contended: 30x the fastest of the shape.
  w.record(1, 103, 0.030);
  EXPECT_EQ(w.times().steps, 3);
  EXPECT_DOUBLE_EQ(w.times().reference_seconds, 0.005 + 0.001);
  EXPECT_DOUBLE_EQ(w.times().seconds, 0.033);
}

TEST(StepTimeWatch, BucketsOfSmallCountsAreExact) {
  StepTimeWatch w;
  w.record(3, 10, 0.001);
  w.record(4, 10, 0.001);  // 4 tokens are not 3
  w.record(3, 11, 0.001);  // 11 tokens of context are not 10
  EXPECT_EQ(w.times().steps, 0);
  w.record(3, 10, 0.002);
  EXPECT_EQ(w.times().steps, 1);
}

}  // namespace
}  // namespace tern
