// StepBatch: which rows ask for logits, per sequence.
#include "tern/models/step_context.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern {
namespace {

TEST(StepBatch, LogitRowsFromAnIndexOn) {
  StepBatch batch(2, 4);
  const std::vector<int32_t> a = {5, 6, 7, 8, 9}, b = {1, 2, 3};
  const std::vector<int32_t> blocks_a = {0, 1}, blocks_b = {2, 3};
  batch.add_sequence_logits_from(a, 0, blocks_a, 3);  // rows 3, 4
  batch.add_sequence_logits_from(b, 4, blocks_b, 0);  // rows 5, 6, 7
  batch.add_sequence_logits_from(b, 0, blocks_b, 9);  // none
  batch.add_sequence(b, 0, blocks_b, true);           // the last: row 13
  batch.add_sequence(b, 0, blocks_b, false);          // none
  const StepContext ctx = batch.context();
  EXPECT_EQ(std::vector<int32_t>(ctx.logit_rows.begin(), ctx.logit_rows.end()),
            (std::vector<int32_t>{3, 4, 5, 6, 7, 13}));
  EXPECT_EQ(ctx.positions[5], 4);
  EXPECT_EQ(ctx.slot_mapping[5], 3 * 4);  // position 4 of b: its second block (3), offset 0
}

}  // namespace
}  // namespace tern
