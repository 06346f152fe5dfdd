// QuantRecipe against tables worked out by hand from llama.cpp's llama-quant.cpp rules, for
// the shapes of real models (Qwen3-0.6B: 28 layers; Llama 3.2 1B: 16 layers; both tied).
#include "tern/quant/quant_recipe.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/models/weight_loader.h"

namespace tern {
namespace {

using testing::fixture;

const char* const kLayerMatrices[] = {"attn_q.weight",      "attn_k.weight",   "attn_v.weight",
                                      "attn_output.weight", "ffn_gate.weight", "ffn_up.weight",
                                      "ffn_down.weight"};

// The row length (GGUF ne[0]) of a layer matrix in `c`.
int64_t cols_of(const ModelConfig& c, std::string_view what) {
  if (what == "attn_output.weight") return c.q_dim();
  if (what == "ffn_down.weight") return c.intermediate_size;
  return c.hidden_size;
}

// Every layer matrix of `c` under `recipe`: `more_bits_type` for attn_v / ffn_down of the
// layers in `more_bits`, `base` elsewhere.
void expect_layers(const ModelConfig& c, const QuantRecipe& recipe,
                   const std::set<int64_t>& attn_v_layers, DType attn_v_type,
                   const std::set<int64_t>& ffn_down_layers, DType ffn_down_type, DType base) {
  const RecipeModel m = RecipeModel::of(c);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    for (const char* what : kLayerMatrices) {
      const std::string name = gguf_tensor_name(i, what);
      DType want = base;
      if (std::string_view(what) == "attn_v.weight" && attn_v_layers.contains(i))
        want = attn_v_type;
      if (std::string_view(what) == "ffn_down.weight" && ffn_down_layers.contains(i))
        want = ffn_down_type;
      EXPECT_EQ(dtype_name(recipe.weight_type(m, {name, i, cols_of(c, what)})), dtype_name(want))
          << recipe.name() << " " << name;
    }
  }
}

DType embedding_type(const ModelConfig& c, const QuantRecipe& recipe) {
  return recipe.weight_type(RecipeModel::of(c), {"token_embd.weight", -1, c.hidden_size});
}

// use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
// 28 layers: n/8 = 3, 7n/8 = 24: layers 0-2, 24-27, and 5, 8, 11, 14, 17, 20, 23.
const std::set<int64_t> kQwen3MoreBits = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
// 16 layers: n/8 = 2, 7n/8 = 14: layers 0-1, 14-15, and 4, 7, 10, 13.
const std::set<int64_t> kLlama16MoreBits = {0, 1, 4, 7, 10, 13, 14, 15};

ModelConfig config_of(const std::string& dir) { return ModelConfig::from_hf_dir(fixture(dir)); }

TEST(QuantRecipe, Qwen3_0_6B_Q4_K_M) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  ASSERT_EQ(c.num_layers, 28);
  ASSERT_TRUE(c.tie_word_embeddings);
  const QuantRecipe r = QuantRecipe::mixture(FileType::Q4_K_M);
  expect_layers(c, r, kQwen3MoreBits, DType::Q6_K, kQwen3MoreBits, DType::Q6_K, DType::Q4_K);
  // Tied: the embedding is quantized as the output matrix it also is.
  EXPECT_EQ(embedding_type(c, r), DType::Q6_K);
  EXPECT_EQ(static_cast<uint32_t>(*r.file_type()), 15u);
}

TEST(QuantRecipe, Qwen3_0_6B_Q5_K_M_And_S) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  expect_layers(c, QuantRecipe::mixture(FileType::Q5_K_M), kQwen3MoreBits, DType::Q6_K,
                kQwen3MoreBits, DType::Q6_K, DType::Q5_K);
  // Q5_K_S changes nothing but the output (here the tied embedding).
  expect_layers(c, QuantRecipe::mixture(FileType::Q5_K_S), {}, DType::Q5_K, {}, DType::Q5_K,
                DType::Q5_K);
  EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(FileType::Q5_K_S)), DType::Q6_K);
}

TEST(QuantRecipe, Qwen3_0_6B_Q4_K_S) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  // attn_v of the first 4 layers and ffn_down of the first n/8 = 3 get Q5_K.
  expect_layers(c, QuantRecipe::mixture(FileType::Q4_K_S), {0, 1, 2, 3}, DType::Q5_K, {0, 1, 2},
                DType::Q5_K, DType::Q4_K);
  EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(FileType::Q4_K_S)), DType::Q6_K);
}

TEST(QuantRecipe, Llama3_2_1B_Q4_K_M_And_S) {
  TERN_REQUIRE_FIXTURE("model-configs/llama-3.2-1b/config.json");
  const ModelConfig c = config_of("model-configs/llama-3.2-1b");
  ASSERT_EQ(c.num_layers, 16);
  expect_layers(c, QuantRecipe::mixture(FileType::Q4_K_M), kLlama16MoreBits, DType::Q6_K,
                kLlama16MoreBits, DType::Q6_K, DType::Q4_K);
  EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(FileType::Q4_K_M)), DType::Q6_K);
  // n/8 = 2 ffn_down layers get Q5_K under Q4_K_S.
  expect_layers(c, QuantRecipe::mixture(FileType::Q4_K_S), {0, 1, 2, 3}, DType::Q5_K, {0, 1},
                DType::Q5_K, DType::Q4_K);
}

// Every layer matrix of `c` under `recipe` against want(matrix, layer).
template <typename Want>
void expect_each_layer(const ModelConfig& c, const QuantRecipe& recipe, Want want) {
  const RecipeModel m = RecipeModel::of(c);
  for (int64_t i = 0; i < c.num_layers; ++i)
    for (const char* what : kLayerMatrices) {
      const std::string name = gguf_tensor_name(i, what);
      EXPECT_EQ(dtype_name(recipe.weight_type(m, {name, i, cols_of(c, what)})),
                dtype_name(want(std::string_view(what), i)))
          << recipe.name() << " " << name;
    }
}

// The mixtures below 4 bits (28 layers: n/16 = 1, n/8 = 3; 16 query heads on 8 kv heads, so
// llama.cpp's n_gqa is 2 and attn_v does not get Q2_K's GQA bump).
TEST(QuantRecipe, Qwen3_0_6B_Q3_K_And_Q2_K) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  ASSERT_EQ(c.num_heads / c.num_kv_heads, 2);
  expect_each_layer(c, QuantRecipe::mixture(FileType::Q3_K_M), [](std::string_view w, int64_t i) {
    if (w == "attn_v.weight") return i < 2 ? DType::Q5_K : DType::Q4_K;
    if (w == "ffn_down.weight") return i < 1 ? DType::Q5_K : DType::Q4_K;
    if (w == "attn_output.weight") return DType::Q4_K;
    return DType::Q3_K;
  });
  expect_each_layer(c, QuantRecipe::mixture(FileType::Q3_K_L), [](std::string_view w, int64_t) {
    if (w == "attn_v.weight" || w == "ffn_down.weight" || w == "attn_output.weight")
      return DType::Q5_K;
    return DType::Q3_K;
  });
  expect_each_layer(c, QuantRecipe::mixture(FileType::Q3_K_S),
                    [](std::string_view, int64_t) { return DType::Q3_K; });
  expect_each_layer(c, QuantRecipe::mixture(FileType::Q2_K), [](std::string_view w, int64_t) {
    if (w == "attn_v.weight" || w == "ffn_down.weight" || w == "attn_output.weight")
      return DType::Q3_K;
    return DType::Q2_K;
  });
  expect_each_layer(c, QuantRecipe::mixture(FileType::Q2_K_S), [](std::string_view w, int64_t i) {
    if (w == "ffn_down.weight" && i < 3) return DType::Q4_K;
    return DType::Q2_K;
  });
  for (FileType ft :
       {FileType::Q2_K, FileType::Q2_K_S, FileType::Q3_K_S, FileType::Q3_K_M, FileType::Q3_K_L})
    EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(ft)), DType::Q6_K) << file_type_name(ft);
  EXPECT_TRUE(QuantRecipe::mixture(FileType::Q2_K_S).needs_importance_matrix());
  EXPECT_TRUE(QuantRecipe::pure(FileType::Q2_K_S).needs_importance_matrix());
  EXPECT_FALSE(QuantRecipe::mixture(FileType::Q2_K).needs_importance_matrix());
}

// IQ4_XS and IQ4_NL: without an importance matrix the first eighth of ffn_down (3 of 28
// layers) is Q5_K; with one, every matrix but the output is the base. n_gqa 2: attn_v stays.
TEST(QuantRecipe, Qwen3_0_6B_IQ4) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  for (FileType ft : {FileType::IQ4_XS, FileType::IQ4_NL}) {
    const DType base = file_type_base(ft);
    expect_each_layer(c, QuantRecipe::mixture(ft), [&](std::string_view w, int64_t i) {
      return w == "ffn_down.weight" && i < 3 ? DType::Q5_K : base;
    });
    RecipeModel m = RecipeModel::of(c);
    m.has_imatrix = true;
    EXPECT_EQ(QuantRecipe::mixture(ft).weight_type(m, {"blk.0.ffn_down.weight", 0, 3072}), base);
    EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(ft)), DType::Q6_K) << file_type_name(ft);
  }
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ4_NL), 25u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ4_XS), 30u);
  EXPECT_EQ(uniform_file_type(DType::IQ4_XS), FileType::IQ4_XS);
  EXPECT_FALSE(QuantRecipe::mixture(FileType::IQ4_XS).needs_importance_matrix());
}

// The lattice mixtures on 28 layers (n/8 = 3, 7n/8 = 24) with n_gqa 2, as llama.cpp's
// llama_tensor_get_type gives them.
TEST(QuantRecipe, Qwen3_0_6B_LatticeMixtures) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = config_of("model-configs/qwen3-0.6b");
  auto is = [](std::string_view w, const char* what) { return w == what; };
  // IQ3_XXS without an importance matrix: attn_v IQ3_S, ffn_down Q4_K / Q3_K.
  expect_each_layer(c, QuantRecipe::mixture(FileType::IQ3_XXS), [&](std::string_view w, int64_t i) {
    if (is(w, "attn_q.weight") || is(w, "attn_k.weight")) return DType::IQ2_S;
    if (is(w, "attn_v.weight") || is(w, "attn_output.weight")) return DType::IQ3_S;
    if (is(w, "ffn_down.weight")) return i < 3 ? DType::Q4_K : DType::Q3_K;
    return DType::IQ3_XXS;
  });
  RecipeModel with = RecipeModel::of(c);
  with.has_imatrix = true;
  const QuantRecipe xxs = QuantRecipe::mixture(FileType::IQ3_XXS);
  EXPECT_EQ(xxs.weight_type(with, {"blk.0.attn_v.weight", 0, 1024}), DType::IQ3_XXS);
  EXPECT_EQ(xxs.weight_type(with, {"blk.0.ffn_down.weight", 0, 3072}), DType::IQ3_XXS);
  EXPECT_EQ(embedding_type(c, xxs), DType::Q5_K);
  expect_each_layer(c, QuantRecipe::mixture(FileType::IQ3_XS), [&](std::string_view w, int64_t i) {
    if (is(w, "attn_q.weight") || is(w, "attn_k.weight")) return DType::IQ3_XXS;
    if ((is(w, "ffn_gate.weight") || is(w, "ffn_up.weight")) && i >= 3 && i < 24)
      return DType::IQ3_XXS;
    return DType::IQ3_S;
  });
  expect_each_layer(c, QuantRecipe::mixture(FileType::IQ3_M), [&](std::string_view w, int64_t i) {
    if (is(w, "attn_v.weight") || is(w, "attn_output.weight")) return DType::Q4_K;
    if (is(w, "ffn_down.weight") && i < 3) return DType::Q4_K;
    return DType::IQ3_S;
  });
  expect_each_layer(c, QuantRecipe::mixture(FileType::IQ3_S),
                    [](std::string_view, int64_t) { return DType::IQ3_S; });
  for (FileType ft : {FileType::IQ3_XS, FileType::IQ3_S, FileType::IQ3_M})
    EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(ft)), DType::Q6_K) << file_type_name(ft);
  // The 2- and 1-bit files: more bits (IQ3_S for IQ2_S / IQ2_M, else Q2_K) for attn_v and the
  // first eighth of ffn_down; attn_output IQ3_S (IQ2_S, IQ2_M) or IQ2_XXS (IQ1).
  struct Case {
    FileType ft;
    DType base, more, output;
  };
  for (const Case& k : {Case{FileType::IQ2_XXS, DType::IQ2_XXS, DType::Q2_K, DType::IQ2_XXS},
                        Case{FileType::IQ2_XS, DType::IQ2_XS, DType::Q2_K, DType::IQ2_XS},
                        Case{FileType::IQ2_S, DType::IQ2_XS, DType::IQ3_S, DType::IQ3_S},
                        Case{FileType::IQ2_M, DType::IQ2_S, DType::IQ3_S, DType::IQ3_S},
                        Case{FileType::IQ1_S, DType::IQ1_S, DType::Q2_K, DType::IQ2_XXS},
                        Case{FileType::IQ1_M, DType::IQ1_M, DType::Q2_K, DType::IQ2_XXS}}) {
    expect_each_layer(c, QuantRecipe::mixture(k.ft), [&](std::string_view w, int64_t i) {
      if (is(w, "attn_v.weight") || (is(w, "ffn_down.weight") && i < 3)) return k.more;
      if (is(w, "attn_output.weight")) return k.output;
      return k.base;
    });
    EXPECT_EQ(embedding_type(c, QuantRecipe::mixture(k.ft)), DType::Q5_K) << file_type_name(k.ft);
    EXPECT_TRUE(QuantRecipe::mixture(k.ft).needs_importance_matrix()) << file_type_name(k.ft);
  }
  EXPECT_TRUE(QuantRecipe::mixture(FileType::IQ3_XXS).needs_importance_matrix());
  EXPECT_TRUE(QuantRecipe::mixture(FileType::IQ3_XS).needs_importance_matrix());
  EXPECT_FALSE(QuantRecipe::mixture(FileType::IQ3_S).needs_importance_matrix());
  EXPECT_FALSE(QuantRecipe::mixture(FileType::IQ3_M).needs_importance_matrix());
  // llama.cpp's values of general.file_type.
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ2_XXS), 19u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ3_XS), 22u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ3_XXS), 23u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ1_S), 24u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ3_M), 27u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ2_M), 29u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::IQ1_M), 31u);
  // A row not whole super-blocks falls back to IQ4_NL, as llama.cpp's.
  EXPECT_EQ(fitting_type(DType::IQ2_XXS, 288), DType::IQ4_NL);
}

// 32 query heads on 8 kv heads (n_gqa 4): Q2_K and Q2_K_S give attn_v Q4_K, the IQ4 types Q5_K.
TEST(QuantRecipe, Llama3_2_1B_Q2_K_GivesAttnVQ4_K) {
  TERN_REQUIRE_FIXTURE("model-configs/llama-3.2-1b/config.json");
  const ModelConfig c = config_of("model-configs/llama-3.2-1b");
  const RecipeModel m = RecipeModel::of(c);
  ASSERT_EQ(m.gqa, 4);
  for (FileType ft : {FileType::Q2_K, FileType::Q2_K_S})
    EXPECT_EQ(QuantRecipe::mixture(ft).weight_type(m, {"blk.5.attn_v.weight", 5, c.hidden_size}),
              DType::Q4_K)
        << file_type_name(ft);
  for (FileType ft : {FileType::IQ4_XS, FileType::IQ4_NL})
    EXPECT_EQ(QuantRecipe::mixture(ft).weight_type(m, {"blk.5.attn_v.weight", 5, c.hidden_size}),
              DType::Q5_K)
        << file_type_name(ft);
}

TEST(QuantRecipe, UntiedModelGivesTheOutputMoreBitsAndTheEmbeddingTheBase) {
  RecipeModel m;
  m.num_layers = 16;
  m.tied_embeddings = false;
  const QuantRecipe r = QuantRecipe::mixture(FileType::Q4_K_M);
  EXPECT_EQ(r.weight_type(m, {"output.weight", -1, 2048}), DType::Q6_K);
  EXPECT_EQ(r.weight_type(m, {"token_embd.weight", -1, 2048}), DType::Q4_K);
  // A Q8_0 file keeps its output at Q8_0; a Q4_0 file raises it to Q6_K.
  EXPECT_EQ(QuantRecipe::mixture(FileType::Q8_0).weight_type(m, {"output.weight", -1, 2048}),
            DType::Q8_0);
  EXPECT_EQ(QuantRecipe::mixture(FileType::Q4_0).weight_type(m, {"output.weight", -1, 2048}),
            DType::Q6_K);
  EXPECT_EQ(QuantRecipe::mixture(FileType::Q4_0).weight_type(m, {"blk.0.ffn_down.weight", 0, 8192}),
            DType::Q4_0);
  // Float file types convert everything, the output too.
  EXPECT_EQ(QuantRecipe::mixture(FileType::MostlyF16).weight_type(m, {"output.weight", -1, 2048}),
            DType::F16);
  EXPECT_EQ(
      QuantRecipe::mixture(FileType::MostlyBF16).weight_type(m, {"blk.0.attn_v.weight", 0, 2048}),
      DType::BF16);
}

TEST(QuantRecipe, RowsThatAreNotWholeSuperBlocksFallBack) {
  // Qwen2.5-0.5B's 896-wide rows (3.5 super-blocks): Q4_K → Q5_0, Q6_K → Q8_0, and the tied
  // embedding goes straight to Q8_0; 4864 = 19·256 is fine.
  RecipeModel m;
  m.num_layers = 24;
  m.tied_embeddings = true;
  const QuantRecipe r = QuantRecipe::mixture(FileType::Q4_K_M);
  EXPECT_EQ(r.weight_type(m, {"blk.5.attn_q.weight", 5, 896}), DType::Q5_0);
  EXPECT_EQ(r.weight_type(m, {"blk.0.attn_v.weight", 0, 896}), DType::Q8_0);
  EXPECT_EQ(r.weight_type(m, {"token_embd.weight", -1, 896}), DType::Q8_0);
  EXPECT_EQ(r.weight_type(m, {"blk.0.ffn_down.weight", 0, 4864}), DType::Q6_K);
  EXPECT_EQ(QuantRecipe::mixture(FileType::Q5_K_S).weight_type(m, {"blk.3.ffn_up.weight", 3, 896}),
            DType::Q5_1);
  // Q2_K, Q3_K and IQ4_XS take IQ4_NL.
  for (FileType ft : {FileType::Q2_K, FileType::Q3_K_S, FileType::IQ4_XS})
    EXPECT_EQ(QuantRecipe::mixture(ft).weight_type(m, {"blk.3.ffn_up.weight", 3, 896}),
              DType::IQ4_NL)
        << file_type_name(ft);
  // Rows no fallback fits (tern keeps F16 where llama-quantize would refuse).
  EXPECT_EQ(r.weight_type(m, {"blk.3.ffn_up.weight", 3, 100}), DType::F16);
  EXPECT_EQ(QuantRecipe::uniform(DType::Q4_K).weight_type(m, {"blk.3.ffn_up.weight", 3, 896}),
            DType::Q5_0);
}

// llama-quantize's MXFP4_MOE: the stacked experts (ne[2] > 1) MXFP4, every other matrix Q8_0,
// the output and the embedding, tied or not, included; the router stays F32.
TEST(QuantRecipe, Mxfp4MoeGivesTheExpertsMxfp4AndTheRestQ8_0) {
  const QuantRecipe r = QuantRecipe::mixture(FileType::MXFP4_MOE);
  for (bool tied : {false, true}) {
    RecipeModel m;
    m.num_layers = 4;
    m.tied_embeddings = tied;
    m.gqa = 8;
    for (int64_t i = 0; i < 4; ++i) {
      for (const char* what :
           {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"})
        EXPECT_EQ(r.weight_type(m, {gguf_tensor_name(i, what), i, 2048, 128}), DType::MXFP4)
            << what;
      for (const char* what : kLayerMatrices)
        EXPECT_EQ(r.weight_type(m, {gguf_tensor_name(i, what), i, 2048}), DType::Q8_0) << what;
      // A dense layer's ffn in a model with experts elsewhere, and a single-expert stack.
      EXPECT_EQ(r.weight_type(m, {gguf_tensor_name(i, "ffn_down_exps.weight"), i, 2048, 1}),
                DType::Q8_0);
      EXPECT_EQ(r.weight_type(m, {gguf_tensor_name(i, "ffn_gate_inp.weight"), i, 2048}),
                DType::F32);
    }
    EXPECT_EQ(r.weight_type(m, {"output.weight", -1, 2048}), DType::Q8_0);
    EXPECT_EQ(r.weight_type(m, {"token_embd.weight", -1, 2048}), DType::Q8_0);
  }
  // --pure: every matrix the base type, MXFP4.
  RecipeModel m;
  m.num_layers = 4;
  EXPECT_EQ(QuantRecipe::pure(FileType::MXFP4_MOE).weight_type(m, {"blk.0.attn_q.weight", 0, 2048}),
            DType::MXFP4);
  // Rows that are not whole blocks: tern keeps F16 (llama-quantize has no fallback for MXFP4).
  EXPECT_EQ(r.weight_type(m, {"blk.0.ffn_down_exps.weight", 0, 100, 8}), DType::F16);
  EXPECT_EQ(static_cast<uint32_t>(FileType::MXFP4_MOE), 38u);
  EXPECT_EQ(file_type_from_name("mxfp4_moe"), FileType::MXFP4_MOE);
  EXPECT_EQ(file_type_from_gguf(38), FileType::MXFP4_MOE);
  EXPECT_EQ(file_type_base(FileType::MXFP4_MOE), DType::MXFP4);
  EXPECT_EQ(uniform_file_type(DType::MXFP4), FileType::MXFP4_MOE);
  EXPECT_EQ(parse_weight_recipe("mxfp4_moe")->file_type(), FileType::MXFP4_MOE);
  EXPECT_FALSE(parse_weight_recipe("mxfp4_moe")->is_uniform());
  EXPECT_TRUE(parse_weight_recipe("mxfp4")->is_uniform());
}

TEST(QuantRecipe, SeventyBillionLlamaGivesAttnVAtLeastQ5_K) {
  ModelConfig c;
  c.arch = ModelArch::Llama;
  c.num_layers = 80;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  const QuantRecipe r = QuantRecipe::mixture(FileType::Q4_K_M);
  ASSERT_TRUE(RecipeModel::of(c).is_70b);
  // Layer 11: (11 - 10) % 3 = 1, not a more-bits layer.
  EXPECT_EQ(r.weight_type(RecipeModel::of(c), {"blk.11.attn_v.weight", 11, 8192}), DType::Q5_K);
  EXPECT_EQ(r.weight_type(RecipeModel::of(c), {"blk.12.attn_v.weight", 12, 8192}), DType::Q6_K);
  EXPECT_EQ(r.weight_type(RecipeModel::of(c), {"blk.11.ffn_down.weight", 11, 28672}), DType::Q4_K);
  // Llama 1's 65B has as many kv heads as heads: not llama.cpp's 70B.
  c.num_kv_heads = 64;
  EXPECT_EQ(r.weight_type(RecipeModel::of(c), {"blk.11.attn_v.weight", 11, 8192}), DType::Q4_K);
  c.arch = ModelArch::Qwen3;
  EXPECT_FALSE(RecipeModel::of(c).is_70b);
}

TEST(QuantRecipe, FileTypesHaveLlamaCppsNumbersAndNames) {
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q4_K_S), 14u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q4_K_M), 15u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q5_K_S), 16u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q5_K_M), 17u);
  EXPECT_EQ(file_type_from_name("q4_k_m"), FileType::Q4_K_M);
  EXPECT_EQ(file_type_from_gguf(17), FileType::Q5_K_M);
  EXPECT_EQ(file_type_from_gguf(19), FileType::IQ2_XXS);
  EXPECT_EQ(file_type_from_gguf(36), std::nullopt);  // TQ1_0: not one tern writes
  EXPECT_EQ(file_type_base(FileType::Q5_K_M), DType::Q5_K);
  EXPECT_EQ(uniform_file_type(DType::Q4_K), FileType::Q4_K_S);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q2_K), 10u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q3_K_M), 12u);
  EXPECT_EQ(static_cast<uint32_t>(FileType::Q2_K_S), 21u);
  EXPECT_EQ(file_type_from_name("Q3_K_L"), FileType::Q3_K_L);
  EXPECT_EQ(uniform_file_type(DType::Q3_K), FileType::Q3_K_S);
  EXPECT_THROW(uniform_file_type(DType::Q8_K), Error);
}

TEST(QuantRecipe, ParsesWeightTypeFlag) {
  EXPECT_EQ(parse_weight_recipe("auto"), std::nullopt);
  const auto m = parse_weight_recipe("q4_k_m");
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->is_uniform());
  EXPECT_EQ(m->name(), "Q4_K_M");
  EXPECT_EQ(parse_weight_recipe("Q5_K_S")->file_type(), FileType::Q5_K_S);
  const auto u = parse_weight_recipe("q4_k");
  ASSERT_TRUE(u.has_value());
  EXPECT_TRUE(u->is_uniform());
  EXPECT_EQ(u->file_type(), FileType::Q4_K_S);
  EXPECT_EQ(parse_weight_recipe("bfloat16")->name(), "BF16");
  EXPECT_EQ(parse_weight_recipe("q3_k_m")->file_type(), FileType::Q3_K_M);
  EXPECT_TRUE(parse_weight_recipe("q2_k")->is_uniform());  // a type: every matrix Q2_K
  // A load-time requantization has no importance matrix for Q2_K_S.
  // (IQ2_XXS, which needs one too, is refused by name below.)
  try {
    parse_weight_recipe("q2_k_s");
    ADD_FAILURE() << "q2_k_s: no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q3_k_m"), std::string::npos) << e.what();
  }
  EXPECT_THROW(QuantRecipe::uniform(DType::Q8_K), Error);
  // The lattice types: IQ3_S and the IQ3_M mixture load-time; what needs an importance matrix
  // (which a load-time requantization has none of) is refused, naming tern quantize --imatrix.
  EXPECT_TRUE(parse_weight_recipe("iq3_s")->is_uniform());
  EXPECT_EQ(parse_weight_recipe("IQ3_M")->file_type(), FileType::IQ3_M);
  for (const char* name :
       {"iq3_xxs", "iq3_xs", "iq2_xxs", "IQ2_XS", "iq2_s", "iq2_m", "iq1_s", "IQ1_M", "q2_k_s"}) {
    try {
      parse_weight_recipe(name);
      ADD_FAILURE() << name << ": no error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("needs an importance matrix"), std::string::npos) << what;
      EXPECT_NE(what.find("--imatrix"), std::string::npos) << what;
    }
  }
  for (DType t :
       {DType::IQ3_XXS, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M})
    EXPECT_TRUE(QuantRecipe::uniform(t).needs_importance_matrix()) << dtype_name(t);
  EXPECT_FALSE(QuantRecipe::uniform(DType::IQ3_S).needs_importance_matrix());
  // llama-quantize --pure IQ3_XS is all IQ3_S: no importance matrix needed.
  EXPECT_FALSE(QuantRecipe::pure(FileType::IQ3_XS).needs_importance_matrix());
}

std::string float_dtype_error(const std::string& name) {
  try {
    parse_float_dtype(name);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// --dtype takes vLLM's names of the float types; a quantized type is requantizing, which is
// --weight-type's, and the message says so.
TEST(QuantRecipe, ParsesDtypeFlagAsVllmsComputeType) {
  EXPECT_EQ(parse_float_dtype("auto"), std::nullopt);
  for (const char* half : {"half", "float16", "f16", "F16"})
    EXPECT_EQ(parse_float_dtype(half), DType::F16) << half;
  for (const char* bf : {"bfloat16", "bf16"}) EXPECT_EQ(parse_float_dtype(bf), DType::BF16) << bf;
  for (const char* f : {"float", "float32", "f32"})
    EXPECT_EQ(parse_float_dtype(f), DType::F32) << f;
  EXPECT_NE(float_dtype_error("q4_0").find("use --weight-type q4_0"), std::string::npos)
      << float_dtype_error("q4_0");
  EXPECT_NE(float_dtype_error("q4_k_m").find("use --weight-type q4_k_m"), std::string::npos);
  EXPECT_NE(float_dtype_error("float8").find("is not a dtype (auto, half"), std::string::npos)
      << float_dtype_error("float8");
}

TEST(QuantRecipe, LayerOutsideTheModelIsAnError) {
  RecipeModel m;
  m.num_layers = 4;
  const QuantRecipe r = QuantRecipe::mixture(FileType::Q4_K_M);
  EXPECT_THROW(r.weight_type(m, {"blk.4.attn_v.weight", 4, 256}), Error);
  EXPECT_THROW(r.weight_type(m, {"blk.x.ffn_down.weight", -1, 256}), Error);
  // Matrices whose type does not depend on the layer do not need one.
  EXPECT_EQ(r.weight_type(m, {"blk.4.attn_q.weight", -1, 256}), DType::Q4_K);
}

}  // namespace
}  // namespace tern
