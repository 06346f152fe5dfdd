// save_quantized_checkpoint (checkpoint_export.h): the packings of checkpoint_weights.h, written.
#include "tern/models/checkpoint_export.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>

#include "tern/blocks/block_layouts.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/formats/safetensors.h"
#include "tern/models/checkpoint_weights.h"
#include "tern/models/gguf_export.h"
#include "tern/models/tensor_names.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

// The row of a tern matrix that holds a checkpoint's row r: r itself, or for the q and k of a
// llama read from GGUF (interleaved RoPE pairs) the row llama.cpp's converter moved it to.
using RowMap = std::function<int64_t(int64_t)>;

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

uint16_t to_f16(float v, const std::string& tensor) {
  const uint16_t h = f32_to_f16(v);
  if (std::isfinite(v) && !std::isfinite(f16_to_f32(h)))
    throw Error(tensor + ": the value " + std::to_string(v) +
                " is beyond f16's range, which the checkpoint stores");
  return h;
}

// One INT matrix's groups, addressed as a checkpoint addresses them: by its output row and
// input (the groups of an act-order matrix are not runs of inputs).
template <class B>
class Groups {
 public:
  Groups(const WeightMatrix& m, const RowMap& row_map) : m_(m), row_map_(row_map) {
    if (m.input_order != nullptr) {
      position_.resize(static_cast<size_t>(m.cols));
      for (int64_t p = 0; p < m.cols; ++p) position_[static_cast<size_t>(m.input_order[p])] = p;
    }
  }
  int64_t rows() const { return m_.rows; }
  int64_t cols() const { return m_.cols; }
  int64_t groups() const { return m_.cols / B::kElems; }
  const B& block(int64_t row, int64_t g) const {
    return reinterpret_cast<const B*>(m_.row(row_map_ ? row_map_(row) : row))[g];
  }
  int64_t position(int64_t input) const {
    return position_.empty() ? input : position_[static_cast<size_t>(input)];
  }
  int64_t group_of(int64_t input) const { return position(input) / B::kElems; }
  int code(int64_t row, int64_t input) const {
    const int64_t p = position(input);
    return affine_code(block(row, p / B::kElems), static_cast<int>(p % B::kElems));
  }

 private:
  const WeightMatrix& m_;
  const RowMap& row_map_;
  std::vector<int64_t> position_;
};

// The integer zero z of a group whose offset is −scale · z, checked.
int zero_point(float scale, float bias, int lowest, int qmax, const std::string& module,
               const char* format) {
  const long z = std::lround(-bias / scale);
  if (z < lowest || z > qmax || -scale * static_cast<float>(z) != bias)
    throw Error(module + ": a group's offset " + std::to_string(bias) + " (scale " +
                std::to_string(scale) + ") is not −scale · z for an integer zero z in [" +
                std::to_string(lowest) + ", " + std::to_string(qmax) + "], which " + format +
                " stores; quantize with the rule of that format");
  return static_cast<int>(z);
}

struct PackedTensor {
  std::string suffix;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

template <class T>
PackedTensor packed(std::string suffix, DType dtype, std::vector<int64_t> shape,
                    const std::vector<T>& v) {
  const auto b = bytes_of(v);
  return {std::move(suffix), dtype, std::move(shape), {b.begin(), b.end()}};
}

// The zero point of each group [rows × groups], as stored (v1: z − 1), checked first: the
// packing loops run in parallel, where nothing may throw.
template <class B>
std::vector<uint32_t> stored_zeros(const Groups<B>& m, int lowest, int sym_zero,
                                   const std::string& module, const char* format) {
  constexpr int qmax = (1 << B::kBitsPerCode) - 1;
  std::vector<uint32_t> zeros(static_cast<size_t>(m.rows() * m.groups()));
  for (int64_t r = 0; r < m.rows(); ++r)
    for (int64_t g = 0; g < m.groups(); ++g) {
      const B& b = m.block(r, g);
      const int zero = zero_point(b.scale, b.bias, lowest, qmax, module, format);
      if (sym_zero >= 0 && zero != sym_zero)
        throw Error(module + ": a group's zero point is " + std::to_string(zero) +
                    ", not the middle code " + std::to_string(sym_zero) +
                    " of a symmetric GPTQ checkpoint");
      zeros[static_cast<size_t>(r * m.groups() + g)] = static_cast<uint32_t>(zero - lowest);
      to_f16(b.scale, module + ".scales");
    }
  return zeros;
}

template <class B>
std::vector<PackedTensor> pack_gptq(const Groups<B>& m, const CheckpointQuantization& q,
                                    const std::string& module) {
  constexpr int bits = B::kBitsPerCode, per_word = 32 / bits, qmax = (1 << bits) - 1;
  const int64_t n = m.rows(), k = m.cols(), groups = m.groups();
  const std::vector<uint32_t> zeros =
      stored_zeros(m, q.zeros_minus_one ? 1 : 0, q.sym ? (qmax + 1) / 2 : -1, module, "GPTQ");
  std::vector<uint32_t> qweight(static_cast<size_t>(k / per_word * n), 0);
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * (n / per_word)), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t r0 = 0; r0 < n; r0 += per_word)
    for (int64_t r = r0; r < r0 + per_word; ++r) {
      for (int64_t i = 0; i < k; ++i)
        qweight[static_cast<size_t>(i / per_word * n + r)] |= static_cast<uint32_t>(m.code(r, i))
                                                              << (i % per_word * bits);
      for (int64_t g = 0; g < groups; ++g) {
        qzeros[static_cast<size_t>(g * (n / per_word) + r / per_word)] |=
            zeros[static_cast<size_t>(r * groups + g)] << (r % per_word * bits);
        scales[static_cast<size_t>(g * n + r)] = f32_to_f16(m.block(r, g).scale);
      }
    }
  for (int64_t i = 0; i < k; ++i)
    g_idx[static_cast<size_t>(i)] = static_cast<int32_t>(m.group_of(i));
  std::vector<PackedTensor> out;
  out.push_back(packed("qweight", DType::I32, {k / per_word, n}, qweight));
  out.push_back(packed("qzeros", DType::I32, {groups, n / per_word}, qzeros));
  out.push_back(packed("scales", DType::F16, {groups, n}, scales));
  out.push_back(packed("g_idx", DType::I32, {k}, g_idx));
  return out;
}

template <class B>
std::vector<PackedTensor> pack_awq(const Groups<B>& m, const std::string& module) {
  constexpr int bits = B::kBitsPerCode, per_word = 32 / bits;
  const int64_t n = m.rows(), k = m.cols(), groups = m.groups(), words = n / per_word;
  const std::vector<uint32_t> zeros = stored_zeros(m, 0, -1, module, "AWQ");
  std::vector<uint32_t> qweight(static_cast<size_t>(k * words), 0);
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * words), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(groups * n));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t word = 0; word < words; ++word)
    for (int64_t r = word * per_word; r < (word + 1) * per_word; ++r) {
      const int shift = kAwqNibbleOfOutput[r % per_word] * bits;
      for (int64_t i = 0; i < k; ++i)
        qweight[static_cast<size_t>(i * words + word)] |= static_cast<uint32_t>(m.code(r, i))
                                                          << shift;
      for (int64_t g = 0; g < groups; ++g) {
        qzeros[static_cast<size_t>(g * words + word)] |= zeros[static_cast<size_t>(r * groups + g)]
                                                         << shift;
        scales[static_cast<size_t>(g * n + r)] = f32_to_f16(m.block(r, g).scale);
      }
    }
  std::vector<PackedTensor> out;
  out.push_back(packed("qweight", DType::I32, {k, words}, qweight));
  out.push_back(packed("qzeros", DType::I32, {groups, words}, qzeros));
  out.push_back(packed("scales", DType::F16, {groups, n}, scales));
  return out;
}

template <class B>
std::vector<PackedTensor> pack_mlx(const Groups<B>& m, const std::string& module) {
  constexpr int bits = B::kBitsPerCode, per_word = 32 / bits;
  const int64_t n = m.rows(), k = m.cols(), groups = m.groups(), words = k / per_word;
  std::vector<uint16_t> scales(static_cast<size_t>(n * groups)), biases(scales.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const B& b = m.block(r, g);
      const uint16_t bias = to_f16(b.bias, module + ".biases");
      if (f16_to_f32(bias) != b.bias)
        throw Error(module + ": a group's bias " + std::to_string(b.bias) +
                    " is not an f16 value, which MLX stores; quantize with MLX's rule");
      scales[static_cast<size_t>(r * groups + g)] = to_f16(b.scale, module + ".scales");
      biases[static_cast<size_t>(r * groups + g)] = bias;
    }
  std::vector<uint32_t> weight(static_cast<size_t>(n * words), 0);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i)
      weight[static_cast<size_t>(r * words + i / per_word)] |= static_cast<uint32_t>(m.code(r, i))
                                                               << (i % per_word * bits);
  std::vector<PackedTensor> out;
  out.push_back(packed("weight", DType::U32, {n, words}, weight));
  out.push_back(packed("scales", DType::F16, {n, groups}, scales));
  out.push_back(packed("biases", DType::F16, {n, groups}, biases));
  return out;
}

class CheckpointWriter {
 public:
  CheckpointWriter(const ModelConfig& c, const ModelWeights& w, CheckpointQuantization& q)
      : c_(c), q_(q) {
    if (c.arch == ModelArch::Llama && w.rope_layout == RopeLayout::Interleaved) {
      const auto head_dim = static_cast<size_t>(c.head_dim);
      qk_rows_ = [head_dim](int64_t r) {
        return static_cast<int64_t>(interleaved_row(static_cast<size_t>(r), head_dim));
      };
    } else if (c.arch != ModelArch::Llama && w.rope_layout == RopeLayout::Interleaved) {
      throw Error(std::string(model_arch_name(c.arch)) +
                  " weights in the interleaved RoPE layout cannot be written as a Hugging Face "
                  "checkpoint");
    }
  }

  // A layer's (or MLX's embedding and head's) linear module: packed when it is of the format's
  // INT type, else float (MLX records it as left float).
  void module(const std::string& name, const WeightMatrix& m, bool qk, bool quantized_by_format) {
    const RowMap& rows = qk ? qk_rows_ : no_map_;
    const std::optional<AffineIntFormat> f = affine_int_format(m.dtype);
    const bool mlx = q_.method == QuantMethod::Mlx;
    if (!f || !quantized_by_format) {
      if (quantized_by_format && !mlx)
        throw Error(name + ": is " + std::string(dtype_name(m.dtype)) + " (" +
                    std::to_string(m.rows) + " × " + std::to_string(m.cols) + "), not " +
                    std::string(dtype_name(q_.dtype())) + "; every linear layer of a " +
                    upper(quant_method_name(q_.method)) + " checkpoint is quantized");
      if (mlx && quantized_by_format) q_.mlx_modules[name] = std::nullopt;
      return float_matrix(name + ".weight", m, rows);
    }
    if (!mlx && (f->bits != q_.bits || f->group != q_.group_size))
      throw Error(name + ": is " + std::string(dtype_name(m.dtype)) + ", not " +
                  std::string(dtype_name(q_.dtype())) + " as the checkpoint's settings say");
    if (mlx && (f->bits != q_.bits || f->group != q_.group_size)) q_.mlx_modules[name] = *f;
    if (m.input_order != nullptr && !(q_.method == QuantMethod::Gptq && q_.desc_act))
      throw Error(name +
                  ": its groups are not runs of inputs (act-order), which only a GPTQ "
                  "checkpoint with desc_act stores");
    const int per_word = 32 / f->bits;
    if (!mlx && m.rows % per_word != 0)
      throw Error(name + ": has " + std::to_string(m.rows) + " outputs, not whole " +
                  std::to_string(per_word) + "-code words of " +
                  upper(quant_method_name(q_.method)) + "'s zero points");
    std::vector<PackedTensor> tensors =
        with_affine_block<std::vector<PackedTensor>>(m.dtype, [&]<class B>() {
          const Groups<B> groups(m, rows);
          if (q_.method == QuantMethod::Gptq) return pack_gptq(groups, q_, name);
          if (q_.method == QuantMethod::Awq) return pack_awq(groups, name);
          return pack_mlx(groups, name);
        });
    for (PackedTensor& t : tensors)
      out_.add_tensor(name + "." + t.suffix, t.dtype, std::move(t.shape), t.data);
  }

  void float_matrix(const std::string& name, const WeightMatrix& m, const RowMap& rows) {
    std::vector<uint16_t> half(static_cast<size_t>(m.rows * m.cols));
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(m.cols)), ordered;
#pragma omp for schedule(static)
      for (int64_t r = 0; r < m.rows; ++r) {
        dequantize_row(m.dtype, m.row(rows ? rows(r) : r), row.data(), m.cols);
        if (m.input_order != nullptr) {
          ordered.resize(row.size());
          for (int64_t j = 0; j < m.cols; ++j)
            ordered[static_cast<size_t>(m.input_order[j])] = row[static_cast<size_t>(j)];
          row.swap(ordered);
        }
        for (int64_t j = 0; j < m.cols; ++j)
          half[static_cast<size_t>(r * m.cols + j)] = f32_to_f16(row[static_cast<size_t>(j)]);
      }
    }
    // Checked after the parallel loop, where nothing may throw: a finite value that became
    // infinite was beyond f16's range.
    for (size_t i = 0; i < half.size(); ++i)
      if ((half[i] & 0x7C00) == 0x7C00) {
        std::vector<float> row(static_cast<size_t>(m.cols));
        const auto r = static_cast<int64_t>(i) / m.cols;
        dequantize_row(m.dtype, m.row(rows ? rows(r) : r), row.data(), m.cols);
        for (float v : row) to_f16(v, name);
      }
    out_.add_tensor(name, DType::F16, {m.rows, m.cols}, bytes_of(half));
  }

  // Norms and biases as F32: exact, and small (engines cast them to their compute type).
  void vector(const std::string& name, std::span<const float> v, bool qk = false) {
    if (v.empty()) return;
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      out[i] = v[qk && qk_rows_ ? static_cast<size_t>(qk_rows_(static_cast<int64_t>(i))) : i];
    out_.add_tensor(name, DType::F32, {static_cast<int64_t>(v.size())}, bytes_of(out));
  }

  const SafetensorsWriter& tensors() const { return out_; }

 private:
  static std::string upper(std::string_view s) {
    std::string u(s);
    for (char& ch : u) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return u;
  }

  const ModelConfig& c_;
  CheckpointQuantization& q_;
  RowMap qk_rows_, no_map_;
  SafetensorsWriter out_;
};

void remove_weight_files(const fs::path& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".safetensors") || name == "model.safetensors.index.json")
      fs::remove(e.path(), ec);
  }
}

void write_text(const fs::path& path, const std::string& text) {
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                     reinterpret_cast<const std::byte*>(text.data()) + text.size());
  write_file_atomically(path.string(), bytes);
}

}  // namespace

void check_checkpoint_shapes(const ModelConfig& c, const CheckpointQuantization& q) {
  if (q.method == QuantMethod::Mlx) return;
  const std::string format = q.method == QuantMethod::Gptq ? "GPTQ" : "AWQ";
  const int64_t per_word = 32 / q.bits;
  const int64_t h = c.hidden_size, qd = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  const std::pair<const char*, std::pair<int64_t, int64_t>> modules[] = {
      {"self_attn.q_proj", {qd, h}}, {"self_attn.k_proj", {kv, h}}, {"self_attn.v_proj", {kv, h}},
      {"self_attn.o_proj", {h, qd}}, {"mlp.gate_proj", {ff, h}},    {"mlp.up_proj", {ff, h}},
      {"mlp.down_proj", {h, ff}}};
  for (const auto& [module, shape] : modules) {
    const auto [rows, cols] = shape;
    const std::string name = "model.layers.*." + std::string(module);
    if (cols % q.group_size != 0)
      throw Error(name + " has " + std::to_string(cols) + " inputs, which --group-size " +
                  std::to_string(q.group_size) + " does not divide; " + format +
                  " quantizes every linear layer (a smaller group size may fit)");
    if (rows % per_word != 0)
      throw Error(name + " has " + std::to_string(rows) + " outputs, not whole " +
                  std::to_string(per_word) + "-code words of " + format + "'s zero points");
  }
}

std::vector<std::string> tokenizer_files(const std::string& dir) {
  std::vector<std::string> found;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model",
                           "generation_config.json", "chat_template.jinja", "chat_template.json"}) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(dir) / name, ec)) found.push_back(name);
  }
  return found;
}

std::vector<std::string> save_quantized_checkpoint(const std::string& dir, const ModelWeights& w,
                                                   const ModelConfig& c,
                                                   const CheckpointFolder& folder) {
  // gpt-oss's checkpoints keep their experts in OpenAI's MXFP4 tensors, gate and up interleaved
  // (openai_experts.h), with biases: a layout this writer does not produce.
  if (c.arch == ModelArch::GptOss)
    throw Error(dir +
                ": a gpt-oss checkpoint cannot be written yet (its experts' MXFP4 layout); "
                "--save-gguf writes the model as GGUF");
  // Gemma's norms are stored as weight − 1 and its post norms by other names.
  if (c.arch == ModelArch::Gemma3)
    throw Error(dir + ": a Gemma 3 checkpoint cannot be written yet; --save-gguf writes the " +
                "model as GGUF");
  if (!w.rope_freq_factors.empty() && c.rope_scaling.type == RopeScalingType::None)
    throw Error(dir +
                ": the model's RoPE frequencies are scaled by a rope_freqs tensor (a GGUF "
                "file's llama3 scaling), which a Hugging Face config cannot carry; "
                "quantize the Hugging Face original");
  CheckpointQuantization q = folder.quantization;
  q.mlx_modules.clear();
  CheckpointWriter out(c, w, q);
  const TensorNames& n = kHfTensorNames;
  const bool mlx = q.method == QuantMethod::Mlx;
  auto module_of = [](const std::string& weight) {
    return weight.substr(0, weight.size() - std::string_view(".weight").size());
  };
  out.module(module_of(n.embedding), w.token_embedding, false, mlx);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    auto name = [&](const char* suffix) { return n.layer(static_cast<int64_t>(i), suffix); };
    auto linear = [&](const char* suffix, const WeightMatrix& m, bool qk = false) {
      out.module(module_of(name(suffix)), m, qk, true);
    };
    out.vector(name(n.attn_norm), l.attn_norm);
    linear(n.q, l.wq, true);
    linear(n.k, l.wk, true);
    linear(n.v, l.wv);
    linear(n.o, l.wo);
    out.vector(name(n.bq), l.bq, true);
    out.vector(name(n.bk), l.bk, true);
    out.vector(name(n.bv), l.bv);
    out.vector(name(n.bo), l.bo);
    out.vector(name(n.q_norm), l.q_norm);
    out.vector(name(n.k_norm), l.k_norm);
    out.vector(name(n.ffn_norm), l.ffn_norm);
    if (l.moe) {
      // The router stays unquantized, as quantized checkpoints of these models leave mlp.gate.
      out.module(module_of(name(n.router)), l.moe->router, false, false);
      for (size_t e = 0; e < l.moe->gate.size(); ++e) {
        auto expert = [&](const char* suffix, const WeightMatrix& m) {
          const std::string full =
              n.expert(static_cast<int64_t>(i), static_cast<int64_t>(e), suffix);
          out.module(module_of(full), m, false, true);
        };
        expert(n.expert_gate, l.moe->gate[e]);
        expert(n.expert_up, l.moe->up[e]);
        expert(n.expert_down, l.moe->down[e]);
      }
      if (const std::optional<SharedExpert>& shared = l.moe->shared) {
        linear(n.shared_gate, shared->gate);
        linear(n.shared_up, shared->up);
        linear(n.shared_down, shared->down);
        // A Linear to one output ([1, hidden]), unquantized as mlp.gate.
        const std::span<const float> g = shared->gate_weight;
        const WeightMatrix gate_row{DType::F32, 1, static_cast<int64_t>(g.size()),
                                    reinterpret_cast<const std::byte*>(g.data()), g.size_bytes()};
        out.module(module_of(name(n.shared_gate_weight)), gate_row, false, false);
      }
      continue;
    }
    linear(n.gate, l.w_gate);
    linear(n.up, l.w_up);
    linear(n.down, l.w_down);
    out.vector(name(n.b_gate), l.b_gate);
    out.vector(name(n.b_up), l.b_up);
    out.vector(name(n.b_down), l.b_down);
  }
  out.vector(n.output_norm, w.output_norm);
  if (!w.tied_embeddings) out.module(module_of(n.lm_head), w.lm_head, false, mlx);

  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error(dir + ": cannot create folder: " + ec.message());
  remove_weight_files(root);
  std::vector<std::string> written = out.tensors().write_sharded(dir, folder.max_shard_bytes);
  const std::string source_config =
      folder.config_json.empty() ? c.to_hf_json() : folder.config_json;
  write_text(root / "config.json",
             with_checkpoint_quantization(source_config, dir + "/config.json", q, "float16"));
  written.push_back((root / "config.json").string());
  if (q.method == QuantMethod::Gptq) {
    write_text(root / "quantize_config.json", gptq_quantize_config_json(q));
    written.push_back((root / "quantize_config.json").string());
  }
  if (!folder.tokenizer_dir.empty())
    for (const std::string& file : tokenizer_files(folder.tokenizer_dir)) {
      if (fs::equivalent(fs::path(folder.tokenizer_dir) / file, root / file, ec)) continue;
      fs::copy_file(fs::path(folder.tokenizer_dir) / file, root / file,
                    fs::copy_options::overwrite_existing, ec);
      if (ec) throw Error(dir + "/" + file + ": cannot copy the tokenizer file: " + ec.message());
      written.push_back((root / file).string());
    }
  return written;
}

}  // namespace tern
