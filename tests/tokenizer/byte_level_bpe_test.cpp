// Byte-level BPE against llama.cpp's tokenizer test vectors (Qwen2, Llama 3), plus the byte
// alphabet, the pre-tokenizer regexes and the merge order on small hand-made vocabularies.
#include "tern/tokenizer/byte_level_bpe.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/tokenizer/hf_tokenizer_files.h"
#include "tern/tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

struct BpeCase {
  std::string text;
  std::vector<int32_t> ids;
};

// `.inp`: strings separated by "\n__ggml_vocab_test__\n" (the file ends with one); `.out`: one
// line of ids per string.
std::vector<BpeCase> read_vectors(const std::string& stem) {
  const std::string inp = read_text_file(testing::fixture(stem + ".inp"));
  const std::string out = read_text_file(testing::fixture(stem + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<BpeCase> cases;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(separator, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (auto& c : cases) {
    std::getline(lines, line);
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// Loading a 150k-token folder takes a moment: each is read once per test binary.
const HfTokenizerFiles& folder(const std::string& name) {
  static std::map<std::string, std::unique_ptr<HfTokenizerFiles>> cache;
  auto& slot = cache[name];
  if (!slot)
    slot = std::make_unique<HfTokenizerFiles>(load_hf_tokenizer_files(testing::fixture(name)));
  return *slot;
}

std::vector<int32_t> encode(const ByteLevelBpe& bpe, std::string_view text) {
  std::vector<int32_t> ids;
  bpe.encode(text, ids);
  return ids;
}

std::string decode(const Vocab& vocab, const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids)
    text += ByteLevelBpe::token_text_to_bytes(vocab.tokens[static_cast<size_t>(id)]);
  return text;
}

void expect_vectors(const std::string& dir, const std::string& stem) {
  const HfTokenizerFiles& files = folder(dir);
  const ByteLevelBpe bpe(files.vocab, files.merges, files.byte_level);
  const std::vector<BpeCase> cases = read_vectors(stem);
  ASSERT_EQ(cases.size(), 46u);
  int matched = 0;
  for (const BpeCase& c : cases) {
    const std::vector<int32_t> ids = encode(bpe, c.text);
    EXPECT_EQ(ids, c.ids) << "text: '" << c.text << "'";
    matched += ids == c.ids;
    // None of the 46 strings changes under NFC, so decoding gives every one back byte for byte.
    EXPECT_EQ(decode(files.vocab, ids), c.text);
  }
  EXPECT_EQ(matched, 46);
}

TEST(ByteLevelBpe, QwenMatchesLlamaCppVectors) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-qwen2.gguf.inp");
  expect_vectors("qwen-tokenizer", "llama.cpp-vocab/ggml-vocab-qwen2.gguf");
}

TEST(ByteLevelBpe, Llama3MatchesLlamaCppVectors) {
  TERN_REQUIRE_FIXTURE("llama3-tokenizer/encoder.json");
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-bpe.gguf.inp");
  expect_vectors("llama3-tokenizer", "llama.cpp-vocab/ggml-vocab-llama-bpe.gguf");
}

TEST(ByteLevelBpe, Llama3NeedsIgnoreMerges) {
  TERN_REQUIRE_FIXTURE("llama3-tokenizer/encoder.json");
  const HfTokenizerFiles& files = folder("llama3-tokenizer");
  ASSERT_TRUE(files.byte_level.ignore_merges);
  const ByteLevelBpe with(files.vocab, files.merges, files.byte_level);
  ByteLevelBpeOptions plain = files.byte_level;
  plain.ignore_merges = false;
  const ByteLevelBpe without(files.vocab, files.merges, plain);
  EXPECT_EQ(encode(with, " Việt"), std::vector<int32_t>{101798});
  const std::vector<int32_t> merged = encode(without, " Việt");
  EXPECT_GT(merged.size(), 1u);
  EXPECT_EQ(decode(files.vocab, merged), " Việt");
}

TEST(ByteLevelBpe, QwenNormalisesToNfc) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  const HfTokenizerFiles& files = folder("qwen-tokenizer");
  ASSERT_TRUE(files.byte_level.nfc);
  const ByteLevelBpe bpe(files.vocab, files.merges, files.byte_level);
  // "café" with a combining acute accent (e + U+0301) and with the precomposed é (U+00E9).
  EXPECT_EQ(encode(bpe, "caf\x65\xCC\x81 au lait"), encode(bpe, "caf\xC3\xA9 au lait"));
  EXPECT_EQ(decode(files.vocab, encode(bpe, "A\xCC\x8A")), "\xC3\x85");  // A + ring → Å
  ByteLevelBpeOptions raw = files.byte_level;
  raw.nfc = false;
  const ByteLevelBpe no_nfc(files.vocab, files.merges, raw);
  EXPECT_EQ(decode(files.vocab, encode(no_nfc, "A\xCC\x8A")), "A\xCC\x8A");
}

TEST(ByteLevelBpe, ArbitraryBytesRoundTrip) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  const HfTokenizerFiles& files = folder("qwen-tokenizer");
  const ByteLevelBpe bpe(files.vocab, files.merges, files.byte_level);
  std::string bytes;
  for (int i = 0; i < 512; ++i) bytes.push_back(static_cast<char>((i * 37 + 11) % 256));
  bytes += "\xFF\xFE invalid \xC3 utf-8 \xE4\xBD";  // truncated sequences too
  EXPECT_EQ(decode(files.vocab, encode(bpe, bytes)), bytes);
  // A long whitespace run and a long run of letters stay one pre-token each: no limits hit.
  const std::string spaces(200000, ' ');
  const std::string letters = [] {
    std::string s;
    for (int i = 0; i < 20000; ++i) s += "\xE4\xBD\xA0";  // 你
    return s;
  }();
  EXPECT_EQ(decode(files.vocab, encode(bpe, spaces + "x")), spaces + "x");
  EXPECT_EQ(decode(files.vocab, encode(bpe, letters)), letters);
}

TEST(ByteLevelBpe, ByteAlphabet) {
  EXPECT_EQ(ByteLevelBpe::bytes_to_token_text(" hello\n"), "\xC4\xA0hello\xC4\x8A");  // Ġhello Ċ
  EXPECT_EQ(ByteLevelBpe::token_text_to_bytes("\xC4\xA0hello"), " hello");
  EXPECT_EQ(ByteLevelBpe::bytes_to_token_text("\t"), "\xC4\x89");    // ĉ
  EXPECT_EQ(ByteLevelBpe::bytes_to_token_text("\xAD"), "\xC5\x83");  // Ń
  EXPECT_EQ(ByteLevelBpe::bytes_to_token_text("\xA1"), "\xC2\xA1");  // ¡ itself
  EXPECT_EQ(ByteLevelBpe::token_text_to_bytes("<|im_end|>"), "<|im_end|>");
  EXPECT_EQ(ByteLevelBpe::token_text_to_bytes("\xE4\xBD\xA0"), "\xE4\xBD\xA0");  // not in it
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string text = ByteLevelBpe::bytes_to_token_text(all);
  EXPECT_EQ(text.size(), 94u + 2u * 162u);  // printable ASCII is one byte, the rest two
  EXPECT_EQ(ByteLevelBpe::token_text_to_bytes(text), all);
}

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  const PreTokenizerRegex regex(kind);
  std::vector<std::pair<size_t, size_t>> pieces;
  regex.split(text, pieces);
  std::vector<std::string> out;
  for (auto [b, e] : pieces) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(PreTokenizerRegex, SplitsLikeEachModel) {
  const std::string text = "I'VE got 12345 apples!!\n\n  ok";
  using V = std::vector<std::string>;
  EXPECT_EQ(split(PreTokenizer::Gpt2, text),
            (V{"I", "'", "VE", " got", " 12345", " apples", "!!", "\n\n ", " ok"}));
  EXPECT_EQ(split(PreTokenizer::Llama3, text),
            (V{"I", "'VE", " got", " ", "123", "45", " apples", "!!\n\n", " ", " ok"}));
  EXPECT_EQ(split(PreTokenizer::Qwen2, text),
            (V{"I", "'VE", " got", " ", "1", "2", "3", "4", "5", " apples", "!!\n\n", " ", " ok"}));
  // Invalid UTF-8 never matches; each run of it is a piece of its own.
  EXPECT_EQ(split(PreTokenizer::Qwen2,
                  "ab\xFF\xFE"
                  "cd"),
            (V{"ab", "\xFF\xFE", "cd"}));
  EXPECT_EQ(pre_tokenizer_from_pattern(pre_tokenizer_pattern(PreTokenizer::Llama3)),
            PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_pattern("\\s+"), std::nullopt);
}

// Each expectation is worked out by hand from the o200k regex's alternatives, in order:
// (1) [^\r\n\p{L}\p{N}]? upper* lower+ contraction?, (2) the same with upper+ lower*,
// (3) \p{N}{1,3}, (4) " ?" punctuation+ [\r\n/]*, (5) \s*[\r\n]+, (6) \s+(?!\S), (7) \s+.
TEST(PreTokenizerRegex, O200kSplits) {
  using V = std::vector<std::string>;
  const auto o200k = [](std::string_view text) { return split(PreTokenizer::O200k, text); };
  // Case changes split words: a lower-case run ends a word, so the next capital starts one,
  // while capitals before a lower-case run stay with it ("XMLHttp" is one word).
  EXPECT_EQ(o200k("HelloWorld camelCase XMLHttp"),
            (V{"Hello", "World", " camel", "Case", " XMLHttp"}));
  // An all-capital word takes the second shape, and a contraction stays on its word in any case
  // (Llama 3 splits "'S" off).
  EXPECT_EQ(o200k("HE'S here, I'M sure they're fine"),
            (V{"HE'S", " here", ",", " I'M", " sure", " they're", " fine"}));
  EXPECT_EQ(split(PreTokenizer::Llama3, "HE'S"), (V{"HE", "'S"}));
  // Digits in groups of at most three; a space before digits is a piece of its own, one
  // before a letter joins the word.
  EXPECT_EQ(o200k("12345 678 x1234567"), (V{"123", "45", " ", "678", " x", "123", "456", "7"}));
  // \s*[\r\n]+ takes the spaces and newlines up to the last newline; the spaces after it are
  // left for \s+(?!\S) at the end of the text.
  EXPECT_EQ(o200k("  \n\n  "), (V{"  \n\n", "  "}));
  // Before a word, the last space of a run goes to the word; \r\n is one piece.
  EXPECT_EQ(o200k("a   b\r\nnext"), (V{"a", "  ", " b", "\r\n", "next"}));
  // Punctuation runs take one leading space and trailing newlines or slashes (o200k's own
  // "/"); a single non-letter (tab, slash) prefixes the word after it.
  EXPECT_EQ(o200k("x = y // note\n\n"), (V{"x", " =", " y", " //", " note", "\n\n"}));
  EXPECT_EQ(o200k("end.\n\nNext path/to/ !!/\n\tif"),
            (V{"end", ".\n\n", "Next", " path", "/to", "/", " !!/\n", "\tif"}));
  // Scripts without case: Lo letters belong to both classes, so a run is one word.
  EXPECT_EQ(o200k("\u041F\u0440\u0438\u0432\u0435\u0442 \u043C\u0438\u0440"),  // Привет мир
            (V{"\u041F\u0440\u0438\u0432\u0435\u0442", " \u043C\u0438\u0440"}));
  EXPECT_EQ(o200k("\u4F60\u597D \u4E16\u754C"),  // 你好 世界
            (V{"\u4F60\u597D", " \u4E16\u754C"}));
  // Marks stay inside the word: "e" + combining acute, and Devanagari's virama and vowel sign,
  // which Llama 3's \p{L}+ splits apart.
  EXPECT_EQ(o200k("cafe\u0301 ok"), (V{"cafe\u0301", " ok"}));
  const std::string namaste = "\u0928\u092E\u0938\u094D\u0924\u0947";  // नमस्ते
  EXPECT_EQ(o200k(namaste), (V{namaste}));
  EXPECT_EQ(split(PreTokenizer::Llama3, namaste),
            (V{"\u0928\u092E\u0938", "\u094D\u0924", "\u0947"}));
  // The pattern is recognised in a tokenizer.json Split.
  EXPECT_EQ(pre_tokenizer_from_pattern(pre_tokenizer_pattern(PreTokenizer::O200k)),
            PreTokenizer::O200k);
}

TEST(ByteLevelBpe, PreTokenizerFromGguf) {
  EXPECT_EQ(pre_tokenizer_from_gguf("gpt-2"), PreTokenizer::Gpt2);
  EXPECT_EQ(pre_tokenizer_from_gguf("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf("llama3"), PreTokenizer::Llama3);
  EXPECT_EQ(pre_tokenizer_from_gguf("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_gguf("deepseek-r1-qwen"), PreTokenizer::Qwen2);
  EXPECT_EQ(pre_tokenizer_from_gguf("gpt-4o"), PreTokenizer::O200k);
  try {
    pre_tokenizer_from_gguf("default");
    FAIL() << "expected tern::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'default'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pre_tokenizer_from_gguf("starcoder"), Error);
  EXPECT_TRUE(default_byte_level_options(PreTokenizer::Qwen2).nfc);
  EXPECT_TRUE(default_byte_level_options(PreTokenizer::Llama3).ignore_merges);
  EXPECT_TRUE(default_byte_level_options(PreTokenizer::O200k).ignore_merges);
  EXPECT_FALSE(default_byte_level_options(PreTokenizer::O200k).nfc);
  EXPECT_FALSE(default_byte_level_options(PreTokenizer::Gpt2).nfc);
}

// A vocabulary of the letters a..e plus merge results, to check the merge order by hand.
Vocab small_vocab(const std::vector<std::string>& extra) {
  Vocab vocab;
  for (char c = 'a'; c <= 'e'; ++c) vocab.tokens.emplace_back(1, c);
  vocab.tokens.push_back("\xC4\xA0");  // Ġ
  for (const std::string& t : extra) vocab.tokens.push_back(t);
  vocab.types.assign(vocab.tokens.size(), TokenType::Normal);
  vocab.build_index();
  return vocab;
}

TEST(ByteLevelBpe, MergesByRankLeftmostFirst) {
  // ids: a0 b1 c2 d3 e4 Ġ5 ab6 bc7 abc8 aa9 aaa10 aaaa11
  const Vocab vocab = small_vocab({"ab", "bc", "abc", "aa", "aaa", "aaaa"});
  const ByteLevelBpe bpe(vocab, {"b c", "a b", "a bc", "a a", "aa aa", "aa a"},
                         ByteLevelBpeOptions{});
  EXPECT_EQ(encode(bpe, "abc"), (std::vector<int32_t>{8}));     // bc first, then a+bc
  EXPECT_EQ(encode(bpe, "abd"), (std::vector<int32_t>{6, 3}));  // ab, d
  // "aaaaa": "a a" merges leftmost first → aa aa a; then "aa aa" (rank 4) before "aa a".
  EXPECT_EQ(encode(bpe, "aaaaa"), (std::vector<int32_t>{11, 0}));
  EXPECT_EQ(encode(bpe, "aaa"), (std::vector<int32_t>{10}));
  EXPECT_EQ(encode(bpe, " ab"), (std::vector<int32_t>{5, 6}));  // no "Ġ ab" merge
  EXPECT_EQ(encode(bpe, "z"), (std::vector<int32_t>{}));        // byte not in the vocabulary
}

TEST(ByteLevelBpe, RejectsBadMerges) {
  const Vocab vocab = small_vocab({"ab"});
  const auto message = [&](const std::vector<std::string>& merges) {
    try {
      ByteLevelBpe bpe(vocab, merges, ByteLevelBpeOptions{});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({"a b", "a x"}), "byte-level BPE: merge 2 'a x': 'x' is not in the vocabulary");
  EXPECT_EQ(message({"b c"}),
            "byte-level BPE: merge 1 'b c': the result 'bc' is not in the vocabulary");
  EXPECT_EQ(message({"ab"}),
            "byte-level BPE: merge 1 'ab' is not two tokens separated by one space");
  EXPECT_EQ(message({"a  b"}),
            "byte-level BPE: merge 1 'a  b' is not two tokens separated by one space");
}

}  // namespace
}  // namespace tern
