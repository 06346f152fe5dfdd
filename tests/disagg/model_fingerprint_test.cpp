// The fingerprint two instances compare: equal for the same model and KV layout, different
// when the weights, the KV dtype or the block size differ.
#include "tern/disagg/model_fingerprint.h"

#include <gtest/gtest.h>

#include "engine/engine_test_util.h"

namespace tern::disagg {
namespace {

TEST(ModelFingerprint, SameModelAndLayoutOnly) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/tokenizer_config.json");
  const LoadedModel a = tern::testing::stories260k();
  const LoadedModel b = tern::testing::stories260k();
  const Decoder da(a.config, a.weights, find_device("cpu")),
      db(b.config, b.weights, find_device("cpu"));
  const std::string fa = model_fingerprint(da, da.kv_cache_config(8));
  EXPECT_EQ(fa.size(), 32u);
  EXPECT_EQ(fa, model_fingerprint(db, db.kv_cache_config(100)));  // the block count is local
  EXPECT_NE(fa, model_fingerprint(da, da.kv_cache_config(8, 16, KvDtype::Int8)));
  EXPECT_NE(fa, model_fingerprint(da, da.kv_cache_config(8, 32)));

  const LoadedModel q = tern::testing::tiny_qwen3();
  const Decoder dq(q.config, q.weights, find_device("cpu"));
  EXPECT_NE(fa, model_fingerprint(dq, dq.kv_cache_config(8)));
  // Same shapes, other weights (another dummy seed).
  LoadedModel q2 = tern::testing::tiny_qwen3();
  q2.weights = make_dummy_weights(q2.config, DType::Q4_K, 12);
  const Decoder dq2(q2.config, q2.weights, find_device("cpu"));
  EXPECT_NE(model_fingerprint(dq, dq.kv_cache_config(8)),
            model_fingerprint(dq2, dq2.kv_cache_config(8)));
}

}  // namespace
}  // namespace tern::disagg
