// save_gguf: the metadata keys and tensor names of llama.cpp's converter (gguf-py
// constants.py), so that llama.cpp and tern both load what tern writes.
#include "tern/models/gguf_export.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

size_t interleaved_row(size_t r, size_t head_dim) {
  const size_t head = r / head_dim, in = r % head_dim, half = head_dim / 2;
  const size_t j = in / half, i = in % half;
  return head * head_dim + 2 * i + j;
}

uint32_t gguf_file_type(DType dtype) { return static_cast<uint32_t>(uniform_file_type(dtype)); }

std::vector<float> llama3_rope_freq_factors(const ModelConfig& c) {
  const RopeScaling& rs = c.rope_scaling;
  const double old_context = static_cast<double>(rs.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / rs.low_freq_factor;
  const double high_freq_wavelen = old_context / rs.high_freq_factor;
  std::vector<float> factors(static_cast<size_t>(c.head_dim / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq =
        1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(c.head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_freq_wavelen) {
      f = rs.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth =
          (old_context / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      f = 1.0 / ((1 - smooth) / rs.factor + smooth);
    }
    factors[i] = static_cast<float>(f);
  }
  return factors;
}

namespace {

std::span<const std::byte> bytes_of(const WeightMatrix& m) {
  return {m.data, m.row_bytes * static_cast<size_t>(m.rows)};
}

std::vector<std::byte> permute_rows(const WeightMatrix& m, size_t head_dim) {
  std::vector<std::byte> out(m.row_bytes * static_cast<size_t>(m.rows));
  for (size_t r = 0; r < static_cast<size_t>(m.rows); ++r)
    std::memcpy(out.data() + interleaved_row(r, head_dim) * m.row_bytes,
                m.row(static_cast<int64_t>(r)), m.row_bytes);
  return out;
}

std::vector<float> permute_vector(std::span<const float> v, size_t head_dim) {
  std::vector<float> out(v.size());
  for (size_t r = 0; r < v.size(); ++r) out[interleaved_row(r, head_dim)] = v[r];
  return out;
}

std::span<const std::byte> float_bytes(std::span<const float> v) { return std::as_bytes(v); }

}  // namespace

void save_gguf(const std::string& path, const ModelWeights& w, const ModelConfig& c,
               const Tokenizer* tokenizer, const std::string& model_name,
               const std::vector<std::pair<std::string, GgufValue>>& carried_metadata) {
  const std::string arch(model_arch_name(c.arch));
  const bool gpt_oss = c.arch == ModelArch::GptOss, gemma = c.arch == ModelArch::Gemma3;
  // llama.cpp's llama, qwen2 and qwen3 graphs attend to every key of the context; its gpt-oss
  // slides the even layers and its gemma3 all but every sixth (sliding_window_pattern 2 and 6,
  // which tern writes), or none when a gemma3 file gives no window.
  const int64_t period = gpt_oss ? 2 : gemma && c.has_sliding_window() ? 6 : 0;
  std::vector<bool> gguf_sliding;
  for (int64_t i = 0; period > 0 && i < c.num_layers; ++i)
    gguf_sliding.push_back(i % period < period - 1);
  if (c.sliding_layers != gguf_sliding && (c.has_sliding_window() || gpt_oss))
    throw Error(path + ": the model's sliding-window attention (" +
                std::to_string(c.sliding_window) + " keys) cannot be said in a " + arch +
                " GGUF file: llama.cpp " +
                (gpt_oss ? "slides every other layer, from the first, and no other"
                 : gemma ? "slides all layers but every sixth, and no other"
                         : "would attend to the whole context"));
  if (gemma) {
    // What llama.cpp's gemma3 derives: √hidden, and 1/√head_dim (the 27B's 62 layers:
    // 1/√(hidden / heads)).
    const double scale = 1 / std::sqrt(static_cast<double>(
                                 c.num_layers == 62 ? c.hidden_size / c.num_heads : c.head_dim));
    if (std::abs(c.attention_scale - scale) > 1e-9 * scale ||
        std::abs(c.embedding_scale - std::sqrt(static_cast<double>(c.hidden_size))) > 1e-9)
      throw Error(path +
                  ": the model's query or embedding scale cannot be said in a gemma3 GGUF "
                  "file (llama.cpp derives them from the sizes)");
  }
  if (gpt_oss && c.swiglu_limit != 7.0)
    throw Error(path + ": swiglu_limit " + std::to_string(c.swiglu_limit) +
                " cannot be said in a gpt-oss GGUF file (llama.cpp's is always 7)");
  GgufWriter g;
  for (const auto& [key, value] : carried_metadata) g.set(key, value);
  const std::string p = arch + ".";
  auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  g.set("general.architecture", GgufValue::string(arch));
  if (!model_name.empty() || !g.has("general.name"))
    g.set("general.name", GgufValue::string(model_name.empty() ? arch : model_name));
  // llama.cpp names the file by this ("Q4_K - Medium"), not by its tensors' types.
  const uint32_t file_type = w.file_type ? static_cast<uint32_t>(*w.file_type)
                                         : gguf_file_type(w.layers.empty() ? w.token_embedding.dtype
                                                                           : w.layers[0].wq.dtype);
  g.set("general.file_type", GgufValue::u32(file_type));
  // ggml's GGML_QNT_VERSION, which llama.cpp's converter and llama-quantize write: the block
  // layouts tern writes are version 2's.
  g.set("general.quantization_version", GgufValue::u32(2));
  g.set(p + "vocab_size", u32(c.vocab_size));
  g.set(p + "context_length", u32(c.max_position_embeddings));
  g.set(p + "embedding_length", u32(c.hidden_size));
  g.set(p + "block_count", u32(c.num_layers));
  g.set(p + "feed_forward_length", u32(c.intermediate_size));
  g.set(p + "attention.head_count", u32(c.num_heads));
  g.set(p + "attention.head_count_kv", u32(c.num_kv_heads));
  g.set(p + "attention.key_length", u32(c.head_dim));
  g.set(p + "attention.value_length", u32(c.head_dim));
  g.set(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(c.rms_norm_eps)));
  g.set(p + "rope.freq_base", GgufValue::f32(static_cast<float>(c.rope_theta)));
  g.set(p + "rope.dimension_count", u32(c.head_dim));
  if (c.rope_scaling.type == RopeScalingType::Linear) {
    g.set(p + "rope.scaling.type", GgufValue::string("linear"));
    g.set(p + "rope.scaling.factor", GgufValue::f32(static_cast<float>(c.rope_scaling.factor)));
  }
  if (const RopeScaling& rs = c.rope_scaling; rs.type == RopeScalingType::Yarn) {
    // llama.cpp always rounds the ramp's ends outwards, and multiplies cos/sin by
    // 1 + 0.1 ln(factor) times rope.scaling.attn_factor.
    if (!rs.truncate)
      throw Error(path +
                  ": yarn rope scaling with truncate false cannot be said in GGUF "
                  "(llama.cpp always rounds the ramp's ends)");
    const double implied = rs.factor > 1 ? 1.0 + 0.1 * std::log(rs.factor) : 1.0;
    g.set(p + "rope.scaling.type", GgufValue::string("yarn"));
    g.set(p + "rope.scaling.factor", GgufValue::f32(static_cast<float>(rs.factor)));
    g.set(p + "rope.scaling.original_context_length", u32(rs.original_max_position_embeddings));
    g.set(p + "rope.scaling.yarn_beta_fast", GgufValue::f32(static_cast<float>(rs.beta_fast)));
    g.set(p + "rope.scaling.yarn_beta_slow", GgufValue::f32(static_cast<float>(rs.beta_slow)));
    if (rs.attention_factor != implied)
      g.set(p + "rope.scaling.attn_factor",
            GgufValue::f32(static_cast<float>(rs.attention_factor / implied)));
  }
  if (c.num_experts > 0) {
    // llama.cpp's qwen2moe and qwen3moe make every layer sparse; its qwen3moe always renormalises
    // the top k, its qwen2moe never.
    for (int64_t i = 0; i < c.num_layers; ++i)
      if (!c.is_moe_layer(i))
        throw Error(path + ": layer " + std::to_string(i) + " has a dense MLP, which a " + arch +
                    " GGUF file cannot hold");
    const bool renormalises = c.arch == ModelArch::Qwen3Moe || gpt_oss;
    if (c.norm_topk_prob != renormalises)
      throw Error(path + ": norm_topk_prob is " + (c.norm_topk_prob ? "true" : "false") +
                  ", which a " + arch + " GGUF file cannot say (llama.cpp " +
                  (renormalises ? "always" : "never") +
                  " renormalises the chosen experts' weights)");
    g.set(p + "expert_count", u32(c.num_experts));
    g.set(p + "expert_used_count", u32(c.num_experts_per_tok));
    g.set(p + "expert_feed_forward_length", u32(c.moe_intermediate_size));
    if (c.shared_expert_intermediate_size > 0)
      g.set(p + "expert_shared_feed_forward_length", u32(c.shared_expert_intermediate_size));
  }
  if (period > 0) {
    g.set(p + "attention.sliding_window", u32(c.sliding_window));
    g.set(p + "attention.sliding_window_pattern", u32(period));
  }
  if (gemma && period > 0)
    g.set(p + "rope.freq_base_swa", GgufValue::f32(static_cast<float>(c.rope_local_theta)));
  if (tokenizer != nullptr) tokenizer->write_gguf(g, c.vocab_size);

  // llama in GGUF is interleaved; anything else stays neox.
  const bool permute_qk = c.arch == ModelArch::Llama && w.rope_layout == RopeLayout::Neox;
  if (c.arch != ModelArch::Llama && w.rope_layout == RopeLayout::Interleaved)
    throw Error(path + ": " + arch +
                " weights in the interleaved RoPE layout cannot be written as GGUF");
  const size_t hd = static_cast<size_t>(c.head_dim);

  // The weights outlive the write: no copy of them.
  auto matrix = [&](const std::string& name, const WeightMatrix& m) {
    g.add_tensor_view(name, m.dtype, {m.rows, m.cols}, bytes_of(m));
  };
  // A layer's experts as one [n, rows, cols] tensor: in place when they lie back to back.
  auto experts = [&](const std::string& name, const std::vector<WeightMatrix>& parts) {
    const WeightMatrix& m = parts.front();
    const std::vector<int64_t> shape{static_cast<int64_t>(parts.size()), m.rows, m.cols};
    std::vector<std::byte> copy;
    const WeightMatrix whole = gather_experts(parts, copy);
    if (copy.empty()) return g.add_tensor_view(name, m.dtype, shape, bytes_of(whole));
    g.add_tensor(name, m.dtype, shape, copy);
  };
  auto qk_matrix = [&](const std::string& name, const WeightMatrix& m) {
    if (!permute_qk) return matrix(name, m);
    std::vector<std::byte> permuted = permute_rows(m, hd);
    g.add_tensor(name, m.dtype, {m.rows, m.cols}, permuted);
  };
  auto vector = [&](const std::string& name, std::span<const float> v) {
    if (!v.empty())
      g.add_tensor(name, DType::F32, {static_cast<int64_t>(v.size())}, float_bytes(v));
  };
  // `v` as n vectors stacked, [n, v.size() / n] (the experts' biases).
  auto stacked_vector = [&](const std::string& name, std::span<const float> v, size_t n) {
    if (!v.empty())
      g.add_tensor(name, DType::F32, {static_cast<int64_t>(n), static_cast<int64_t>(v.size() / n)},
                   float_bytes(v));
  };
  auto qk_vector = [&](const std::string& name, std::span<const float> v) {
    if (!permute_qk || v.empty()) return vector(name, v);
    std::vector<float> permuted = permute_vector(v, hd);
    vector(name, permuted);
  };

  matrix("token_embd.weight", w.token_embedding);
  if (!w.rope_freq_factors.empty())
    vector("rope_freqs.weight", w.rope_freq_factors);
  else if (c.rope_scaling.type == RopeScalingType::Llama3)
    vector("rope_freqs.weight", llama3_rope_freq_factors(c));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    auto n = [&](const char* what) { return gguf_tensor_name(static_cast<int64_t>(i), what); };
    vector(n("attn_norm.weight"), l.attn_norm);
    qk_matrix(n("attn_q.weight"), l.wq);
    qk_matrix(n("attn_k.weight"), l.wk);
    matrix(n("attn_v.weight"), l.wv);
    matrix(n("attn_output.weight"), l.wo);
    qk_vector(n("attn_q.bias"), l.bq);
    qk_vector(n("attn_k.bias"), l.bk);
    vector(n("attn_v.bias"), l.bv);
    vector(n("attn_output.bias"), l.bo);
    vector(n("attn_q_norm.weight"), l.q_norm);
    vector(n("attn_k_norm.weight"), l.k_norm);
    vector(n("attn_sinks.weight"), l.attn_sinks);
    vector(n(gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), l.ffn_norm);
    vector(n("post_attention_norm.weight"), l.attn_post_norm);  // Gemma 3's
    vector(n("post_ffw_norm.weight"), l.ffn_post_norm);
    if (l.moe) {
      const size_t e = l.moe->gate.size();
      matrix(n("ffn_gate_inp.weight"), l.moe->router);
      vector(n("ffn_gate_inp.bias"), l.moe->router_bias);
      experts(n("ffn_gate_exps.weight"), l.moe->gate);
      experts(n("ffn_up_exps.weight"), l.moe->up);
      experts(n("ffn_down_exps.weight"), l.moe->down);
      stacked_vector(n("ffn_gate_exps.bias"), l.moe->gate_bias, e);
      stacked_vector(n("ffn_up_exps.bias"), l.moe->up_bias, e);
      stacked_vector(n("ffn_down_exps.bias"), l.moe->down_bias, e);
      if (const std::optional<SharedExpert>& shared = l.moe->shared) {
        vector(n("ffn_gate_inp_shexp.weight"), shared->gate_weight);
        matrix(n("ffn_gate_shexp.weight"), shared->gate);
        matrix(n("ffn_up_shexp.weight"), shared->up);
        matrix(n("ffn_down_shexp.weight"), shared->down);
      }
      continue;
    }
    matrix(n("ffn_gate.weight"), l.w_gate);
    matrix(n("ffn_up.weight"), l.w_up);
    matrix(n("ffn_down.weight"), l.w_down);
    vector(n("ffn_gate.bias"), l.b_gate);
    vector(n("ffn_up.bias"), l.b_up);
    vector(n("ffn_down.bias"), l.b_down);
  }
  vector("output_norm.weight", w.output_norm);
  // llama.cpp's qwen2moe and gpt-oss require an output matrix even when the checkpoint ties it:
  // the embedding's bytes again, under its name.
  if (!w.tied_embeddings || c.arch == ModelArch::Qwen2Moe || gpt_oss)
    matrix("output.weight", w.lm_head);
  g.write(path);
}

}  // namespace tern
