// --speculative-config and its short form: vLLM's keys and defaults, and an error naming
// every key or value tern would otherwise have to ignore.
#include "tern/spec_decode/speculative_config.h"

#include <gtest/gtest.h>

#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

std::string config_error_of(const std::string& json) {
  try {
    parse_speculative_config(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpeculativeConfig, ParsesBothMethodsWithVllmsDefaults) {
  const SpeculativeConfig d = parse_speculative_config(
      R"({"method":"draft_model","model":"D","num_speculative_tokens":4})");
  EXPECT_EQ(d.method, SpeculativeMethod::kDraftModel);
  EXPECT_EQ(d.model, "D");
  EXPECT_EQ(d.num_speculative_tokens, 4);
  EXPECT_TRUE(d.adaptive);

  const SpeculativeConfig n = parse_speculative_config(
      R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4})");
  EXPECT_EQ(n.method, SpeculativeMethod::kNgram);
  EXPECT_EQ(n.prompt_lookup_max, 4);
  EXPECT_EQ(n.prompt_lookup_min, 4);  // one given: both
  const SpeculativeConfig both =
      parse_speculative_config(R"({"method":"ngram","num_speculative_tokens":2})");
  EXPECT_EQ(both.prompt_lookup_min, 5);  // vLLM's defaults
  EXPECT_EQ(both.prompt_lookup_max, 5);

  // A model without a method is a draft model; "[ngram]" as the model is n-gram (vLLM's older
  // form).
  EXPECT_EQ(parse_speculative_config(R"({"model":"D","num_speculative_tokens":1})").method,
            SpeculativeMethod::kDraftModel);
  const SpeculativeConfig old =
      parse_speculative_config(R"({"model":"[ngram]","num_speculative_tokens":3})");
  EXPECT_EQ(old.method, SpeculativeMethod::kNgram);
  EXPECT_TRUE(old.model.empty());

  const SpeculativeConfig extras = parse_speculative_config(
      R"({"model":"D","num_speculative_tokens":2,"weight_type":"q4_0","dtype":"half","load_format":"dummy","adaptive":false,
          "disable_by_batch_size":8,"max_model_len":256,"revision":"r1","draft_tensor_parallel_size":1})");
  EXPECT_EQ(extras.weight_type, "q4_0");
  EXPECT_EQ(extras.dtype, "half");
  EXPECT_EQ(extras.load_format, "dummy");
  EXPECT_FALSE(extras.adaptive);
  EXPECT_EQ(extras.disable_by_batch_size, 8);
  EXPECT_EQ(extras.max_model_len, 256);
  EXPECT_EQ(extras.revision, "r1");
}

TEST(SpeculativeConfig, RefusesWhatItWouldHaveToIgnoreByName) {
  EXPECT_NE(config_error_of(R"({"model":"D","num_speculative_tokens":2,"quantization":"awq"})")
                .find("'quantization'"),
            std::string::npos);
  EXPECT_NE(config_error_of(R"({"method":"eagle","model":"D","num_speculative_tokens":2})")
                .find("\"eagle\""),
            std::string::npos);
  EXPECT_NE(config_error_of(R"({"model":"D"})").find("num_speculative_tokens"), std::string::npos);
  EXPECT_NE(config_error_of(R"({"model":"D","num_speculative_tokens":33})").find("<= 32"),
            std::string::npos);
  EXPECT_NE(
      config_error_of(R"({"model":"D","num_speculative_tokens":"4"})").find("must be an integer"),
      std::string::npos);
  EXPECT_NE(config_error_of(R"({"method":"draft_model","num_speculative_tokens":4})")
                .find("needs a model"),
            std::string::npos);
  EXPECT_NE(config_error_of(R"({"method":"ngram","model":"D","num_speculative_tokens":4})")
                .find("takes no model"),
            std::string::npos);
  EXPECT_NE(
      config_error_of(
          R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":5,"prompt_lookup_max":3})")
          .find("prompt_lookup_min"),
      std::string::npos);
  EXPECT_NE(config_error_of(R"({"model":"D","num_speculative_tokens":4,"prompt_lookup_max":3})")
                .find("ngram"),
            std::string::npos);
  EXPECT_NE(
      config_error_of(R"({"model":"D","num_speculative_tokens":4,"draft_tensor_parallel_size":2})")
          .find("draft_tensor_parallel_size"),
      std::string::npos);
  EXPECT_NE(config_error_of(R"({"num_speculative_tokens":4})").find("give a method"),
            std::string::npos);
  // "dtype" is vLLM's compute type: a quantized one points at tern's "weight_type".
  EXPECT_NE(config_error_of(R"({"model":"D","num_speculative_tokens":4,"dtype":"q8_0"})")
                .find("'weight_type' q8_0"),
            std::string::npos);
  EXPECT_NE(config_error_of(R"({"model":"D","num_speculative_tokens":4,"weight_type":"q3_k_xl"})")
                .find("'weight_type'"),
            std::string::npos);
  EXPECT_NE(config_error_of("[1]").find("JSON object"), std::string::npos);
  EXPECT_NE(config_error_of("{").find("not JSON"), std::string::npos);
}

TEST(SpeculativeConfig, ShortFormIsFinalizedTheSameWay) {
  SpeculativeConfig c;
  finalize_speculative_config(c);  // nothing asked: off
  EXPECT_FALSE(c.enabled());
  c.model = "[ngram]";
  c.num_speculative_tokens = 3;
  finalize_speculative_config(c);
  EXPECT_EQ(c.method, SpeculativeMethod::kNgram);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  SpeculativeConfig k_only;
  k_only.num_speculative_tokens = 4;
  EXPECT_THROW(finalize_speculative_config(k_only), Error);
}

}  // namespace
}  // namespace tern
