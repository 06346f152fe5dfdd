// The weight sums of `tern plan` against the same sums done by hand from the fixture configs:
// parameters and bytes per type, what a decode reads, the Q4_K_M mixture's per-tensor choice,
// and a GGUF (and a Hugging Face folder) whose plan is exactly its file's tensor bytes.
#include "tern/plan/weight_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "models/model_test_util.h"
#include "plan/plan_test_util.h"
#include "tern/formats/gguf.h"
#include "tern/formats/safetensors.h"
#include "tern/models/gguf_export.h"
#include "tern/models/weight_loader.h"
#include "tern/plan/plan.h"
#include "tern/plan/plan_model.h"

namespace tern::plan {
namespace {

using testing::fixture_config;
using testing::fixture_plan_model;

const TypeTotal* find_type(const std::vector<TypeTotal>& totals, DType dtype) {
  for (const TypeTotal& t : totals)
    if (t.dtype == dtype) return &t;
  return nullptr;
}

const PlannedTensor* find_tensor(const WeightPlan& p, const std::string& name) {
  for (const PlannedTensor& t : p.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// Qwen3-8B: vocab 151936, hidden 4096, 36 layers, 32 heads / 8 kv heads of 128, ffn 12288,
// untied. Per layer q 4096×4096, k and v 1024×4096, o 4096×4096, gate/up 12288×4096, down
// 4096×12288; norms attn/ffn 4096, q/k 128 each.
constexpr uint64_t kQwen8bLayerMatrix =
    2 * 4096ull * 4096 + 2 * 1024ull * 4096 + 3 * 12288ull * 4096;  // 192,937,984
constexpr uint64_t kQwen8bEmbedding = 151936ull * 4096;             // 622,329,856
constexpr uint64_t kQwen8bMatrices =
    36 * kQwen8bLayerMatrix + 2 * kQwen8bEmbedding;                         // 8,190,427,136
constexpr uint64_t kQwen8bVectors = 36 * (4096 + 4096 + 128 + 128) + 4096;  // 308,224

TEST(WeightPlan, Qwen3_8bAtF16AndQ4_0ByHand) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-8b"));
  const ModelConfig c = fixture_config("qwen3-8b");
  static_assert(kQwen8bMatrices == 8'190'427'136ull && kQwen8bVectors == 308'224);

  const WeightPlan f16 = plan_recipe_weights(c, *parse_weight_recipe("f16"));
  EXPECT_EQ(f16.parameters(), kQwen8bMatrices + kQwen8bVectors);
  const std::vector<TypeTotal> f16_types = f16.by_type();
  ASSERT_EQ(f16_types.size(), 2u);
  EXPECT_EQ(f16_types[0].dtype, DType::F16);
  EXPECT_EQ(f16_types[0].tensors, 36 * 7 + 2);
  EXPECT_EQ(f16_types[0].bytes, 2 * kQwen8bMatrices);  // 16,380,854,272
  EXPECT_EQ(f16_types[1].dtype, DType::F32);           // norms, as tern writes them
  EXPECT_EQ(f16_types[1].tensors, 36 * 4 + 1);
  EXPECT_EQ(f16_types[1].bytes, 4 * kQwen8bVectors);
  EXPECT_EQ(f16.total_bytes(), 16'382'087'168ull);
  // Untied: a decode reads one row of the embedding table, not the table.
  EXPECT_EQ(f16.bytes_read_per_token(), f16.total_bytes() - 2 * kQwen8bEmbedding);
  EXPECT_EQ(f16.repacked_bytes(find_device("cpu")), 0u);

  // Q4_0: 18 bytes per 32 weights.
  const WeightPlan q4 = plan_recipe_weights(c, *parse_weight_recipe("q4_0"));
  const std::vector<TypeTotal> q4_types = q4.by_type();
  const TypeTotal* q4_type = find_type(q4_types, DType::Q4_0);
  ASSERT_NE(q4_type, nullptr);
  EXPECT_EQ(q4_type->bytes, kQwen8bMatrices / 32 * 18);  // 4,607,115,264
  EXPECT_EQ(q4.total_bytes(), kQwen8bMatrices / 32 * 18 + 4 * kQwen8bVectors);
  EXPECT_EQ(q4.bytes_read_per_token(),
            q4.total_bytes() - kQwen8bEmbedding / 32 * 18);  // 4,258,287,616
}

TEST(WeightPlan, ConfigAloneIsItsCheckpointAtTorchDtype) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-0.6b"));
  // Qwen3-0.6B: tied, 28 layers, hidden 1024, q 2048, kv 1024, ffn 3072; bfloat16.
  const PlanModel m = fixture_plan_model("qwen3-0.6b");
  EXPECT_EQ(m.format, "config.json");
  const WeightPlan p = plan_weights(m, std::nullopt);
  const uint64_t matrices = 151936ull * 1024 + 28 * (2048ull * 1024 + 2 * 1024ull * 1024 +
                                                     1024ull * 2048 + 3 * 3072ull * 1024);
  const uint64_t vectors = 28 * (1024 + 1024 + 128 + 128) + 1024;
  ASSERT_EQ(p.by_type().size(), 1u);
  EXPECT_EQ(p.by_type()[0].dtype, DType::BF16);
  EXPECT_EQ(p.parameters(), matrices + vectors);  // 596,049,920: "0.6B" without the tied head
  EXPECT_EQ(p.total_bytes(), 2 * (matrices + vectors));
  EXPECT_TRUE(p.tied_embeddings);
  EXPECT_EQ(find_tensor(p, "output.weight"), nullptr);
  // Tied: the embedding table is lm_head too, and lm_head reads all of it.
  EXPECT_EQ(p.bytes_read_per_token(), p.total_bytes());
}

TEST(WeightPlan, Llama3ScalingAddsRopeFreqsOnlyToWhatTernWrites) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("llama-3.2-1b"));
  const ModelConfig c = fixture_config("llama-3.2-1b");
  // head_dim 64: 32 f32 divisors, which save_gguf writes and a Hugging Face checkpoint lacks.
  const WeightPlan q8 = plan_recipe_weights(c, *parse_weight_recipe("q8_0"));
  const PlannedTensor* freqs = find_tensor(q8, "rope_freqs.weight");
  ASSERT_NE(freqs, nullptr);
  EXPECT_EQ(freqs->dtype, DType::F32);
  EXPECT_EQ(freqs->bytes, 32u * 4);
  EXPECT_EQ(find_tensor(plan_checkpoint_weights(c, DType::BF16), "rope_freqs.weight"), nullptr);
  // Llama 3.2 1B: 16 layers, hidden 2048, 32 heads / 8 kv heads of 64, ffn 8192, tied.
  const uint64_t matrices =
      128256ull * 2048 + 16 * (2 * 2048ull * 2048 + 2 * 512ull * 2048 + 3 * 8192ull * 2048);
  const std::vector<TypeTotal> q8_types = q8.by_type();
  EXPECT_EQ(find_type(q8_types, DType::Q8_0)->elements, matrices);  // 1,235,746,816
  EXPECT_EQ(find_type(q8_types, DType::Q8_0)->bytes, matrices / 32 * 34);
}

TEST(WeightPlan, Q4_K_MChoosesPerTensorAsLlamaQuantize) {
  TERN_REQUIRE_FIXTURE(testing::model_config_fixture("qwen3-0.6b"));
  const ModelConfig c = fixture_config("qwen3-0.6b");
  const WeightPlan p = plan_recipe_weights(c, *parse_weight_recipe("q4_k_m"));
  // use_more_bits for 28 layers: the first 3, the last 4 (from 7·28/8 = 24) and every third
  // from layer 5: attn_v and ffn_down of those 14 layers are Q6_K, as is the tied embedding.
  const std::vector<int> more_bits = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
  for (int i = 0; i < 28; ++i) {
    const bool more = std::count(more_bits.begin(), more_bits.end(), i) > 0;
    const std::string layer = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(find_tensor(p, layer + "attn_v.weight")->dtype, more ? DType::Q6_K : DType::Q4_K)
        << i;
    EXPECT_EQ(find_tensor(p, layer + "ffn_down.weight")->dtype, more ? DType::Q6_K : DType::Q4_K)
        << i;
    EXPECT_EQ(find_tensor(p, layer + "attn_q.weight")->dtype, DType::Q4_K) << i;
  }
  EXPECT_EQ(find_tensor(p, "token_embd.weight")->dtype, DType::Q6_K);
  const uint64_t v_down = 1024ull * 1024 + 1024ull * 3072;  // attn_v + ffn_down of one layer
  const uint64_t q6k = 151936ull * 1024 + 14 * v_down;
  const uint64_t q4k =
      28 * (2048ull * 1024 + 1024ull * 1024 + 1024ull * 2048 + 2 * 3072ull * 1024) + 14 * v_down;
  // Q6_K: 210 bytes per 256 weights; Q4_K: 144.
  const std::vector<TypeTotal> p_types = p.by_type();
  EXPECT_EQ(find_type(p_types, DType::Q6_K)->bytes, q6k / 256 * 210);
  EXPECT_EQ(find_type(p_types, DType::Q4_K)->bytes, q4k / 256 * 144);
  EXPECT_EQ(find_type(p_types, DType::Q6_K)->tensors, 1 + 2 * 14);
}

TEST(WeightPlan, AGgufsPlanIsItsTensorBytesAndWhatTheRecipeSays) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  testing::TempDir dir("plan-gguf");
  const ModelConfig c = testing::tiny_qwen3_config(8, /*tied=*/false);
  const QuantRecipe recipe = *parse_weight_recipe("q4_k_m");
  const std::string path = dir.file("q4_k_m.gguf");
  save_gguf(path, make_dummy_weights(c, recipe, 3), c, nullptr, "tiny");

  const PlanModel m = open_plan_model(path);
  EXPECT_EQ(m.format, "GGUF");
  const WeightPlan file = plan_weights(m, std::nullopt);
  uint64_t tensor_bytes = 0;
  const GgufFile gguf = GgufFile::open(path);
  for (const TensorInfo& t : gguf.tensors()) tensor_bytes += t.nbytes;
  EXPECT_EQ(file.total_bytes(), tensor_bytes);
  EXPECT_EQ(file.tensors.size(), gguf.tensors().size());
  EXPECT_EQ(file.types, "the file's");
  // The file tern made with the recipe has exactly the types the plan of the recipe predicts.
  const WeightPlan predicted = plan_recipe_weights(c, recipe);
  ASSERT_EQ(predicted.tensors.size(), file.tensors.size());
  for (const PlannedTensor& t : predicted.tensors) {
    const PlannedTensor* f = find_tensor(file, t.name);
    ASSERT_NE(f, nullptr) << t.name;
    EXPECT_EQ(f->dtype, t.dtype) << t.name;
    EXPECT_EQ(f->bytes, t.bytes) << t.name;
  }
  EXPECT_EQ(file.bytes_read_per_token(),
            tensor_bytes - find_tensor(file, "token_embd.weight")->bytes);
  // --weight-type on the file plans what requantizing it would make.
  const WeightPlan q8 = plan_weights(m, parse_weight_recipe("q8_0"));
  EXPECT_EQ(q8.types, "--weight-type Q8_0");
  EXPECT_EQ(find_tensor(q8, "blk.3.ffn_down.weight")->dtype, DType::Q8_0);
}

TEST(WeightPlan, AHuggingFaceFolderIsItsSafetensorsBytes) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  testing::TempDir dir("plan-hf");
  const nlohmann::json overrides = testing::tiny_qwen3_overrides(2);
  const ModelConfig c = testing::shrunk_config("model-configs/qwen3-0.6b", overrides);
  std::ifstream in(testing::fixture("model-configs/qwen3-0.6b/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto it = overrides.begin(); it != overrides.end(); ++it) j[it.key()] = it.value();
  testing::write_hf_folder(dir, j, c, make_dummy_weights(c, DType::F32, 1), DType::BF16);

  const PlanModel m = open_plan_model(dir.path().string());
  EXPECT_EQ(m.format, "safetensors");
  uint64_t bytes = 0;
  const SafetensorsModel st = SafetensorsModel::open(dir.path().string());
  for (const TensorInfo& t : st.tensors()) bytes += t.nbytes;
  const WeightPlan p = plan_weights(m, std::nullopt);
  EXPECT_EQ(p.total_bytes(), bytes);
  // A BF16 checkpoint (norms in BF16 too) is what the config alone at its torch_dtype predicts.
  EXPECT_EQ(plan_checkpoint_weights(m.config, DType::BF16).total_bytes(), bytes);
}

TEST(WeightPlan, TensorPartsByGgufAndHuggingFaceNames) {
  EXPECT_EQ(tensor_part("blk.12.attn_v.weight").role, TensorRole::V);
  EXPECT_EQ(tensor_part("blk.12.attn_v.weight").layer, 12);
  EXPECT_EQ(tensor_part("model.layers.3.mlp.down_proj.weight").role, TensorRole::Down);
  EXPECT_EQ(tensor_part("model.layers.3.mlp.down_proj.weight").layer, 3);
  EXPECT_EQ(tensor_part("model.embed_tokens.weight").role, TensorRole::TokenEmbedding);
  EXPECT_EQ(tensor_part("lm_head.weight").role, TensorRole::Output);
  EXPECT_EQ(tensor_part("blk.1.attn_norm.weight").role, TensorRole::Other);
  EXPECT_EQ(tensor_part("blk.x.attn_q.weight").role, TensorRole::Other);
  EXPECT_EQ(tensor_part("blk.1").role, TensorRole::Other);
  // A mixture of experts': the router, stacked experts (GGUF) and one expert's (Hugging Face).
  EXPECT_EQ(tensor_part("blk.4.ffn_gate_inp.weight").role, TensorRole::Router);
  EXPECT_EQ(tensor_part("model.layers.4.mlp.gate.weight").role, TensorRole::Router);
  const TensorPart stacked = tensor_part("blk.4.ffn_down_exps.weight");
  EXPECT_EQ(stacked.role, TensorRole::Down);
  EXPECT_TRUE(stacked.experts);
  const TensorPart one = tensor_part("model.layers.4.mlp.experts.127.up_proj.weight");
  EXPECT_EQ(one.role, TensorRole::Up);
  EXPECT_EQ(one.layer, 4);
  EXPECT_TRUE(one.experts);
  EXPECT_FALSE(tensor_part("model.layers.4.mlp.up_proj.weight").experts);
  EXPECT_EQ(tensor_part("model.layers.4.mlp.experts.x.up_proj.weight").role, TensorRole::Other);
}

// Qwen3-30B-A3B (tests/data/model-configs): 48 layers of hidden 2048, q 4096 and kv 512 wide,
// 128 experts of 768 with 8 per token, vocabulary 151936, untied. A decode reads the attention,
// the routers, lm_head and 8/128 of the experts: the active parameters, not the total.
TEST(WeightPlan, MixtureOfExpertsReadsTheActiveParameters) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/qwen3-30b-a3b");
  const WeightPlan p = plan_recipe_weights(c, *parse_weight_recipe("bf16"));
  constexpr uint64_t kAttention = 2 * 4096ull * 2048 + 2 * 512ull * 2048;  // q, o, k, v
  constexpr uint64_t kRouter = 128ull * 2048;
  constexpr uint64_t kExperts = 128ull * 3 * 768 * 2048;
  constexpr uint64_t kEmbedding = 151936ull * 2048;
  constexpr uint64_t kVectors = 48 * (2 * 2048 + 2 * 128) + 2048;
  EXPECT_EQ(p.parameters(), 48 * (kAttention + kRouter + kExperts) + 2 * kEmbedding + kVectors);
  EXPECT_EQ(p.parameters(), 30'532'122'624ull);  // the published 30.5 B
  const PlannedTensor* router = find_tensor(p, "blk.0.ffn_gate_inp.weight");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->dtype, DType::F32);  // as llama-quantize leaves it
  const PlannedTensor* gate = find_tensor(p, "blk.47.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{128, 768, 2048}));
  EXPECT_EQ(p.bytes_read_per_token(),
            2 * (48 * (kAttention + kExperts / 16) + kEmbedding) + 4 * 48 * kRouter + 4 * kVectors);
  // The working memory's matrices: one expert's in the gate, up and down slots.
  const std::vector<std::vector<MatrixShape>> layers = p.layer_matrices();
  ASSERT_EQ(layers.size(), 48u);
  EXPECT_EQ(layers[0][static_cast<size_t>(TensorRole::Down)].rows, 2048);
  EXPECT_EQ(layers[0][static_cast<size_t>(TensorRole::Down)].cols, 768);
}

// Qwen1.5-MoE-A2.7B (tests/data/model-configs): 24 layers of hidden 2048 with q/k/v biases, 60
// experts of 1408 with 4 per token and a shared expert of 5632 every token reads, vocabulary
// 151936, untied: the published 14.3 B parameters, 2.7 B of them active.
TEST(WeightPlan, SharedExpertIsReadByEveryToken) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/qwen1.5-moe-a2.7b");
  const WeightPlan p = plan_recipe_weights(c, *parse_weight_recipe("bf16"));
  constexpr uint64_t kAttention = 4 * 2048ull * 2048;
  constexpr uint64_t kRouter = 60ull * 2048;
  constexpr uint64_t kExperts = 60ull * 3 * 1408 * 2048;
  constexpr uint64_t kShared = 3ull * 5632 * 2048;
  constexpr uint64_t kEmbedding = 151936ull * 2048;
  // Per layer two norms, the shared expert's gate and the q, k and v biases; the final norm.
  constexpr uint64_t kVectors = 24 * (3 * 2048 + 3 * 2048) + 2048;
  EXPECT_EQ(p.parameters(),
            24 * (kAttention + kRouter + kExperts + kShared) + 2 * kEmbedding + kVectors);
  EXPECT_EQ(p.parameters(), 14'315'784'192ull);
  const PlannedTensor* shared = find_tensor(p, "blk.23.ffn_down_shexp.weight");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->shape, (std::vector<int64_t>{2048, 5632}));
  EXPECT_TRUE(tensor_part("blk.3.ffn_up_shexp.weight").shared_expert);
  EXPECT_FALSE(tensor_part("blk.3.ffn_up_shexp.weight").experts);
  EXPECT_EQ(tensor_part("model.layers.3.mlp.shared_expert.up_proj.weight").role, TensorRole::Up);
  EXPECT_EQ(p.bytes_read_per_token(),
            2 * (24 * (kAttention + kExperts / 15 + kShared) + kEmbedding) + 4 * 24 * kRouter +
                4 * kVectors);
  // The working memory's matrices: an expert's in the gate, up and down slots, the shared
  // expert's after them.
  const std::vector<std::vector<MatrixShape>> layers = p.layer_matrices();
  ASSERT_EQ(layers.size(), 24u);
  ASSERT_EQ(layers[0].size(), 10u);
  EXPECT_EQ(layers[0][static_cast<size_t>(TensorRole::Down)].cols, 1408);
  EXPECT_EQ(layers[0][9].cols, 5632);
}

// Gemma 3 1B (tests/data/model-configs): four norms a layer and q/k norms, tied: the published
// 999,885,952 parameters.
TEST(WeightPlan, Gemma3CountsItsPostNorms) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/gemma-3-1b-it");
  const WeightPlan p = plan_recipe_weights(c, *parse_weight_recipe("bf16"));
  EXPECT_EQ(p.parameters(), 999'885'952ull);
  ASSERT_NE(find_tensor(p, "blk.25.post_ffw_norm.weight"), nullptr);
  ASSERT_NE(find_tensor(p, "blk.25.post_attention_norm.weight"), nullptr);
}

// gpt-oss-20b (tests/data/model-configs): 24 layers of q/k/v/o with biases and sinks, 32 experts
// of 2880 with biases, 4 per token, vocabulary 201088, untied: the published 20.91 B parameters;
// a token reads its 4 experts' matrices and biases only.
TEST(WeightPlan, GptOssCountsItsBiasesAndSinks) {
  const ModelConfig c = ModelConfig::from_hf_dir(std::string(TERN_SOURCE_DIR) +
                                                 "/tests/data/model-configs/gpt-oss-20b");
  const WeightPlan p = plan_recipe_weights(c, *parse_weight_recipe("bf16"));
  constexpr uint64_t kAttention = 2 * 4096ull * 2880 + 2 * 512ull * 2880;
  constexpr uint64_t kRouter = 32ull * 2880;
  constexpr uint64_t kExperts = 32ull * 3 * 2880 * 2880;
  constexpr uint64_t kEmbedding = 201088ull * 2880;
  // Per layer q/k/v/o biases, sinks, two norms and the router's bias; the experts' biases.
  constexpr uint64_t kVectors = 4096 + 2 * 512 + 2880 + 64 + 2 * 2880 + 32;
  constexpr uint64_t kExpertBiases = 32ull * 3 * 2880;
  EXPECT_EQ(p.parameters(), 24 * (kAttention + kRouter + kExperts + kVectors + kExpertBiases) +
                                2 * kEmbedding + 2880);
  EXPECT_EQ(p.parameters(), 20'914'757'184ull);
  ASSERT_NE(find_tensor(p, "blk.0.post_attention_norm.weight"), nullptr);
  const PlannedTensor* bias = find_tensor(p, "blk.5.ffn_down_exps.bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(bias->shape, (std::vector<int64_t>{32, 2880}));
  EXPECT_TRUE(tensor_part("blk.5.ffn_down_exps.bias").experts);
  EXPECT_TRUE(tensor_part("model.layers.5.mlp.experts.gate_up_proj_blocks").experts);
  // bf16 matrices, an f32 router, f32 vectors.
  EXPECT_EQ(p.bytes_read_per_token(), 2 * (24 * (kAttention + kExperts / 8) + kEmbedding) +
                                          4 * 24 * kRouter +
                                          4 * (24 * (kVectors + kExpertBiases / 8) + 2880));
}

}  // namespace
}  // namespace tern::plan
