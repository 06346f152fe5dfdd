// Tokenizer: loading from every source, special and added tokens, bos/eos, decode rules and
// errors. The llama.cpp vector sets are in llama_cpp_vectors_test.cpp.
#include "tern/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/gguf.h"
#include "tern/tokenizer/hf_tokenizer_files.h"

namespace tern {
namespace {

using Ids = std::vector<int32_t>;

std::string load_error(const std::string& path) {
  try {
    Tokenizer::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string gguf_error(const GgufWriter& w) {
  auto bytes = w.to_bytes();
  try {
    Tokenizer::from_gguf(
        GgufFile::parse(std::make_shared<MappedFile>("bad.gguf", std::move(bytes))));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* const kStories[] = {
    "Once upon a time, there was a little girl named Lily.",
    "She loved to play outside in the park with her big red ball.",
    "One day, Tom said: \"Let's go to the sea!\" and they were very happy.",
    "The cat was 3 years old. It liked fish, milk and naps",
};

TEST(Tokenizer, Stories260KGgufAndTok512ModelAgree) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  const Tokenizer gguf = Tokenizer::load(testing::fixture("stories260K/stories260K.gguf"));
  const Tokenizer model = Tokenizer::load(testing::fixture("tok512/tok512.model"));
  for (const Tokenizer* t : {&gguf, &model}) {
    EXPECT_EQ(t->kind(), TokenizerKind::SentencePieceBpe);
    EXPECT_EQ(t->vocab_size(), 512);
    EXPECT_EQ(t->bos_id(), 1);
    EXPECT_EQ(t->eos_id(), 2);
    EXPECT_EQ(t->unk_id(), 0);
    EXPECT_TRUE(t->add_bos());
    EXPECT_FALSE(t->add_eos());
    EXPECT_EQ(t->eos_ids(), Ids{2});
    EXPECT_TRUE(t->chat_template().empty());
  }
  EXPECT_EQ(gguf.encode(kStories[0]),
            (Ids{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}));
  for (const char* s : kStories) {
    const Ids ids = gguf.encode(s);
    EXPECT_EQ(ids, model.encode(s)) << s;
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(gguf.decode(ids), s);
    EXPECT_EQ(model.decode(ids), s);
  }
  EXPECT_EQ(gguf.encode(kStories[0], false), model.encode(kStories[0], false));
  EXPECT_NE(gguf.encode(kStories[0], false).front(), 1);
}

TEST(Tokenizer, Tok512CollapsesExtraWhitespaceLikeSentencePiece) {
  // tok512.model sets normalizer_spec.remove_extra_whitespaces; GGUF files do not carry that
  // option (llama.cpp never applies it), so only the .model tokenizer collapses spaces.
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  const Tokenizer gguf = Tokenizer::load(testing::fixture("stories260K/stories260K.gguf"));
  const Tokenizer model = Tokenizer::load(testing::fixture("tok512/tok512.model"));
  EXPECT_EQ(model.encode("  Lily  went ", false), model.encode("Lily went", false));
  // The one normalisation decode cannot undo for SentencePiece models that ask for it.
  EXPECT_EQ(model.decode(model.encode("  Lily  went ")), "Lily went");
  EXPECT_EQ(gguf.encode("Lily  went", false), (Ids{317, 410, 263, 377}));
  EXPECT_EQ(gguf.decode(Ids{317, 410, 263, 377}), "Lily  went");
}

TEST(Tokenizer, SentencePieceSpecialTokens) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer t =
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(t.vocab_size(), 32000);
  EXPECT_TRUE(t.is_special(0));
  EXPECT_TRUE(t.is_special(1));
  EXPECT_TRUE(t.is_special(2));
  EXPECT_FALSE(t.is_special(13));
  EXPECT_FALSE(t.is_special(-1));
  // A special token is matched in the text; the text after it gets its own dummy prefix.
  EXPECT_EQ(t.encode("<s>Hello</s>", false), (Ids{1, 15043, 2}));
  EXPECT_EQ(t.encode("<s>Hello</s>"), (Ids{1, 1, 15043, 2}));
  const Ids literal = t.encode("<s>Hello</s>", false, /*parse_special=*/false);
  EXPECT_EQ(literal, (Ids{529, 29879, 29958, 10994, 829, 29879, 29958}));
  EXPECT_EQ(t.decode(literal), "<s>Hello</s>");
  EXPECT_EQ(t.decode(Ids{1, 15043, 2}), "Hello");
  EXPECT_EQ(t.decode(Ids{1, 15043, 2}, /*skip_special_tokens=*/false), "<s>Hello</s>");
  EXPECT_EQ(t.decode(Ids{1, 15043, 2, 1, 15043}, false), "<s>Hello</s><s>Hello");
  // Only the text's first space is the dummy prefix.
  EXPECT_EQ(t.decode(Ids{15043, 15043}), "Hello Hello");
  EXPECT_EQ(t.encode(""), Ids{1});
  EXPECT_EQ(t.encode("", false), Ids{});
}

TEST(Tokenizer, TokenBytesAndRangeErrors) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  const Tokenizer t =
      Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(t.token_bytes(13), "\n");
  EXPECT_EQ(t.token_bytes(243), "\xF0");
  EXPECT_EQ(t.token_bytes(29871), " ");
  EXPECT_EQ(t.token_bytes(15043), " Hello");
  EXPECT_EQ(t.token_bytes(1), "<s>");
  EXPECT_THROW(t.token_bytes(32000), Error);
  EXPECT_THROW(t.decode(Ids{15043, -1}), Error);
  try {
    t.decode(Ids{32000});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 32000 is outside the vocabulary of 32000"),
              std::string::npos)
        << e.what();
  }
  // Copies share one state.
  const Tokenizer copy = t;
  EXPECT_EQ(&copy.vocab(), &t.vocab());
}

TEST(Tokenizer, SentencePieceWithTokenizerConfig) {
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  const std::string config = R"({
    "add_bos_token": false, "add_eos_token": true,
    "bos_token": {"content": "<s>"}, "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
    "added_tokens_decoder": {
      "1": {"content": "<s>", "special": true},
      "512": {"content": "<|user|>", "special": true},
      "513": {"content": "<think>", "special": false}
    }})";
  const Tokenizer t = Tokenizer::from_sentencepiece(
      read_sentencepiece_model(testing::fixture("tok512/tok512.model")), config);
  EXPECT_EQ(t.vocab_size(), 514);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.add_eos());
  EXPECT_EQ(t.chat_template(), "D");
  EXPECT_TRUE(t.is_special(512));
  EXPECT_FALSE(t.is_special(513));
  const Ids lily = t.encode("Lily", false);
  ASSERT_EQ(lily, Ids{317});
  EXPECT_EQ(t.encode("<|user|>Lily<think>"), (Ids{512, 317, 513, 2}));
  // Without parse_special the special token is text; the non-special one is still matched.
  const Ids plain = t.encode("<|user|>Lily<think>", false, false);
  ASSERT_GE(plain.size(), 3u);
  EXPECT_NE(plain.front(), 512);
  EXPECT_EQ(plain.back(), 513);
  EXPECT_EQ(t.decode(plain), "<|user|>Lily<think>");
  EXPECT_EQ(t.decode(Ids{512, 317, 513, 2}), "Lily<think>");
  EXPECT_EQ(t.decode(Ids{512, 317, 513, 2}, false), "<|user|>Lily<think></s>");

  EXPECT_THROW(Tokenizer::from_sentencepiece(
                   read_sentencepiece_model(testing::fixture("tok512/tok512.model")),
                   R"({"added_tokens_decoder": {"5": {"content": "<x>"}}})"),
               Error);
  EXPECT_THROW(Tokenizer::from_sentencepiece(
                   read_sentencepiece_model(testing::fixture("tok512/tok512.model")), "{oops"),
               Error);
}

TEST(Tokenizer, LoadErrorsNameThePath) {
  TERN_REQUIRE_FIXTURE("chat-templates");
  const std::string missing = testing::fixture("no-such-tokenizer");
  EXPECT_NE(load_error(missing).find(missing + ": no such file or folder"), std::string::npos);
  const std::string folder = testing::fixture("chat-templates");
  EXPECT_NE(load_error(folder).find(folder + ": no tokenizer found"), std::string::npos);
  const std::string file = testing::fixture("chat-templates/SOURCE.md");
  EXPECT_NE(load_error(file).find(file + ": not a tokenizer"), std::string::npos);
}

TEST(Tokenizer, GgufErrors) {
  GgufWriter none;
  none.set("general.architecture", GgufValue::string("llama"));
  EXPECT_NE(gguf_error(none).find("bad.gguf: no tokenizer"), std::string::npos);

  GgufWriter bert;
  bert.set("tokenizer.ggml.model", GgufValue::string("bert"));
  bert.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b"}));
  EXPECT_NE(gguf_error(bert).find("'bert' is not supported"), std::string::npos);

  GgufWriter types;
  types.set("tokenizer.ggml.model", GgufValue::string("llama"));
  types.set("tokenizer.ggml.tokens", GgufValue::string_array({"<unk>", "a"}));
  types.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0}));
  types.set("tokenizer.ggml.token_type", GgufValue::i32_array({2}));
  EXPECT_NE(gguf_error(types).find("token_type has 1 entries for 2 tokens"), std::string::npos);

  GgufWriter bos;
  bos.set("tokenizer.ggml.model", GgufValue::string("llama"));
  bos.set("tokenizer.ggml.tokens", GgufValue::string_array({"<unk>", "a"}));
  bos.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0}));
  bos.set("tokenizer.ggml.bos_token_id", GgufValue::u32(7));
  EXPECT_NE(gguf_error(bos).find("bad.gguf: bos id 7 is outside the vocabulary of 2"),
            std::string::npos)
      << gguf_error(bos);

  GgufWriter no_merges;
  no_merges.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  no_merges.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "b"}));
  EXPECT_NE(gguf_error(no_merges).find("tokenizer.ggml.merges is required"), std::string::npos);
}

TEST(Tokenizer, MinimalGgufSentencePiece) {
  // A hand-built vocabulary: unk, bos, eos, a user-defined token, pieces; eot listed as an
  // end-of-generation id; add_bos off.
  GgufWriter w;
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens",
        GgufValue::string_array({"<unk>", "<s>", "</s>", "<eot>", "[X]", "\xE2\x96\x81", "a",
                                 "\xE2\x96\x81"
                                 "a"}));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array({0, 0, 0, 0, 0, -5, -5, -1}));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 3, 4, 1, 1, 1}));
  w.set("tokenizer.ggml.eot_token_id", GgufValue::u32(3));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  w.set("tokenizer.chat_template", GgufValue::string("{{ messages }}"));
  auto bytes = w.to_bytes();
  const Tokenizer t = Tokenizer::from_gguf(
      GgufFile::parse(std::make_shared<MappedFile>("mini.gguf", std::move(bytes))));
  EXPECT_EQ(t.eos_ids(), (Ids{2, 3}));
  EXPECT_FALSE(t.add_bos());
  EXPECT_EQ(t.chat_template(), "{{ messages }}");
  EXPECT_EQ(t.encode("a a"), (Ids{7, 7}));
  // The user-defined token is matched even without parse_special and is not special.
  EXPECT_EQ(t.encode("a[X]a", true, false), (Ids{7, 4, 7}));
  EXPECT_FALSE(t.is_special(4));
  EXPECT_EQ(t.decode(Ids{7, 4, 7}), "a[X]a");
  // No byte pieces: an unknown character becomes <unk>, skipped by decode.
  EXPECT_EQ(t.encode("a\xC3\xA9"), (Ids{7, 0}));
  EXPECT_EQ(t.decode(Ids{7, 0}), "a");
  EXPECT_EQ(t.decode(Ids{7, 0}, false), "a<unk>");
}

// A Llama-2-style tokenizer.json goes through the SentencePiece BPE with the scores the reader
// synthesises from merge ranks, byte fallback and the dummy-prefix rules.
TEST(Tokenizer, SentencePieceStyleTokenizerJson) {
  const std::string sp = "\xE2\x96\x81";
  const nlohmann::json json = {
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", sp}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"vocab",
         {{"<unk>", 0},
          {"<s>", 1},
          {"</s>", 2},
          {"<0x41>", 3},
          {sp, 4},
          {"a", 5},
          {"b", 6},
          {sp + "a", 7},
          {"ab", 8},
          {sp + "ab", 9}}},
        {"merges", {sp + " a", "a b", sp + "a b"}}}}};
  const Tokenizer t = Tokenizer::from_hf_files(parse_tokenizer_json(json.dump(), "tokenizer.json"));
  EXPECT_EQ(t.kind(), TokenizerKind::SentencePieceBpe);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.encode("ab aA", false), (Ids{9, 7, 3}));
  EXPECT_EQ(t.decode(Ids{9, 7, 3}), "ab aA");
  EXPECT_EQ(t.encode("<s>ab", false), (Ids{1, 9}));
  EXPECT_EQ(t.decode(Ids{1, 9}, false), "<s>ab");
  EXPECT_TRUE(t.is_special(1));
}

TEST(Tokenizer, QwenAddedTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  const Tokenizer t = Tokenizer::load(testing::fixture("qwen-tokenizer"));
  EXPECT_EQ(t.kind(), TokenizerKind::ByteLevelBpe);
  EXPECT_FALSE(t.add_bos());
  EXPECT_FALSE(t.chat_template().empty());
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  // 151644 <|im_start|>, "user" 872, "\n" 198, "hi" 6023, 151645 <|im_end|>
  EXPECT_EQ(t.encode(text), (Ids{151644, 872, 198, 6023, 151645}));
  const Ids plain = t.encode(text, true, /*parse_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151645), 0);
  EXPECT_GT(plain.size(), 5u);
  EXPECT_EQ(t.decode(plain), text);
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_EQ(t.decode(Ids{151644, 872, 198, 6023, 151645}), "user\nhi");
  EXPECT_EQ(t.decode(Ids{151644, 872, 198, 6023, 151645}, false), text);
  // <think> is an added token that is not special: always matched, never skipped.
  const auto think = t.vocab().find("<think>");
  ASSERT_TRUE(think.has_value());
  EXPECT_FALSE(t.is_special(*think));
  EXPECT_EQ(t.encode("<think>", false, false), Ids{*think});
  EXPECT_EQ(t.decode(Ids{*think}), "<think>");
  // Qwen normalises to NFC before BPE; decode cannot bring back a decomposed input.
  EXPECT_EQ(t.decode(t.encode("Cafe\xCC\x81")), "Caf\xC3\xA9");
  EXPECT_EQ(t.encode("Cafe\xCC\x81"), t.encode("Caf\xC3\xA9"));
}

TEST(Tokenizer, Gpt2GgufDefaults) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  const Tokenizer t = Tokenizer::load(testing::fixture("llama.cpp-vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(t.kind(), TokenizerKind::ByteLevelBpe);
  EXPECT_FALSE(t.add_bos());  // llama.cpp's default for byte-level vocabularies
  EXPECT_EQ(t.bos_id(), 50256);
  EXPECT_EQ(t.eos_id(), 50256);
  EXPECT_EQ(t.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(t.token_bytes(995), " world");
  EXPECT_EQ(t.decode(Ids{15496, 995, 50256}), "Hello world");
  EXPECT_EQ(t.decode(Ids{15496, 995, 50256}, false), "Hello world<|endoftext|>");
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// llama.cpp wants one token per embedding row: write_gguf pads a shorter vocabulary with
// unused "[PAD<id>]" tokens and the padded file reads back with the same ids for real text.
TEST(TokenizerGguf, PadsToTheModelVocabulary) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const Tokenizer qwen = Tokenizer::load(tern::testing::fixture("qwen-tokenizer"));
  ASSERT_EQ(qwen.vocab_size(), 151669);
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string("qwen3"));
  qwen.write_gguf(writer, 151936);
  auto file = std::make_shared<const MappedFile>("padded.gguf", writer.to_bytes());
  const GgufFile gguf = GgufFile::parse(file);
  const auto tokens = gguf.get_string_array("tokenizer.ggml.tokens").value();
  const auto types = gguf.get_int_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(tokens.size(), 151936u);
  ASSERT_EQ(types.size(), 151936u);
  EXPECT_EQ(tokens[151669], "[PAD151669]");
  EXPECT_EQ(tokens[151935], "[PAD151935]");
  EXPECT_EQ(types[151935], static_cast<int64_t>(TokenType::Unused));
  EXPECT_EQ(tokens[151667], "<think>");

  const Tokenizer back = Tokenizer::from_gguf(gguf);
  const std::string text = "<|im_start|>user\nHello, 世界 <think>[PAD151700]</think><|im_end|>";
  EXPECT_EQ(back.encode(text), qwen.encode(text));

  GgufWriter too_small;
  EXPECT_THROW(qwen.write_gguf(too_small, 1000), Error);
}

}  // namespace
}  // namespace tern
