// Packing a model's matrices for the CPU kernels' layouts, and the rule for stacking the ones
// that share an input.
#include "tern/backend/cpu/weight_packing.h"

#include <initializer_list>
#include <vector>

#include "tern/backend/cpu/cpu_working_memory.h"
#include "tern/kernels/cpu/matmul.h"

namespace tern {

void pack_for_kernels(ModelWeights& w) {
  auto view_of = [](const WeightMatrix& m) {
    return cpu::WeightView{m.dtype, m.rows, m.cols, m.data, m.row_bytes};
  };
  auto pack_into = [&](WeightMatrix& m, std::byte* out) {
    cpu::pack_weights(view_of(m), out);
    m.packed = out;
    if (m.data != w.token_embedding.data) w.drop_file_pages(m);
  };
  auto pack = [&](WeightMatrix& m) {
    const size_t bytes = cpu::packed_weight_bytes(view_of(m));
    if (bytes == 0 || m.packed != nullptr) return;
    pack_into(m, w.own_bytes(bytes).data());
  };
  // Matrices that share their input, packed back to back into `fused` when they are of one
  // type and width and each is whole groups of rows.
  auto pack_fused = [&](std::initializer_list<WeightMatrix*> parts, WeightMatrix& fused) {
    const WeightMatrix& first = **parts.begin();
    std::vector<MatrixShape> shapes;
    for (const WeightMatrix* m : parts) {
      // One matmul takes one gathering of the input.
      if (m->packed != nullptr || m->input_order != first.input_order) return;
      shapes.push_back({m->dtype, m->rows, m->cols});
    }
    // tern plan sizes the fused matmul's output buffer by the same rule
    // (cpu_working_memory.h).
    if (!packs_back_to_back(shapes)) return;
    size_t bytes = 0;
    int64_t rows = 0;
    for (const WeightMatrix* m : parts) {
      bytes += cpu::packed_weight_bytes(view_of(*m));
      rows += m->rows;
    }
    std::byte* out = w.own_bytes(bytes).data();
    fused = WeightMatrix{first.dtype,     rows, first.cols,       nullptr,
                         first.row_bytes, out,  first.input_order};
    for (WeightMatrix* m : parts) {
      pack_into(*m, out);
      out += cpu::packed_weight_bytes(view_of(*m));
    }
  };
  for (LayerWeights& l : w.layers) {
    pack_fused({&l.wq, &l.wk, &l.wv}, l.wqkv_packed);
    pack_fused({&l.w_gate, &l.w_up}, l.w_gate_up_packed);
    l.for_each_matrix(pack);
  }
  pack(w.lm_head);
}

}  // namespace tern
