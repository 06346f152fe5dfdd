// The SentencePiece model reader (real files and hand-built malformed protos) and the
// score-ordered BPE on small synthetic vocabularies.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/core/utf8.h"
#include "tern/tokenizer/sentencepiece_bpe.h"
#include "tern/tokenizer/sentencepiece_model.h"
#include "tokenizer/llama_cpp_vectors.h"

namespace tern {
namespace {

// A minimal protobuf writer for building test models.
struct Proto {
  std::string bytes;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<char>(v));
  }
  Proto& key(uint32_t field, uint32_t wire) {
    varint((uint64_t{field} << 3) | wire);
    return *this;
  }
  Proto& int_field(uint32_t field, int64_t v) {
    key(field, 0);
    varint(static_cast<uint64_t>(v));
    return *this;
  }
  Proto& string_field(uint32_t field, std::string_view s) {
    key(field, 2);
    varint(s.size());
    bytes.append(s);
    return *this;
  }
  Proto& float_field(uint32_t field, float f) {
    key(field, 5);
    char b[4];
    std::memcpy(b, &f, 4);
    bytes.append(b, 4);
    return *this;
  }
};

std::string piece(std::string_view text, float score, int type = 1) {
  Proto p;
  p.string_field(1, text).float_field(2, score).int_field(3, type);
  return p.bytes;
}

std::vector<std::byte> to_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

SentencePieceModel parse(const std::string& s) {
  const auto b = to_bytes(s);
  return parse_sentencepiece_model(b, "test.model");
}

// unk, <s>, </s>, then pieces; BPE trainer spec.
std::string small_model(const std::vector<std::pair<std::string, float>>& pieces,
                        int model_type = 2) {
  Proto m;
  m.string_field(1, piece("<unk>", 0, 2));
  m.string_field(1, piece("<s>", 0, 3));
  m.string_field(1, piece("</s>", 0, 3));
  for (const auto& [text, score] : pieces) m.string_field(1, piece(text, score));
  Proto trainer;
  trainer.int_field(3, model_type).int_field(35, 0);
  m.string_field(2, trainer.bytes);
  Proto norm;
  norm.int_field(3, 1).int_field(4, 0).int_field(5, 1);
  m.string_field(3, norm.bytes);
  return m.bytes;
}

std::string load_error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SentencePieceModel, ReadsLlama2Tokenizer) {
  TERN_REQUIRE_FIXTURE("llama2-tokenizer/tokenizer.model");
  const auto m = read_sentencepiece_model(testing::fixture("llama2-tokenizer/tokenizer.model"));
  EXPECT_EQ(m.vocab.size(), 32000);
  EXPECT_EQ(m.model_type, SentencePieceModelType::Bpe);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.unk_id, 0);
  EXPECT_EQ(m.bos_id, 1);
  EXPECT_EQ(m.eos_id, 2);
  EXPECT_EQ(m.pad_id, std::nullopt);
  EXPECT_TRUE(m.add_dummy_prefix);
  EXPECT_FALSE(m.remove_extra_whitespaces);
  EXPECT_EQ(m.vocab.tokens[0], "<unk>");
  EXPECT_EQ(m.vocab.types[0], TokenType::Unknown);
  EXPECT_EQ(m.vocab.tokens[1], "<s>");
  EXPECT_EQ(m.vocab.types[1], TokenType::Control);
  EXPECT_EQ(m.vocab.tokens[13], "<0x0A>");
  EXPECT_EQ(m.vocab.types[13], TokenType::Byte);
  EXPECT_EQ(m.vocab.tokens[29871], "\xE2\x96\x81");
  EXPECT_EQ(m.vocab.find("\xE2\x96\x81Hello"), 15043);
}

TEST(SentencePieceModel, ReadsTok512) {
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  const auto m = read_sentencepiece_model(testing::fixture("tok512/tok512.model"));
  EXPECT_EQ(m.vocab.size(), 512);
  EXPECT_TRUE(m.byte_fallback);
  EXPECT_EQ(m.bos_id, 1);
  EXPECT_EQ(m.eos_id, 2);
  EXPECT_EQ(m.vocab.types[3], TokenType::Byte);
  EXPECT_EQ(m.vocab.tokens[3], "<0x00>");
  EXPECT_EQ(m.vocab.types[259], TokenType::Normal);
}

TEST(SentencePieceModel, ParsesSyntheticModel) {
  const auto m = parse(small_model({{"a", -1.0f}, {"b", -2.0f}}));
  ASSERT_EQ(m.vocab.size(), 5);
  EXPECT_EQ(m.vocab.tokens[3], "a");
  EXPECT_FLOAT_EQ(m.vocab.scores[4], -2.0f);
  EXPECT_FALSE(m.byte_fallback);
  EXPECT_FALSE(m.remove_extra_whitespaces);
  EXPECT_EQ(m.vocab.find("b"), 4);
}

TEST(SentencePieceModel, SkipsUnknownFieldsOfEveryWireType) {
  std::string s = small_model({{"a", -1.0f}});
  Proto extra;
  extra.int_field(9, 123456789);             // varint
  extra.key(10, 1).bytes.append(8, '\x01');  // fixed64
  extra.string_field(11, "whatever");        // length-delimited
  extra.float_field(12, 1.5f);               // fixed32
  const auto m = parse(s + extra.bytes);
  EXPECT_EQ(m.vocab.size(), 4);
}

TEST(SentencePieceModel, NegativeIdsAreUnset) {
  Proto m;
  m.string_field(1, piece("<unk>", 0, 2)).string_field(1, piece("a", 0));
  Proto trainer;
  trainer.int_field(3, 2).int_field(41, -1).int_field(42, -1).int_field(43, 1);
  m.string_field(2, trainer.bytes);
  const auto model = parse(m.bytes);
  EXPECT_EQ(model.unk_id, 0);
  EXPECT_EQ(model.bos_id, std::nullopt);
  EXPECT_EQ(model.eos_id, std::nullopt);
  EXPECT_EQ(model.pad_id, 1);
}

TEST(SentencePieceModel, RejectsUnigram) {
  const std::string err = load_error_of(small_model({{"a", -1.0f}}, 1));
  EXPECT_NE(err.find("test.model"), std::string::npos) << err;
  EXPECT_NE(err.find("UNIGRAM"), std::string::npos) << err;
  EXPECT_NE(load_error_of(Proto().string_field(1, piece("a", 0)).bytes).find("UNIGRAM"),
            std::string::npos)
      << "a model without trainer_spec is UNIGRAM by proto default";
}

TEST(SentencePieceModel, RejectsMalformedInput) {
  const std::string good = small_model({{"a", -1.0f}, {"b", -2.0f}});
  // Every truncation of a valid model either parses (cut at a field boundary) or throws
  // tern::Error naming the file; none reads out of bounds.
  int errors = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    try {
      parse(good.substr(0, n));
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).rfind("test.model: ", 0), 0u) << e.what();
    }
  }
  EXPECT_GT(errors, static_cast<int>(good.size()) / 2);

  EXPECT_NE(load_error_of("\x0A\xFF").find("past the end"), std::string::npos);
  EXPECT_NE(load_error_of(std::string("\x08") + std::string(11, '\xFF')).find("varint"),
            std::string::npos);
  EXPECT_NE(load_error_of("\x0B").find("wire type 3"), std::string::npos);
  EXPECT_NE(load_error_of(std::string("\x00\x00", 2)).find("field number 0"), std::string::npos);
  // pieces (field 1) as a varint
  EXPECT_NE(load_error_of("\x08\x01").find("expected length-delimited"), std::string::npos);
  // piece type 7, empty piece, invalid UTF-8 piece
  Proto bad_type;
  bad_type.string_field(1, piece("a", 0, 7));
  EXPECT_NE(load_error_of(bad_type.bytes).find("unknown piece type 7"), std::string::npos);
  Proto empty;
  empty.string_field(1, piece("", 0));
  EXPECT_NE(load_error_of(empty.bytes).find("empty piece"), std::string::npos);
  Proto invalid;
  invalid.string_field(1, piece("\xC3", 0));
  EXPECT_NE(load_error_of(invalid.bytes).find("UTF-8"), std::string::npos);
  // bos_id beyond the vocabulary
  Proto far;
  far.string_field(1, piece("<unk>", 0, 2));
  Proto trainer;
  trainer.int_field(3, 2).int_field(41, 7);
  far.string_field(2, trainer.bytes);
  EXPECT_NE(load_error_of(far.bytes).find("bos_id 7 is outside"), std::string::npos);
  EXPECT_NE(load_error_of("").find("no pieces"), std::string::npos);
}

// --- BPE ---

struct SmallSpm {
  SentencePieceModel model;
  SentencePieceBpe bpe;
  explicit SmallSpm(const std::vector<std::pair<std::string, float>>& pieces,
                    SentencePieceBpeOptions options = {})
      : model(parse(small_model(pieces))), bpe(model.vocab, with_unk(options)) {}
  static SentencePieceBpeOptions with_unk(SentencePieceBpeOptions o) {
    o.unk_id = 0;
    return o;
  }
  std::vector<std::string> pieces(std::string_view text) const {
    std::vector<int32_t> ids;
    bpe.encode(text, ids);
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(model.vocab.tokens[static_cast<size_t>(id)]);
    return out;
  }
};

const std::string kSp = "\xE2\x96\x81";

SentencePieceBpeOptions no_prefix() {
  SentencePieceBpeOptions o;
  o.add_dummy_prefix = false;
  return o;
}

SentencePieceBpeOptions collapsing() {
  SentencePieceBpeOptions o;
  o.remove_extra_whitespaces = true;
  return o;
}

TEST(SentencePieceBpe, MergesHighestScoreFirst) {
  // "abc": ab (-1) beats bc (-2), then abc is not reachable from ab+c unless present.
  SmallSpm spm({{"a", -10}, {"b", -10}, {"c", -10}, {kSp, -10}, {"ab", -1}, {"bc", -2}},
               no_prefix());
  EXPECT_EQ(spm.pieces("abc"), (std::vector<std::string>{"ab", "c"}));
  SmallSpm spm2({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}}, no_prefix());
  EXPECT_EQ(spm2.pieces("abc"), (std::vector<std::string>{"a", "bc"}));
}

TEST(SentencePieceBpe, TiesGoToTheLeftmostPair) {
  SmallSpm spm({{"a", -10}, {"aa", -1}}, no_prefix());
  EXPECT_EQ(spm.pieces("aaa"), (std::vector<std::string>{"aa", "a"}));
  EXPECT_EQ(spm.pieces("aaaaa"), (std::vector<std::string>{"aa", "aa", "a"}));
}

TEST(SentencePieceBpe, MergedPiecesKeepMerging) {
  SmallSpm spm(
      {{"a", -10}, {"b", -10}, {"ab", -1}, {"abab", -0.5}, {kSp, -10}, {kSp + "abab", -3}});
  EXPECT_EQ(spm.pieces("abab"), (std::vector<std::string>{kSp + "abab"}));
  EXPECT_EQ(spm.pieces("ab ab"), (std::vector<std::string>{kSp, "ab", kSp, "ab"}));
}

TEST(SentencePieceBpe, DummyPrefixAndWhitespace) {
  SmallSpm spm({{"a", -10}, {kSp, -10}, {kSp + "a", -1}});
  EXPECT_EQ(spm.bpe.normalize("a a"), kSp + "a" + kSp + "a");
  EXPECT_EQ(spm.bpe.normalize(""), "");
  EXPECT_EQ(spm.bpe.normalize(" "), kSp + kSp);
  SmallSpm collapse({{"a", -10}}, collapsing());
  EXPECT_EQ(collapse.bpe.normalize("  a   a  "), kSp + "a" + kSp + "a");
  EXPECT_EQ(collapse.bpe.normalize("   "), "");
}

TEST(SentencePieceBpe, UnknownCharactersBecomeUnkWithoutByteFallback) {
  SmallSpm spm({{"a", -10}}, no_prefix());
  EXPECT_EQ(spm.pieces("a\xC3\xA9"
                       "a"),
            (std::vector<std::string>{"a", "<unk>", "a"}));
}

TEST(SentencePieceBpe, ParsesBytePieces) {
  EXPECT_EQ(parse_byte_piece("<0x0A>"), 0x0A);
  EXPECT_EQ(parse_byte_piece("<0xff>"), 0xFF);
  EXPECT_EQ(parse_byte_piece("<0x0G>"), std::nullopt);
  EXPECT_EQ(parse_byte_piece("<0x0A"), std::nullopt);
}

TEST(SentencePieceBpe, Llama2ByteFallbackAndInvalidBytes) {
  TERN_REQUIRE_FIXTURE("llama2-tokenizer/tokenizer.model");
  const auto m = read_sentencepiece_model(testing::fixture("llama2-tokenizer/tokenizer.model"));
  SentencePieceBpeOptions options;
  options.unk_id = m.unk_id;
  SentencePieceBpe bpe(m.vocab, options);
  std::vector<int32_t> ids;
  bpe.encode("\xF0\x9F\xA6\x99", ids);  // 🦙: no piece, four byte pieces after "▁"
  EXPECT_EQ(ids, (std::vector<int32_t>{29871, 243, 162, 169, 156}));
  ids.clear();
  bpe.encode("a\xFF", ids);  // an invalid byte still round-trips as <0xFF>
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[1], 0xFF + 3);
}

// The model alone (no special-token split) on llama.cpp's Llama 2 vectors; the end-to-end
// version through Tokenizer is in llama_cpp_vectors_test.cpp.
TEST(SentencePieceBpe, Llama2VectorsFromTokenizerModel) {
  TERN_REQUIRE_FIXTURE("llama2-tokenizer/tokenizer.model");
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf.inp");
  const auto m = read_sentencepiece_model(testing::fixture("llama2-tokenizer/tokenizer.model"));
  SentencePieceBpeOptions options;
  options.unk_id = m.unk_id;
  SentencePieceBpe bpe(m.vocab, options);
  const auto vectors = testing::read_llama_cpp_vectors(
      testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf.inp"),
      testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf.out"));
  ASSERT_EQ(vectors.size(), 46u);
  int exact = 0;
  for (const auto& v : vectors) {
    std::vector<int32_t> ids;
    bpe.encode(v.text, ids);
    EXPECT_EQ(ids, v.ids) << "text: '" << v.text << "'";
    exact += ids == v.ids;
  }
  EXPECT_EQ(exact, 46);
}

TEST(Utf8Scan, ClassifiesSequences) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  const std::string s = "\xF0\x9F\x98";
  EXPECT_EQ(next_utf8_char(s, 0).status, Utf8Status::Incomplete);
  EXPECT_EQ(next_utf8_char(s, 0).length, 3u);
  EXPECT_EQ(sanitize_utf8("a\xE2\x82"
                          "b\xFF"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tern
