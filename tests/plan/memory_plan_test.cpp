// The KV cache and working-memory sums of `tern plan`: KV bytes per token of each fixture and
// each KV dtype by hand, whole blocks for a context × sequences, and the working memory equal
// to what a Decoder really holds after reserving for the same step.
#include "tern/plan/memory_plan.h"

#include <gtest/gtest.h>

#include "models/model_test_util.h"
#include "plan/plan_test_util.h"
#include "tern/models/decoder.h"
#include "tern/models/weight_loader.h"

namespace tern::plan {
namespace {

using testing::fixture_config;

struct KvCase {
  const char* model;
  int64_t layers, kv_heads, head_dim;
};

TEST(MemoryPlan, KvBytesPerTokenOfEachFixtureAndDtypeByHand) {
  const KvCase cases[] = {{"qwen3-0.6b", 28, 8, 128},
                          {"qwen3-1.7b", 28, 8, 128},
                          {"qwen3-4b", 36, 8, 128},
                          {"qwen3-8b", 36, 8, 128},
                          {"llama-3.2-1b", 16, 8, 64}};
  for (const KvCase& k : cases) {
    TERN_REQUIRE_FIXTURE(testing::model_config_fixture(k.model));
    const ModelConfig c = fixture_config(k.model);
    // K and V, every layer and kv head: head_dim elements, plus an f16 scale in the 8-bit types.
    const int64_t half = 2 * k.layers * k.kv_heads * k.head_dim * 2;
    const int64_t eight_bit = 2 * k.layers * k.kv_heads * (k.head_dim + 2);
    EXPECT_EQ(plan_kv(c, KvDtype::F16, 1, 1, 16, find_device("cpu")).bytes_per_token, half)
        << k.model;
    EXPECT_EQ(plan_kv(c, KvDtype::BF16, 1, 1, 16, find_device("cpu")).bytes_per_token, half)
        << k.model;
    for (KvDtype d : {KvDtype::Fp8E4M3, KvDtype::Fp8E5M2, KvDtype::Int8})
      EXPECT_EQ(plan_kv(c, d, 1, 1, 16, find_device("cpu")).bytes_per_token, eight_bit) << k.model;
  }
  // Qwen3-8B: 144 KiB a token at f16, so 8K of context is 1.125 GiB per sequence.
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  EXPECT_EQ(plan_kv(fixture_config("qwen3-8b"), KvDtype::F16, 1, 1, 16, find_device("cpu"))
                .bytes_per_token,
            147456);
}

TEST(MemoryPlan, KvCacheIsWholeBlocksPerSequenceAndTheLayersPadding) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const ModelConfig c = fixture_config("qwen3-8b");
  // 1000 tokens need ⌈1000 / 16⌉ = 63 blocks each; 3 sequences 189 blocks of 16 tokens.
  const KvPlan f16 = plan_kv(c, KvDtype::F16, 1000, 3, 16, find_device("cpu"));
  EXPECT_EQ(f16.num_blocks, 189);
  // Each layer's K and V arrays start on 64 bytes: 2 · 36 · 64 bytes at most.
  EXPECT_EQ(f16.bytes, 189ull * 16 * 147456 + 2 * 36 * 64);
  // The 8-bit caches' scale arrays are aligned too: 4 arrays a layer.
  const KvPlan int8 = plan_kv(c, KvDtype::Int8, 1000, 3, 16, find_device("cpu"));
  EXPECT_EQ(int8.bytes, 189ull * 16 * 74880 + 4 * 36 * 64);
  EXPECT_EQ(plan_kv(c, KvDtype::F16, 40960, 1, 16, find_device("cpu")).bytes,
            2560ull * 16 * 147456 + 2 * 36 * 64);
}

TEST(MemoryPlan, WorkingMemoryOfQwen3_8bByHand) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const ModelConfig c = fixture_config("qwen3-8b");
  const WeightPlan f16 = plan_recipe_weights(c, *parse_weight_recipe("f16"));
  const WorkingMemory w = plan_working_memory(c, f16, 512, 4, find_device("cpu"));
  // f32 buffers of 512 tokens: x, xn, out [4096]; q, attn [4096]; k, v [1024]; gate, up
  // [12288]; cos/sin [128]; the final norm's 4 rows [4096]. F16 weights have no fused copies.
  const uint64_t floats = 512ull * (3 * 4096 + 2 * 4096 + 2 * 1024 + 2 * 12288 + 128) + 4 * 4096;
  EXPECT_EQ(w.activations, 4 * floats);
  // F16 matrices take f32 activations: the widest input is ffn_down's 12288.
  EXPECT_EQ(w.workspace, 512ull * 12288 * 4);
  EXPECT_EQ(w.logits, 4ull * 151936 * 4);
  EXPECT_EQ(w.total(), w.activations + w.workspace + w.logits);
}

// The plan's working memory is what a Decoder of those weights holds after reserving for the
// step (the logits are the caller's), fused copies and this CPU's activation formats included.
TEST(MemoryPlan, WorkingMemoryEqualsWhatTheDecoderAllocates) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  for (const char* type : {"f16", "q8_0", "q4_0", "q4_k_m", "bf16"}) {
    const QuantRecipe recipe = *parse_weight_recipe(type);
    ModelWeights weights = make_dummy_weights(c, recipe, 5);
    find_device("cpu").prepare_weights(weights);
    Decoder decoder(c, weights, find_device("cpu"));
    for (const auto& [tokens, rows] : {std::pair<int64_t, int64_t>{1, 1}, {37, 3}, {512, 16}}) {
      decoder.reserve(tokens, rows);
      const WorkingMemory w =
          plan_working_memory(c, plan_recipe_weights(c, recipe), tokens, rows, find_device("cpu"));
      EXPECT_EQ(decoder.buffer_bytes(), w.activations + w.workspace) << type << " " << tokens;
    }
  }
}

}  // namespace
}  // namespace tern::plan
