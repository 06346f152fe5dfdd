// The mixture-of-experts decoders (qwen3moe, qwen2moe, gpt-oss), and Gemma 3's dense one, against
// a float64 forward written here from the models' definitions (transformers'
// Qwen3MoeSparseMoeBlock: softmax over the router's logits, the top k, renormalised when
// norm_topk_prob, each expert a SwiGLU; Qwen2MoeSparseMoeBlock adds a shared expert scaled by
// sigmoid(x · shared_expert_gate); GptOssMLP biases the router and the experts and clamps their
// SwiGLU, GptOssAttention adds a sink per head to the softmax's denominator), batch invariance, and
// GGUF files and Hugging Face folders written and read back. Gemma3DecoderLayer: the embedding
// times √hidden, each block's output RMS-normed before the residual, GeGLU with tanh GELU, queries
// scaled by query_pre_attn_scalar^-½, the sliding layers rotated by rope_local_base_freq.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>

#include "models/model_test_util.h"
#include "models/tiny_model_configs.h"
#include "tern/backend/device.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/formats/gguf.h"
#include "tern/models/checkpoint_export.h"
#include "tern/models/decoder.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"
#include "tern/models/weight_loader.h"

namespace tern {
namespace {

using testing::config_from_json;
using testing::pattern_vectors;
using testing::tiny_gpt_oss_json;
using testing::tiny_moe_json;
using testing::tiny_qwen2moe_json;

using Vec = std::vector<double>;

Vec times(const WeightMatrix& m, const Vec& x) {
  EXPECT_EQ(m.dtype, DType::F32);
  Vec y(static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    const auto* w = reinterpret_cast<const float*>(m.row(r));
    double s = 0;
    for (int64_t j = 0; j < m.cols; ++j) s += static_cast<double>(w[j]) * x[static_cast<size_t>(j)];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

Vec rms_norm(const double* x, std::span<const float> weight, double eps) {
  const size_t n = weight.size();
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  Vec out(n);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
  return out;
}

// y += bias[from, from + y.size()) (nothing when bias is empty).
void add_bias(Vec& y, std::span<const float> bias, size_t from = 0) {
  if (bias.empty()) return;
  for (size_t i = 0; i < y.size(); ++i) y[i] += bias[from + i];
}

Vec swiglu(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const Vec& x,
           MlpActivation act = MlpActivation::Silu) {
  Vec g = times(gate, x);
  const Vec u = times(up, x);
  for (size_t i = 0; i < g.size(); ++i) {
    const double a = act == MlpActivation::Silu
                         ? g[i] / (1 + std::exp(-g[i]))
                         : 0.5 * g[i] *
                               (1 + std::tanh(std::sqrt(2 / std::numbers::pi) *
                                              (g[i] + 0.044715 * g[i] * g[i] * g[i])));
    g[i] = a * u[i];
  }
  return times(down, g);
}

// gpt-oss's expert e (GptOssExperts): biased gate and up, the gate clamped above and the up on
// both sides at `limit`, gate · sigmoid(1.702 gate) · (up + 1), a biased down.
Vec gpt_oss_expert(const MixtureOfExperts& moe, size_t e, const Vec& x) {
  Vec g = times(moe.gate[e], x), u = times(moe.up[e], x);
  add_bias(g, moe.gate_bias, e * g.size());
  add_bias(u, moe.up_bias, e * u.size());
  const double limit = moe.swiglu_limit;
  for (size_t i = 0; i < g.size(); ++i) {
    const double gi = std::min(g[i], limit), ui = std::clamp(u[i], -limit, limit);
    g[i] = gi / (1 + std::exp(-1.702 * gi)) * (ui + 1);
  }
  Vec y = times(moe.down[e], g);
  add_bias(y, moe.down_bias, e * y.size());
  return y;
}

// transformers' Qwen3MoeSparseMoeBlock for one token (and GptOssMLP's, whose router has a bias
// and whose softmax over the top k logits is the renormalised top k of the softmax over all).
Vec experts_of(const MixtureOfExperts& moe, const Vec& x) {
  Vec p = times(moe.router, x);
  add_bias(p, moe.router_bias);
  const double top = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - top));
  for (double& v : p) v /= sum;
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  order.resize(static_cast<size_t>(moe.top_k));
  double chosen = 0;
  for (size_t e : order) chosen += p[e];
  Vec out(x.size(), 0.0);
  for (size_t e : order) {
    const double w = moe.normalize_top_k ? p[e] / chosen : p[e];
    const Vec y = moe.swiglu_limit > 0 ? gpt_oss_expert(moe, e, x)
                                       : swiglu(moe.gate[e], moe.up[e], moe.down[e], x);
    for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
  }
  if (const std::optional<SharedExpert>& s = moe.shared) {
    double z = 0;
    for (size_t i = 0; i < x.size(); ++i) z += x[i] * s->gate_weight[i];
    const Vec y = swiglu(s->gate, s->up, s->down, x);
    for (size_t i = 0; i < out.size(); ++i) out[i] += y[i] / (1 + std::exp(-z));
  }
  return out;
}

// Every position's logits of `tokens` from position 0, in float64: [tokens, vocab].
std::vector<double> reference_logits(const ModelConfig& c, const ModelWeights& w,
                                     const std::vector<int32_t>& tokens) {
  const auto t = tokens.size();
  const auto h = static_cast<size_t>(c.hidden_size), hd = static_cast<size_t>(c.head_dim);
  const auto nh = static_cast<size_t>(c.num_heads), nkv = static_cast<size_t>(c.num_kv_heads);
  std::vector<Vec> x(t, Vec(h));
  for (size_t i = 0; i < t; ++i) {
    std::vector<float> row(h);
    w.embed(tokens[i], row.data());
    for (size_t e = 0; e < h; ++e) x[i][e] = row[e] * c.embedding_scale;
  }
  double theta = c.rope_theta;  // the layer's (Gemma's sliding layers: rope_local_theta)
  auto rope = [&](double* v, size_t pos) {
    for (size_t i = 0; i < hd / 2; ++i) {
      const double a = static_cast<double>(pos) *
                       std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      const double x0 = v[i], x1 = v[i + hd / 2];
      v[i] = x0 * std::cos(a) - x1 * std::sin(a);
      v[i + hd / 2] = x1 * std::cos(a) + x0 * std::sin(a);
    }
  };
  for (size_t layer = 0; layer < w.layers.size(); ++layer) {
    const LayerWeights& l = w.layers[layer];
    theta = c.local_rope(static_cast<int64_t>(layer)) ? c.rope_local_theta : c.rope_theta;
    std::vector<Vec> q(t), k(t), v(t);
    for (size_t i = 0; i < t; ++i) {
      const Vec xn = rms_norm(x[i].data(), l.attn_norm, c.rms_norm_eps);
      q[i] = times(l.wq, xn);
      k[i] = times(l.wk, xn);
      v[i] = times(l.wv, xn);
      for (const auto& [y, b] : {std::pair{&q[i], l.bq}, {&k[i], l.bk}, {&v[i], l.bv}})
        for (size_t e = 0; e < b.size(); ++e) (*y)[e] += b[e];
      // q/k RMSNorm per head (qwen3moe) before RoPE.
      auto norm_and_rope = [&](double* head, std::span<const float> norm) {
        if (!norm.empty()) {
          const Vec n = rms_norm(head, norm, c.rms_norm_eps);
          std::copy(n.begin(), n.end(), head);
        }
        rope(head, i);
      };
      for (size_t head = 0; head < nh; ++head) norm_and_rope(&q[i][head * hd], l.q_norm);
      for (size_t head = 0; head < nkv; ++head) norm_and_rope(&k[i][head * hd], l.k_norm);
    }
    // A sliding layer's token i sees keys i + 1 - window .. i.
    const auto window = static_cast<size_t>(c.attention_window(static_cast<int64_t>(layer)));
    for (size_t i = 0; i < t; ++i) {
      Vec attn(nh * hd, 0.0);
      const size_t lo = window > 0 && i + 1 > window ? i + 1 - window : 0;
      for (size_t head = 0; head < nh; ++head) {
        const size_t kvh = head / (nh / nkv);
        Vec s(i + 1, -1e300);
        for (size_t j = lo; j <= i; ++j) {
          double d = 0;
          for (size_t e = 0; e < hd; ++e) d += q[i][head * hd + e] * k[j][kvh * hd + e];
          s[j] = d * (c.attention_scale > 0 ? c.attention_scale
                                            : 1 / std::sqrt(static_cast<double>(hd)));
        }
        // A sink joins the softmax's denominator as a key with no value.
        const double sink = l.attn_sinks.empty() ? -1e300 : l.attn_sinks[head];
        const double top = std::max(*std::max_element(s.begin(), s.end()), sink);
        double sum = std::exp(sink - top);
        for (double& e : s) sum += (e = std::exp(e - top));
        for (size_t j = lo; j <= i; ++j)
          for (size_t e = 0; e < hd; ++e) attn[head * hd + e] += s[j] / sum * v[j][kvh * hd + e];
      }
      Vec o = times(l.wo, attn);
      add_bias(o, l.bo);
      if (c.post_norms) o = rms_norm(o.data(), l.attn_post_norm, c.rms_norm_eps);
      for (size_t e = 0; e < h; ++e) x[i][e] += o[e];
    }
    for (size_t i = 0; i < t; ++i) {
      const Vec xn = rms_norm(x[i].data(), l.ffn_norm, c.rms_norm_eps);
      Vec y =
          l.moe ? experts_of(*l.moe, xn) : swiglu(l.w_gate, l.w_up, l.w_down, xn, c.mlp_activation);
      if (c.post_norms) y = rms_norm(y.data(), l.ffn_post_norm, c.rms_norm_eps);
      for (size_t e = 0; e < h; ++e) x[i][e] += y[e];
    }
  }
  std::vector<double> logits;
  for (size_t i = 0; i < t; ++i) {
    const Vec l = times(w.lm_head, rms_norm(x[i].data(), w.output_norm, c.rms_norm_eps));
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

void expect_matches_reference(const ModelConfig& c, const ModelWeights& w) {
  const std::vector<int32_t> tokens = {1, 17, 42, 99, 5, 300, 21};
  // An f32 KV cache, so that what differs is the arithmetic's f32 rounding alone.
  Decoder decoder(c, w, find_device("cpu"));
  SequenceRunner runner(decoder, static_cast<int64_t>(tokens.size()), 16, KvDtype::F32);
  const std::span<const float> got = runner.feed(tokens, /*all_logits=*/true);
  const std::vector<double> want = reference_logits(c, w, tokens);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  // f32 arithmetic over rows of 256 and 3 layers.
  EXPECT_LT(err, 1e-5 * scale) << "largest difference " << err << " of logits up to " << scale;
}

TEST(MoeDecoder, MatchesFloat64Reference) {
  const ModelConfig c = config_from_json(tiny_moe_json());
  ASSERT_EQ(c.arch, ModelArch::Qwen3Moe);
  ASSERT_TRUE(c.is_moe_layer(0) && c.is_moe_layer(1));
  expect_matches_reference(c, make_dummy_weights(c, DType::F32, 5));
}

// A dense layer among the sparse ones (mlp_only_layers), and the chosen weights left as the
// softmax gave them (norm_topk_prob false, transformers' default).
TEST(MoeDecoder, DenseLayersAndUnnormalisedWeightsMatchFloat64Reference) {
  nlohmann::json j = tiny_moe_json();
  j["num_hidden_layers"] = 3;
  j["mlp_only_layers"] = {1};
  j["norm_topk_prob"] = false;
  j["num_experts_per_tok"] = 3;
  const ModelConfig c = config_from_json(j);
  ASSERT_FALSE(c.is_moe_layer(1));
  const ModelWeights w = make_dummy_weights(c, DType::F32, 6);
  ASSERT_TRUE(w.layers[0].moe && !w.layers[1].moe && w.layers[2].moe);
  expect_matches_reference(c, w);
}

// Qwen2-MoE: the shared expert beside the chosen ones, q/k/v biases, no q/k norms.
TEST(MoeDecoder, Qwen2MoeMatchesFloat64Reference) {
  const ModelConfig c = config_from_json(tiny_qwen2moe_json());
  ASSERT_EQ(c.arch, ModelArch::Qwen2Moe);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  ModelWeights w = make_dummy_weights(c, DType::F32, 12);
  ASSERT_TRUE(w.layers[0].moe && w.layers[0].moe->shared);
  EXPECT_EQ(w.layers[0].moe->shared->down.cols, 512);
  // Dummy biases are zeros; these make the reference check that they are added.
  for (LayerWeights& l : w.layers)
    for (std::span<const float>* b : {&l.bq, &l.bk, &l.bv}) {
      std::span<float> v = w.own_floats(b->size());
      for (size_t e = 0; e < v.size(); ++e) v[e] = 0.01f * static_cast<float>(e % 7) - 0.03f;
      *b = v;
    }
  expect_matches_reference(c, w);
}

// Sliding-window attention: Qwen2-MoE with use_sliding_window (layers from max_window_layers
// on slide), and Mistral (every layer), each against the float64 forward with windows of 3
// keys over 7 tokens, and batch invariant.
TEST(MoeDecoder, SlidingWindowMatchesFloat64Reference) {
  nlohmann::json qwen = tiny_qwen2moe_json();
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 3;
  qwen["max_window_layers"] = 1;
  const ModelConfig c = config_from_json(qwen);
  EXPECT_EQ(c.attention_window(0), 0);
  EXPECT_EQ(c.attention_window(1), 3);
  expect_matches_reference(c, make_dummy_weights(c, DType::F32, 15));

  nlohmann::json mistral = tiny_moe_json();
  for (const char* key :
       {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob"})
    mistral.erase(key);
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["model_type"] = "mistral";
  mistral["sliding_window"] = 3;
  const ModelConfig m = config_from_json(mistral);
  EXPECT_EQ(m.arch, ModelArch::Llama);
  EXPECT_EQ(m.attention_window(0), 3);
  EXPECT_EQ(m.attention_window(1), 3);
  const ModelWeights w = make_dummy_weights(m, DType::F32, 16);
  expect_matches_reference(m, w);
  testing::expect_batch_invariant(m, w);
  const ModelConfig again = config_from_json(nlohmann::json::parse(m.to_hf_json()));
  EXPECT_EQ(again.arch_name, "MistralForCausalLM");
  EXPECT_EQ(again.attention_window(1), 3);

  // A GGUF file cannot say the window (llama.cpp's llama attends to every key): refused.
  testing::TempDir dir("sliding_gguf");
  try {
    save_gguf(dir.file("m.gguf"), w, m, nullptr, "tiny");
    ADD_FAILURE() << "wrote a sliding-window llama as GGUF";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window attention (3 keys)"), std::string::npos)
        << e.what();
  }
}

// gpt-oss: the router's and experts' biases, the clamped SwiGLU, the sinks, o_proj's bias, a
// sliding layer and a full one; and batch invariant.
TEST(MoeDecoder, GptOssMatchesFloat64Reference) {
  const ModelConfig c = config_from_json(tiny_gpt_oss_json());
  ASSERT_EQ(c.arch, ModelArch::GptOss);
  EXPECT_EQ(c.attention_window(0), 3);
  EXPECT_EQ(c.attention_window(1), 0);
  ModelWeights w = make_dummy_weights(c, DType::F32, 17);
  ASSERT_EQ(w.layers[1].moe->down_bias.size(), 6u * 256);
  ASSERT_EQ(w.layers[1].attn_sinks.size(), 4u);
  pattern_vectors(w);
  expect_matches_reference(c, w);
  testing::expect_batch_invariant(c, w);
  testing::expect_batch_invariant(
      c, make_dummy_weights(c, QuantRecipe::mixture(FileType::MXFP4_MOE), 18));
}

// Gemma 3 (text): 3 layers of hidden 256, the last global and the others sliding over 3 keys and
// rotated by rope_local_base_freq, 4 q and 2 kv heads of 64 with q/k norms, queries scaled by
// 1/√32, the embedding by √256, GeGLU of 512, every block's output normed (norms patterned, as a
// Gemma checkpoint's are not ones); and batch invariant.
TEST(MoeDecoder, Gemma3MatchesFloat64Reference) {
  nlohmann::json j = tiny_moe_json();
  for (const char* key :
       {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob"})
    j.erase(key);
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["model_type"] = "gemma3_text";
  j["num_hidden_layers"] = 3;
  j["sliding_window"] = 3;
  j["sliding_window_pattern"] = 3;
  j["query_pre_attn_scalar"] = 32;
  j["rope_local_base_freq"] = 100.0;
  const ModelConfig c = config_from_json(j);
  ASSERT_EQ(c.arch, ModelArch::Gemma3);
  EXPECT_EQ(c.mlp_activation, MlpActivation::GeluTanh);
  EXPECT_TRUE(c.local_rope(0) && c.local_rope(1) && !c.local_rope(2));
  EXPECT_EQ(c.embedding_scale, 16.0);
  ModelWeights w = make_dummy_weights(c, DType::F32, 19);
  testing::pattern_norms(w);
  expect_matches_reference(c, w);
  testing::expect_batch_invariant(c, w);
}

TEST(MoeDecoder, BatchInvariant) {
  const ModelConfig c = config_from_json(tiny_moe_json());
  testing::expect_batch_invariant(c, make_dummy_weights(c, DType::F32, 7));
  testing::expect_batch_invariant(c,
                                  make_dummy_weights(c, QuantRecipe::mixture(FileType::Q4_K_M), 7));
  const ModelConfig shared = config_from_json(tiny_qwen2moe_json());
  testing::expect_batch_invariant(
      shared, make_dummy_weights(shared, QuantRecipe::mixture(FileType::Q4_K_M), 7));
}

// save_gguf writes llama.cpp's qwen3moe (stacked ffn_*_exps, an F32 router, the expert keys),
// and the file loads back to the same logits bit for bit, its experts views of the stacked
// tensors.
TEST(MoeDecoder, GgufRoundTrip) {
  const ModelConfig c = config_from_json(tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, QuantRecipe::mixture(FileType::Q4_K_M), 8);
  EXPECT_EQ(w.layers[0].moe->router.dtype, DType::F32);
  testing::TempDir dir("moe_gguf");
  const std::string path = dir.file("moe.gguf");
  save_gguf(path, w, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  const TensorInfo* gate = g.find_tensor("blk.1.ffn_gate_exps.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{6, 256, 256}));
  EXPECT_EQ(g.get_int("qwen3moe.expert_count"), 6);
  EXPECT_EQ(g.get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(g.get_int("qwen3moe.expert_feed_forward_length"), 256);
  const ModelConfig read = ModelConfig::from_gguf(g);
  EXPECT_EQ(read.arch, ModelArch::Qwen3Moe);
  EXPECT_EQ(read.num_experts, 6);
  EXPECT_TRUE(read.norm_topk_prob);
  const ModelWeights loaded = load_gguf_weights(g, read);
  EXPECT_EQ(loaded.layers[1].moe->down[5].data,
            loaded.layers[1].moe->down[0].data + 5 * 256 * loaded.layers[1].moe->down[0].row_bytes);
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(read, loaded, tokens),
                                     testing::prefill_logits(c, w, tokens)));
}

// save_gguf writes llama.cpp's qwen2moe: the shared expert's ffn_*_shexp, its gate a vector
// [hidden] (ffn_gate_inp_shexp), expert_shared_feed_forward_length, an output matrix even when
// tied; norm_topk_prob, which llama.cpp's qwen2moe never applies, is refused when true.
TEST(MoeDecoder, Qwen2MoeGgufRoundTrip) {
  nlohmann::json j = tiny_qwen2moe_json();
  j["tie_word_embeddings"] = true;
  const ModelConfig c = config_from_json(j);
  const ModelWeights w = make_dummy_weights(c, QuantRecipe::mixture(FileType::Q4_K_M), 13);
  testing::TempDir dir("qwen2moe_gguf");
  const std::string path = dir.file("moe.gguf");
  save_gguf(path, w, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.get_string("general.architecture"), "qwen2moe");
  EXPECT_EQ(g.get_int("qwen2moe.expert_shared_feed_forward_length"), 512);
  EXPECT_EQ(g.get_int("qwen2moe.expert_used_count"), 3);
  const TensorInfo* gate = g.find_tensor("blk.1.ffn_gate_inp_shexp.weight");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->shape, (std::vector<int64_t>{256}));
  ASSERT_NE(g.find_tensor("blk.1.ffn_down_shexp.weight"), nullptr);
  EXPECT_EQ(g.find_tensor("blk.1.ffn_down_shexp.weight")->shape, (std::vector<int64_t>{256, 512}));
  ASSERT_NE(g.find_tensor("output.weight"), nullptr);
  const ModelConfig read = ModelConfig::from_gguf(g);
  EXPECT_EQ(read.arch, ModelArch::Qwen2Moe);
  EXPECT_FALSE(read.norm_topk_prob);
  EXPECT_TRUE(read.attention_bias);
  EXPECT_EQ(read.shared_expert_intermediate_size, 512);
  const ModelWeights loaded = load_gguf_weights(g, read);
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(read, loaded, tokens),
                                     testing::prefill_logits(c, w, tokens)));

  j["norm_topk_prob"] = true;
  try {
    save_gguf(dir.file("normalised.gguf"), w, config_from_json(j), nullptr, "tiny");
    ADD_FAILURE() << "wrote a qwen2moe file llama.cpp would read differently";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("norm_topk_prob is true"), std::string::npos) << e.what();
  }
}

// llama-quantize's MXFP4_MOE (gpt-oss's published files): the stacked experts MXFP4 (ggml type
// 39), every other matrix Q8_0, the router F32, the file type 38; save_gguf writes it and it
// loads back zero-copy to the same logits bit for bit.
TEST(MoeDecoder, Mxfp4MoeGgufRoundTrip) {
  const ModelConfig c = config_from_json(tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, QuantRecipe::mixture(FileType::MXFP4_MOE), 9);
  testing::TempDir dir("moe_mxfp4");
  const std::string path = dir.file("moe.gguf");
  save_gguf(path, w, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.get_int("general.file_type"), 38);
  for (const TensorInfo& t : g.tensors()) {
    const bool experts = t.name.find("_exps.weight") != std::string::npos;
    const bool vector = t.shape.size() == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
    EXPECT_EQ(dtype_name(t.dtype), experts ? "MXFP4" : vector ? "F32" : "Q8_0") << t.name;
  }
  const TensorInfo* down = g.find_tensor("blk.0.ffn_down_exps.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<int64_t>{6, 256, 256}));
  EXPECT_EQ(down->nbytes, 6u * 256 * 256 / 32 * 17);
  const ModelConfig read = ModelConfig::from_gguf(g);
  const ModelWeights loaded = load_gguf_weights(g, read);
  EXPECT_EQ(loaded.layers[1].moe->up[0].dtype, DType::MXFP4);
  EXPECT_EQ(loaded.layers[0].moe->down[0].data, down->data);  // read in place
  const std::vector<int32_t> tokens = {3, 9, 27, 81, 243};
  EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(read, loaded, tokens),
                                     testing::prefill_logits(c, w, tokens)));
  testing::expect_batch_invariant(read, loaded);
}

// A Hugging Face folder (mlp.gate, mlp.experts.N.*_proj: one tensor per expert; qwen2moe's
// mlp.shared_expert.* and its gate, a Linear to one output) loads to the weights it was written
// from.
TEST(MoeDecoder, HuggingFaceFolder) {
  for (const nlohmann::json& j : {tiny_moe_json(), tiny_qwen2moe_json()}) {
    const ModelConfig c = config_from_json(j);
    const ModelWeights w = make_dummy_weights(c, DType::F32, 10);
    testing::TempDir dir("moe_hf");
    testing::write_hf_folder(dir, j, c, w, DType::F32);
    LoadOptions load;
    load.model = dir.path().string();
    const LoadedModel m = load_model(load);
    ASSERT_TRUE(m.weights.layers[1].moe);
    EXPECT_EQ(m.weights.layers[1].moe->down.size(), 6u);
    EXPECT_EQ(m.weights.layers[1].moe->shared.has_value(), c.arch == ModelArch::Qwen2Moe);
    const std::vector<int32_t> tokens = {3, 9, 27, 81, 243};
    EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(m.config, m.weights, tokens),
                                       testing::prefill_logits(c, w, tokens)))
        << c.arch_name;
  }
}

// tern quantize gives the shared expert llama-quantize's types by its GGUF names (Q4_K_M:
// ffn_down_shexp Q6_K in the layers use_more_bits picks), and a GPTQ checkpoint holds it as
// mlp.shared_expert.* modules that load back to the same values.
TEST(MoeDecoder, Qwen2MoeQuantizedAndWrittenAsGptq) {
  const ModelConfig c = config_from_json(tiny_qwen2moe_json());
  const ModelWeights f32 = make_dummy_weights(c, DType::F32, 14);
  const ModelWeights q4km =
      quantize_weights(f32, c, QuantRecipe::mixture(FileType::Q4_K_M), QuantizeOptions{});
  EXPECT_EQ(q4km.layers[0].moe->shared->down.dtype, DType::Q4_K);
  EXPECT_EQ(q4km.layers[1].moe->shared->down.dtype, DType::Q6_K);
  EXPECT_EQ(q4km.layers[1].moe->shared->gate.dtype, DType::Q4_K);
  EXPECT_EQ(q4km.layers[1].moe->router.dtype, DType::F32);
  ASSERT_EQ(q4km.layers[1].moe->shared->gate_weight.size(), 256u);
  EXPECT_EQ(q4km.layers[1].moe->shared->gate_weight[3], f32.layers[1].moe->shared->gate_weight[3]);

  CheckpointFolder folder;
  folder.quantization.method = QuantMethod::Gptq;
  folder.quantization.bits = 4;
  folder.quantization.group_size = 128;
  folder.quantization.zeros_minus_one = true;
  folder.quantization.sym = false;
  folder.config_json = tiny_qwen2moe_json().dump();
  QuantRecipe int4 = QuantRecipe::uniform(DType::INT4_G128);
  int4.set_token_embedding_type(DType::F16);
  int4.set_output_type(DType::F16);
  QuantizeOptions options;
  options.affine_rule = quant::AffineRule::ZeroPointFromOne;
  const ModelWeights w = quantize_weights(f32, c, int4, options);
  testing::TempDir dir("qwen2moe_gptq");
  save_quantized_checkpoint(dir.path().string(), w, c, folder);
  LoadOptions load;
  load.model = dir.path().string();
  const LoadedModel m = load_model(load);
  const SharedExpert& read = *m.weights.layers[1].moe->shared;
  const SharedExpert& wrote = *w.layers[1].moe->shared;
  for (const auto& [a, b] :
       {std::pair{&read.gate, &wrote.gate}, {&read.up, &wrote.up}, {&read.down, &wrote.down}}) {
    ASSERT_EQ(a->dtype, DType::INT4_G128);
    std::vector<float> ra(static_cast<size_t>(a->cols)), rb(ra.size());
    for (int64_t r = 0; r < a->rows; ++r) {
      dequantize_row(a->dtype, a->row(r), ra.data(), a->cols);
      dequantize_row(b->dtype, b->row(r), rb.data(), b->cols);
      ASSERT_EQ(ra, rb) << "row " << r;
    }
  }
  // The gate, a float module, travels in f16 as the format's float tensors do.
  ASSERT_EQ(read.gate_weight.size(), 256u);
  EXPECT_NEAR(read.gate_weight[5], wrote.gate_weight[5], 1e-4);
}

// tern imatrix watches the decoder's matrix inputs: a sparse layer shows its normed input, then
// its routes and each route's intermediate (copied by the backend only while watched), and a
// watched forward gives the logits of an unwatched one.
TEST(MoeDecoder, AnObserverSeesEachSparseLayersRoutes) {
  struct Watcher : ActivationObserver {
    std::vector<int> inputs, experts;
    int64_t routes = 0, down_floats = 0;
    void observe(int layer, MatrixInput input, const float*, int64_t, int64_t) override {
      if (input == MatrixInput::MoeInput) inputs.push_back(layer);
    }
    void observe_experts(int layer, const float*, int64_t, const MoeCapture& moe) override {
      experts.push_back(layer);
      routes += static_cast<int64_t>(moe.route_experts.size());
      down_floats += static_cast<int64_t>(moe.expert_down_inputs.size());
    }
  } watcher;
  const ModelConfig c = config_from_json(tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 11);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 33, 7};
  const std::vector<float> plain = testing::prefill_logits(c, w, tokens);
  Decoder decoder(c, w, find_device("cpu"));
  decoder.set_observer(&watcher);
  SequenceRunner runner(decoder, static_cast<int64_t>(tokens.size()));
  const std::span<const float> watched = runner.feed(tokens, /*all_logits=*/true);
  decoder.set_observer(nullptr);
  EXPECT_EQ(watcher.inputs, (std::vector<int>{0, 1}));
  EXPECT_EQ(watcher.experts, (std::vector<int>{0, 1}));
  EXPECT_EQ(watcher.routes, 2 * 6 * c.num_experts_per_tok);
  EXPECT_EQ(watcher.down_floats, watcher.routes * c.moe_intermediate_size);
  EXPECT_TRUE(testing::bitwise_equal(watched, plain));
}

TEST(MoeDecoder, BadExpertsAreNamed) {
  nlohmann::json j = tiny_moe_json();
  j["num_experts_per_tok"] = 7;
  EXPECT_THROW(
      {
        try {
          config_from_json(j);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("num_experts_per_tok must be in 1..num_experts"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);

  // A file whose expert tensor is missing names it.
  const ModelConfig c = config_from_json(tiny_moe_json());
  ModelWeights broken = make_dummy_weights(c, DType::F32, 8);
  testing::TempDir dir("moe_missing_expert");
  const std::string path = dir.file("moe.gguf");
  broken.layers[1].moe->up.resize(5);  // the stacked tensor of 5: a shape the config refuses
  save_gguf(path, broken, c, nullptr, "tiny");
  const GgufFile g = GgufFile::open(path);
  try {
    (void)load_gguf_weights(g, ModelConfig::from_gguf(g));
    ADD_FAILURE() << "loaded a file with 5 of 6 experts";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.1.ffn_up_exps.weight' has shape [5, 256, 256]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern
