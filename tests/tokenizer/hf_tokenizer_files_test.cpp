// Reading Hugging Face tokenizer folders: the Qwen and Llama 3 fixtures, a tokenizer.json
// rebuilt from the Qwen files, SentencePiece-style tokenizer.json, and malformed folders.
#include "tern/tokenizer/hf_tokenizer_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A scratch folder removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("tern-hf-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::string files_error_of(const std::string& dir) {
  try {
    load_hf_tokenizer_files(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<std::string> vector_strings() {
  const std::string inp =
      read_text_file(testing::fixture("llama.cpp-vocab/ggml-vocab-qwen2.gguf.inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  for (size_t pos = 0, end; (end = inp.find(separator, pos)) != std::string::npos;
       pos = end + separator.size())
    out.push_back(inp.substr(pos, end - pos));
  return out;
}

TEST(HfTokenizerFiles, QwenFolder) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  const HfTokenizerFiles files = load_hf_tokenizer_files(testing::fixture("qwen-tokenizer"));
  EXPECT_EQ(files.kind, TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(files.byte_level.pre_tokenizer, PreTokenizer::Qwen2);
  EXPECT_TRUE(files.byte_level.nfc);
  EXPECT_FALSE(files.byte_level.ignore_merges);
  EXPECT_EQ(files.vocab.size(), 151669);
  EXPECT_EQ(files.merges.size(), 151387u);
  EXPECT_EQ(files.merges.front(), "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  ASSERT_EQ(files.added_tokens.size(), 26u);
  for (size_t i = 0; i < 26; ++i) EXPECT_EQ(files.added_tokens[i].id, 151643 + int32_t(i));
  EXPECT_EQ(files.added_tokens.front().content, "<|endoftext|>");
  EXPECT_EQ(files.added_tokens[24].content, "<think>");
  EXPECT_EQ(files.added_tokens[24].id, 151667);
  EXPECT_FALSE(files.added_tokens[24].special);  // <think> is a normal added token in Qwen3
  EXPECT_TRUE(files.added_tokens[2].special);
  EXPECT_EQ(files.vocab.find("<think>"), 151667);
  EXPECT_EQ(files.vocab.types[151645], TokenType::Control);
  EXPECT_EQ(files.vocab.types[151667], TokenType::UserDefined);
  EXPECT_EQ(files.vocab.types[100], TokenType::Normal);
  EXPECT_EQ(files.eos_id, 151645);  // <|im_end|>
  EXPECT_EQ(files.vocab.tokens[151645], "<|im_end|>");
  EXPECT_EQ(files.pad_id, 151643);
  EXPECT_EQ(files.bos_id, std::nullopt);
  EXPECT_EQ(files.unk_id, std::nullopt);
  EXPECT_FALSE(files.add_bos);
  EXPECT_FALSE(files.add_eos);
  EXPECT_NE(files.chat_template.find("enable_thinking"), std::string::npos);
  EXPECT_TRUE(files.vocab.scores.empty());
}

TEST(HfTokenizerFiles, Llama3Folder) {
  TERN_REQUIRE_FIXTURE("llama3-tokenizer/encoder.json");
  const HfTokenizerFiles files = load_hf_tokenizer_files(testing::fixture("llama3-tokenizer"));
  EXPECT_EQ(files.kind, TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(files.byte_level.pre_tokenizer, PreTokenizer::Llama3);  // by fingerprint
  EXPECT_TRUE(files.byte_level.ignore_merges);
  EXPECT_FALSE(files.byte_level.nfc);
  EXPECT_EQ(files.vocab.size(), 128000);
  EXPECT_EQ(files.merges.size(), 280147u);
  EXPECT_TRUE(files.added_tokens.empty());
  EXPECT_EQ(files.bos_id, std::nullopt);
  EXPECT_EQ(files.eos_id, std::nullopt);
  EXPECT_TRUE(files.chat_template.empty());
}

TEST(HfTokenizerFiles, FingerprintFromDigitTokens) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pre_tokenizer_from_vocabulary(V{"1", "12",
                                            "\xC4\xA0"
                                            "12"},
                                          "x"),
            PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_vocabulary(V{"1", "12", "2018"}, "x"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_vocabulary(V{"1", "12", "123", "a"}, "x"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_vocabulary(V{"1", "2", "ab"}, "x"), PreTokenizer::Qwen2);
  EXPECT_THROW(pre_tokenizer_from_vocabulary(V{"a", "b"}, "x"), Error);
}

TEST(HfTokenizerFiles, TokenizerJsonGivesTheSameTokenizer) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-qwen2.gguf.inp");
  const std::string qwen = testing::fixture("qwen-tokenizer");
  const Json config = Json::parse(read_text_file(qwen + "/tokenizer_config.json"));
  Json added = Json::array();
  for (const auto& [id, token] : config["added_tokens_decoder"].items())
    added.push_back({{"id", std::stoi(id)},
                     {"content", token["content"]},
                     {"special", token["special"]},
                     {"normalized", false}});
  // Merges as [left, right] pairs, the newer tokenizer.json form.
  Json merges = Json::array();
  const std::string merges_txt = read_text_file(qwen + "/merges.txt");
  for (size_t pos = 0, end; pos < merges_txt.size(); pos = end + 1) {
    end = merges_txt.find('\n', pos);
    if (end == std::string::npos) end = merges_txt.size();
    const std::string line = merges_txt.substr(pos, end - pos);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    merges.push_back({line.substr(0, space), line.substr(space + 1)});
  }
  const Json tokenizer = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(pre_tokenizer_pattern(PreTokenizer::Qwen2))}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", nullptr},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", Json::parse(read_text_file(qwen + "/vocab.json"))},
        {"merges", merges}}}};
  TempDir dir;
  dir.write("tokenizer.json", tokenizer.dump());
  dir.write("tokenizer_config.json", config.dump());

  const HfTokenizerFiles a = load_hf_tokenizer_files(qwen);
  const HfTokenizerFiles b = load_hf_tokenizer_files(dir.str());
  EXPECT_EQ(b.kind, TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(b.byte_level.pre_tokenizer, PreTokenizer::Qwen2);
  EXPECT_TRUE(b.byte_level.nfc);
  EXPECT_EQ(a.vocab.tokens, b.vocab.tokens);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.eos_id, b.eos_id);
  EXPECT_EQ(a.added_tokens.size(), b.added_tokens.size());
  const ByteLevelBpe bpe_a(a.vocab, a.merges, a.byte_level);
  const ByteLevelBpe bpe_b(b.vocab, b.merges, b.byte_level);
  const std::vector<std::string> strings = vector_strings();
  ASSERT_EQ(strings.size(), 46u);
  for (const std::string& s : strings) {
    std::vector<int32_t> ids_a, ids_b;
    bpe_a.encode(s, ids_a);
    bpe_b.encode(s, ids_b);
    EXPECT_EQ(ids_a, ids_b) << s;
  }
}

// A Llama-2-style tokenizer.json: SentencePiece pieces, merges turned into scores.
TEST(HfTokenizerFiles, SentencePieceStyleTokenizerJson) {
  const Json tokenizer = {
      {"added_tokens",
       {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
        {{"id", 1}, {"content", "<s>"}, {"special", true}},
        {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
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
          {"\xE2\x96\x81", 4},
          {"a", 5},
          {"b", 6},
          {"\xE2\x96\x81"
           "a",
           7},
          {"ab", 8},
          {"\xE2\x96\x81"
           "ab",
           9}}},
        {"merges",
         {"\xE2\x96\x81 a", "a b",
          "\xE2\x96\x81"
          "a b"}}}}};
  const HfTokenizerFiles files = parse_tokenizer_json(tokenizer.dump(), "tokenizer.json");
  EXPECT_EQ(files.kind, TokenizerKind::SentencePieceBpe);
  ASSERT_EQ(files.vocab.scores.size(), 10u);
  EXPECT_EQ(files.vocab.scores[7], 0.0f);
  EXPECT_EQ(files.vocab.scores[8], -1.0f);
  EXPECT_EQ(files.vocab.scores[9], -2.0f);
  EXPECT_EQ(files.vocab.scores[5], -1e9f);
  EXPECT_EQ(files.vocab.types[0], TokenType::Unknown);
  EXPECT_EQ(files.vocab.types[1], TokenType::Control);
  EXPECT_EQ(files.vocab.types[3], TokenType::Byte);
  EXPECT_EQ(files.vocab.types[5], TokenType::Normal);
  EXPECT_EQ(files.bos_id, 1);
  EXPECT_TRUE(files.add_bos);
  EXPECT_EQ(files.unk_id, 0);
  EXPECT_EQ(files.added_tokens.size(), 3u);
}

// A tiny GPT-2-style folder; `config` is its tokenizer_config.json ("" for none).
void write_small_folder(const TempDir& dir, const std::string& vocab, const std::string& merges,
                        const std::string& config) {
  dir.write("vocab.json", vocab);
  dir.write("merges.txt", merges);
  if (!config.empty()) dir.write("tokenizer_config.json", config);
}

constexpr const char* kSmallVocab =
    R"({"a": 0, "b": 1, "ab": 2, "1": 3, "2": 4, "3": 5, "12": 6, "123": 7})";
constexpr const char* kSmallMerges = "#version: 0.2\na b\n1 2\n12 3\n";

TEST(HfTokenizerFiles, SmallFolderWithConfig) {
  TempDir dir;
  write_small_folder(dir, kSmallVocab, kSmallMerges, R"({
    "added_tokens_decoder": {"8": {"content": "<|eot|>", "special": true}},
    "bos_token": {"content": "<|eot|>"}, "eos_token": "<|eot|>", "unk_token": null,
    "add_bos_token": true,
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
  })");
  const HfTokenizerFiles files = load_hf_tokenizer_files(dir.str());
  EXPECT_EQ(files.byte_level.pre_tokenizer, PreTokenizer::Llama3);  // longest digit token: 3
  EXPECT_EQ(files.merges, (std::vector<std::string>{"a b", "1 2", "12 3"}));
  EXPECT_EQ(files.vocab.size(), 9);
  EXPECT_EQ(files.bos_id, 8);
  EXPECT_EQ(files.eos_id, 8);
  EXPECT_TRUE(files.add_bos);
  EXPECT_EQ(files.chat_template, "D");
  const ByteLevelBpe bpe(files.vocab, files.merges, files.byte_level);
  std::vector<int32_t> ids;
  bpe.encode("ab1234", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 7}));  // "4" is not in the vocabulary: dropped
}

TEST(HfTokenizerFiles, RejectsMalformedFolders) {
  const auto folder_error = [](const std::string& vocab, const std::string& merges,
                               const std::string& config) {
    TempDir dir;
    write_small_folder(dir, vocab, merges, config);
    std::string message = files_error_of(dir.str());
    const size_t at = message.find(dir.str());
    if (at != std::string::npos) message.replace(at, dir.str().size(), "DIR");
    return message;
  };
  const auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  std::string m = folder_error(R"({"a": 0, "b": )", kSmallMerges, "");
  EXPECT_TRUE(has(m, "DIR/vocab.json: not valid JSON")) << m;
  m = folder_error(kSmallVocab, "a b\na c\n", "");
  EXPECT_EQ(m, "DIR/merges.txt merge 2: merge 'a c': its right part is not in the vocabulary");
  m = folder_error(kSmallVocab, "b a\n", "");
  EXPECT_EQ(m, "DIR/merges.txt merge 1: merge 'b a': its result is not in the vocabulary");
  m = folder_error(kSmallVocab, "ab\n", "");
  EXPECT_EQ(m, "DIR/merges.txt line: merge 1 'ab' is not two tokens separated by one space");
  m = folder_error(R"({"a": 0, "b": 0})", "", "");
  EXPECT_EQ(m, "DIR/vocab.json: tokens 'a' and 'b' have the same id 0");
  m = folder_error(R"({"a": 0, "b": 99999999})", "", "");
  EXPECT_EQ(m, "DIR/vocab.json: token id 99999999 is out of range (only 2 tokens so far)");
  m = folder_error(R"({"a": 0, "b": -1})", "", "");
  EXPECT_EQ(m, "DIR/vocab.json: token id -1 is negative");
  m = folder_error(R"({"a": 0, "b": "1"})", "", "");
  EXPECT_EQ(m, "DIR/vocab.json: the id of token 'b' is not an integer");
  m = folder_error(R"(["a", "b"])", "", "");
  EXPECT_EQ(m, "DIR/vocab.json: the vocabulary is not a non-empty {\"token\": id} object");
  m = folder_error(kSmallVocab, kSmallMerges,
                   R"({"added_tokens_decoder": {"2": {"content": "<x>", "special": true}}})");
  EXPECT_EQ(m, "DIR/tokenizer_config.json: added token '<x>' has id 2, which is already 'ab'");
  m = folder_error(kSmallVocab, kSmallMerges, R"({"eos_token": "</s>"})");
  EXPECT_EQ(m, "DIR: eos_token '</s>' is not in the vocabulary");
  m = folder_error(kSmallVocab, kSmallMerges,
                   R"({"added_tokens_decoder": {"x1": {"content": "<x>"}}})");
  EXPECT_EQ(m, "DIR/tokenizer_config.json: added_tokens_decoder key 'x1' is not a token id");
  m = folder_error(R"({"a": 0, "b": 1, "ab": 2})", "a b\n", "");
  EXPECT_TRUE(has(m, "DIR: cannot tell the pre-tokenizer from the vocabulary")) << m;

  TempDir empty;
  EXPECT_TRUE(has(files_error_of(empty.str()), ": no tokenizer.json, vocab.json + merges.txt"));
  TempDir no_merges;
  no_merges.write("vocab.json", kSmallVocab);
  EXPECT_TRUE(has(files_error_of(no_merges.str()), "vocab.json is there but merges.txt is not"));
}

TEST(HfTokenizerFiles, RejectsMalformedTokenizerJson) {
  const auto error = [](const std::string& text) {
    try {
      parse_tokenizer_json(text, "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string model =
      R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  const std::string byte_level = R"("pre_tokenizer": {"type": "ByteLevel", "use_regex": true})";
  EXPECT_EQ(error("{" + model + "," + byte_level + "}"), "no error");
  EXPECT_EQ(error("[1, 2]"), "t.json: the top level is not an object");
  EXPECT_EQ(error(R"({"model": {"type": "Unigram", "vocab": []}})"),
            "t.json: model type 'Unigram' is not supported (only BPE)");
  std::string deep = R"({"type": "NFC"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type": "Sequence", "normalizers": [)" + deep + "]}";
  EXPECT_EQ(error("{" + model + "," + byte_level + R"(, "normalizer": )" + deep + "}"),
            "t.json: normalizer Sequences nest too deeply");
  EXPECT_EQ(error("{" + model + "}"),
            "t.json: byte-level BPE without a pre-tokenizer regex (ByteLevel or Split)");
  EXPECT_EQ(
      error("{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\d+"}}})"),
      "t.json: Split regex '\\d+' is not one tern knows (GPT-2, Llama 3, Qwen2, o200k)");
  EXPECT_EQ(error("{" + model + "," + byte_level + R"(, "normalizer": {"type": "NFKC"}})"),
            "t.json: normalizer 'NFKC' is not supported (NFC, or SentencePiece's Prepend/Replace "
            "with \xE2\x96\x81)");
  EXPECT_EQ(error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}})"),
            "t.json: merge 1 is neither \"left right\" nor [\"left\", \"right\"]");
  EXPECT_EQ(
      error("{" + model + "," + byte_level + R"(, "added_tokens": [{"id": 1, "content": "<s>"}]})"),
      "t.json: added token '<s>' has id 1, which is already 'b'");
  EXPECT_TRUE(error("{\"model\": ").starts_with("t.json: not valid JSON"));
}

}  // namespace
}  // namespace tern
