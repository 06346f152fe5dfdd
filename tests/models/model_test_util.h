// Shared by the model tests: configs shrunk for speed, temporary folders, logit comparisons.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "fixtures.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/half.h"
#include "tern/engine/sequence_runner.h"
#include "tern/formats/model_config.h"
#include "tern/formats/safetensors.h"
#include "tern/models/decoder.h"
#include "tern/models/step_context.h"
#include "tern/models/weight_loader.h"

namespace tern::testing {

// A folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("tern-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A fixture config.json with some fields replaced ("num_hidden_layers": 1, …), as a ModelConfig.
inline ModelConfig shrunk_config(const std::string& fixture_dir, const nlohmann::json& overrides) {
  std::ifstream in(fixture(fixture_dir + "/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto it = overrides.begin(); it != overrides.end(); ++it) j[it.key()] = it.value();
  return ModelConfig::from_hf_json(j.dump(), fixture_dir + " (shrunk)");
}

// Qwen3-0.6B's features (q/k norm, GQA, neox rope) at a size a test can build weights for and
// the sanitizers run quickly: `layers` layers of 256 hidden, 4 q heads and 2 kv heads of 64,
// ffn 512 (whole 256-element K-quant super-blocks), vocabulary 512. The overrides of its
// config.json, for tests that write a Hugging Face folder:
inline nlohmann::json tiny_qwen3_overrides(int64_t layers) {
  return {{"num_hidden_layers", layers},
          {"vocab_size", 512},
          {"hidden_size", 256},
          {"intermediate_size", 512},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 64}};
}

inline ModelConfig tiny_qwen3_config(int64_t layers, bool tied = true) {
  nlohmann::json overrides = tiny_qwen3_overrides(layers);
  if (!tied) overrides["tie_word_embeddings"] = false;
  return shrunk_config("model-configs/qwen3-0.6b", overrides);
}

// rms(a - b) / rms(b): the relative error of a against the reference b.
inline double relative_rms_error(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

// Logits of every position of `tokens` in one prefill: [tokens.size(), vocab].
inline std::vector<float> prefill_logits(const ModelConfig& c, const ModelWeights& w,
                                         const std::vector<int32_t>& tokens) {
  Decoder decoder(c, w, find_device("cpu"));
  SequenceRunner runner(decoder, static_cast<int64_t>(tokens.size()));
  std::span<const float> l = runner.feed(tokens, /*all_logits=*/true);
  return {l.begin(), l.end()};
}

inline bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Hugging Face names and layout (a sparse layer's router and experts too), written from dummy
// weights: matrices in `matrix_type`
// (F32 or BF16), norms in BF16 (ones: exact).
inline void write_hf_folder(const TempDir& dir, const nlohmann::json& config_json,
                            const ModelConfig& c, const ModelWeights& w, DType matrix_type) {
  std::ofstream(dir.file("config.json")) << config_json.dump();
  SafetensorsWriter st;
  auto matrix = [&](const std::string& name, const WeightMatrix& m) {
    std::vector<float> row(static_cast<size_t>(m.cols));
    std::vector<std::byte> out(static_cast<size_t>(m.rows * m.cols) *
                               (matrix_type == DType::F32 ? 4 : 2));
    for (int64_t r = 0; r < m.rows; ++r) {
      dequantize_row(m.dtype, m.row(r), row.data(), m.cols);
      quantize_row(matrix_type, row.data(),
                   out.data() + static_cast<size_t>(r) * out.size() / m.rows, m.cols);
    }
    st.add_tensor(name, matrix_type, {m.rows, m.cols}, out);
  };
  auto vec = [&](const std::string& name, std::span<const float> v) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16(v[i]);
    st.add_tensor(name, DType::BF16, {static_cast<int64_t>(v.size())}, std::as_bytes(std::span(b)));
  };
  // A vector stored as a Linear to one output ([1, n]), kept f32.
  auto row = [&](const std::string& name, std::span<const float> v) {
    st.add_tensor(name, DType::F32, {1, static_cast<int64_t>(v.size())}, std::as_bytes(v));
  };
  matrix("model.embed_tokens.weight", w.token_embedding);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    vec(p + "input_layernorm.weight", l.attn_norm);
    matrix(p + "self_attn.q_proj.weight", l.wq);
    matrix(p + "self_attn.k_proj.weight", l.wk);
    matrix(p + "self_attn.v_proj.weight", l.wv);
    matrix(p + "self_attn.o_proj.weight", l.wo);
    for (const auto& [suffix, bias] : {std::pair{"q_proj.bias", l.bq},
                                       {"k_proj.bias", l.bk},
                                       {"v_proj.bias", l.bv},
                                       {"o_proj.bias", l.bo}})
      if (!bias.empty()) vec(p + "self_attn." + suffix, bias);
    if (c.qk_norm) {
      vec(p + "self_attn.q_norm.weight", l.q_norm);
      vec(p + "self_attn.k_norm.weight", l.k_norm);
    }
    vec(p + "post_attention_layernorm.weight", l.ffn_norm);
    if (l.moe) {
      matrix(p + "mlp.gate.weight", l.moe->router);
      for (size_t e = 0; e < l.moe->gate.size(); ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        matrix(x + "gate_proj.weight", l.moe->gate[e]);
        matrix(x + "up_proj.weight", l.moe->up[e]);
        matrix(x + "down_proj.weight", l.moe->down[e]);
      }
      if (const std::optional<SharedExpert>& shared = l.moe->shared) {
        matrix(p + "mlp.shared_expert.gate_proj.weight", shared->gate);
        matrix(p + "mlp.shared_expert.up_proj.weight", shared->up);
        matrix(p + "mlp.shared_expert.down_proj.weight", shared->down);
        row(p + "mlp.shared_expert_gate.weight", shared->gate_weight);
      }
      continue;
    }
    matrix(p + "mlp.gate_proj.weight", l.w_gate);
    matrix(p + "mlp.up_proj.weight", l.w_up);
    matrix(p + "mlp.down_proj.weight", l.w_down);
  }
  vec("model.norm.weight", w.output_norm);
  if (!w.tied_embeddings) matrix("lm_head.weight", w.lm_head);
  st.write_sharded(dir.path().string(), 1 << 20);  // several shards + index
}

// Batch invariance: a sequence's logits alone, batched with another sequence, and prefilled in
// two chunks, and decoded after a prefill are the same bits, on `device`.
inline void expect_batch_invariant(const ModelConfig& c, const ModelWeights& w,
                                   const Device& device = find_device("cpu")) {
  const std::vector<int32_t> a = {1, 17, 42, 99, 5, 300, 21, 8, 64, 3, 250};
  const std::vector<int32_t> b = {1, 7, 7, 400, 12, 2};
  const int64_t vocab = c.vocab_size;
  Decoder decoder(c, w, device);
  const std::unique_ptr<KvCache> cache =
      decoder.make_kv_cache(8, 4);  // 4-token blocks: chunks cross blocks
  const std::vector<int32_t> blocks_a = {5, 2, 7}, blocks_b = {0, 3};
  StepBatch batch(3, 4);
  std::vector<float> logits(static_cast<size_t>(32 * vocab));

  // Alone, one prefill with every row's logits.
  batch.add_sequence(a, 0, blocks_a, true, true);
  decoder.check_step(batch.context(), *cache);
  decoder.forward(batch.context(), *cache, logits.data());
  const std::vector<float> alone(logits.begin(),
                                 logits.begin() + static_cast<std::ptrdiff_t>(a.size() * vocab));

  // Batched behind another sequence, in other blocks.
  std::fill(logits.begin(), logits.end(), 0.0f);
  const std::unique_ptr<KvCache> cache2 = decoder.make_kv_cache(8, 4);
  const std::vector<int32_t> blocks_a2 = {1, 6, 4};
  batch.clear();
  batch.add_sequence(b, 0, blocks_b, true, true);
  batch.add_sequence(a, 0, blocks_a2, true, true);
  decoder.check_step(batch.context(), *cache2);
  decoder.forward(batch.context(), *cache2, logits.data());
  const std::span<const float> batched(logits.data() + b.size() * vocab, a.size() * vocab);
  EXPECT_TRUE(testing::bitwise_equal(batched, alone)) << "batched with another sequence";

  // Two chunks (5 + 6 tokens); the second chunk shares its step with a decode of b.
  const std::unique_ptr<KvCache> cache3 = decoder.make_kv_cache(8, 4);
  std::vector<float> chunked(alone.size());
  batch.clear();
  batch.add_sequence(std::span(a).first(5), 0, blocks_a, true, true);
  batch.add_sequence(std::span(b).first(5), 0, blocks_b, false);
  decoder.forward(batch.context(), *cache3, logits.data());
  std::memcpy(chunked.data(), logits.data(), 5 * vocab * sizeof(float));
  batch.clear();
  batch.add_sequence(std::span(b).subspan(5), 5, blocks_b, true);
  batch.add_sequence(std::span(a).subspan(5), 5, blocks_a, true, true);
  decoder.forward(batch.context(), *cache3, logits.data());
  std::memcpy(chunked.data() + 5 * vocab, logits.data() + vocab, 6 * vocab * sizeof(float));
  EXPECT_TRUE(testing::bitwise_equal(chunked, alone)) << "prefilled in two chunks";

  // Decode: the last token fed alone after a prefill of the others.
  const std::unique_ptr<KvCache> cache4 = decoder.make_kv_cache(8, 4);
  batch.clear();
  batch.add_sequence(std::span(a).first(a.size() - 1), 0, blocks_a, false);
  decoder.forward(batch.context(), *cache4, logits.data());
  batch.clear();
  batch.add_sequence(std::span(a).last(1), static_cast<int32_t>(a.size() - 1), blocks_a, true);
  decoder.forward(batch.context(), *cache4, logits.data());
  EXPECT_TRUE(testing::bitwise_equal(std::span<const float>(logits.data(), vocab),
                                     std::span(alone).last(vocab)))
      << "decoded one token at a time";
}

}  // namespace tern::testing
