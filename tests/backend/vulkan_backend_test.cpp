// The Vulkan backend on whatever Vulkan device the machine has (lavapipe, Mesa's CPU driver,
// in CI): each matmul kernel against its scalar twin (the blocks' reference dequantization and
// a float64 dot) and batch invariant; whole forwards against the CPU backend within the stated
// tolerance, batch invariant within the backend; the engine on it (continuous batching, chunked
// prefill, prefix caching, n > 1) giving the same tokens as alone and as the CPU; and what it
// refuses, by name.
//
// Tolerance against the CPU: the CPU multiplies quantized and BF16 matrices by activations
// rounded to 8 bits or to bf16 (llama.cpp's scheme), the Vulkan kernels by the f32 activations,
// so their logits differ by that rounding: relative RMS logit error under 2.5 % for those types,
// under 1e-4 for F32 and F16 matrices; and greedy generations of stories260K the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan_test_util.h"
#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "kernels/kernel_test_util.h"
#include "models/model_test_util.h"
#include "models/tiny_model_configs.h"
#include "spec_decode/spec_test_util.h"
#include "tern/backend/device.h"
#include "tern/blocks/lattice_fit.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/engine/llm.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/decoder.h"
#include "tern/models/weight_loader.h"

namespace tern {
namespace {

// A model of no layers whose embedding table is `x` (one row per token, F32) and whose lm_head
// is `w`: a forward through the backend is then exactly one embed and one matmul.
struct OneMatrixModel {
  ModelConfig config;
  ModelWeights weights;
};

OneMatrixModel one_matrix_model(DType type, int64_t rows, int64_t cols, int64_t tokens,
                                uint32_t seed) {
  OneMatrixModel m;
  m.config.hidden_size = cols;
  m.config.num_heads = 1;
  m.config.num_kv_heads = 1;
  m.config.head_dim = 64;
  m.config.intermediate_size = 64;
  m.config.vocab_size = tokens;
  m.config.rope_theta = 10000;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto table = [&](DType t, int64_t r, int64_t c) {
    WeightMatrix w;
    w.dtype = t;
    w.rows = r;
    w.cols = c;
    w.row_bytes = static_cast<size_t>(*dtype_bytes(t, static_cast<uint64_t>(c)));
    std::span<std::byte> bytes = m.weights.own_bytes(w.row_bytes * static_cast<size_t>(r));
    std::vector<float> row(static_cast<size_t>(c));
    for (int64_t i = 0; i < r; ++i) {
      std::byte* to = bytes.data() + static_cast<size_t>(i) * w.row_bytes;
      if (has_lattice_fit(t)) {  // the lattice types: random blocks, every sign and scale pattern
        const std::vector<uint8_t> blocks =
            testing::random_blocks(t, c, seed + static_cast<uint32_t>(i));
        std::memcpy(to, blocks.data(), w.row_bytes);
        continue;
      }
      for (float& v : row) v = uni(rng);
      quantize_row(t, row.data(), to, c);
    }
    w.data = bytes.data();
    return w;
  };
  m.weights.token_embedding = table(DType::F32, tokens, cols);
  m.weights.lm_head = table(type, rows, cols);
  std::span<float> norm = m.weights.own_floats(static_cast<size_t>(cols));
  std::fill(norm.begin(), norm.end(), 1.0f);
  m.weights.output_norm = norm;
  return m;
}

// Each kernel against the scalar twin: dequantize_row (blocks/, the reference every CPU kernel
// is tested against too) and a float64 dot, at 1…17 tokens (more than the kernel's group of 8)
// and rows of about 3 and 65 units of 32 (fewer and more than a row's 16 lanes; 1 and 9
// super-blocks of the K types, 1 and 17 groups of 128); and a token's row the same bits alone as
// in the batch.
TEST(VulkanKernels, MatmulOfEveryTypeMatchesItsScalarTwinAndIsBatchInvariant) {
  TERN_REQUIRE_VULKAN();
  const Device& device = find_device("vulkan");
  for (DType type :
       {DType::F32,       DType::F16,      DType::BF16,     DType::Q8_0,     DType::Q4_0,
        DType::Q4_1,      DType::Q5_0,     DType::Q5_1,     DType::Q2_K,     DType::Q3_K,
        DType::Q4_K,      DType::Q5_K,     DType::Q6_K,     DType::IQ4_NL,   DType::IQ4_XS,
        DType::MXFP4,     DType::IQ3_XXS,  DType::IQ3_S,    DType::IQ2_XXS,  DType::IQ2_XS,
        DType::IQ2_S,     DType::IQ1_S,    DType::IQ1_M,    DType::INT4_G32, DType::INT4_G64,
        DType::INT4_G128, DType::INT8_G32, DType::INT8_G64, DType::INT8_G128}) {
    const int64_t block = dtype_traits(type).block_elems;
    for (int64_t cols : {(96 + block - 1) / block * block, (2080 + block - 1) / block * block}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols));
      const int64_t rows = 70, tokens = 17;
      OneMatrixModel m = one_matrix_model(type, rows, cols, tokens, 7);
      const WeightMatrix& w = m.weights.lm_head;
      std::unique_ptr<Backend> backend = device.make_backend(m.config, m.weights);
      const Activation x = backend->make_activation(cols, ActivationRows::PerToken);
      backend->reserve(tokens, tokens);
      std::vector<int32_t> ids(tokens);
      for (int32_t i = 0; i < tokens; ++i) ids[static_cast<size_t>(i)] = i;
      std::vector<float> batched(static_cast<size_t>(tokens * rows));
      backend->embed(ids, x);
      backend->logits(w, x, tokens, batched.data());

      std::vector<float> wrow(static_cast<size_t>(cols)), xrow(static_cast<size_t>(cols));
      for (int64_t t = 0; t < tokens; ++t) {
        m.weights.embed(static_cast<int32_t>(t), xrow.data());
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(type, w.row(r), wrow.data(), cols);
          double dot = 0, magnitude = 0;
          for (int64_t k = 0; k < cols; ++k) {
            dot += static_cast<double>(wrow[k]) * xrow[k];
            magnitude += std::abs(static_cast<double>(wrow[k]) * xrow[k]);
          }
          const float got = batched[static_cast<size_t>(t * rows + r)];
          ASSERT_NEAR(got, dot, 1e-6 * magnitude + 1e-6) << "token " << t << " row " << r;
        }
      }
      for (int64_t n : {1, 3, 9}) {
        std::vector<float> part(static_cast<size_t>(n * rows));
        std::vector<int32_t> some(ids.begin() + 5, ids.begin() + 5 + n);
        backend->embed(some, x);
        backend->logits(w, x, n, part.data());
        EXPECT_TRUE(testing::bitwise_equal(
            part, std::span<const float>(batched).subspan(static_cast<size_t>(5 * rows),
                                                          static_cast<size_t>(n * rows))))
            << n << " tokens";
      }
    }
  }
}

// Logits of a 12-token prefill (every row) and 3 decodes, on `device`.
std::vector<float> forward_logits(const ModelConfig& c, const ModelWeights& w,
                                  const Device& device) {
  Decoder decoder(c, w, device);
  SequenceRunner runner(decoder, 32);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300, 21, 8, 64, 3, 250, 11};
  std::span<const float> l = runner.feed(prompt, /*all_logits=*/true);
  std::vector<float> all(l.begin(), l.end());
  for (int32_t id : {7, 400, 42}) {
    l = runner.feed(id);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

void expect_close_to_cpu(const ModelConfig& c, const ModelWeights& w, double bound,
                         const std::string& what) {
  const std::vector<float> cpu = forward_logits(c, w, find_device("cpu"));
  const std::vector<float> gpu = forward_logits(c, w, find_device("vulkan"));
  ASSERT_EQ(gpu.size(), cpu.size());
  const double err = testing::relative_rms_error(gpu, cpu);
  EXPECT_LT(err, bound) << what;
  std::printf("vulkan against cpu, %s: relative RMS logit error %.2e\n", what.c_str(), err);
}

TEST(VulkanDecoder, Stories260KMatchesTheCpuWithinTolerance) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const LoadedModel m = testing::stories260k();
  expect_close_to_cpu(m.config, m.weights, 1e-4, "stories260K F32");
  for (DType type : {DType::Q8_0, DType::Q4_0})
    expect_close_to_cpu(m.config, quantize_weights(m.weights, type), 0.02,
                        "stories260K " + std::string(dtype_name(type)));
}

TEST(VulkanDecoder, TinyQwen3MatchesTheCpuWithinTolerance) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_1,
                     DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS,
                     DType::MXFP4, DType::INT4_G128, DType::INT8_G32}) {
    const bool exact = type == DType::F32 || type == DType::F16;
    expect_close_to_cpu(c, make_dummy_weights(c, type, 5), exact ? 1e-4 : 0.025,
                        "tiny qwen3 " + std::string(dtype_name(type)));
  }
}

// The lattice types tern reads but does not write (llama-quantize's grid search makes them):
// every matrix of `w`'s layers and its lm_head replaced by random blocks of `type`, their d
// (2^-9..2^-8, the first two bytes of a block) lowered to weights of about 0.01 to 0.03, an
// initialiser's size: 16 times for the IQ3 types (magnitudes up to 62, the scale's quarter or
// whole), 8 for the IQ2 types (up to 43, its eighth); the IQ1 types' d (2 ls + 1) (g ± 1/8)
// are that size already (IQ1_M's d, spread over its scales, is left as it is).
void randomize_matrices(ModelWeights& w, DType type, uint32_t seed) {
  const DTypeTraits& traits = dtype_traits(type);
  const bool iq1 = type == DType::IQ1_S || type == DType::IQ1_M;
  const int lower = type == DType::IQ3_XXS || type == DType::IQ3_S ? 4 : iq1 ? 0 : 3;
  auto randomize = [&](WeightMatrix& m) {
    const size_t row_bytes = *dtype_bytes(type, static_cast<uint64_t>(m.cols));
    std::span<std::byte> data = w.own_bytes(row_bytes * static_cast<size_t>(m.rows));
    for (int64_t r = 0; r < m.rows; ++r) {
      std::vector<uint8_t> row = testing::random_blocks(type, m.cols, seed++);
      for (size_t b = 0; b < row.size(); b += static_cast<size_t>(traits.block_bytes))
        row[b + 1] = static_cast<uint8_t>(row[b + 1] - (lower << 2));  // d's f16 exponent
      std::memcpy(data.data() + static_cast<size_t>(r) * row_bytes, row.data(), row_bytes);
    }
    m = {
        .dtype = type, .rows = m.rows, .cols = m.cols, .data = data.data(), .row_bytes = row_bytes};
  };
  for (LayerWeights& l : w.layers) {
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (!m->empty()) randomize(*m);
    if (l.moe)  // each expert its own blocks: the device stacks them at upload
      for (std::vector<WeightMatrix>* parts : {&l.moe->gate, &l.moe->up, &l.moe->down})
        for (WeightMatrix& m : *parts) randomize(m);
  }
  randomize(w.lm_head);
}

TEST(VulkanDecoder, TinyQwen3OfLatticeTypesMatchesTheCpuWithinTolerance) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  for (DType type : {DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                     DType::IQ1_S, DType::IQ1_M}) {
    ModelWeights w = make_dummy_weights(c, DType::Q8_0, 5);
    randomize_matrices(w, type, 11);
    expect_close_to_cpu(c, w, 0.025, "tiny qwen3 " + std::string(dtype_name(type)));
  }
}

// Act-order GPTQ (desc_act): each matrix's inputs in an order of its own
// (WeightMatrix::input_order), which the device gathers before the matmul. Within the quantized
// tolerance of the CPU; the same weights taken in the plain order are far from it, so a device
// that ignored the order would fail.
TEST(VulkanDecoder, ActOrderMatricesMatchTheCpu) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  ModelWeights w = make_dummy_weights(c, DType::INT4_G128, 5);
  const std::vector<float> plain = forward_logits(c, w, find_device("cpu"));
  std::mt19937 rng(3);
  for (LayerWeights& l : w.layers)
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      std::span<std::byte> bytes = w.own_bytes(static_cast<size_t>(m->cols) * sizeof(int32_t));
      auto* order = reinterpret_cast<int32_t*>(bytes.data());
      std::iota(order, order + m->cols, 0);
      std::shuffle(order, order + m->cols, rng);
      m->input_order = order;
    }
  EXPECT_GT(testing::relative_rms_error(forward_logits(c, w, find_device("cpu")), plain), 0.1);
  expect_close_to_cpu(c, w, 0.025, "tiny qwen3 INT4_G128, act-order");
}

// Sliding-window attention (a window of 5 keys in layer 1) on the device: the CPU's logits
// within the same tolerance, and batch invariant.
TEST(VulkanDecoder, SlidingWindowMatchesTheCpu) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  c.sliding_window = 5;
  c.sliding_layers = {false, true};
  const ModelWeights w = make_dummy_weights(c, DType::F32, 5);
  expect_close_to_cpu(c, w, 1e-4, "tiny qwen3, layer 1 sliding over 5 keys");
  testing::expect_batch_invariant(c, w, find_device("vulkan"));
}

// gpt-oss's attention sinks on the device: the CPU's logits within the same tolerance.
TEST(VulkanDecoder, AttentionSinksMatchTheCpu) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  ModelConfig c = testing::tiny_qwen3_config(2, /*tied=*/false);
  c.attention_sinks = true;  // dummy weights' sinks are zeros: patterned below
  ModelWeights w = make_dummy_weights(c, DType::F32, 5);
  for (LayerWeights& l : w.layers) {
    std::span<float> sinks = w.own_floats(static_cast<size_t>(c.num_heads));
    for (size_t h = 0; h < sinks.size(); ++h) sinks[h] = 0.5f * static_cast<float>(h % 5) - 1.0f;
    l.attn_sinks = sinks;
  }
  expect_close_to_cpu(c, w, 1e-4, "tiny qwen3 with attention sinks");
}

// Gemma 3 on the device: the embedding times √hidden, q/k norms, post norms, GeGLU, queries
// scaled by query_pre_attn_scalar, two sliding layers rotated by their own RoPE table, then a
// global one; norms patterned, as a checkpoint's are not ones. The CPU's logits within the F32
// tolerance (GeGLU in float here, in double there), and batch invariant.
TEST(VulkanDecoder, Gemma3MatchesTheCpu) {
  TERN_REQUIRE_VULKAN();
  nlohmann::json j = testing::tiny_gemma3_json();
  j["query_pre_attn_scalar"] = 32;
  j["rope_local_base_freq"] = 100.0;
  const ModelConfig c = testing::config_from_json(j);
  ASSERT_TRUE(c.local_rope(0) && !c.local_rope(2));
  // Float order alone moves this model's logits by 2e-5 to 9e-5 (seeds 19 to 22): the scaled
  // embedding and the post norms amplify it. A rotation on the wrong table moves them by 0.26.
  ModelWeights w = make_dummy_weights(c, DType::F32, 20);
  testing::pattern_norms(w);
  expect_close_to_cpu(c, w, 1e-4, "tiny gemma 3");
  testing::expect_batch_invariant(c, w, find_device("vulkan"));
  expect_close_to_cpu(c, quantize_weights(w, DType::Q8_0), 0.025, "tiny gemma 3 Q8_0");
}

// The mixtures of experts on the device, routed there: qwen3moe (6 experts, 2 a token,
// renormalised), qwen2moe (3 a token, not renormalised, a shared expert) and gpt-oss (biased
// router and experts, the clamped SwiGLU, sinks, a sliding layer), in F32 within the F32
// tolerance of the CPU (the choices the same: no two experts' probabilities within that error
// of each other here), and batch invariant. Quantized experts: with every expert chosen (k = n)
// no rounding can change a choice, so each expert type's matmul_id kernel meets the CPU's
// tolerance for quantized matrices.
TEST(VulkanDecoder, MixturesOfExpertsMatchTheCpu) {
  TERN_REQUIRE_VULKAN();
  const Device& vulkan = find_device("vulkan");
  for (const auto& [name, json] : {std::pair{"qwen3moe", testing::tiny_moe_json()},
                                   {"qwen2moe", testing::tiny_qwen2moe_json()},
                                   {"gpt-oss", testing::tiny_gpt_oss_json()}}) {
    const ModelConfig c = testing::config_from_json(json);
    ModelWeights w = make_dummy_weights(c, DType::F32, 31);
    testing::pattern_vectors(w);
    expect_close_to_cpu(c, w, 1e-4, std::string("tiny ") + name);
    testing::expect_batch_invariant(c, w, vulkan);
  }
  nlohmann::json every = testing::tiny_moe_json();
  every["num_experts"] = 2;
  const ModelConfig c = testing::config_from_json(every);
  for (DType type : {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::IQ4_XS, DType::MXFP4})
    expect_close_to_cpu(c, make_dummy_weights(c, type, 32), 0.025,
                        "tiny qwen3moe, both experts " + std::string(dtype_name(type)));
  for (DType type : {DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S,
                     DType::IQ1_S, DType::IQ1_M}) {
    ModelWeights w = make_dummy_weights(c, DType::Q8_0, 32);
    randomize_matrices(w, type, 13);
    expect_close_to_cpu(c, w, 0.025,
                        "tiny qwen3moe, both experts " + std::string(dtype_name(type)));
  }
}

// The routes and expert intermediates stay on the device: an importance matrix per expert is
// refused by name when the observer is set, not collected without its experts.
TEST(VulkanDecoder, RefusesToCaptureExpertActivationsByName) {
  TERN_REQUIRE_VULKAN();
  struct Watcher : ActivationObserver {
    void observe(int, MatrixInput, const float*, int64_t, int64_t) override {}
    void observe_experts(int, const float*, int64_t, const MoeCapture&) override {}
  } watcher;
  const ModelConfig c = testing::config_from_json(testing::tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 31);
  Decoder decoder(c, w, find_device("vulkan"));
  try {
    decoder.set_observer(&watcher);
    ADD_FAILURE() << "the Vulkan backend accepted an observer of a mixture of experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Vulkan backend does not copy out"), std::string::npos)
        << e.what();
  }
  decoder.set_observer(nullptr);
}

TEST(VulkanDecoder, BatchInvariant) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const Device& vulkan = find_device("vulkan");
  const LoadedModel m = testing::stories260k();
  testing::expect_batch_invariant(m.config, m.weights, vulkan);
  const ModelConfig c = testing::tiny_qwen3_config(2);
  testing::expect_batch_invariant(c, make_dummy_weights(c, DType::Q4_0, 3), vulkan);
}

// The engine on the device, with an f16 and an int8 cache: mixed lengths in one batch with
// chunked prefill and a warm prefix cache give the same ids and logprobs as each prompt alone;
// greedy ids equal the CPU's with the same cache type; n = 2 forks a sequence's blocks (copy on
// write on the device).
TEST(VulkanEngine, BatchedChunkedAndCachedGiveTheOutputsAloneAndTheCpusTokens) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = testing::random_prompts(10, 100, 512, 5);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 10; ++i) params.push_back(testing::greedy(1 + (i * 7) % 12));
  for (KvDtype dtype : {KvDtype::F16, KvDtype::Int8}) {
    SCOPED_TRACE(std::string(kv_dtype_name(dtype)));
    auto engine = [dtype](int64_t budget, bool chunked = true, bool prefix = true) {
      EngineConfig c = testing::small_engine(budget, chunked, prefix);
      c.kv_cache_dtype = dtype;
      return c;
    };
    const auto alone = testing::run_alone(prompts, params, testing::stories260k_on_vulkan,
                                          engine(512, false, false));
    LLM llm(testing::stories260k_on_vulkan(), engine(48));
    testing::expect_same_outputs(llm.generate(prompts, params), alone,
                                 "batched, chunked prefill, cold cache");
    const auto warm = llm.generate(prompts, params);
    EXPECT_GT(llm.engine().stats().prefix_cache_hits, 0);
    testing::expect_same_outputs(warm, alone, "batched, prefix cache warm");
    LLM cpu(testing::stories260k(), engine(48));
    const auto on_cpu = cpu.generate(prompts, params);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(alone[i].outputs[0].token_ids, on_cpu[i].outputs[0].token_ids) << "request " << i;
  }

  // n = 2, greedy: both completions fork the prompt's last, partly filled block (its copy is a
  // command on the device) and must each be the greedy completion alone.
  SamplingParams two = testing::greedy(24);
  two.n = 2;
  LLM llm(testing::stories260k_on_vulkan(), testing::small_engine(64));
  const std::vector<int32_t> prompt(prompts[1].begin(), prompts[1].begin() + 21);
  const auto single = llm.generate({prompt}, {testing::greedy(24)});
  const auto forked = llm.generate({prompt}, {two});
  ASSERT_EQ(forked[0].outputs.size(), 2u);
  for (size_t j = 0; j < 2; ++j)
    EXPECT_EQ(forked[0].outputs[j].token_ids, single[0].outputs[0].token_ids) << "completion " << j;
}

// Speculative decoding with the target and its draft on the device, and with n-gram proposals:
// greedy ids and logprobs bit for bit plain decoding's on the device (its verify rows are the
// plain rows: the kernels are batch invariant).
TEST(VulkanEngine, GreedySpeculationEqualsPlainDecodingBitForBit) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto prompts = testing::random_prompts(12, 80, 512, 9);
  std::vector<SamplingParams> params;
  for (int i = 0; i < 12; ++i) params.push_back(testing::greedy(4 + (i * 5) % 20));
  LLM plain(testing::stories260k_on_vulkan(), testing::small_engine(48));
  const auto reference = plain.generate(prompts, params);
  LoadedModel draft = testing::stories260k_on_vulkan();
  draft.weights = quantize_weights(draft.weights, DType::Q4_0);
  LLM with_draft(testing::stories260k_on_vulkan(),
                 testing::speculative_engine(SpeculativeMethod::kDraftModel, 4, false, 48),
                 std::move(draft));
  testing::expect_same_outputs(with_draft.generate(prompts, params), reference, "Q4_0 draft");
  EXPECT_GT(with_draft.engine().stats().spec.num_accepted_tokens, 0);
  LLM ngram(testing::stories260k_on_vulkan(),
            testing::speculative_engine(SpeculativeMethod::kNgram, 3, false, 48));
  testing::expect_same_outputs(ngram.generate(prompts, params), reference, "n-gram");
}

TEST(VulkanBackend, RefusesWhatItHasNoKernelsForByName) {
  TERN_REQUIRE_VULKAN();
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const Device& vulkan = find_device("vulkan");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  // Every type tern reads a matrix in has a kernel now (the kernel test runs each); a matrix of
  // a type without one is still refused by name before anything goes up: Q8_K (the CPU's
  // activation blocks, a matrix of no file) as a Q8_0 model's attn_q of layer 0 (zero blocks).
  {
    const DType type = DType::Q8_K;
    const std::string name(dtype_name(type));
    ModelWeights w = make_dummy_weights(c, DType::Q8_0, 1);
    WeightMatrix& q = w.layers[0].wq;
    const size_t row_bytes = *dtype_bytes(type, static_cast<uint64_t>(q.cols));
    std::span<std::byte> data = w.own_bytes(row_bytes * static_cast<size_t>(q.rows));
    std::memset(data.data(), 0, data.size());
    q = {
        .dtype = type, .rows = q.rows, .cols = q.cols, .data = data.data(), .row_bytes = row_bytes};
    try {
      Decoder decoder(c, std::move(w), vulkan);
      ADD_FAILURE() << "a " << name << " model was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer 0's attn_q is " + name), std::string::npos)
          << e.what();
    }
  }
  // A router that picks more experts a token than the device's routing holds, and experts in
  // tern's affine groups (which have no matmul_id kernel).
  nlohmann::json many = testing::tiny_moe_json();
  many["num_experts"] = 20;
  many["num_experts_per_tok"] = 17;
  const ModelConfig many_config = testing::config_from_json(many);
  try {
    Decoder decoder(many_config, make_dummy_weights(many_config, DType::F16, 1), vulkan);
    ADD_FAILURE() << "17 experts a token were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0's router chooses 17 experts a token"),
              std::string::npos)
        << e.what();
  }
  nlohmann::json wide = testing::tiny_moe_json();
  wide["num_experts"] = 1025;
  wide["num_hidden_layers"] = 1;
  wide["moe_intermediate_size"] = 32;
  const ModelConfig wide_config = testing::config_from_json(wide);
  try {
    Decoder decoder(wide_config, make_dummy_weights(wide_config, DType::Q8_0, 1), vulkan);
    ADD_FAILURE() << "1025 experts were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0's mixture has 1025 experts"), std::string::npos)
        << e.what();
  }
  const ModelConfig moe_config = testing::config_from_json(testing::tiny_moe_json());
  {  // act-order experts (the dense matrices' gather is not in the expert kernels)
    ModelWeights ordered = make_dummy_weights(moe_config, DType::Q8_0, 1);
    WeightMatrix& expert = ordered.layers[0].moe->up[1];
    std::span<std::byte> bytes = ordered.own_bytes(static_cast<size_t>(expert.cols) * 4);
    auto* order = reinterpret_cast<int32_t*>(bytes.data());
    std::iota(order, order + expert.cols, 0);
    expert.input_order = order;
    try {
      Decoder decoder(moe_config, ordered, vulkan);
      ADD_FAILURE() << "act-order experts were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer 0's ffn_up_exps has an act-order input"),
                std::string::npos)
          << e.what();
    }
  }
  try {
    Decoder decoder(moe_config, make_dummy_weights(moe_config, DType::INT4_G128, 1), vulkan);
    ADD_FAILURE() << "INT4_G128 experts were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0's ffn_gate_exps is INT4_G128"), std::string::npos)
        << e.what();
  }
  const ModelWeights q4 = make_dummy_weights(c, DType::Q4_0, 1);
  Decoder decoder(c, q4, vulkan);
  try {
    decoder.make_kv_cache(4, 16, KvDtype::Fp8E4M3);
    ADD_FAILURE() << "an fp8 KV cache was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype fp8_e4m3 is not built for the Vulkan"),
              std::string::npos)
        << e.what();
  }
  // A cache of the CPU's handed to the Vulkan decoder is refused before anything runs.
  Decoder on_cpu(c, q4, find_device("cpu"));
  const std::unique_ptr<KvCache> cpu_cache = on_cpu.make_kv_cache(4, 16);
  StepBatch batch(1, 4);
  const std::vector<int32_t> ids = {1, 2, 3};
  const std::vector<int32_t> blocks = {0};
  batch.add_sequence(ids, 0, blocks, true);
  EXPECT_THROW(decoder.check_step(batch.context(), *cpu_cache), Error);
  EXPECT_THROW(find_device("vulkan:99"), Error);
}

}  // namespace
}  // namespace tern
