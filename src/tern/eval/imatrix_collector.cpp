// compute_importance_matrix: one SequenceRunner forward per window, an observer naming each
// matrix input after the GGUF tensors that read it.
#include "tern/eval/imatrix_collector.h"

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/weight_loader.h"

namespace tern {
namespace {

class ImatrixObserver : public ActivationObserver {
 public:
  ImatrixObserver(ImportanceMatrix& out, bool process_output)
      : out_(out), process_output_(process_output) {}

  void observe(int layer, MatrixInput input, const float* x, int64_t num_tokens,
               int64_t cols) override {
    // Matrices that share an input get the same sums, as llama-imatrix records them: the first
    // one's entry here, copied to the others by share_inputs once the windows are done (the
    // second moments cost cols² a token, not to be paid three times over).
    switch (input) {
      case MatrixInput::AttnQkv:
        out_.accumulate(gguf_tensor_name(layer, "attn_q.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::AttnOutput:
        out_.accumulate(gguf_tensor_name(layer, "attn_output.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::FfnGateUp:
        out_.accumulate(gguf_tensor_name(layer, "ffn_gate.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::FfnDown:
        out_.accumulate(gguf_tensor_name(layer, "ffn_down.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::MoeInput:
        out_.accumulate(gguf_tensor_name(layer, "ffn_gate_inp.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::SharedDown:
        out_.accumulate(gguf_tensor_name(layer, "ffn_down_shexp.weight"), x, num_tokens, cols);
        break;
      case MatrixInput::LmHead:
        if (process_output_) out_.accumulate("output.weight", x, num_tokens, cols);
        break;
    }
  }

  // llama-imatrix's MUL_MAT_ID: each expert sums the rows routed to it, one row of sums and one
  // count per expert; the gate's input is each token's (once per chosen expert), the down's
  // each route's own intermediate.
  void observe_experts(int layer, const float* x, int64_t hidden, const MoeCapture& moe) override {
    out_.accumulate_experts(gguf_tensor_name(layer, "ffn_gate_exps.weight"), moe.num_experts, x,
                            moe.tokens, hidden, moe.route_experts, moe.top_k);
    out_.accumulate_experts(gguf_tensor_name(layer, "ffn_down_exps.weight"), moe.num_experts,
                            moe.expert_down_inputs.data(), moe.tokens * moe.top_k, moe.expert_ff,
                            moe.route_experts, 1);
  }

 private:
  ImportanceMatrix& out_;
  bool process_output_;
};

// The entries of the matrices that read the same input as the one observed.
void share_inputs(ImportanceMatrix& m, const ModelWeights& weights) {
  const struct {
    const char* observed;
    std::vector<const char*> sharing;
  } shared[] = {{"attn_q.weight", {"attn_k.weight", "attn_v.weight"}},
                {"ffn_gate.weight", {"ffn_up.weight"}},
                {"ffn_gate_exps.weight", {"ffn_up_exps.weight"}}};
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const int layer = static_cast<int>(i);
    auto share = [&](const char* observed, std::span<const char* const> sharing) {
      const auto it = m.entries.find(gguf_tensor_name(layer, observed));
      if (it == m.entries.end()) return;
      for (const char* what : sharing) m.entries[gguf_tensor_name(layer, what)] = it->second;
    };
    for (const auto& [observed, sharing] : shared) share(observed, sharing);
    // Only a layer with a shared expert has the matrices that read its router's input.
    const std::optional<MixtureOfExperts>& moe = weights.layers[i].moe;
    static constexpr const char* kSharedExpert[] = {"ffn_gate_shexp.weight", "ffn_up_shexp.weight"};
    if (moe && moe->shared) share("ffn_gate_inp.weight", kSharedExpert);
  }
}

// Clears the decoder's observer however the computation ends.
struct ObserverScope {
  LanguageModel& decoder;
  ObserverScope(LanguageModel& d, ActivationObserver* o) : decoder(d) { decoder.set_observer(o); }
  ~ObserverScope() { decoder.set_observer(nullptr); }
};

}  // namespace

ImportanceMatrix compute_importance_matrix(LanguageModel& decoder, std::span<const int32_t> tokens,
                                           const ImatrixOptions& options) {
  if (options.ctx < 2) throw Error("imatrix: --ctx must be at least 2");
  if (options.keep_outer && decoder.config().num_experts > 0)
    throw Error(
        "imatrix: --hessian (second moments, for GPTQ) is not collected per expert, so "
        "a mixture of experts (" +
        std::string(model_arch_name(decoder.config().arch)) + ") cannot keep them");
  int64_t chunks = static_cast<int64_t>(tokens.size()) / options.ctx;
  if (options.max_chunks >= 0) chunks = std::min(chunks, options.max_chunks);
  if (chunks < 1)
    throw Error("imatrix: the calibration text has " + std::to_string(tokens.size()) +
                " tokens, fewer than one window of --ctx " + std::to_string(options.ctx));
  ImportanceMatrix m;
  m.chunk_size = options.ctx;
  m.keep_outer = options.keep_outer;
  // The lm_head sees only the rows whose logits are asked for: all of them when it is observed.
  const bool tied = decoder.weights().tied_embeddings;
  ImatrixObserver observer(m, options.process_output && !tied);
  ObserverScope scope(decoder, &observer);
  SequenceRunner runner(decoder, options.ctx);
  std::vector<int32_t> window(static_cast<size_t>(options.ctx));
  for (int64_t c = 0; c < chunks; ++c) {
    const auto start = tokens.begin() + c * options.ctx;
    window.assign(start, start + options.ctx);
    if (options.bos) window[0] = *options.bos;
    runner.reset();
    runner.feed(window, /*all_logits=*/options.process_output);
    m.chunk_count = c + 1;
    if (options.on_chunk) options.on_chunk(c + 1, chunks);
  }
  share_inputs(m, decoder.weights());
  return m;
}

}  // namespace tern
