// Uploading a model's weights. Blocks whose size is not whole words (ggml's Q8_0, Q4_0, Q5_0,
// IQ4_NL, Q3_K, Q6_K, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S and IQ1_S: 34, 18, 22, 18, 110,
// 210, 110, 98, 66, 74, 82 and 50 bytes) are split at upload into their f16 scales and the rest,
// and MXFP4's (17) into its scales as f32 and its nibbles, so the kernel reads whole aligned
// words; Q4_1, Q5_1, Q2_K, Q4_K, Q5_K, IQ4_XS and IQ1_M (20, 24, 84, 144, 176, 136 and 56
// bytes) and the affine groups go up as they are. The lattice types' grids go up once, in one
// table.
#include "tern/backend/vulkan/vulkan_weights.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <span>
#include <type_traits>

#include "tern/blocks/block_layouts.h"
#include "tern/core/error.h"

namespace tern::vulkan {
namespace {

struct TypeKernel {
  DType dtype;
  const char* kernel;
  const char* experts_kernel;  // its mixture-of-experts variant; none for the affine groups
  bool lattice = false;        // whether its kernel reads the lattice table
};
constexpr TypeKernel kKernels[] = {
    {DType::F32, "matmul_f32", "matmul_id_f32"},
    {DType::F16, "matmul_f16", "matmul_id_f16"},
    {DType::BF16, "matmul_bf16", "matmul_id_bf16"},
    {DType::Q8_0, "matmul_q8_0", "matmul_id_q8_0"},
    {DType::Q4_0, "matmul_q4_0", "matmul_id_q4_0"},
    {DType::Q4_1, "matmul_q4_1", "matmul_id_q4_1"},
    {DType::Q5_0, "matmul_q5_0", "matmul_id_q5_0"},
    {DType::Q5_1, "matmul_q5_1", "matmul_id_q5_1"},
    {DType::Q2_K, "matmul_q2_k", "matmul_id_q2_k"},
    {DType::Q3_K, "matmul_q3_k", "matmul_id_q3_k"},
    {DType::Q4_K, "matmul_q4_k", "matmul_id_q4_k"},
    {DType::Q5_K, "matmul_q5_k", "matmul_id_q5_k"},
    {DType::Q6_K, "matmul_q6_k", "matmul_id_q6_k"},
    {DType::IQ4_NL, "matmul_iq4_nl", "matmul_id_iq4_nl"},
    {DType::IQ4_XS, "matmul_iq4_xs", "matmul_id_iq4_xs"},
    {DType::MXFP4, "matmul_mxfp4", "matmul_id_mxfp4"},
    {DType::IQ3_XXS, "matmul_iq3_xxs", "matmul_id_iq3_xxs", true},
    {DType::IQ3_S, "matmul_iq3_s", "matmul_id_iq3_s", true},
    {DType::IQ2_XXS, "matmul_iq2_xxs", "matmul_id_iq2_xxs", true},
    {DType::IQ2_XS, "matmul_iq2_xs", "matmul_id_iq2_xs", true},
    {DType::IQ2_S, "matmul_iq2_s", "matmul_id_iq2_s", true},
    {DType::IQ1_S, "matmul_iq1_s", "matmul_id_iq1_s", true},
    {DType::IQ1_M, "matmul_iq1_m", "matmul_id_iq1_m", true},
    {DType::INT4_G32, "matmul_int4_g32", nullptr},
    {DType::INT4_G64, "matmul_int4_g64", nullptr},
    {DType::INT4_G128, "matmul_int4_g128", nullptr},
    {DType::INT8_G32, "matmul_int8_g32", nullptr},
    {DType::INT8_G64, "matmul_int8_g64", nullptr},
    {DType::INT8_G128, "matmul_int8_g128", nullptr},
};

const TypeKernel* kernels_of(DType dtype) {
  for (const TypeKernel& k : kKernels)
    if (k.dtype == dtype) return &k;
  return nullptr;
}

// The lattice types' grids in one table, where matmul.comp's *_GRID defines say (in words):
// IQ3_XXS's and IQ3_S's entries a word each, IQ2_XXS's, IQ2_XS's and IQ2_S's two (the low half
// first), the IQ1 types' 16-bit codes two to a word.
constexpr size_t kIq3SGridAt = std::size(kIq3XxsGrid);
constexpr size_t kIq2XxsGridAt = kIq3SGridAt + std::size(kIq3SGrid);
constexpr size_t kIq2XsGridAt = kIq2XxsGridAt + 2 * std::size(kIq2XxsGrid);
constexpr size_t kIq2SGridAt = kIq2XsGridAt + 2 * std::size(kIq2XsGrid);
constexpr size_t kIq1GridAt = kIq2SGridAt + 2 * std::size(kIq2SGrid);
static_assert(kIq3SGridAt == 256 && kIq2XxsGridAt == 768 && kIq2XsGridAt == 1280 &&
                  kIq2SGridAt == 2304 && kIq1GridAt == 4352,
              "matmul.comp's IQ3_S_GRID, IQ2_XXS_GRID, IQ2_XS_GRID, IQ2_S_GRID and IQ1_GRID");

std::vector<uint32_t> lattice_table() {
  std::vector<uint32_t> table(std::begin(kIq3XxsGrid), std::end(kIq3XxsGrid));
  table.insert(table.end(), std::begin(kIq3SGrid), std::end(kIq3SGrid));
  for (std::span<const uint64_t> grid :
       {std::span<const uint64_t>(kIq2XxsGrid), std::span<const uint64_t>(kIq2XsGrid),
        std::span<const uint64_t>(kIq2SGrid)})
    for (uint64_t entry : grid) {
      table.push_back(static_cast<uint32_t>(entry));
      table.push_back(static_cast<uint32_t>(entry >> 32));
    }
  for (size_t i = 0; i < std::size(kIq1GridCodes); i += 2)
    table.push_back(kIq1GridCodes[i] | static_cast<uint32_t>(kIq1GridCodes[i + 1]) << 16);
  return table;
}

// Each block of `m`, row by row, handed to `repack(block, to)`, which writes its `out_bytes`
// (whole words) at `to` in `quants` and returns its scale for `scales`: the one loop of every
// layout uploaded apart from ggml's.
template <typename Block, typename Scale, typename Repack>
void repack_blocks(const WeightMatrix& m, size_t out_bytes, std::vector<Scale>& scales,
                   std::vector<std::byte>& quants, Repack repack) {
  const int64_t nb = m.cols / dtype_traits(m.dtype).block_elems;
  const size_t n = static_cast<size_t>(m.rows * nb);
  // f16 scales are read two to a word: one more keeps the last word inside the buffer.
  scales.resize(sizeof(Scale) == sizeof(uint16_t) ? n + 1 : n);
  quants.resize(n * out_bytes);
  for (int64_t r = 0; r < m.rows; ++r) {
    const auto* blocks = reinterpret_cast<const Block*>(m.row(r));
    for (int64_t b = 0; b < nb; ++b) {
      const size_t i = static_cast<size_t>(r * nb + b);
      scales[i] = repack(blocks[b], quants.data() + i * out_bytes);
    }
  }
}

// Blocks of `Block` (an f16 `d` and the rest) split into the scales and the rest, each block's
// rest whole words.
template <typename Block>
void split_blocks(const WeightMatrix& m, std::vector<uint16_t>& scales,
                  std::vector<std::byte>& quants) {
  constexpr size_t quant_bytes = sizeof(Block) - sizeof(uint16_t);
  static_assert(quant_bytes % 4 == 0);
  repack_blocks<Block>(m, quant_bytes, scales, quants, [](const Block& block, std::byte* to) {
    const auto* bytes = reinterpret_cast<const std::byte*>(&block);
    if constexpr (std::is_same_v<Block, BlockQ6_K> || std::is_same_v<Block, BlockQ3_K>)
      std::memcpy(to, bytes, quant_bytes);  // d last
    else
      std::memcpy(to, bytes + sizeof(uint16_t), quant_bytes);  // d first
    return block.d;
  });
}

// MXFP4's blocks split into their scales 2^(e − 128) as f32 (exact) and their 16 bytes of
// nibbles: the kernel reads a word per scale rather than decoding e8m0.
void split_mxfp4(const WeightMatrix& m, std::vector<float>& scales,
                 std::vector<std::byte>& quants) {
  repack_blocks<BlockMxfp4>(m, sizeof(BlockMxfp4::qs), scales, quants,
                            [](const BlockMxfp4& block, std::byte* to) {
                              std::memcpy(to, block.qs, sizeof block.qs);
                              return mxfp4_scale(block.e);
                            });
}

}  // namespace

std::string vulkan_matrix_types() {
  std::string s;
  for (const TypeKernel& k : kKernels)
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(k.dtype));
  return s;
}

bool has_vulkan_matmul(DType dtype) { return kernels_of(dtype) != nullptr; }

DeviceWeights::DeviceWeights(Context& context, const ModelWeights& weights) {
  auto check = [](const WeightMatrix& m, const std::string& what) {
    if (m.empty()) return;
    if (!has_vulkan_matmul(m.dtype))
      throw Error("--device vulkan: " + what + " is " + std::string(dtype_name(m.dtype)) +
                  ", which the Vulkan backend cannot multiply yet (" + vulkan_matrix_types() + ")");
  };
  auto check_experts = [&](const std::vector<WeightMatrix>& parts, const std::string& what) {
    for (const WeightMatrix& m : parts) {
      check(m, what);
      if (m.input_order != nullptr)
        throw Error("--device vulkan: " + what +
                    " has an act-order input permutation, which the Vulkan backend applies in "
                    "dense layers only");
      if (kernels_of(m.dtype)->experts_kernel == nullptr)
        throw Error("--device vulkan: " + what + " is " + std::string(dtype_name(m.dtype)) +
                    ", which the Vulkan backend multiplies in dense layers only");
    }
  };
  for (size_t i = 0; i < weights.layers.size(); ++i) {
    const LayerWeights& l = weights.layers[i];
    const std::string layer = "layer " + std::to_string(i) + "'s ";
    if (l.moe) {
      const MixtureOfExperts& moe = *l.moe;
      if (moe.top_k > kMaxTopK)
        throw Error("--device vulkan: " + layer + "router chooses " + std::to_string(moe.top_k) +
                    " experts a token; the Vulkan backend's routing "
                    "takes at most " +
                    std::to_string(kMaxTopK));
      if (moe.num_experts() > kMaxExperts)
        throw Error("--device vulkan: " + layer + "mixture has " +
                    std::to_string(moe.num_experts()) +
                    " experts; the Vulkan backend's grouping by expert takes at most " +
                    std::to_string(kMaxExperts));
      check(moe.router, layer + "ffn_gate_inp");
      check_experts(moe.gate, layer + "ffn_gate_exps");
      check_experts(moe.up, layer + "ffn_up_exps");
      check_experts(moe.down, layer + "ffn_down_exps");
      if (const std::optional<SharedExpert>& s = moe.shared) {
        check(s->gate, layer + "ffn_gate_shexp");
        check(s->up, layer + "ffn_up_shexp");
        check(s->down, layer + "ffn_down_shexp");
      }
    }
    check(l.wq, layer + "attn_q");
    check(l.wk, layer + "attn_k");
    check(l.wv, layer + "attn_v");
    check(l.wo, layer + "attn_output");
    check(l.w_gate, layer + "ffn_gate");
    check(l.w_up, layer + "ffn_up");
    check(l.w_down, layer + "ffn_down");
  }
  check(weights.lm_head, "the output matrix (lm_head)");

  for (const LayerWeights& l : weights.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      add_matrix(context, *m);
    if (l.moe) {
      const MixtureOfExperts& moe = *l.moe;
      add_matrix(context, moe.router);
      for (const std::vector<WeightMatrix>* parts : {&moe.gate, &moe.up, &moe.down})
        add_experts(context, *parts);
      for (std::span<const float> v : {moe.router_bias, moe.gate_bias, moe.up_bias, moe.down_bias})
        add_vector(context, v);
      if (const std::optional<SharedExpert>& s = moe.shared) {
        for (const WeightMatrix* m : {&s->gate, &s->up, &s->down}) add_matrix(context, *m);
        add_vector(context, s->gate_weight);
      }
    }
    for (std::span<const float> v :
         {l.attn_norm, l.ffn_norm, l.attn_post_norm, l.ffn_post_norm, l.q_norm, l.k_norm, l.bq,
          l.bk, l.bv, l.bo, l.b_gate, l.b_up, l.b_down, l.attn_sinks})
      add_vector(context, v);
  }
  add_matrix(context, weights.lm_head);
  add_vector(context, weights.output_norm);
}

void DeviceWeights::add_experts(Context& context, const std::vector<WeightMatrix>& parts) {
  if (parts.empty() || matrices_.count(parts[0].data) != 0) return;
  std::vector<std::byte> storage;
  const WeightMatrix stacked = gather_experts(parts, storage);
  add_matrix(context, stacked, parts[0].data, kernels_of(stacked.dtype)->experts_kernel);
  matrices_.at(parts[0].data).rows = parts[0].rows;
}

void DeviceWeights::add_matrix(Context& context, const WeightMatrix& m, const void* key,
                               const char* kernel) {
  if (key == nullptr) key = m.data;
  if (m.empty() || matrices_.count(key) != 0) return;
  DeviceMatrix d;
  d.matmul = kernel != nullptr ? &context.pipeline(kernel, sizeof(MatmulIdPush))
                               : &context.pipeline(kernels_of(m.dtype)->kernel, sizeof(MatmulPush));
  d.rows = m.rows;
  d.cols = m.cols;
  std::vector<uint16_t> scales;
  std::vector<float> float_scales;
  std::vector<std::byte> quants;
  const void* values = m.data;
  uint64_t value_bytes = static_cast<uint64_t>(m.rows) * m.row_bytes;
  switch (m.dtype) {
    case DType::Q4_0:
      split_blocks<BlockQ4_0>(m, scales, quants);
      break;
    case DType::Q5_0:
      split_blocks<BlockQ5_0>(m, scales, quants);
      break;
    case DType::Q8_0:
      split_blocks<BlockQ8_0>(m, scales, quants);
      break;
    case DType::IQ4_NL:
      split_blocks<BlockIq4Nl>(m, scales, quants);
      break;
    case DType::Q3_K:
      split_blocks<BlockQ3_K>(m, scales, quants);
      break;
    case DType::Q6_K:
      split_blocks<BlockQ6_K>(m, scales, quants);
      break;
    case DType::IQ3_S:
      split_blocks<BlockIq3S>(m, scales, quants);
      break;
    case DType::IQ3_XXS:
      split_blocks<BlockIq3Xxs>(m, scales, quants);
      break;
    case DType::IQ2_XXS:
      split_blocks<BlockIq2Xxs>(m, scales, quants);
      break;
    case DType::IQ2_XS:
      split_blocks<BlockIq2Xs>(m, scales, quants);
      break;
    case DType::IQ2_S:
      split_blocks<BlockIq2S>(m, scales, quants);
      break;
    case DType::IQ1_S:
      split_blocks<BlockIq1S>(m, scales, quants);
      break;
    case DType::MXFP4:
      split_mxfp4(m, float_scales, quants);
      break;
    default:
      break;
  }
  if (kernels_of(m.dtype)->lattice) d.tables = lattice_tables(context);
  if (!quants.empty()) {
    values = quants.data();
    value_bytes = quants.size();
  }
  const void* scale_data = scales.empty() ? static_cast<const void*>(float_scales.data())
                                          : static_cast<const void*>(scales.data());
  const size_t scale_bytes =
      scales.empty() ? float_scales.size() * sizeof(float) : scales.size() * sizeof(uint16_t);
  Buffer& w = buffers_.emplace_back(context, value_bytes, Memory::Device);
  context.upload(w, 0, values, value_bytes);
  d.words = w.address();
  bytes_ += w.bytes();
  if (scale_bytes != 0) {
    Buffer& s = buffers_.emplace_back(context, scale_bytes, Memory::Device);
    context.upload(s, 0, scale_data, scale_bytes);
    d.scales = s.address();
    bytes_ += s.bytes();
  }
  if (m.input_order != nullptr) {
    const uint64_t bytes = static_cast<uint64_t>(m.cols) * sizeof(int32_t);
    Buffer& o = buffers_.emplace_back(context, bytes, Memory::Device);
    context.upload(o, 0, m.input_order, bytes);
    d.input_order = o.address();
    bytes_ += o.bytes();
    max_ordered_cols_ = std::max(max_ordered_cols_, m.cols);
  }
  matrices_.emplace(key, d);
}

VkDeviceAddress DeviceWeights::lattice_tables(Context& context) {
  if (lattice_tables_ != 0) return lattice_tables_;
  const std::vector<uint32_t> tables = lattice_table();
  const uint64_t bytes = tables.size() * sizeof(uint32_t);
  Buffer& b = buffers_.emplace_back(context, bytes, Memory::Device);
  context.upload(b, 0, tables.data(), bytes);
  bytes_ += b.bytes();
  lattice_tables_ = b.address();
  return lattice_tables_;
}

void DeviceWeights::add_vector(Context& context, std::span<const float> v) {
  if (v.empty() || vectors_.count(v.data()) != 0) return;
  Buffer& b = buffers_.emplace_back(context, v.size_bytes(), Memory::Device);
  context.upload(b, 0, v.data(), v.size_bytes());
  vectors_.emplace(v.data(), b.address());
  bytes_ += b.bytes();
}

const DeviceMatrix& DeviceWeights::experts(const std::vector<WeightMatrix>& parts) const {
  auto it = parts.empty() ? matrices_.end() : matrices_.find(parts[0].data);
  if (it == matrices_.end()) throw Error("vulkan: experts that were not uploaded");
  return it->second;
}

const DeviceMatrix& DeviceWeights::matrix(const WeightMatrix& m) const {
  auto it = matrices_.find(m.data);
  if (it == matrices_.end()) throw Error("vulkan: a matrix that was not uploaded");
  return it->second;
}

VkDeviceAddress DeviceWeights::vector(std::span<const float> v) const {
  return v.empty() ? 0 : vector(v.data());
}

VkDeviceAddress DeviceWeights::vector(const float* v) const {
  auto it = vectors_.find(v);
  if (it == vectors_.end()) throw Error("vulkan: a vector that was not uploaded");
  return it->second;
}

}  // namespace tern::vulkan
