// Streaming decode: chunks concatenate to decode(all ids), and no chunk is invalid UTF-8,
// including emoji and CJK split over byte-fallback and byte-level tokens.
#include "tern/tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "shared_tokenizer.h"
#include "tern/core/error.h"
#include "tern/core/utf8.h"
#include "tokenizer/llama_cpp_vectors.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

// Streams `ids`, checking each chunk; returns the concatenation.
std::string stream(const Tokenizer& t, const Ids& ids, bool skip_special = true,
                   size_t* max_held = nullptr) {
  IncrementalDetokenizer detok(t, skip_special);
  std::string all;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    EXPECT_TRUE(is_valid_utf8(chunk)) << "chunk after id " << id;
    EXPECT_LE(detok.held_bytes(), 3u);
    if (max_held) *max_held = std::max(*max_held, detok.held_bytes());
    all += chunk;
  }
  const std::string tail = detok.flush();
  EXPECT_TRUE(is_valid_utf8(tail));
  EXPECT_EQ(detok.held_bytes(), 0u);
  return all + tail;
}

const char* const kMixed[] = {
    "Hello \xF0\x9F\xA6\x99 llama",                      // 🦙
    "\xE4\xB8\x96\xE7\x95\x8C\xE4\xBD\xA0\xE5\xA5\xBD",  // 世界你好
    "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family",  // 👨‍👩‍👧
    " leading space and \xE1\x9E\x80\xE1\x9E\xB6 Khmer",
    "\xF0\x9F\x98\x80\xF0\x9F\x98\x81\xF0\x9F\x98\x82",
};

void check_vector_strings(const Tokenizer& t, const std::string& vector_name) {
  const std::string base = "llama.cpp-vocab/ggml-vocab-" + vector_name + ".gguf";
  const auto vectors = testing::read_llama_cpp_vectors(testing::fixture(base + ".inp"),
                                                       testing::fixture(base + ".out"));
  for (const auto& v : vectors) {
    const Ids ids = t.encode(v.text);
    EXPECT_EQ(stream(t, ids), t.decode(ids)) << v.text;
    EXPECT_EQ(stream(t, ids, false), t.decode(ids, false)) << v.text;
  }
  size_t max_held = 0;
  for (const char* s : kMixed) {
    const Ids ids = t.encode(s);
    EXPECT_EQ(stream(t, ids, true, &max_held), t.decode(ids)) << s;
    EXPECT_EQ(t.decode(ids), s);
  }
  EXPECT_GE(max_held, 1u) << "some character should have been held back over tokens";
}

TEST(IncrementalDetokenizer, SentencePieceVectorsAndEmoji) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  check_vector_strings(
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf")), "llama-spm");
}

TEST(IncrementalDetokenizer, QwenVectorsAndEmoji) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  check_vector_strings(testing::shared_tokenizer("qwen-tokenizer"), "qwen2");
}

TEST(IncrementalDetokenizer, Gpt2VectorsAndEmoji) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  check_vector_strings(Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-gpt-2.gguf")),
                       "gpt-2");
}

TEST(IncrementalDetokenizer, HoldsSplitCharacterUntilComplete) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer t =
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  // <s> ▁Hello ▁ <0xF0> <0x9F> <0xA6> <0x99>: "Hello 🦙"
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(1), "");
  EXPECT_EQ(d.push(15043), "Hello");
  EXPECT_EQ(d.push(29871), " ");
  EXPECT_EQ(d.push(243), "");
  EXPECT_EQ(d.push(162), "");
  EXPECT_EQ(d.push(169), "");
  EXPECT_EQ(d.held_bytes(), 3u);
  EXPECT_EQ(d.push(156), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.flush(), "");
}

TEST(IncrementalDetokenizer, InvalidAndUnfinishedBytesBecomeReplacementChars) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer t =
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  IncrementalDetokenizer d(t);
  EXPECT_EQ(d.push(0xFF + 3), "\xEF\xBF\xBD");  // <0xFF> can never start a character
  EXPECT_EQ(d.push(0xF0 + 3), "");              // held
  EXPECT_EQ(d.push(0x41 + 3),
            "\xEF\xBF\xBD"
            "A");  // <0x41> ends it: F0 was ill-formed
  EXPECT_EQ(d.push(0xE4 + 3), "");
  EXPECT_EQ(d.push(0xB8 + 3), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");  // the stream ended inside a character
  EXPECT_THROW(d.push(32000), Error);
}

TEST(IncrementalDetokenizer, LeadingSpaceRule) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer t =
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  IncrementalDetokenizer start(t);
  EXPECT_EQ(start.push(15043), "Hello");
  EXPECT_EQ(start.push(15043), " Hello");
  // Continuing after a prompt: the first token's space is real text.
  IncrementalDetokenizer continuing(t, true, /*at_text_start=*/false);
  EXPECT_EQ(continuing.push(15043), " Hello");
  // Shown special tokens: the space encode added after them is removed, as decode does.
  IncrementalDetokenizer shown(t, /*skip_special_tokens=*/false);
  EXPECT_EQ(shown.push(1), "<s>");
  EXPECT_EQ(shown.push(15043), "Hello");
  EXPECT_EQ(shown.push(2), "</s>");
}

}  // namespace
}  // namespace tern
