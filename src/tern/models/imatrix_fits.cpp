// check_imatrix_fits: the model's matrices by GGUF name, then each entry looked up among them.
#include "tern/models/imatrix_fits.h"

#include <map>
#include <span>
#include <utility>

#include "tern/core/error.h"

namespace tern {
namespace {

// A matrix an entry may be for: its column count, and its experts (1 unless stacked).
struct EntryShape {
  int64_t cols = 0, experts = 1;
};

// GGUF name → shape of every matrix a model quantizes (and of qwen2moe's shared-expert gate,
// a vector tern keeps in f32 that llama-imatrix still records as a matrix).
std::map<std::string, EntryShape> matrix_shapes(const ModelWeights& w) {
  std::map<std::string, EntryShape> shapes;
  shapes["token_embd.weight"] = {w.token_embedding.cols};
  if (!w.tied_embeddings) shapes["output.weight"] = {w.lm_head.cols};
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    auto add = [&](const char* what, int64_t cols, int64_t experts = 1) {
      shapes[gguf_tensor_name(layer, what)] = {cols, experts};
    };
    const std::pair<const char*, const WeightMatrix*> matrices[] = {
        {"attn_q.weight", &l.wq},      {"attn_k.weight", &l.wk},       {"attn_v.weight", &l.wv},
        {"attn_output.weight", &l.wo}, {"ffn_gate.weight", &l.w_gate}, {"ffn_up.weight", &l.w_up},
        {"ffn_down.weight", &l.w_down}};
    // A sparse layer has no dense MLP: a router, stacked experts and maybe a shared one.
    for (const auto& [what, m] : std::span(matrices).first(l.moe ? 4 : 7)) add(what, m->cols);
    if (!l.moe) continue;
    const MixtureOfExperts& moe = *l.moe;
    add("ffn_gate_inp.weight", moe.router.cols);
    add("ffn_gate_exps.weight", moe.gate[0].cols, moe.num_experts());
    add("ffn_up_exps.weight", moe.up[0].cols, moe.num_experts());
    add("ffn_down_exps.weight", moe.down[0].cols, moe.num_experts());
    if (const std::optional<SharedExpert>& s = moe.shared) {
      add("ffn_gate_shexp.weight", s->gate.cols);
      add("ffn_up_shexp.weight", s->up.cols);
      add("ffn_down_shexp.weight", s->down.cols);
      add("ffn_gate_inp_shexp.weight", static_cast<int64_t>(s->gate_weight.size()));
    }
  }
  return shapes;
}

}  // namespace

void check_imatrix_fits(const ImportanceMatrix& imatrix, const ModelWeights& weights,
                        const std::string& source) {
  const std::map<std::string, EntryShape> shapes = matrix_shapes(weights);
  for (const auto& [name, e] : imatrix.entries) {
    const auto it = shapes.find(name);
    if (it == shapes.end())
      throw Error(source + ": importance matrix entry '" + name +
                  "' is not a matrix of this model (was it made for another one?)");
    const EntryShape& want = it->second;
    if (e.cols() != want.cols)
      throw Error(source + ": importance matrix entry '" + name + "' has " +
                  std::to_string(e.cols()) + " columns, the model's matrix " +
                  std::to_string(want.cols));
    if (e.experts() != want.experts)
      throw Error(source + ": importance matrix entry '" + name + "' has " +
                  std::to_string(e.experts()) + (e.experts() == 1 ? " row" : " rows") +
                  " of importances (one per expert), the model's tensor " +
                  std::to_string(want.experts) + (want.experts == 1 ? " matrix" : " experts"));
  }
}

}  // namespace tern
