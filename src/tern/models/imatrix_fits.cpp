// check_imatrix_fits: the model's matrices by GGUF name, then each entry looked up among them.
#include "tern/models/imatrix_fits.h"

#include <map>
#include <span>
#include <utility>

#include "tern/core/error.h"

namespace tern {
namespace {

// GGUF name → column count of every matrix a model quantizes.
std::map<std::string, int64_t> matrix_columns(const ModelWeights& w) {
  std::map<std::string, int64_t> cols;
  cols["token_embd.weight"] = w.token_embedding.cols;
  if (!w.tied_embeddings) cols["output.weight"] = w.lm_head.cols;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    const std::pair<const char*, const WeightMatrix*> matrices[] = {
        {"attn_q.weight", &l.wq},      {"attn_k.weight", &l.wk},       {"attn_v.weight", &l.wv},
        {"attn_output.weight", &l.wo}, {"ffn_gate.weight", &l.w_gate}, {"ffn_up.weight", &l.w_up},
        {"ffn_down.weight", &l.w_down}};
    // A sparse layer has no dense MLP, and its experts are quantized without importances.
    for (const auto& [what, m] : std::span(matrices).first(l.moe ? 4 : 7))
      cols[gguf_tensor_name(layer, what)] = m->cols;
  }
  return cols;
}

}  // namespace

void check_imatrix_fits(const ImportanceMatrix& imatrix, const ModelWeights& weights,
                        const std::string& source) {
  const std::map<std::string, int64_t> cols = matrix_columns(weights);
  for (const auto& [name, e] : imatrix.entries) {
    const auto it = cols.find(name);
    if (it == cols.end() && (name.find("_exps.weight") != std::string::npos ||
                             name.find("_shexp.weight") != std::string::npos))
      throw Error(source + ": importance matrix entry '" + name +
                  "' is an expert's; tern quantizes experts without importances (leave the "
                  "experts out of the importance matrix)");
    if (it == cols.end())
      throw Error(source + ": importance matrix entry '" + name +
                  "' is not a matrix of this model (was it made for another one?)");
    if (static_cast<int64_t>(e.sum_squares.size()) != it->second)
      throw Error(source + ": importance matrix entry '" + name + "' has " +
                  std::to_string(e.sum_squares.size()) + " columns, the model's matrix " +
                  std::to_string(it->second));
  }
}

}  // namespace tern
