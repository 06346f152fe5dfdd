// Importance matrices of mixtures of experts, per expert as llama-imatrix's MUL_MAT_ID entries:
// compute_importance_matrix's expert entries against the routing and the experts' intermediates
// computed here in double from the weights; their files (`<name>.in_sum2` [n_expert, cols],
// `<name>.counts` [n_expert, 1]) round-trip and llama.cpp's parse; malformed ones are refused;
// quantize_weights fits each expert's slice to its own row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "models/model_test_util.h"
#include "models/tiny_model_configs.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/eval/imatrix_collector.h"
#include "tern/formats/gguf.h"
#include "tern/models/decoder.h"
#include "tern/models/imatrix_fits.h"
#include "tern/models/weight_loader.h"
#include "tern/quant/importance_matrix.h"
#include "tern/quant/quant_recipe.h"

namespace tern {
namespace {

using testing::config_from_json;

ImportanceMatrix parse_imatrix(std::vector<std::byte> bytes) {
  return ImportanceMatrix::parse(
      std::make_shared<const MappedFile>("experts.imatrix", std::move(bytes)));
}

std::vector<int32_t> calibration_tokens(int64_t n) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 11) % 512));
  return tokens;
}

// Records the normed input of one sparse layer, as the decoder shows it to an observer.
struct LayerInputRecorder : ActivationObserver {
  int layer = 0;
  std::vector<float> x;
  void observe(int l, MatrixInput input, const float* rows, int64_t t, int64_t cols) override {
    if (l == layer && input == MatrixInput::MoeInput) x.assign(rows, rows + t * cols);
  }
  void observe_experts(int, const float*, int64_t, const MoeCapture&) override {}
};

std::vector<double> times_in_double(const WeightMatrix& m, const float* x) {
  std::vector<float> row(static_cast<size_t>(m.cols));
  std::vector<double> y(static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m.dtype, m.row(r), row.data(), m.cols);
    double s = 0;
    for (int64_t c = 0; c < m.cols; ++c) s += static_cast<double>(row[c]) * x[c];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

ImatrixOptions one_window(int64_t tokens) {
  ImatrixOptions o;
  o.ctx = tokens;
  return o;
}

// qwen3moe: every expert entry's counts sum to tokens × top_k; expert e's gate/up sums are the
// squares of the normed rows of the tokens whose top k (by router logit) hold e, its down sums
// those of silu(gate_e x) · up_e x for those tokens; the router's entry is the dense one.
TEST(ExpertImatrix, SumsEachExpertsInputsAsRouted) {
  const ModelConfig c = config_from_json(testing::tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 11);
  Decoder decoder(c, w, find_device("cpu"));
  const int64_t t = 40, k = c.num_experts_per_tok, n = c.num_experts, h = c.hidden_size;
  const std::vector<int32_t> tokens = calibration_tokens(t);
  const ImportanceMatrix im = compute_importance_matrix(decoder, tokens, one_window(t));

  for (int layer = 0; layer < 2; ++layer) {
    auto entry = [&](const char* what) -> const ImportanceEntry& {
      return im.entries.at(gguf_tensor_name(layer, what));
    };
    for (const char* what :
         {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}) {
      const ImportanceEntry& e = entry(what);
      ASSERT_EQ(e.experts(), n) << what;
      EXPECT_EQ(std::accumulate(e.expert_counts.begin(), e.expert_counts.end(), int64_t{0}), t * k)
          << what;
      EXPECT_EQ(e.count, t * k) << what;
    }
    EXPECT_EQ(entry("ffn_down_exps.weight").cols(), c.moe_intermediate_size);
    EXPECT_EQ(entry("ffn_gate_exps.weight").sum_squares, entry("ffn_up_exps.weight").sum_squares);
    EXPECT_TRUE(entry("ffn_gate_inp.weight").expert_counts.empty());
    EXPECT_EQ(entry("ffn_gate_inp.weight").count, t);
    EXPECT_FALSE(im.entries.contains(gguf_tensor_name(layer, "ffn_gate_shexp.weight")));
  }
  check_imatrix_fits(im, w, "tiny qwen3moe");

  // Layer 1 from its normed input, routed and run here.
  LayerInputRecorder recorder;
  recorder.layer = 1;
  decoder.set_observer(&recorder);
  SequenceRunner runner(decoder, t);
  runner.feed(tokens, false);
  decoder.set_observer(nullptr);
  ASSERT_EQ(recorder.x.size(), static_cast<size_t>(t * h));
  const MixtureOfExperts& moe = *w.layers[1].moe;
  const int64_t ff = c.moe_intermediate_size;
  std::vector<double> gate_sums(static_cast<size_t>(n * h)), down_sums(static_cast<size_t>(n * ff));
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int64_t i = 0; i < t; ++i) {
    const float* x = recorder.x.data() + i * h;
    const std::vector<double> logits = times_in_double(moe.router, x);
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return logits[a] > logits[b]; });
    for (int64_t j = 0; j < k; ++j) {
      const auto e = static_cast<size_t>(order[static_cast<size_t>(j)]);
      ++counts[e];
      for (int64_t col = 0; col < h; ++col)
        gate_sums[e * h + col] += static_cast<double>(x[col]) * x[col];
      const std::vector<double> g = times_in_double(moe.gate[e], x),
                                u = times_in_double(moe.up[e], x);
      for (int64_t col = 0; col < ff; ++col) {
        const double a = g[col] / (1 + std::exp(-g[col])) * u[col];
        down_sums[e * ff + col] += a * a;
      }
    }
  }
  const ImportanceEntry& gate = im.entries.at("blk.1.ffn_gate_exps.weight");
  const ImportanceEntry& down = im.entries.at("blk.1.ffn_down_exps.weight");
  EXPECT_EQ(gate.expert_counts, counts);
  EXPECT_EQ(down.expert_counts, counts);
  for (size_t i = 0; i < gate_sums.size(); ++i)
    ASSERT_NEAR(gate.sum_squares[i], gate_sums[i], 1e-4 * gate_sums[i] + 1e-6) << i;
  for (size_t i = 0; i < down_sums.size(); ++i)
    ASSERT_NEAR(down.sum_squares[i], down_sums[i], 1e-3 * down_sums[i] + 1e-7) << i;
}

// qwen2moe's shared expert and gpt-oss's experts (clamped activation, biases): entries of the
// model's shapes, counts summing to tokens × top_k, and the file keeps them.
TEST(ExpertImatrix, SharedExpertsAndGptOss) {
  for (const nlohmann::json& j : {testing::tiny_qwen2moe_json(), testing::tiny_gpt_oss_json()}) {
    const ModelConfig c = config_from_json(j);
    ModelWeights w = make_dummy_weights(c, DType::F32, 5);
    testing::pattern_vectors(w);
    Decoder decoder(c, w, find_device("cpu"));
    const int64_t t = 24;
    const ImportanceMatrix im =
        compute_importance_matrix(decoder, calibration_tokens(t), one_window(t));
    check_imatrix_fits(im, w, "tiny model");
    const bool shared = c.shared_expert_intermediate_size > 0;
    for (int layer = 0; layer < 2; ++layer) {
      const ImportanceEntry& down = im.entries.at(gguf_tensor_name(layer, "ffn_down_exps.weight"));
      EXPECT_EQ(down.experts(), c.num_experts);
      EXPECT_EQ(std::accumulate(down.expert_counts.begin(), down.expert_counts.end(), int64_t{0}),
                t * c.num_experts_per_tok);
      // gpt-oss's down reads the clamped activation: |act| ≤ limit · (limit + 1) a column.
      if (c.swiglu_limit > 0)
        for (int64_t e = 0; e < down.experts(); ++e)
          for (int64_t col = 0; col < down.cols(); ++col) {
            const double bound = c.swiglu_limit * (c.swiglu_limit + 1.0);
            EXPECT_LE(down.sum_squares[static_cast<size_t>(e * down.cols() + col)],
                      bound * bound * static_cast<double>(down.expert_counts[e]) + 1e-9);
          }
      EXPECT_EQ(im.entries.contains(gguf_tensor_name(layer, "ffn_down_shexp.weight")), shared);
      EXPECT_EQ(im.entries.contains(gguf_tensor_name(layer, "ffn_up_shexp.weight")), shared);
      if (shared) {
        EXPECT_EQ(im.entries.at(gguf_tensor_name(layer, "ffn_down_shexp.weight")).count, t);
        EXPECT_EQ(im.entries.at(gguf_tensor_name(layer, "ffn_down_shexp.weight")).cols(),
                  c.shared_expert_intermediate_size);
      }
    }
    const ImportanceMatrix back = parse_imatrix(im.to_bytes());
    ASSERT_EQ(back.entries.size(), im.entries.size());
    for (const auto& [name, e] : im.entries) {
      EXPECT_EQ(back.entries.at(name).expert_counts, e.expert_counts) << name;
      // The file stores the sums as F32: equal to a float's rounding.
      const std::vector<float> a = back.importance(name), b = im.importance(name);
      ASSERT_EQ(a.size(), b.size()) << name;
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6f * b[i]) << name << i;
    }
  }
  // Second moments (GPTQ's) are not collected per expert: refused by name.
  const ModelConfig c = config_from_json(testing::tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 5);
  Decoder decoder(c, w, find_device("cpu"));
  ImatrixOptions o = one_window(8);
  o.keep_outer = true;
  try {
    compute_importance_matrix(decoder, calibration_tokens(8), o);
    ADD_FAILURE() << "second moments of experts were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not collected per expert"), std::string::npos)
        << e.what();
  }
}

// llama.cpp's layout: in_sum2 ne {cols, n_expert} and counts ne {1, n_expert}, in tern's order
// [n_expert, cols] and [n_expert, 1]. An expert no token reached weighs uniformly (1).
GgufWriter llama_cpp_expert_file(std::span<const float> sums, std::span<const float> counts,
                                 int64_t experts, int64_t cols) {
  GgufWriter g;
  g.set("general.type", GgufValue::string("imatrix"));
  g.set("imatrix.chunk_count", GgufValue::u32(1));
  g.add_tensor("blk.0.ffn_down_exps.weight.in_sum2", DType::F32, {experts, cols},
               std::as_bytes(sums));
  g.add_tensor("blk.0.ffn_down_exps.weight.counts", DType::F32,
               {static_cast<int64_t>(counts.size()), 1}, std::as_bytes(counts));
  return g;
}

TEST(ExpertImatrix, ParsesLlamaCppsExpertEntriesAndWritesThem) {
  const float sums[] = {2, 4, 6, 8, 0, 0, 9, 3, 6};
  const float counts[] = {2, 0, 3};
  const ImportanceMatrix m = parse_imatrix(llama_cpp_expert_file(sums, counts, 3, 3).to_bytes());
  const ImportanceEntry& e = m.entries.at("blk.0.ffn_down_exps.weight");
  EXPECT_EQ(e.expert_counts, (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(e.count, 5);
  EXPECT_EQ(e.cols(), 3);
  EXPECT_EQ(m.importance("blk.0.ffn_down_exps.weight"),
            (std::vector<float>{1, 2, 3, 1, 1, 1, 3, 1, 2}));
  const GgufFile g = GgufFile::parse(std::make_shared<const MappedFile>("t", m.to_bytes()));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_down_exps.weight.in_sum2")->shape,
            (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(g.find_tensor("blk.0.ffn_down_exps.weight.counts")->shape,
            (std::vector<int64_t>{3, 1}));
  const ImportanceMatrix back = parse_imatrix(m.to_bytes());
  EXPECT_EQ(back.entries.at("blk.0.ffn_down_exps.weight").sum_squares, e.sum_squares);
  EXPECT_EQ(back.entries.at("blk.0.ffn_down_exps.weight").expert_counts, e.expert_counts);
}

TEST(ExpertImatrix, RefusesMalformedExpertEntries) {
  auto expect_refused = [](const GgufWriter& g, const std::string& what) {
    try {
      parse_imatrix(g.to_bytes());
      ADD_FAILURE() << "accepted; wanted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const float sums[] = {1, 1, 1, 1, 1, 1};
  const float two_counts[] = {1, 1}, three_counts[] = {1, 1, 1}, negative[] = {1, -2, 1};
  expect_refused(llama_cpp_expert_file(sums, two_counts, 3, 2), "3 rows of sums ([3, 2]) and 2");
  expect_refused(llama_cpp_expert_file(sums, negative, 3, 2), "invalid count");
  GgufWriter outer = llama_cpp_expert_file(sums, three_counts, 3, 2);
  outer.add_tensor("blk.0.ffn_down_exps.weight.in_sum_outer", DType::F32, {2, 2},
                   std::as_bytes(std::span(sums).first(4)));
  expect_refused(outer, "second moments per expert are not supported");

  // Against a model: the experts' count and the columns must be the tensor's.
  const ModelConfig c = config_from_json(testing::tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 1);
  auto expect_misfit = [&](const ImportanceMatrix& m, const std::string& what) {
    try {
      check_imatrix_fits(m, w, "im.gguf");
      ADD_FAILURE() << "fitted; wanted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ImportanceMatrix pooled;  // one row for a stacked tensor of 6 experts
  const std::vector<float> x(256, 1.0f);
  pooled.accumulate("blk.0.ffn_gate_exps.weight", x.data(), 1, 256);
  expect_misfit(pooled, "has 1 row of importances (one per expert), the model's tensor 6 experts");
  ImportanceMatrix four;  // 4 experts where the model has 6
  const int32_t routes[] = {0, 3};
  four.accumulate_experts("blk.0.ffn_gate_exps.weight", 4, x.data(), 1, 256, routes, 2);
  expect_misfit(four, "has 4 rows");
  ImportanceMatrix narrow;
  narrow.accumulate_experts("blk.0.ffn_gate_exps.weight", 6, x.data(), 2, 128, routes, 1);
  expect_misfit(narrow, "128 columns");
  const int32_t bad_route[] = {6};
  EXPECT_THROW(
      narrow.accumulate_experts("blk.0.ffn_gate_exps.weight", 6, x.data(), 1, 128, bad_route, 1),
      Error);
}

// The bytes of expert e's slice of a stacked expert tensor.
std::vector<std::byte> expert_bytes(const MixtureOfExperts& moe, size_t e) {
  const WeightMatrix& m = moe.down[e];
  const auto* begin = m.row(0);
  return {begin, begin + static_cast<size_t>(m.rows) * m.row_bytes};
}

// IQ2_XXS needs an importance matrix: with tern's own, per expert, a MoE model quantizes; each
// expert's slice is fitted to its own row (not to the pooled importances), and an expert no token
// reached is fitted as with uniform importances, as llama-quantize does.
TEST(ExpertImatrix, QuantizesEachExpertByItsOwnImportances) {
  const ModelConfig c = config_from_json(testing::tiny_moe_json());
  const ModelWeights w = make_dummy_weights(c, DType::F32, 3);
  Decoder decoder(c, w, find_device("cpu"));
  const int64_t t = 32;
  const ImportanceMatrix im =
      compute_importance_matrix(decoder, calibration_tokens(t), one_window(t));
  const QuantRecipe recipe = QuantRecipe::uniform(DType::IQ2_XXS);
  EXPECT_THROW(quantize_weights(w, c, recipe), Error);  // no importance matrix
  QuantizeOptions options;
  options.imatrix = &im;
  const ModelWeights q = quantize_weights(w, c, recipe, options);
  ASSERT_EQ(q.layers[0].moe->down[0].dtype, DType::IQ2_XXS);

  // The same matrix with every expert's row replaced by the pooled importances.
  const std::string down = "blk.0.ffn_down_exps.weight";
  const ImportanceEntry& own = im.entries.at(down);
  ImportanceMatrix pooled = im;
  ImportanceEntry& p = pooled.entries.at(down);
  const int64_t cols = own.cols();
  std::vector<double> total(static_cast<size_t>(cols));
  for (int64_t e = 0; e < own.experts(); ++e)
    for (int64_t j = 0; j < cols; ++j) total[j] += own.sum_squares[e * cols + j];
  for (int64_t e = 0; e < own.experts(); ++e) {
    std::copy(total.begin(), total.end(), p.sum_squares.begin() + e * cols);
    p.expert_counts[e] = own.count;
  }
  options.imatrix = &pooled;
  const ModelWeights qp = quantize_weights(w, c, recipe, options);
  int differing = 0;
  for (size_t e = 0; e < static_cast<size_t>(c.num_experts); ++e)
    differing += expert_bytes(*q.layers[0].moe, e) != expert_bytes(*qp.layers[0].moe, e);
  EXPECT_GT(differing, 0) << "per-expert importances changed no expert";

  // Expert 0 unreached (count 0) is fitted as with importances of 1.
  ImportanceMatrix unreached = im, ones = im;
  unreached.entries.at(down).expert_counts[0] = 0;
  ImportanceEntry& o = ones.entries.at(down);
  std::fill(o.sum_squares.begin(), o.sum_squares.begin() + cols, 1.0);
  o.expert_counts[0] = 1;
  options.imatrix = &unreached;
  const ModelWeights qu = quantize_weights(w, c, recipe, options);
  options.imatrix = &ones;
  const ModelWeights qo = quantize_weights(w, c, recipe, options);
  EXPECT_EQ(expert_bytes(*qu.layers[0].moe, 0), expert_bytes(*qo.layers[0].moe, 0));
  EXPECT_EQ(expert_bytes(*qu.layers[0].moe, 1), expert_bytes(*q.layers[0].moe, 1));
}

}  // namespace
}  // namespace tern
