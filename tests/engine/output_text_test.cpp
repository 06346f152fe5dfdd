// CompletionText on real tokenizers: stop strings inside one token and across two, three and
// more, the streamed deltas never showing text that is later cut, include_stop_str_in_output,
// several stop strings, min_tokens, and UTF-8 characters split over tokens.
#include "tern/engine/output_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "shared_tokenizer.h"
#include "tern/core/utf8.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

const Tokenizer& qwen() {
  static const Tokenizer t = testing::shared_tokenizer("qwen-tokenizer");
  return t;
}

const Tokenizer& llama2() {
  static const Tokenizer t = Tokenizer::load(testing::fixture("llama2-tokenizer/tokenizer.model"));
  return t;
}

// The text a completion of `ids` shows without stop strings.
std::string plain_text(const Tokenizer& t, const Ids& ids) {
  IncrementalDetokenizer d(t, true, /*at_text_start=*/false);
  std::string s;
  for (int32_t id : ids) d.push(id, s);
  d.flush(s);
  return s;
}

struct Streamed {
  std::string text;      // CompletionText::text() at the end
  std::string streamed;  // every delta, then finish()
  std::optional<std::string> stop;
  size_t stop_token = 0;  // index of the token whose append reported the stop
};

// Appends `ids` until a stop, checking at every step that what was streamed is a prefix of the
// final text (nothing shown is cut later) and valid UTF-8.
Streamed stream(const Tokenizer& t, const SamplingParams& p, const Ids& ids) {
  CompletionText c(t, p);
  std::vector<std::string> snapshots;
  Streamed r;
  for (size_t i = 0; i < ids.size() && !r.stop; ++i) {
    CompletionText::Update u = c.append(ids[i]);
    EXPECT_TRUE(is_valid_utf8(u.delta)) << "delta after token " << i;
    r.streamed += u.delta;
    snapshots.push_back(r.streamed);
    if (u.stop_string) {
      r.stop = u.stop_string;
      r.stop_token = i;
      EXPECT_TRUE(c.stopped());
      EXPECT_EQ(c.append(ids[i]).delta, "") << "nothing is added after a stop";
    }
  }
  r.streamed += c.finish();
  r.text = c.text();
  EXPECT_EQ(r.streamed, r.text);
  for (const std::string& s : snapshots)
    EXPECT_EQ(r.text.rfind(s, 0), 0u) << "streamed \"" << s << "\" was cut";
  return r;
}

SamplingParams with_stop(std::vector<std::string> stop, bool include = false) {
  SamplingParams p;
  p.stop = std::move(stop);
  p.include_stop_str_in_output = include;
  return p;
}

// The index of the token in which byte `offset` of the plain text of `ids` ends up.
size_t token_of_byte(const Tokenizer& t, const Ids& ids, size_t offset) {
  IncrementalDetokenizer d(t, true, false);
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    d.push(ids[i], s);
    if (s.size() > offset) return i;
  }
  return ids.size();
}

TEST(CompletionText, NoStopStringsStreamsEverything) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Ids ids = qwen().encode("Hello world. The end.", false);
  const Streamed r = stream(qwen(), SamplingParams{}, ids);
  EXPECT_FALSE(r.stop);
  EXPECT_EQ(r.text, "Hello world. The end.");
}

TEST(CompletionText, StopStringInsideOneToken) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Ids ids = qwen().encode("Hello world. The end.", false);
  ASSERT_EQ(qwen().decode(Ids{ids[0]}), "Hello");
  const Streamed r = stream(qwen(), with_stop({"ell"}), ids);
  EXPECT_EQ(r.stop, "ell");
  EXPECT_EQ(r.stop_token, 0u);
  EXPECT_EQ(r.text, "H");
}

TEST(CompletionText, StopStringAcrossTwoThreeAndMoreTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const std::string text = "Hello world. The end is near, said the cat.";
  const Ids ids = qwen().encode(text, false);
  ASSERT_EQ(plain_text(qwen(), ids), text);
  for (const std::string stop : {"lo wor", "world. T", "o world. The end", "cat."}) {
    const size_t at = text.find(stop);
    const size_t first = token_of_byte(qwen(), ids, at);
    const size_t last = token_of_byte(qwen(), ids, at + stop.size() - 1);
    const Streamed r = stream(qwen(), with_stop({stop}), ids);
    EXPECT_EQ(r.stop, stop);
    EXPECT_EQ(r.stop_token, last) << stop;
    EXPECT_EQ(r.text, text.substr(0, at)) << stop;
    if (stop == "world. T") {
      EXPECT_GE(last - first, 2u) << "spans three tokens";
    }
    if (stop == "o world. The end") {
      EXPECT_GE(last - first, 3u);
    }
  }
}

TEST(CompletionText, HeldBackTextIsReleasedWhenNoStopFollows) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Ids ids = qwen().encode("Hello world", false);
  CompletionText c(qwen(), with_stop({"world peace", "xyz"}));
  EXPECT_EQ(c.append(ids[0]).delta, "Hello");
  // " world" may still become "world peace": the "world" is held, the space goes out.
  EXPECT_EQ(c.append(ids[1]).delta, " ");
  EXPECT_EQ(c.text(), "Hello world");
  EXPECT_EQ(c.finish(), "world");
  EXPECT_EQ(c.finish(), "");
}

TEST(CompletionText, IncludeStopStringKeepsItAndHoldsNothingBack) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const std::string text = "Hello world. The end.";
  const Ids ids = qwen().encode(text, false);
  CompletionText c(qwen(), with_stop({"world. T"}, true));
  std::string streamed;
  for (int32_t id : ids) {
    const CompletionText::Update u = c.append(id);
    streamed += u.delta;
    EXPECT_EQ(streamed, c.text()) << "nothing held back";
    if (u.stop_string) break;
  }
  EXPECT_EQ(c.text(), "Hello world. T");
  const Streamed r = stream(qwen(), with_stop({"world. T"}, true), ids);
  EXPECT_EQ(r.text, "Hello world. T");
  // A stop string that ends inside a token cuts that token's rest.
  EXPECT_EQ(stream(qwen(), with_stop({"ell"}, true), ids).text, "Hell");
}

TEST(CompletionText, TheEarliestOfSeveralStopStringsWins) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Ids ids = qwen().encode("Hello world. The end.", false);
  // Both end in the first token; "el" starts first although it is listed second.
  Streamed r = stream(qwen(), with_stop({"lo", "el"}), ids);
  EXPECT_EQ(r.stop, "el");
  EXPECT_EQ(r.text, "H");
  r = stream(qwen(), with_stop({"end", "The", "zzz"}), ids);
  EXPECT_EQ(r.stop, "The");
  EXPECT_EQ(r.text, "Hello world. ");
}

TEST(CompletionText, StopStringsAreIgnoredWithinMinTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Ids ids = qwen().encode("Hello world. Hello again.", false);
  SamplingParams p = with_stop({"Hello"});
  p.min_tokens = 1;
  const Streamed r = stream(qwen(), p, ids);
  EXPECT_EQ(r.stop, "Hello");
  EXPECT_EQ(r.text, "Hello world. ");
  p.min_tokens = 0;
  EXPECT_EQ(stream(qwen(), p, ids).text, "");
}

TEST(CompletionText, SpecialTokensFollowSkipSpecialTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const int32_t end_of_text = qwen().encode("<|endoftext|>", false)[0];
  ASSERT_TRUE(qwen().is_special(end_of_text));
  SamplingParams p;
  CompletionText skip(qwen(), p);
  EXPECT_EQ(skip.append(end_of_text).delta, "");
  p.skip_special_tokens = false;
  CompletionText show(qwen(), p);
  EXPECT_EQ(show.append(end_of_text).delta, "<|endoftext|>");
}

TEST(CompletionText, Utf8SplitOverByteLevelTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const std::string rare = "\xF0\xAA\x9A\xA5";  // U+2A6A5: three byte-level tokens in Qwen
  const std::string text = "a" + rare + "b" + rare + " llama";
  const Ids ids = qwen().encode(text, false);
  ASSERT_EQ(ids.size(), 9u);  // a, 3, b, 3, " llama"
  EXPECT_EQ(stream(qwen(), with_stop({rare}), ids).text, "a");
  EXPECT_EQ(stream(qwen(), with_stop({"b" + rare}), ids).text, "a" + rare);
  EXPECT_EQ(stream(qwen(), with_stop({rare + " ll"}, true), ids).text,
            "a" + rare + "b" + rare + " ll");
  // A stop prefix that ends in a split character: deltas stay whole characters.
  EXPECT_EQ(stream(qwen(), with_stop({"b" + rare + "X"}), ids).text, text);
}

TEST(CompletionText, Utf8SplitOverByteFallbackTokens) {
  TERN_REQUIRE_FIXTURE("llama2-tokenizer/tokenizer.model");
  const std::string llama = "\xF0\x9F\xA6\x99";
  const Ids ids = llama2().encode("Hello " + llama + " llama " + llama + "!", false);
  const std::string text = plain_text(llama2(), ids);
  ASSERT_EQ(text, " Hello " + llama + " llama " + llama + "!");  // the dummy prefix is real here
  EXPECT_EQ(stream(llama2(), with_stop({" llama"}), ids).text, " Hello " + llama);
  EXPECT_EQ(stream(llama2(), with_stop({llama + "!"}), ids).text, " Hello " + llama + " llama ");
  // Cut off in the middle of the character: finish() shows U+FFFD for the unfinished bytes.
  size_t first_byte = 0;  // the first token of the character: the detokenizer holds its byte
  IncrementalDetokenizer d(llama2(), true, false);
  while (d.push(ids[first_byte]), d.held_bytes() == 0) ++first_byte;
  CompletionText c(llama2(), SamplingParams{});
  std::string streamed;
  for (size_t i = 0; i <= first_byte + 1; ++i) streamed += c.append(ids[i]).delta;
  EXPECT_EQ(streamed, " Hello ");
  EXPECT_EQ(c.finish(), std::string(kReplacementChar));
}

}  // namespace
}  // namespace tern
