// The CPU's layout of a model's weights: what CpuDevice::prepare_weights does once at load.
#pragma once

#include "tern/weights/model_weights.h"

namespace tern {

// Gives each matrix that the best ISA's kernels read in a layout of their own (the Amx level's
// Q4_0 and Q8_0: groups of 16 rows) its packed copy (WeightMatrix::packed), owned by `w`; q/k/v
// and gate/up back to back where they can be (LayerWeights::wqkv_packed). The results do not
// change (each level's packed kernels give its in-place kernels' bits). The file's rows stay
// readable (saving and requantizing read them) but, in a mapped file, leave the resident
// memory, so a packed model does not hold its weights twice; the embedding table's stay. A
// matrix packed already is left as it is, so packing twice is packing once.
void pack_for_kernels(ModelWeights& w);

}  // namespace tern
