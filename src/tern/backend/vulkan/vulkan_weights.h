// A model's weights in a Vulkan device's memory: every matrix the forward multiplies by (in
// the layout its matmul kernel reads, vulkan_weights.cpp), the norm vectors and the biases,
// found again by the host pointer the decoder's ops pass (WeightMatrix::data, a norm's or a
// bias's span). The token embedding stays on the host, where a step's rows are looked up
// before they are staged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "tern/backend/vulkan/vulkan_context.h"
#include "tern/core/dtype.h"
#include "tern/weights/model_weights.h"

namespace tern::vulkan {

// The push constants of matmul.comp (every weight type's variant), as its GLSL block lays them.
struct MatmulPush {
  VkDeviceAddress w, scales, x, y, bias, tables;
  uint32_t rows, cols, t, has_bias;
};
// The push constants of its mixture-of-experts variants (matmul_id_*).
struct MatmulIdPush {
  VkDeviceAddress w, scales, x, y, bias, tiles, tables;  // tiles: moe_group.comp's
  uint32_t rows, cols, t, has_bias, top_k, x_by_token, tile0, pad;
};

struct DeviceMatrix {
  const Pipeline* matmul = nullptr;  // the kernel of its type (experts: its matmul_id_ variant)
  VkDeviceAddress words = 0;         // the values (floats, halves, or the blocks' quants)
  VkDeviceAddress scales = 0;        // the blocks' scales; 0 for unquantized types
  VkDeviceAddress tables = 0;        // the lattice types' grids; 0 for the others
  // An act-order checkpoint's input permutation [cols] (WeightMatrix::input_order: input j is
  // x[order[j]]), int32; 0 when the inputs come in order.
  VkDeviceAddress input_order = 0;
  int64_t rows = 0;  // experts: an expert's rows
  int64_t cols = 0;
};

// The most experts a token may be routed to on the device (moe_route.comp's registers), and
// the most experts a layer may have (moe_group.comp's shared counters).
inline constexpr int64_t kMaxTopK = 16, kMaxExperts = 1024;

// The weight types with a Vulkan matmul kernel, for messages: "F32, F16, ...".
std::string vulkan_matrix_types();
// Whether `dtype` has one.
bool has_vulkan_matmul(DType dtype);

class DeviceWeights {
 public:
  // Uploads `weights`' matrices (but the token embedding's table, unless lm_head is tied to
  // it), norms and biases. Throws tern::Error naming the first matrix of a type without a
  // Vulkan kernel, before anything is uploaded.
  DeviceWeights(Context& context, const ModelWeights& weights);

  // The device copy of `m` (one of the uploaded matrices).
  const DeviceMatrix& matrix(const WeightMatrix& m) const;
  // A mixture of experts' matrices of one kind (MixtureOfExperts::gate, up or down), stacked
  // [n_experts · rows, cols] on the device.
  const DeviceMatrix& experts(const std::vector<WeightMatrix>& parts) const;
  // The device copy of a norm or bias vector; 0 for an empty span.
  VkDeviceAddress vector(std::span<const float> v) const;
  VkDeviceAddress vector(const float* v) const;
  uint64_t bytes() const { return bytes_; }
  // The most inputs of a matrix with an act-order permutation (0: none has one): the backend's
  // gathered rows are that wide.
  int64_t max_ordered_cols() const { return max_ordered_cols_; }

 private:
  // `key`: what matrix() / experts() find it by (m.data by default); `kernel` its pipeline.
  void add_matrix(Context& context, const WeightMatrix& m, const void* key = nullptr,
                  const char* kernel = nullptr);
  void add_experts(Context& context, const std::vector<WeightMatrix>& parts);
  void add_vector(Context& context, std::span<const float> v);
  // The lattice types' grids, uploaded with the first matrix that needs them.
  VkDeviceAddress lattice_tables(Context& context);

  std::vector<Buffer> buffers_;
  std::unordered_map<const void*, DeviceMatrix> matrices_;
  std::unordered_map<const void*, VkDeviceAddress> vectors_;
  uint64_t bytes_ = 0;
  VkDeviceAddress lattice_tables_ = 0;
  int64_t max_ordered_cols_ = 0;
};

}  // namespace tern::vulkan
