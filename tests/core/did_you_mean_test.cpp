#include "tern/core/did_you_mean.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(DidYouMean, TyposFindTheirName) {
  const std::vector<std::string> flags = {"--max-model-len", "--max-num-seqs", "--max-tokens",
                                          "--temperature", "--port"};
  EXPECT_EQ(closest_name("--max-model-length", flags), "--max-model-len");
  EXPECT_EQ(closest_name("--max-num-seq", flags), "--max-num-seqs");
  EXPECT_EQ(closest_name("--tempreature", flags), "--temperature");  // a swap is one edit
  EXPECT_EQ(closest_name("--prot", flags), "--port");
  EXPECT_EQ(did_you_mean("--max-token", flags), " (did you mean '--max-tokens'?)");
}

TEST(DidYouMean, NothingNearIsNoGuess) {
  const std::vector<std::string> names = {"max_tokens", "n", "seed"};
  EXPECT_EQ(closest_name("logit_bias", names), "");
  EXPECT_EQ(closest_name("x", names), "");  // one edit from "n", but that is the whole name
  EXPECT_EQ(did_you_mean("best_of", names), "");
  EXPECT_EQ(closest_name("anything", {}), "");
}

}  // namespace
}  // namespace tern
