// QuantRecipe: the rules of llama.cpp's src/llama-quant.cpp (llama_tensor_get_type,
// use_more_bits, tensor_type_fallback) restated for the file types tern writes and the decoders
// it runs (no fused qkv, no falcon; of the experts' own rules, MXFP4_MOE's).
#include "tern/quant/quant_recipe.h"

#include <array>
#include <cctype>

#include "tern/core/error.h"
#include "tern/quant/weight_quantizer.h"

namespace tern {
namespace {

struct FileTypeInfo {
  FileType type;
  std::string_view name;
  DType base;
};

constexpr std::array kFileTypes{
    FileTypeInfo{FileType::AllF32, "F32", DType::F32},
    FileTypeInfo{FileType::MostlyF16, "F16", DType::F16},
    FileTypeInfo{FileType::Q4_0, "Q4_0", DType::Q4_0},
    FileTypeInfo{FileType::Q4_1, "Q4_1", DType::Q4_1},
    FileTypeInfo{FileType::Q8_0, "Q8_0", DType::Q8_0},
    FileTypeInfo{FileType::Q5_0, "Q5_0", DType::Q5_0},
    FileTypeInfo{FileType::Q5_1, "Q5_1", DType::Q5_1},
    FileTypeInfo{FileType::Q2_K, "Q2_K", DType::Q2_K},
    FileTypeInfo{FileType::Q2_K_S, "Q2_K_S", DType::Q2_K},
    FileTypeInfo{FileType::Q3_K_S, "Q3_K_S", DType::Q3_K},
    FileTypeInfo{FileType::Q3_K_M, "Q3_K_M", DType::Q3_K},
    FileTypeInfo{FileType::Q3_K_L, "Q3_K_L", DType::Q3_K},
    FileTypeInfo{FileType::Q4_K_S, "Q4_K_S", DType::Q4_K},
    FileTypeInfo{FileType::Q4_K_M, "Q4_K_M", DType::Q4_K},
    FileTypeInfo{FileType::Q5_K_S, "Q5_K_S", DType::Q5_K},
    FileTypeInfo{FileType::Q5_K_M, "Q5_K_M", DType::Q5_K},
    FileTypeInfo{FileType::Q6_K, "Q6_K", DType::Q6_K},
    FileTypeInfo{FileType::IQ4_NL, "IQ4_NL", DType::IQ4_NL},
    FileTypeInfo{FileType::IQ4_XS, "IQ4_XS", DType::IQ4_XS},
    FileTypeInfo{FileType::IQ3_XXS, "IQ3_XXS", DType::IQ3_XXS},
    FileTypeInfo{FileType::IQ3_XS, "IQ3_XS", DType::IQ3_S},
    FileTypeInfo{FileType::IQ3_S, "IQ3_S", DType::IQ3_S},
    FileTypeInfo{FileType::IQ3_M, "IQ3_M", DType::IQ3_S},
    FileTypeInfo{FileType::IQ2_XXS, "IQ2_XXS", DType::IQ2_XXS},
    FileTypeInfo{FileType::IQ2_XS, "IQ2_XS", DType::IQ2_XS},
    FileTypeInfo{FileType::IQ2_S, "IQ2_S", DType::IQ2_XS},
    FileTypeInfo{FileType::IQ2_M, "IQ2_M", DType::IQ2_S},
    FileTypeInfo{FileType::IQ1_S, "IQ1_S", DType::IQ1_S},
    FileTypeInfo{FileType::IQ1_M, "IQ1_M", DType::IQ1_M},
    FileTypeInfo{FileType::MostlyBF16, "BF16", DType::BF16},
    FileTypeInfo{FileType::MXFP4_MOE, "MXFP4_MOE", DType::MXFP4},
};

const FileTypeInfo& info(FileType type) {
  for (const FileTypeInfo& i : kFileTypes)
    if (i.type == type) return i;
  throw Error("unknown file type " + std::to_string(static_cast<uint32_t>(type)));
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool is_quantized(DType t) { return dtype_traits(t).block_elems > 1; }

// The types a recipe may ask for: those the weight quantizers write.
bool is_weight_type(DType t) { return quant::has_weight_quantizer(t); }

// llama.cpp's tensor categories, found by the same name matches.
enum class Kind {
  Output,
  TokenEmbedding,
  AttnV,
  AttnK,
  AttnQ,
  AttnOutput,
  FfnUp,
  FfnGate,
  FfnDown,
  Other
};

Kind kind_of(std::string_view name) {
  auto has = [name](std::string_view part) { return name.find(part) != std::string_view::npos; };
  if (name == "output.weight") return Kind::Output;
  if (name == "token_embd.weight") return Kind::TokenEmbedding;
  // A fused qkv counts as attn_v (llama.cpp's category_is_attn_v); tern never writes one.
  if (has("attn_qkv.weight") || has("attn_v.weight")) return Kind::AttnV;
  if (has("attn_k.weight")) return Kind::AttnK;
  if (has("attn_q.weight")) return Kind::AttnQ;
  if (has("attn_output.weight")) return Kind::AttnOutput;
  if (has("ffn_up")) return Kind::FfnUp;
  if (has("ffn_gate")) return Kind::FfnGate;
  if (has("ffn_down")) return Kind::FfnDown;
  return Kind::Other;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third layer in
// between get more bits. (The modulo of a negative number never decides: those layers are in
// the first eighth already.)
bool use_more_bits(int64_t layer, int64_t num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

// The mixture's choice before fallbacks. `base` is quantized.
DType mixture_type(FileType ft, DType base, const RecipeModel& m, const RecipeTensor& t,
                   Kind kind) {
  auto layer_checked = [&] {
    if (t.layer < 0 || t.layer >= m.num_layers)
      throw Error("quantizing '" + std::string(t.name) + "': layer " + std::to_string(t.layer) +
                  " is outside the model's " + std::to_string(m.num_layers) + " layers");
    return t.layer;
  };
  // MXFP4_MOE: the stacked experts MXFP4, every other matrix (the output and embedding too)
  // Q8_0.
  if (ft == FileType::MXFP4_MOE) return t.experts > 1 ? DType::MXFP4 : DType::Q8_0;
  const bool medium = ft == FileType::Q4_K_M || ft == FileType::Q5_K_M;
  const bool iq4 = ft == FileType::IQ4_NL || ft == FileType::IQ4_XS;
  // The 2- and 1-bit lattice files: IQ2_S and IQ2_M give their few more-bits matrices IQ3_S,
  // the others Q2_K.
  const bool iq1 = ft == FileType::IQ1_S || ft == FileType::IQ1_M;
  const bool iq2 = ft == FileType::IQ2_XXS || ft == FileType::IQ2_XS || ft == FileType::IQ2_S ||
                   ft == FileType::IQ2_M || iq1;
  const DType iq2_more =
      ft == FileType::IQ2_S || ft == FileType::IQ2_M ? DType::IQ3_S : DType::Q2_K;
  switch (kind) {
    case Kind::Output:
    case Kind::TokenEmbedding: {
      // A tied embedding is quantized as the output it also is; an untied one keeps the base
      // (the 2-bit and IQ3_XXS files' gets more bits).
      if (kind == Kind::TokenEmbedding && !m.tied_embeddings) {
        if (iq2) return iq2_more;
        return ft == FileType::IQ3_XXS ? DType::IQ3_S : base;
      }
      if (t.cols % dtype_traits(base).block_elems != 0) return DType::Q8_0;
      if (iq2 || ft == FileType::IQ3_XXS) return DType::Q5_K;
      return base == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;
    }
    case Kind::AttnV: {
      const int64_t i = layer_checked();
      if (iq2) return m.gqa >= 4 ? DType::Q4_K : iq2_more;
      DType type = base;
      if (ft == FileType::IQ3_XXS)
        type = m.gqa >= 4 ? DType::Q4_K : m.has_imatrix ? DType::IQ3_XXS : DType::IQ3_S;
      else if ((ft == FileType::IQ3_XS || ft == FileType::IQ3_S) && m.gqa >= 4)
        type = DType::Q4_K;
      else if (ft == FileType::IQ3_M)
        type = DType::Q4_K;
      else if (ft == FileType::Q2_K)
        type = m.gqa >= 4 ? DType::Q4_K : DType::Q3_K;
      else if (ft == FileType::Q2_K_S && m.gqa >= 4)
        type = DType::Q4_K;
      else if (ft == FileType::Q3_K_M)
        type = i < 2 ? DType::Q5_K : DType::Q4_K;
      else if (ft == FileType::Q3_K_L)
        type = DType::Q5_K;
      else if (iq4 && m.gqa >= 4)
        type = DType::Q5_K;
      else if (medium && use_more_bits(i, m.num_layers))
        type = DType::Q6_K;
      else if (ft == FileType::Q4_K_S && i < 4)
        type = DType::Q5_K;
      // 70B models share each attn_v among 8 query heads, so it is small: more bits cost little.
      if (m.is_70b && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
      return type;
    }
    case Kind::FfnDown: {
      const int64_t i = layer_checked();
      if (iq2) return i < m.num_layers / 8 ? iq2_more : base;
      if (ft == FileType::IQ3_XXS && !m.has_imatrix)
        return i < m.num_layers / 8 ? DType::Q4_K : DType::Q3_K;
      if (ft == FileType::IQ3_M && i < m.num_layers / 8) return DType::Q4_K;
      if (ft == FileType::Q2_K) return DType::Q3_K;
      if (ft == FileType::Q2_K_S) return i < m.num_layers / 8 ? DType::Q4_K : base;
      // (llama.cpp keeps Q3_K beyond the first sixteenth only for falcon, which tern does not run.)
      if (ft == FileType::Q3_K_M) return i < m.num_layers / 16 ? DType::Q5_K : DType::Q4_K;
      if (ft == FileType::Q3_K_L) return DType::Q5_K;
      if (medium && use_more_bits(i, m.num_layers)) return DType::Q6_K;
      if (iq4 && i < m.num_layers / 8 && !m.has_imatrix) return DType::Q5_K;
      if (ft == FileType::Q4_K_S && i < m.num_layers / 8) return DType::Q5_K;
      return base;
    }
    case Kind::AttnOutput:
      if (iq1) return DType::IQ2_XXS;
      if (ft == FileType::IQ2_S || ft == FileType::IQ2_M) return DType::IQ3_S;
      if (ft == FileType::IQ3_XXS) return DType::IQ3_S;
      if (ft == FileType::IQ3_M) return DType::Q4_K;
      if (ft == FileType::Q2_K) return DType::Q3_K;
      if (ft == FileType::Q3_K_M) return DType::Q4_K;
      if (ft == FileType::Q3_K_L) return DType::Q5_K;
      return base;
    case Kind::AttnQ:
    case Kind::AttnK:
      // IQ3_XS and IQ3_XXS save bits where the error costs least.
      if (ft == FileType::IQ3_XS) return DType::IQ3_XXS;
      if (ft == FileType::IQ3_XXS) return DType::IQ2_S;
      return base;
    case Kind::FfnGate:
    case Kind::FfnUp: {
      if (ft != FileType::IQ3_XS) return base;
      const int64_t i = layer_checked();
      return i >= m.num_layers / 8 && i < 7 * m.num_layers / 8 ? DType::IQ3_XXS : base;
    }
    default:
      // Anything else these file types leave at the base in a model without experts.
      return base;
  }
}

// vLLM's --dtype names of the float types, and tern's own (f32, f16, bf16, any case).
std::optional<DType> vllm_float_dtype(std::string_view name) {
  if (name == "float32" || name == "float" || equals_ignoring_case(name, "f32")) return DType::F32;
  if (name == "float16" || name == "half" || equals_ignoring_case(name, "f16")) return DType::F16;
  if (name == "bfloat16" || equals_ignoring_case(name, "bf16")) return DType::BF16;
  return std::nullopt;
}

}  // namespace

std::string_view file_type_name(FileType type) { return info(type).name; }

std::optional<FileType> file_type_from_name(std::string_view name) {
  for (const FileTypeInfo& i : kFileTypes)
    if (equals_ignoring_case(i.name, name)) return i.type;
  return std::nullopt;
}

std::optional<FileType> file_type_from_gguf(uint32_t value) {
  for (const FileTypeInfo& i : kFileTypes)
    if (static_cast<uint32_t>(i.type) == value) return i.type;
  return std::nullopt;
}

DType file_type_base(FileType type) { return info(type).base; }

FileType uniform_file_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return FileType::AllF32;
    case DType::F16:
      return FileType::MostlyF16;
    case DType::BF16:
      return FileType::MostlyBF16;
    case DType::Q4_0:
      return FileType::Q4_0;
    case DType::Q4_1:
      return FileType::Q4_1;
    case DType::Q8_0:
      return FileType::Q8_0;
    case DType::Q5_0:
      return FileType::Q5_0;
    case DType::Q5_1:
      return FileType::Q5_1;
    case DType::Q4_K:
      return FileType::Q4_K_S;  // every matrix Q4_K
    case DType::Q5_K:
      return FileType::Q5_K_S;
    case DType::Q6_K:
      return FileType::Q6_K;
    case DType::Q2_K:
      return FileType::Q2_K;  // llama.cpp's name of the closest mixture
    case DType::Q3_K:
      return FileType::Q3_K_S;
    case DType::IQ4_NL:
      return FileType::IQ4_NL;
    case DType::IQ4_XS:
      return FileType::IQ4_XS;
    case DType::IQ3_XXS:
      return FileType::IQ3_XXS;
    case DType::IQ3_S:
      return FileType::IQ3_S;
    case DType::IQ2_XXS:
      return FileType::IQ2_XXS;
    case DType::IQ2_XS:
      return FileType::IQ2_XS;
    case DType::IQ2_S:
      return FileType::IQ2_M;  // llama.cpp's IQ2_M has IQ2_S matrices, its IQ2_S IQ2_XS ones
    case DType::IQ1_S:
      return FileType::IQ1_S;
    case DType::IQ1_M:
      return FileType::IQ1_M;
    case DType::MXFP4:
      return FileType::MXFP4_MOE;  // (llama-quantize --pure MXFP4_MOE)
    default:
      throw Error("no GGUF file type for weights of type " + std::string(dtype_name(dtype)));
  }
}

DType fitting_type(DType want, int64_t cols) {
  auto fits = [cols](DType t) { return dtype_bytes(t, static_cast<uint64_t>(cols)).has_value(); };
  if (fits(want)) return want;
  DType fallback = DType::F16;
  // (the lattice types' super-blocks of 256 fall back to IQ4_NL's blocks of 32, as llama.cpp's)
  const bool lattice = want == DType::IQ3_XXS || want == DType::IQ3_S || want == DType::IQ2_XXS ||
                       want == DType::IQ2_XS || want == DType::IQ2_S || want == DType::IQ1_S ||
                       want == DType::IQ1_M;
  if (want == DType::Q2_K || want == DType::Q3_K || want == DType::IQ4_XS || lattice)
    fallback = DType::IQ4_NL;
  if (want == DType::Q4_K) fallback = DType::Q5_0;
  if (want == DType::Q5_K) fallback = DType::Q5_1;
  if (want == DType::Q6_K) fallback = DType::Q8_0;
  return fits(fallback) ? fallback : DType::F16;
}

RecipeModel RecipeModel::of(const ModelConfig& c) {
  RecipeModel m;
  m.num_layers = c.num_layers;
  m.tied_embeddings = c.tie_word_embeddings;
  if (c.num_kv_heads > 0) m.gqa = c.num_heads / c.num_kv_heads;
  // llama.cpp's size classes: 80-layer llama with GQA (not llama 1's 65B) and 80-layer qwen2.
  if (c.num_layers == 80)
    m.is_70b =
        (c.arch == ModelArch::Llama && c.num_heads != c.num_kv_heads) || c.arch == ModelArch::Qwen2;
  return m;
}

namespace {
void check_weight_type(DType dtype) {
  if (!is_weight_type(dtype))
    throw Error(
        "weight type " + std::string(dtype_name(dtype)) +
        " is not one tern quantizes to (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, "
        "Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, "
        "IQ1_M, MXFP4, INT4_G32/64/128, INT8_G32/64/128)");
}
}  // namespace

QuantRecipe QuantRecipe::uniform(DType dtype) {
  check_weight_type(dtype);
  QuantRecipe r;
  r.uniform_ = dtype;
  // tern's own types (the affine groups of GPTQ, AWQ and MLX) have no GGUF file type.
  if (dtype_traits(dtype).ggml_type >= 0)
    r.file_type_ = uniform_file_type(dtype);
  else
    r.file_type_ = std::nullopt;
  return r;
}

QuantRecipe QuantRecipe::mixture(FileType file_type) {
  QuantRecipe r;
  r.file_type_ = info(file_type).type;
  return r;
}

QuantRecipe QuantRecipe::pure(FileType file_type) {
  QuantRecipe r = uniform(file_type_base(file_type));
  r.file_type_ = file_type;
  return r;
}

void QuantRecipe::set_output_type(DType type) {
  check_weight_type(type);
  output_type_ = type;
}

void QuantRecipe::set_token_embedding_type(DType type) {
  check_weight_type(type);
  token_embedding_type_ = type;
}

DType QuantRecipe::weight_type(const RecipeModel& model, const RecipeTensor& tensor) const {
  // A mixture of experts' router stays F32 whatever the recipe, as llama-quantize keeps it (its
  // few rows decide which experts run at all).
  if (tensor.name.find("ffn_gate_inp.weight") != std::string_view::npos) return DType::F32;
  if (output_type_ && tensor.name == "output.weight")
    return fitting_type(*output_type_, tensor.cols);
  if (token_embedding_type_ && tensor.name == "token_embd.weight")
    return fitting_type(*token_embedding_type_, tensor.cols);
  if (uniform_) return fitting_type(*uniform_, tensor.cols);
  const FileType mixture = *file_type_;  // every recipe but a uniform one has a file type
  const DType base = file_type_base(mixture);
  // F32 / F16 / BF16 files convert every matrix to their type, with no mixture and no fallback.
  if (!is_quantized(base)) return base;
  return fitting_type(mixture_type(mixture, base, model, tensor, kind_of(tensor.name)),
                      tensor.cols);
}

std::optional<FileType> QuantRecipe::file_type() const { return file_type_; }

bool QuantRecipe::needs_importance_matrix(DType type) const {
  switch (type) {
    case DType::IQ3_XXS:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
      return true;
    case DType::Q2_K:
      return file_type_ == FileType::Q2_K_S;
    default:
      return false;
  }
}

bool QuantRecipe::needs_importance_matrix() const {
  if (uniform_) return needs_importance_matrix(*uniform_);
  // Every mixture that needs one has such a type among its layers' matrices (its base, or
  // IQ3_XS's attn_q and attn_k); IQ3_S and IQ3_M have none.
  switch (*file_type_) {
    case FileType::Q2_K_S:
    case FileType::IQ3_XXS:
    case FileType::IQ3_XS:
    case FileType::IQ2_XXS:
    case FileType::IQ2_XS:
    case FileType::IQ2_S:
    case FileType::IQ2_M:
    case FileType::IQ1_S:
    case FileType::IQ1_M:
      return true;
    default:
      return false;
  }
}

std::string QuantRecipe::name() const {
  return std::string(uniform_ ? dtype_name(*uniform_) : file_type_name(*file_type_));
}

std::optional<QuantRecipe> parse_weight_recipe(const std::string& name, std::string_view flag) {
  if (name.empty() || name == "auto") return std::nullopt;
  auto without_imatrix = [&](QuantRecipe r) {
    if (r.needs_importance_matrix())
      throw Error(std::string(flag) + " " + r.name() +
                  ": needs an importance matrix (llama-quantize refuses it without one), which a "
                  "load-time requantization has none of; tern quantize IN OUT " +
                  r.name() + " --imatrix F writes one, or use q3_k_m, iq3_s, iq3_m");
    return r;
  };
  for (FileType mixed : {FileType::Q4_K_M, FileType::Q4_K_S, FileType::Q5_K_M, FileType::Q5_K_S,
                         FileType::Q3_K_S, FileType::Q3_K_M, FileType::Q3_K_L, FileType::MXFP4_MOE,
                         FileType::IQ3_M, FileType::IQ3_XS, FileType::IQ2_M, FileType::Q2_K_S})
    if (equals_ignoring_case(file_type_name(mixed), name))
      return without_imatrix(QuantRecipe::mixture(mixed));
  if (auto d = dtype_from_name(name); d && is_weight_type(*d))
    return without_imatrix(QuantRecipe::uniform(*d));
  if (std::optional<DType> d = vllm_float_dtype(name)) return QuantRecipe::uniform(*d);
  throw Error(
      std::string(flag) + " '" + name +
      "' is not a weight type (auto, f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, "
      "q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, iq3_s, mxfp4, int4_g32, int4_g64, int4_g128, "
      "int8_g32, int8_g64, int8_g128) or a llama.cpp mixture (q4_k_m, q4_k_s, q5_k_m, q5_k_s, "
      "q3_k_s, q3_k_m, q3_k_l, iq3_m, mxfp4_moe)");
}

std::optional<DType> parse_float_dtype(const std::string& name, std::string_view flag,
                                       std::string_view weight_flag) {
  if (name.empty() || name == "auto") return std::nullopt;
  if (std::optional<DType> d = vllm_float_dtype(name)) return d;
  bool quantized = false;
  try {
    quantized = parse_weight_recipe(name, weight_flag).has_value();
  } catch (const Error&) {
  }
  if (quantized)
    throw Error(std::string(flag) + " '" + name + "' is a quantized type, but " +
                std::string(flag) +
                " is the compute type (vLLM's: float weights become it, quantized ones keep "
                "theirs); to requantize every matrix use " +
                std::string(weight_flag) + " " + name);
  throw Error(std::string(flag) + " '" + name +
              "' is not a dtype (auto, half, float16, bfloat16, float, float32, f16, bf16, f32)");
}

}  // namespace tern
