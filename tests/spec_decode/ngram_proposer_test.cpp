// N-gram prompt lookup: the longest suffix first, its latest earlier occurrence, the tokens
// that followed it cut at k and at the end of the sequence.
#include "tern/spec_decode/ngram_proposer.h"

#include <gtest/gtest.h>

#include <vector>

namespace tern {
namespace {

std::vector<int32_t> lookup(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n,
                            int32_t k) {
  std::vector<int32_t> out = {99};  // overwritten
  ngram_lookup(tokens, min_n, max_n, k, out);
  return out;
}

TEST(NgramLookup, LongestSuffixWinsOverAShorterLaterMatch) {
  // Suffix [1 2 3] occurred at 0 (followed by 4 5); [2 3] alone also at 7 (followed by 9).
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 0, 0, 2, 3, 9, 1, 2, 3};
  EXPECT_EQ(lookup(t, 1, 3, 2), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(lookup(t, 1, 2, 2), (std::vector<int32_t>{9, 1}));  // max 2: the latest [2 3]
}

TEST(NgramLookup, LatestOccurrenceAndCutAtTheEnd) {
  const std::vector<int32_t> t = {7, 8, 1, 7, 8, 2, 7, 8};
  EXPECT_EQ(lookup(t, 2, 2, 3), (std::vector<int32_t>{2, 7, 8}));  // after the second [7 8]
  // A match whose continuation runs into the suffix itself is cut at the sequence's end.
  const std::vector<int32_t> r = {5, 5, 5};
  EXPECT_EQ(lookup(r, 1, 2, 4), (std::vector<int32_t>{5}));
}

TEST(NgramLookup, NothingBelowTheMinimumOrWithoutAnEarlierOccurrence) {
  const std::vector<int32_t> t = {1, 2, 3, 4, 1};
  EXPECT_EQ(lookup(t, 1, 3, 2), (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(lookup(t, 2, 3, 2).empty());  // [4 1] never occurred before
  EXPECT_TRUE(lookup({1}, 1, 3, 2).empty());
  EXPECT_TRUE(lookup(t, 1, 3, 0).empty());
}

TEST(NgramProposer, KeepsItsMatchAndCutsItToTheScheduledCount) {
  NgramProposer p(1, 3, 100);
  Sequence s;
  s.token_ids = {1, 2, 3, 4, 5, 1, 2};
  p.prepare(s, 4);
  EXPECT_EQ(p.max_drafts(s, 4), 4);  // [5 1 2] never occurred; [1 2] did, followed by 3 4 5 1
  EXPECT_EQ(s.draft_token_ids, (std::vector<int32_t>{3, 4, 5, 1}));
  const DraftRequest r{&s, nullptr, 2};
  p.propose(std::span<const DraftRequest>(&r, 1), {});
  EXPECT_EQ(s.draft_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(p.draft_probs(0).empty());  // point masses
}

}  // namespace
}  // namespace tern
