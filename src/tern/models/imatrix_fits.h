// Whether an importance matrix was made for this model: its entries against the model's
// matrices, by GGUF name and column count. It reads ModelWeights, which quant/ sits below.
#pragma once

#include <string>

#include "tern/models/weight_loader.h"
#include "tern/quant/importance_matrix.h"

namespace tern {

// Throws tern::Error naming the first entry that is not a matrix of `weights` (by GGUF name)
// or whose column count differs from that matrix's, or whose rows are not one per expert of a
// stacked expert tensor (ffn_*_exps; one for any other matrix): an importance matrix made for
// another model. Matrices without an entry are fine (llama-imatrix leaves out output.weight).
void check_imatrix_fits(const ImportanceMatrix& imatrix, const ModelWeights& weights,
                        const std::string& source);

}  // namespace tern
