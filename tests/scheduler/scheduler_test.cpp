// Scheduler: decodes before prefills, chunked prefill under the token budget, whole prefills
// when chunking is off, the sequence cap, and preemption of the newest when blocks run out.
#include "tern/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "tern/core/error.h"

namespace tern {
namespace {

struct Fixture {
  BlockManager blocks;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;

  Fixture(int64_t num_blocks, int block_size, SchedulerConfig config, bool caching = true)
      : blocks(num_blocks, block_size, caching), scheduler(config, blocks) {}

  Sequence* add(int prompt_len, int32_t first_token = 0) {
    auto s = std::make_unique<Sequence>();
    s->seq_id = static_cast<int64_t>(seqs.size());
    for (int i = 0; i < prompt_len; ++i) s->token_ids.push_back(first_token + i);
    s->num_prompt_tokens = prompt_len;
    scheduler.add(s.get());
    seqs.push_back(std::move(s));
    return seqs.back().get();
  }

  // Runs a step as the engine would: complete it and append a token to every sampled sequence.
  SchedulerStep run_step() {
    SchedulerStep step = scheduler.schedule();
    scheduler.complete(step);
    for (const auto& c : step.chunks)
      if (c.sample) c.seq->token_ids.push_back(7);
    return step;
  }
};

SchedulerConfig config(int32_t max_seqs, int64_t budget, bool chunked = true) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.enable_chunked_prefill = chunked;
  return c;
}

TEST(Scheduler, ChunksALongPromptAndPutsDecodesFirst) {
  Fixture f(64, 4, config(8, 10));
  Sequence* a = f.add(3);
  SchedulerStep s1 = f.run_step();
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_TRUE(s1.chunks[0].sample);
  Sequence* b = f.add(25, 100);
  SchedulerStep s2 = f.run_step();
  ASSERT_EQ(s2.chunks.size(), 2u);
  EXPECT_EQ(s2.chunks[0].seq, a);  // the decode first
  EXPECT_EQ(s2.chunks[0].num_tokens, 1);
  EXPECT_EQ(s2.chunks[1].seq, b);
  EXPECT_EQ(s2.chunks[1].num_tokens, 9);  // the rest of the budget
  EXPECT_FALSE(s2.chunks[1].sample);
  SchedulerStep s3 = f.run_step();
  EXPECT_EQ(s3.chunks[1].num_tokens, 9);
  SchedulerStep s4 = f.run_step();
  EXPECT_EQ(s4.chunks[1].num_tokens, 7);
  EXPECT_TRUE(s4.chunks[1].sample);
  EXPECT_EQ(b->num_computed_tokens, 25);
}

// A step's own budget (the engine's, sized by time) cuts the chunk, and never raises the cap.
TEST(Scheduler, AStepBudgetBelowTheCapCutsTheChunk) {
  Fixture f(64, 4, config(8, 10));
  Sequence* a = f.add(25);
  SchedulerStep s1 = f.scheduler.schedule(nullptr, 4);
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_EQ(s1.chunks[0].seq, a);
  EXPECT_EQ(s1.chunks[0].num_tokens, 4);
  f.scheduler.complete(s1);
  SchedulerStep s2 = f.scheduler.schedule(nullptr, 100);
  EXPECT_EQ(s2.chunks[0].num_tokens, 10);  // the cap
}

TEST(Scheduler, WithoutChunkingAPromptWaitsForRoomInTheBudget) {
  Fixture f(64, 4, config(8, 10, /*chunked=*/false));
  f.add(3);
  f.run_step();
  Sequence* b = f.add(10, 100);
  SchedulerStep s = f.run_step();
  ASSERT_EQ(s.chunks.size(), 1u);  // 1 decode + 10 > 10: b waits whole
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
}

TEST(Scheduler, CapsTheNumberOfSequences) {
  Fixture f(64, 4, config(2, 100));
  f.add(3);
  f.add(3, 10);
  f.add(3, 20);
  SchedulerStep s = f.run_step();
  EXPECT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(f.scheduler.num_waiting(), 1);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  // 4 blocks of 4 tokens. Two sequences of 7 tokens take 2 blocks each; decoding past 8 needs
  // a third block: the newer one is preempted to make room for the older.
  Fixture f(4, 4, config(8, 100), /*caching=*/false);
  Sequence* a = f.add(7);
  Sequence* b = f.add(7, 50);
  f.run_step();  // both prefilled, each sampled a token (8 tokens, 8 computed? no: 7)
  f.run_step();  // decode: token 8 computed, 9 tokens
  SchedulerStep s = f.run_step();  // a needs a third block
  ASSERT_EQ(s.preempted.size(), 1u);
  EXPECT_EQ(s.preempted[0], b);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(a->status, SequenceStatus::kRunning);
  // When a finishes, b is recomputed from its prompt and output.
  f.scheduler.remove(a);
  SchedulerStep r = f.run_step();
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_EQ(r.chunks[0].seq, b);
  EXPECT_EQ(r.chunks[0].num_tokens, 9);
}

TEST(Scheduler, PrefixCacheHitSkipsTheCachedBlocks) {
  Fixture f(64, 4, config(8, 100));
  Sequence* a = f.add(10);
  f.run_step();
  f.scheduler.remove(a);
  Sequence* b = f.add(10);
  SchedulerStep s = f.run_step();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].num_tokens, 2);  // 8 tokens from the cache
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(f.blocks.prefix_hits(), 8);
  EXPECT_EQ(f.blocks.prefix_queries(), 20);
}

TEST(Scheduler, DraftsTakeBudgetAndBlocksButNeverCostAPreemption) {
  Fixture f(6, 4, config(8, 16));
  Sequence* a = f.add(7);
  Sequence* b = f.add(7, 100);
  f.run_step();  // both prefilled, a token sampled: 8 tokens, 7 computed, 2 blocks each
  const auto wants = [&](const Sequence& s) -> int64_t { return &s == a ? 4 : 20; };
  const SchedulerStep step = f.scheduler.schedule(wants);
  ASSERT_EQ(step.chunks.size(), 2u);
  EXPECT_EQ(step.chunks[0].num_tokens, 5);  // a: its last token and 4 drafts
  EXPECT_EQ(step.chunks[0].num_draft_tokens, 4);
  EXPECT_TRUE(step.chunks[0].sample);
  // b asked for more drafts than the budget (10 left) and the blocks (1 free) hold: it decodes.
  EXPECT_EQ(step.chunks[1].seq, b);
  EXPECT_EQ(step.chunks[1].num_tokens, 1);
  EXPECT_EQ(step.chunks[1].num_draft_tokens, 0);
  EXPECT_TRUE(step.preempted.empty());
  EXPECT_EQ(a->block_table.size(), 3u);
  EXPECT_EQ(f.blocks.num_free_blocks(), 1);

  f.scheduler.complete(step);
  EXPECT_EQ(a->num_computed_tokens, 8);  // the drafts count once accepted
  a->token_ids.push_back(9);             // none accepted: the target's own token
  f.scheduler.accept_drafts(*a, 0);
  EXPECT_EQ(a->num_computed_tokens, 8);
  EXPECT_EQ(a->block_table.size(), 2u);  // the block of rejected drafts is given back
  EXPECT_EQ(f.blocks.num_free_blocks(), 2);
}

TEST(Scheduler, RejectsABadConfig) {
  BlockManager blocks(4, 4, true);
  EXPECT_THROW(Scheduler(config(0, 10), blocks), Error);
  EXPECT_THROW(Scheduler(config(1, 0), blocks), Error);
}

// Random arrivals, finishes and aborts on a tiny cache: every sequence eventually finishes
// (no deadlock, no starvation), and no block leaks.
TEST(Scheduler, TinyCacheRandomLoadAlwaysDrains) {
  std::mt19937 rng(99);
  Fixture f(12, 4, config(6, 16));
  std::map<Sequence*, int> target;  // tokens to generate
  int added = 0, finished = 0;
  for (int step = 0; step < 20000 && (added < 200 || !target.empty()); ++step) {
    if (added < 200 && rng() % 3 == 0) {
      Sequence* s = f.add(1 + static_cast<int>(rng() % 20), static_cast<int32_t>(rng() % 4) * 3);
      target[s] = 1 + static_cast<int>(rng() % 20);
      ++added;
    }
    SchedulerStep st = f.run_step();
    for (const auto& c : st.chunks) {
      Sequence* s = c.seq;
      if (!c.sample || !target.count(s)) continue;
      if (s->num_output_tokens() >= target[s] || rng() % 50 == 0) {  // done, or aborted
        f.scheduler.remove(s);
        target.erase(s);
        ++finished;
      }
    }
  }
  EXPECT_EQ(finished, 200);
  EXPECT_EQ(f.scheduler.num_running(), 0);
  EXPECT_EQ(f.scheduler.num_waiting(), 0);
  EXPECT_EQ(f.blocks.num_free_blocks(), 12);
  EXPECT_GT(f.scheduler.num_preemptions(), 0);
}

// The same load with speculation: decoding sequences ask for random drafts, a random number is
// accepted, forks share blocks. After every step each block's reference count is the number
// of live sequences holding it, and everything drains with no block leaked.
TEST(Scheduler, RandomLoadWithDraftsBalancesEveryBlock) {
  std::mt19937 rng(7);
  constexpr int64_t kBlocks = 16;
  Fixture f(kBlocks, 4, config(6, 24));
  std::map<Sequence*, int> target;
  int added = 0, finished = 0, verifies = 0;
  const auto drafts_wanted = [&](const Sequence&) { return static_cast<int64_t>(rng() % 6); };
  for (int step = 0; step < 20000 && (added < 300 || !target.empty()); ++step) {
    if (added < 300 && rng() % 3 == 0) {
      Sequence* s = f.add(1 + static_cast<int>(rng() % 20), static_cast<int32_t>(rng() % 4) * 3);
      target[s] = 1 + static_cast<int>(rng() % 30);
      ++added;
    }
    SchedulerStep st = f.scheduler.schedule(drafts_wanted);
    f.scheduler.complete(st);
    for (const auto& c : st.chunks) {
      Sequence* s = c.seq;
      if (!c.sample || !target.count(s)) continue;
      const int64_t accepted =
          c.num_draft_tokens > 0 ? static_cast<int64_t>(rng() % (c.num_draft_tokens + 1)) : 0;
      for (int64_t i = 0; i <= accepted; ++i) s->token_ids.push_back(7);
      if (c.num_draft_tokens > 0) {
        f.scheduler.accept_drafts(*s, accepted);
        ++verifies;
      }
      if (s->num_output_tokens() >= target[s] || rng() % 50 == 0) {
        f.scheduler.remove(s);
        target.erase(s);
        ++finished;
      } else if (rng() % 40 == 0 && f.blocks.num_free_blocks() > 0) {  // n > 1: a fork joins
        auto child = std::make_unique<Sequence>();
        child->seq_id = 1000 + static_cast<int64_t>(f.seqs.size());
        f.blocks.fork(*s, *child);
        f.scheduler.add_running(child.get(), s);
        target[child.get()] = target[s];
        f.seqs.push_back(std::move(child));
        ++added;
      }
    }
    std::vector<int32_t> held(kBlocks, 0);
    for (const auto& [s, left] : target)
      for (int32_t b : s->block_table) held[static_cast<size_t>(b)]++;
    int64_t free_blocks = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(f.blocks.ref_count(b), held[static_cast<size_t>(b)])
          << "block " << b << ", step " << step;
      free_blocks += held[static_cast<size_t>(b)] == 0;
    }
    ASSERT_EQ(f.blocks.num_free_blocks(), free_blocks);
    for (const auto& [s, left] : target) ASSERT_LT(s->num_computed_tokens, s->num_tokens());
  }
  EXPECT_EQ(finished, added);
  EXPECT_GT(verifies, 500);
  EXPECT_EQ(f.scheduler.num_running(), 0);
  EXPECT_EQ(f.blocks.num_free_blocks(), kBlocks);
  EXPECT_GT(f.scheduler.num_preemptions(), 0);
}

}  // namespace
}  // namespace tern
