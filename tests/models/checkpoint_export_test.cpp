// Writing GPTQ, AWQ and MLX checkpoints (checkpoint_export.h): each format's tensors hold, by
// that format's rules as its readers apply them (decoded here by the test's own code, which
// shares nothing with the writer or the loader), exactly the values tern quantized; the folder
// loads back as the same model, logit for logit; config.json records the settings; and weights
// a format cannot hold are refused naming the module.
#include "tern/models/checkpoint_export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/safetensors.h"
#include "tern/models/model_loader.h"
#include "tern/quant/importance_matrix.h"

namespace tern {
namespace {

uint32_t word(const TensorInfo& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}
float half(const TensorInfo& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  return f16_to_f32(h);
}

// Module `module` of a checkpoint decoded by its format's rules into [rows × cols] floats:
//   GPTQ  w[n][k] = scales[g][n] · (q − (qzeros' z + 1)), g = g_idx[k], q the bits of
//         qweight[k / (32/b)][n] at (k mod 32/b)·b, z those of qzeros[g][n / (32/b)];
//   AWQ   w[n][k] = scales[g][n] · (q − z), g = k / G, output n at nibble (0 4 1 5 2 6 3 7)[n mod
//   8]
//         of qweight[k][n / 8] and qzeros[g][n / 8];
//   MLX   w[n][k] = scales[n][g] · q + biases[n][g], q from weight[n][k / (32/b)].
std::vector<float> decode_by_rules(const SafetensorsModel& st, QuantMethod method, int bits,
                                   int group, const std::string& module, int64_t rows,
                                   int64_t cols) {
  auto tensor = [&](const char* suffix) -> const TensorInfo& {
    const TensorInfo* t = st.find_tensor(module + "." + suffix);
    EXPECT_NE(t, nullptr) << module << "." << suffix;
    return *t;
  };
  const int per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  if (method == QuantMethod::Mlx) {
    const TensorInfo &weight = tensor("weight"), &scales = tensor("scales"),
                     &biases = tensor("biases");
    EXPECT_EQ(weight.shape, (std::vector<int64_t>{rows, cols / per}));
    EXPECT_EQ(scales.shape, (std::vector<int64_t>{rows, cols / group}));
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const uint32_t q = (word(weight, n * (cols / per) + k / per) >> (k % per * bits)) & mask;
        const int64_t g = n * (cols / group) + k / group;
        w[n * cols + k] = half(scales, g) * static_cast<float>(q) + half(biases, g);
      }
    return w;
  }
  const TensorInfo &qweight = tensor("qweight"), &qzeros = tensor("qzeros"),
                   &scales = tensor("scales");
  EXPECT_EQ(scales.shape, (std::vector<int64_t>{cols / group, rows}));
  if (method == QuantMethod::Gptq) {
    const TensorInfo& g_idx = tensor("g_idx");
    EXPECT_EQ(qweight.shape, (std::vector<int64_t>{cols / per, rows}));
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < cols; ++k) {
        const auto g = static_cast<int64_t>(word(g_idx, k));
        const uint32_t q = (word(qweight, k / per * rows + n) >> (k % per * bits)) & mask;
        const uint32_t z =
            ((word(qzeros, g * (rows / per) + n / per) >> (n % per * bits)) & mask) + 1;
        w[n * cols + k] =
            half(scales, g * rows + n) * (static_cast<float>(q) - static_cast<float>(z));
      }
    return w;
  }
  constexpr int kNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  EXPECT_EQ(qweight.shape, (std::vector<int64_t>{cols, rows / 8}));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t g = k / group;
      const int shift = 4 * kNibble[n % 8];
      const uint32_t q = (word(qweight, k * (rows / 8) + n / 8) >> shift) & 15;
      const uint32_t z = (word(qzeros, g * (rows / 8) + n / 8) >> shift) & 15;
      w[n * cols + k] =
          half(scales, g * rows + n) * (static_cast<float>(q) - static_cast<float>(z));
    }
  return w;
}

// m's values in the inputs' order, as tern computes with them.
std::vector<float> dequantized(const WeightMatrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols)), row(static_cast<size_t>(m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m.dtype, m.row(r), row.data(), m.cols);
    for (int64_t j = 0; j < m.cols; ++j)
      out[r * m.cols + (m.input_order != nullptr ? m.input_order[j] : j)] = row[j];
  }
  return out;
}

// Inputs with a few large columns and correlated neighbours, as a model's are: every matrix of
// the model's layers gets its input's sums (and with `outer` its second moments).
ImportanceMatrix skewed_imatrix(const ModelConfig& c, bool outer = true) {
  ImportanceMatrix im;
  im.keep_outer = outer;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  auto add = [&](const std::string& name, int64_t cols) {
    const int64_t tokens = 96;
    std::vector<float> x(static_cast<size_t>(tokens * cols));
    for (int64_t t = 0; t < tokens; ++t) {
      float prev = 0.0f;
      for (int64_t j = 0; j < cols; ++j) {
        prev = 0.5f * prev + normal(rng) * (j % 17 == 3 ? 8.0f : 1.0f);
        x[t * cols + j] = prev;
      }
    }
    im.accumulate(name, x.data(), tokens, cols);
  };
  for (int64_t i = 0; i < c.num_layers; ++i)
    for (const char* what :
         {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
          "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"})
      add(gguf_tensor_name(i, what), std::string_view(what) == "attn_output.weight" ? c.q_dim()
                                     : std::string_view(what) == "ffn_down.weight"
                                         ? c.intermediate_size
                                         : c.hidden_size);
  // q, k, v (and gate, up) read one input: give them the same statistics.
  for (int64_t i = 0; i < c.num_layers; ++i) {
    auto same = [&](const char* from, const char* to) {
      im.entries[gguf_tensor_name(i, to)] = im.entries.at(gguf_tensor_name(i, from));
    };
    same("attn_q.weight", "attn_k.weight");
    same("attn_q.weight", "attn_v.weight");
    same("ffn_gate.weight", "ffn_up.weight");
  }
  return im;
}

struct Case {
  std::string name;
  CheckpointQuantization q;
  quant::AffineRule rule;
  bool act_order = false, awq = false;
};

CheckpointQuantization settings(QuantMethod method, int bits, int group, bool sym = false,
                                bool desc_act = false) {
  CheckpointQuantization q;
  q.method = method, q.bits = bits, q.group_size = group, q.sym = sym, q.desc_act = desc_act;
  q.zeros_minus_one = method == QuantMethod::Gptq;
  return q;
}

std::string tiny_config_json(int64_t layers) {
  std::ifstream in(testing::fixture("model-configs/qwen3-0.6b/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json small = testing::tiny_qwen3_overrides(layers);
  for (auto it = small.begin(); it != small.end(); ++it) j[it.key()] = it.value();
  return j.dump();
}

ModelWeights quantized_for(const Case& k, const ModelConfig& c, const ModelWeights& f32,
                           const ImportanceMatrix& im) {
  QuantRecipe recipe = QuantRecipe::uniform(k.q.dtype());
  if (k.q.method != QuantMethod::Mlx) {
    recipe.set_token_embedding_type(DType::F16);
    recipe.set_output_type(DType::F16);
  }
  QuantizeOptions options;
  options.affine_rule = k.rule;
  options.act_order = k.act_order;
  options.awq = k.awq;
  if (k.act_order || k.awq) options.imatrix = &im;
  return quantize_weights(f32, c, recipe, options);
}

TEST(CheckpointExport, EachFormatHoldsExactlyWhatTernQuantized) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  const ModelWeights f32 = make_dummy_weights(c, DType::F32, 21);
  const ImportanceMatrix im = skewed_imatrix(c);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 33, 7, 480, 2};
  using R = quant::AffineRule;
  const std::vector<Case> cases = {
      {"gptq-4bit-g128", settings(QuantMethod::Gptq, 4, 128), R::ZeroPointFromOne},
      {"gptq-8bit-g32-sym", settings(QuantMethod::Gptq, 8, 32, true), R::SymmetricZero},
      {"gptq-4bit-g64-act-order", settings(QuantMethod::Gptq, 4, 64, false, true),
       R::ZeroPointFromOne, true},
      {"awq-4bit-g64", settings(QuantMethod::Awq, 4, 64), R::ZeroPoint, false, true},
      {"mlx-4bit-g64", settings(QuantMethod::Mlx, 4, 64), R::HalfBias},
      {"mlx-8bit-g32", settings(QuantMethod::Mlx, 8, 32), R::HalfBias},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const ModelWeights w = quantized_for(k, c, f32, im);
    testing::TempDir dir("export-" + k.name);
    CheckpointFolder folder;
    folder.quantization = k.q;
    folder.config_json = tiny_config_json(2);
    save_quantized_checkpoint(dir.path().string(), w, c, folder);

    // config.json says what was written.
    const std::optional<CheckpointQuantization> read =
        parse_checkpoint_quantization(read_text_file(dir.file("config.json")), "config.json");
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(read->method, k.q.method);
    EXPECT_EQ(read->dtype(), k.q.dtype());
    if (k.q.method == QuantMethod::Gptq) {
      EXPECT_EQ(read->desc_act, k.q.desc_act);
      EXPECT_EQ(read->sym, k.q.sym);
      EXPECT_TRUE(read->zeros_minus_one);
    }
    EXPECT_EQ(std::filesystem::exists(dir.file("quantize_config.json")),
              k.q.method == QuantMethod::Gptq);

    // Every quantized module decodes, by the format's rules, to tern's values.
    const SafetensorsModel st = SafetensorsModel::open(dir.path().string());
    auto expect_module = [&](const std::string& module, const WeightMatrix& m) {
      EXPECT_EQ(decode_by_rules(st, k.q.method, k.q.bits, k.q.group_size, module, m.rows, m.cols),
                dequantized(m))
          << module;
    };
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& l = w.layers[i];
      const std::string p = "model.layers." + std::to_string(i) + ".";
      expect_module(p + "self_attn.q_proj", l.wq);
      expect_module(p + "self_attn.k_proj", l.wk);
      expect_module(p + "self_attn.v_proj", l.wv);
      expect_module(p + "self_attn.o_proj", l.wo);
      expect_module(p + "mlp.gate_proj", l.w_gate);
      expect_module(p + "mlp.up_proj", l.w_up);
      expect_module(p + "mlp.down_proj", l.w_down);
      EXPECT_EQ(l.wq.input_order != nullptr, k.act_order);
    }
    if (k.q.method == QuantMethod::Mlx) {
      expect_module("model.embed_tokens", w.token_embedding);
    } else {
      EXPECT_EQ(st.find_tensor("model.embed_tokens.weight")->dtype, DType::F16);
    }

    // It loads as the model it was written from: the same logits, bit for bit.
    LoadOptions load;
    load.model = dir.path().string();
    const LoadedModel loaded = load_model(load);
    EXPECT_EQ(loaded.weights.layers[1].w_down.dtype, k.q.dtype());
    if (k.act_order) {
      const WeightMatrix &a = loaded.weights.layers[0].wq, &b = w.layers[0].wq;
      ASSERT_NE(a.input_order, nullptr);
      EXPECT_TRUE(std::equal(a.input_order, a.input_order + a.cols, b.input_order));
    }
    const std::vector<float> want = testing::prefill_logits(c, w, tokens);
    EXPECT_TRUE(testing::bitwise_equal(testing::prefill_logits(c, loaded.weights, tokens), want));
    // And stays near the float model (4-bit dummy weights: relative RMS ~0.15).
    EXPECT_LT(testing::relative_rms_error(want, testing::prefill_logits(c, f32, tokens)),
              k.q.bits == 8 ? 0.02 : 0.25);
  }
}

void expect_refused(const ModelWeights& w, const ModelConfig& c, const CheckpointQuantization& q,
                    const std::string& phrase) {
  testing::TempDir dir("export-refused");
  CheckpointFolder folder;
  folder.quantization = q;
  try {
    save_quantized_checkpoint(dir.path().string(), w, c, folder);
    ADD_FAILURE() << "written: " << phrase;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
  }
}

TEST(CheckpointExport, RefusesWeightsTheFormatCannotHold) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(1);
  const ModelWeights f32 = make_dummy_weights(c, DType::F32, 3);
  const ImportanceMatrix im = skewed_imatrix(c);
  using R = quant::AffineRule;
  // A float layer in a GPTQ checkpoint.
  expect_refused(quantize_weights(f32, DType::F16), c, settings(QuantMethod::Gptq, 4, 128),
                 "self_attn.q_proj: is F16");
  // Another group size than the settings'.
  const ModelWeights g64 =
      quantized_for({"", settings(QuantMethod::Awq, 4, 64), R::ZeroPoint}, c, f32, im);
  expect_refused(g64, c, settings(QuantMethod::Awq, 4, 128), "not INT4_G128");
  // MLX's f16 biases are no integer zero points, and GPTQ's −s·z no f16 biases.
  const ModelWeights mlx =
      quantized_for({"", settings(QuantMethod::Mlx, 4, 64), R::HalfBias}, c, f32, im);
  expect_refused(mlx, c, settings(QuantMethod::Gptq, 4, 64), "integer zero");
  expect_refused(g64, c, settings(QuantMethod::Mlx, 4, 64), "not an f16 value");
  // Zero points other than the middle code in a symmetric checkpoint.
  expect_refused(g64, c, settings(QuantMethod::Gptq, 4, 64, true), "not the middle code");
  // Act-order groups where no g_idx can say so.
  const ModelWeights act = quantized_for(
      {"", settings(QuantMethod::Gptq, 4, 64, false, true), R::ZeroPointFromOne, true}, c, f32, im);
  expect_refused(act, c, settings(QuantMethod::Awq, 4, 64), "act-order");
  expect_refused(act, c, settings(QuantMethod::Gptq, 4, 64), "act-order");
}

TEST(CheckpointExport, WritesAConfigForAModelReadFromGguf) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(1, /*tied=*/false);
  const ModelConfig back = ModelConfig::from_hf_json(c.to_hf_json(), "written");
  EXPECT_EQ(back.arch, c.arch);
  EXPECT_EQ(back.hidden_size, c.hidden_size);
  EXPECT_EQ(back.head_dim, c.head_dim);
  EXPECT_EQ(back.num_kv_heads, c.num_kv_heads);
  EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_EQ(back.qk_norm, c.qk_norm);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
}

// stories260K's GGUF: a llama whose q and k rows llama.cpp's converter interleaved, put back in
// Hugging Face's order; its 172-wide ffn_down has no whole groups of 64, so MLX leaves it float
// and says so, as mlx-lm's per-module entries do.
TEST(CheckpointExport, LlamaReadFromGgufWithModulesLeftFloat) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LoadOptions load;
  load.model = testing::fixture("stories260K/stories260K.gguf");
  const LoadedModel source = load_model(load);
  ASSERT_EQ(source.weights.rope_layout, RopeLayout::Interleaved);
  QuantizeOptions options;
  options.affine_rule = quant::AffineRule::HalfBias;
  const ModelWeights w = quantize_weights(source.weights, source.config,
                                          QuantRecipe::uniform(DType::INT4_G64), options);
  ASSERT_EQ(w.layers[0].w_down.dtype, DType::F16);
  testing::TempDir dir("export-stories");
  CheckpointFolder folder;
  folder.quantization = settings(QuantMethod::Mlx, 4, 64);
  save_quantized_checkpoint(dir.path().string(), w, source.config, folder);
  const nlohmann::json config = nlohmann::json::parse(read_text_file(dir.file("config.json")));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["quantization"]["model.layers.0.mlp.down_proj"], false);
  EXPECT_FALSE(config["quantization"].contains("model.layers.0.mlp.up_proj"));

  LoadOptions back;
  back.model = dir.path().string();
  back.tokenizer = load.model;
  const LoadedModel loaded = load_model(back);
  EXPECT_EQ(loaded.weights.rope_layout, RopeLayout::Neox);
  EXPECT_EQ(loaded.weights.layers[0].wq.dtype, DType::INT4_G64);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 1000 % 512, 30, 95};
  EXPECT_LT(
      testing::relative_rms_error(testing::prefill_logits(loaded.config, loaded.weights, tokens),
                                  testing::prefill_logits(source.config, w, tokens)),
      1e-5);
}

// stories260K widened as ../shared/tools/widen_gguf.py widens it (Net2Net: the hidden state
// `copies` copies of itself, each FFN neuron `neurons` times; powers of two keep it exact), small
// enough for a test: hidden 128, FFN 2752 (43 groups of 64), in F32.
struct Widened {
  ModelConfig config;
  ModelWeights weights;
};

Widened widen(const LoadedModel& m, int64_t copies, int64_t neurons) {
  const ModelConfig& c = m.config;
  const ModelWeights& s = m.weights;
  EXPECT_FALSE(s.tied_embeddings);  // a tied head would read k copies: no longer the function
  Widened out{c, {}};
  ModelConfig& wc = out.config;
  ModelWeights& w = out.weights;
  wc.hidden_size = c.hidden_size * copies;
  wc.intermediate_size = c.intermediate_size * neurons;
  // rows × cols of F32 from f(r, j), the source's values read through `src`.
  auto matrix = [&](int64_t rows, int64_t cols, auto value) {
    std::span<std::byte> bytes = w.own_bytes(static_cast<size_t>(rows * cols) * sizeof(float));
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) f[r * cols + j] = value(r, j);
    return WeightMatrix{DType::F32, rows, cols, bytes.data(), static_cast<size_t>(cols) * 4};
  };
  auto at = [](const WeightMatrix& src) {
    auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(src.rows * src.cols));
    for (int64_t r = 0; r < src.rows; ++r)
      dequantize_row(src.dtype, src.row(r), rows->data() + r * src.cols, src.cols);
    return [rows, cols = src.cols](int64_t r, int64_t j) { return (*rows)[r * cols + j]; };
  };
  auto repeated = [&](std::span<const float> v, int64_t times) -> std::span<const float> {
    std::span<float> r = w.own_floats(v.size() * static_cast<size_t>(times));
    for (size_t i = 0; i < r.size(); ++i) r[i] = v[i % v.size()];
    return r;
  };
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  const auto k = static_cast<float>(copies), n = static_cast<float>(neurons);
  // Reads the hidden state: each copy takes W / k. Writes it: W stacked k times.
  auto reads = [&](const WeightMatrix& src) {
    auto v = at(src);
    return matrix(src.rows, h * copies, [&](int64_t r, int64_t j) { return v(r, j % h) / k; });
  };
  auto writes = [&](const WeightMatrix& src) {
    auto v = at(src);
    return matrix(src.rows * copies, src.cols,
                  [&](int64_t r, int64_t j) { return v(r % src.rows, j); });
  };
  auto e = at(s.token_embedding);
  w.token_embedding =
      matrix(s.token_embedding.rows, h * copies, [&](int64_t r, int64_t j) { return e(r, j % h); });
  w.lm_head = reads(s.lm_head);
  w.output_norm = repeated(s.output_norm, copies);
  w.rope_layout = s.rope_layout;
  for (const LayerWeights& l : s.layers) {
    LayerWeights& o = w.layers.emplace_back();
    o.attn_norm = repeated(l.attn_norm, copies);
    o.ffn_norm = repeated(l.ffn_norm, copies);
    o.wq = reads(l.wq);
    o.wk = reads(l.wk);
    o.wv = reads(l.wv);
    o.wo = writes(l.wo);
    // Each neuron `neurons` times (gate and up rows), down reading the copies with weight 1 / m.
    auto gate = at(l.w_gate), up = at(l.w_up), down = at(l.w_down);
    o.w_gate = matrix(f * neurons, h * copies,
                      [&](int64_t r, int64_t j) { return gate(r % f, j % h) / k; });
    o.w_up =
        matrix(f * neurons, h * copies, [&](int64_t r, int64_t j) { return up(r % f, j % h) / k; });
    o.w_down = matrix(h * copies, f * neurons,
                      [&](int64_t r, int64_t j) { return down(r % h, j % f) / n; });
  }
  return out;
}

// The whole model in each format: a widened stories260K (real weights, whose text is real)
// quantized, written, loaded, and run with the logits of its own weights dequantized to F32.
TEST(CheckpointExport, WidenedStoriesInEachFormat) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  LoadOptions load;
  load.model = testing::fixture("stories260K/stories260K.gguf");
  const LoadedModel stories = load_model(load);
  const Widened wide = widen(stories, 2, 16);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 488, 30, 95, 290, 34};
  const std::vector<float> original =
      testing::prefill_logits(stories.config, stories.weights, tokens);
  // The widening keeps the function (up to float rounding).
  EXPECT_LT(testing::relative_rms_error(testing::prefill_logits(wide.config, wide.weights, tokens),
                                        original),
            1e-4);
  const ImportanceMatrix im = skewed_imatrix(wide.config, /*outer=*/false);
  using R = quant::AffineRule;
  const std::vector<Case> cases = {
      {"gptq", settings(QuantMethod::Gptq, 4, 64), R::ZeroPointFromOne},
      {"gptq-8bit-sym", settings(QuantMethod::Gptq, 8, 32, true), R::SymmetricZero},
      {"awq", settings(QuantMethod::Awq, 4, 64), R::ZeroPoint, false, true},
      {"mlx", settings(QuantMethod::Mlx, 4, 64), R::HalfBias},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    testing::TempDir dir("export-wide-" + k.name);
    CheckpointFolder folder;
    folder.quantization = k.q;
    save_quantized_checkpoint(dir.path().string(), quantized_for(k, wide.config, wide.weights, im),
                              wide.config, folder);
    LoadOptions back;
    back.model = dir.path().string();
    const LoadedModel loaded = load_model(back);
    EXPECT_EQ(loaded.weights.layers[2].w_down.dtype, k.q.dtype());
    const ModelWeights dequantized = quantize_weights(loaded.weights, DType::F32);
    const std::vector<float> got = testing::prefill_logits(loaded.config, loaded.weights, tokens);
    // The 8-bit activations' error only (measured 0.0035-0.0061), and the 4-bit weights' own
    // against stories260K itself.
    EXPECT_LT(testing::relative_rms_error(
                  got, testing::prefill_logits(loaded.config, dequantized, tokens)),
              0.016);
    EXPECT_LT(testing::relative_rms_error(got, original), k.q.bits == 8 ? 0.03 : 0.35);
  }
}

}  // namespace
}  // namespace tern
