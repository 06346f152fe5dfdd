// model_fingerprint: one streaming XXH3-128 over what makes two instances' KV blocks
// interchangeable.
#include "tern/disagg/model_fingerprint.h"

#include <xxhash.h>

#include <cstdio>
#include <memory>
#include <span>

namespace tern::disagg {
namespace {

constexpr size_t kSampleSpans = 16;
constexpr size_t kSampleBytes = 4096;

class Hasher {
 public:
  Hasher() : state_(XXH3_createState(), XXH3_freeState) { XXH3_128bits_reset(state_.get()); }
  void bytes(const void* data, size_t size) { XXH3_128bits_update(state_.get(), data, size); }
  template <class T>
  void value(const T& v) {
    bytes(&v, sizeof v);
  }
  void text(std::string_view s) {
    value(s.size());
    bytes(s.data(), s.size());
  }
  void floats(std::span<const float> v) {
    value(v.size());
    bytes(v.data(), v.size_bytes());
  }
  void matrix(const WeightMatrix& m) {
    value(static_cast<int>(m.dtype));
    value(m.rows);
    value(m.cols);
    if (m.empty()) return;
    const size_t total = static_cast<size_t>(m.rows) * m.row_bytes;
    if (total <= kSampleSpans * kSampleBytes) {
      bytes(m.data, total);
      return;
    }
    const size_t stride = (total - kSampleBytes) / (kSampleSpans - 1);
    for (size_t i = 0; i < kSampleSpans; ++i) bytes(m.data + i * stride, kSampleBytes);
  }
  std::string hex() const {
    const XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    char out[33];
    std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                  static_cast<unsigned long long>(h.low64));
    return out;
  }

 private:
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state_;
};

}  // namespace

std::string model_fingerprint(const LanguageModel& decoder, const KvCacheConfig& kv) {
  Hasher h;
  const ModelConfig& c = decoder.config();
  h.text(c.arch_name);
  for (int64_t v : {c.vocab_size, c.hidden_size, c.intermediate_size, c.num_layers, c.num_heads,
                    c.num_kv_heads, c.head_dim})
    h.value(v);
  for (int64_t v : {c.num_experts, c.num_experts_per_tok, c.moe_intermediate_size,
                    c.shared_expert_intermediate_size})
    h.value(v);
  h.value(c.sliding_window);
  for (int64_t i = 0; i < c.num_layers; ++i) h.value(static_cast<int64_t>(c.attention_window(i)));
  h.value(c.rope_theta);
  h.value(c.rms_norm_eps);
  for (bool v : {c.tie_word_embeddings, c.attention_bias, c.attention_out_bias, c.mlp_bias,
                 c.qk_norm, c.norm_topk_prob})
    h.value(v);
  h.value(kv.num_layers);
  h.value(kv.block_size);
  h.value(kv.n_kv_heads);
  h.value(kv.head_dim);
  h.text(kv_dtype_name(kv.dtype));

  const ModelWeights& w = decoder.weights();
  h.matrix(w.token_embedding);
  for (const LayerWeights& layer : w.layers) {
    layer.for_each_matrix([&](const WeightMatrix& m) { h.matrix(m); });
    for (std::span<const float> v :
         {layer.attn_norm, layer.bq, layer.bk, layer.bv, layer.bo, layer.q_norm, layer.k_norm,
          layer.ffn_norm, layer.b_gate, layer.b_up, layer.b_down})
      h.floats(v);
  }
  h.floats(w.output_norm);
  h.matrix(w.lm_head);
  h.floats(w.rope_freq_factors);
  h.value(static_cast<int>(w.rope_layout));
  return h.hex();
}

}  // namespace tern::disagg
