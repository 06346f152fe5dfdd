// Reading GPTQ, AWQ and MLX matrices into tern's affine groups (checkpoint_weights.h).
#include "tern/models/checkpoint_weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "tern/blocks/block_layouts.h"
#include "tern/core/error.h"
#include "tern/core/half.h"

namespace tern {
namespace {

// Element access to a checkpoint tensor whose dtype and shape were checked.
uint32_t word_at(const TensorInfo& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + 4 * i, 4);
  return v;
}
int32_t int_at(const TensorInfo& t, int64_t i) { return static_cast<int32_t>(word_at(t, i)); }
float float_at(const TensorInfo& t, int64_t i) {
  if (t.dtype == DType::F32) {
    float v;
    std::memcpy(&v, t.data + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, t.data + 2 * i, 2);
  return t.dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// Finds and checks the tensors of one module.
class ModuleTensors {
 public:
  ModuleTensors(const FindTensor& find, const std::string& source, std::string module)
      : find_(find), source_(source), module_(std::move(module)) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(source_ + ": " + what); }
  std::string name(const char* suffix) const { return module_ + "." + suffix; }
  const std::string& module() const { return module_; }

  const TensorInfo* optional(const char* suffix) const { return find_(name(suffix)); }
  const TensorInfo& required(const char* suffix, const char* why) const {
    const TensorInfo* t = optional(suffix);
    if (t == nullptr) fail("tensor '" + name(suffix) + "' is missing (" + why + ")");
    return *t;
  }
  void check(const TensorInfo& t, std::initializer_list<DType> dtypes,
             const std::vector<int64_t>& shape, const std::string& what) const {
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) {
      std::string names;
      for (DType d : dtypes) names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
      fail("tensor '" + t.name + "' has type " + std::string(dtype_name(t.dtype)) + ", expected " +
           names);
    }
    if (t.shape != shape)
      fail("tensor '" + t.name + "' has shape " + shape_text(t.shape) + ", expected " +
           shape_text(shape) + " (" + what + ")");
  }

 private:
  const FindTensor& find_;
  const std::string& source_;
  std::string module_;
};

// rows × cols of B: code(row, input) the checkpoint's code, scale_bias(row, group) its
// group's (scale, bias), position j of a row being input order[j] (j without an order); the
// groups of a row are in the order of its (possibly permuted) inputs.
// `rows_outer`: a row's codes lie together (MLX), so each row is read in turn; else (GPTQ, AWQ)
// neighbouring outputs' words are neighbours, and 16 rows are read input by input, so that a
// tile's rows read each cache line once. The tile's codes are gathered first, then packed a
// block at a time.
template <class B, class Code, class ScaleBias>
void fill_rows(std::byte* out, size_t row_bytes, int64_t rows, int64_t cols, const int32_t* order,
               bool rows_outer, const Code& code, const ScaleBias& scale_bias) {
  const int64_t groups = cols / B::kElems;
  constexpr int64_t kTile = 16;
#pragma omp parallel
  {
    std::vector<uint8_t> codes(static_cast<size_t>(kTile * cols));
#pragma omp for schedule(dynamic, 4)
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      if (rows_outer) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t j = 0; j < cols; ++j)
            codes[static_cast<size_t>((r - r0) * cols + j)] =
                static_cast<uint8_t>(code(r, order != nullptr ? order[j] : j));
      } else {
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t input = order != nullptr ? order[j] : j;
          for (int64_t r = r0; r < r1; ++r)
            codes[static_cast<size_t>((r - r0) * cols + j)] = static_cast<uint8_t>(code(r, input));
        }
      }
      for (int64_t r = r0; r < r1; ++r) {
        auto* blocks = reinterpret_cast<B*>(out + static_cast<size_t>(r) * row_bytes);
        for (int64_t g = 0; g < groups; ++g) {
          const auto [scale, bias] = scale_bias(r, g);
          blocks[g].scale = scale;
          blocks[g].bias = bias;
          set_affine_codes(blocks[g], &codes[static_cast<size_t>((r - r0) * cols + g * B::kElems)]);
        }
      }
    }
  }
}

template <class Code, class ScaleBias>
WeightMatrix make_matrix(const AffineIntFormat& f, int64_t rows, int64_t cols, const int32_t* order,
                         bool rows_outer, const Code& code, const ScaleBias& scale_bias,
                         ModelWeights& w) {
  const DType dtype = *affine_int_dtype(f.bits, f.group);
  const auto row_bytes = static_cast<size_t>(*dtype_bytes(dtype, static_cast<uint64_t>(cols)));
  std::byte* out = w.own_bytes(row_bytes * static_cast<size_t>(rows)).data();
  with_affine_block<bool>(dtype, [&]<class B>() {
    fill_rows<B>(out, row_bytes, rows, cols, order, rows_outer, code, scale_bias);
    return true;
  });
  WeightMatrix m{dtype, rows, cols, out, row_bytes};
  m.input_order = order;
  return m;
}

// GPTQ's g_idx as a permutation that makes each group a run of G inputs (ascending within a
// group), or nullptr when the groups already are runs (desc_act off, or static groups).
const int32_t* gptq_input_order(const ModuleTensors& m, const TensorInfo* g_idx, int64_t cols,
                                int group, ModelWeights& w, InputOrders& orders) {
  if (g_idx == nullptr) return nullptr;
  m.check(*g_idx, {DType::I32}, {cols}, "one group index per input");
  const int64_t groups = cols / group;
  std::vector<int64_t> count(static_cast<size_t>(groups), 0);
  bool runs = true;
  for (int64_t k = 0; k < cols; ++k) {
    const int32_t g = int_at(*g_idx, k);
    if (g < 0 || g >= groups)
      m.fail("tensor '" + g_idx->name + "' gives input " + std::to_string(k) + " group " +
             std::to_string(g) + ", outside [0, " + std::to_string(groups) + ")");
    ++count[static_cast<size_t>(g)];
    runs = runs && g == k / group;
  }
  if (runs) return nullptr;
  for (int64_t g = 0; g < groups; ++g)
    if (count[static_cast<size_t>(g)] != group)
      m.fail("tensor '" + g_idx->name + "' puts " + std::to_string(count[static_cast<size_t>(g)]) +
             " inputs in group " + std::to_string(g) + ", not the group size " +
             std::to_string(group));
  std::vector<int32_t> order(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) order[static_cast<size_t>(k)] = static_cast<int32_t>(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return int_at(*g_idx, a) < int_at(*g_idx, b); });
  return orders.intern(std::move(order), w);
}

WeightMatrix read_gptq_or_awq(const CheckpointQuantization& q, const ModuleTensors& m,
                              const TensorInfo& qweight, int64_t rows, int64_t cols,
                              ModelWeights& w, InputOrders& orders) {
  const bool awq = q.method == QuantMethod::Awq;
  const int bits = q.bits, group = q.group_size, per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const char* format = awq ? "AWQ" : "GPTQ";
  if (cols % group != 0)
    m.fail("module '" + m.module() + "' has " + std::to_string(cols) +
           " inputs, which the group size " + std::to_string(group) + " does not divide");
  if (cols % per_word != 0 || rows % per_word != 0)
    m.fail("module '" + m.module() + "' is " + std::to_string(rows) + " × " + std::to_string(cols) +
           ", not whole " + std::to_string(per_word) + "-code words of " + format);
  const int64_t groups = cols / group;
  const TensorInfo& qzeros = m.required("qzeros", "every GPTQ and AWQ module has its zero points");
  const TensorInfo& scales = m.required("scales", "every GPTQ and AWQ module has its scales");
  if (awq) {
    m.check(qweight, {DType::I32}, {cols, rows / per_word}, "AWQ: inputs × outputs / 8");
  } else {
    m.check(qweight, {DType::I32}, {cols / per_word, rows}, "GPTQ: inputs · bits / 32 × outputs");
  }
  m.check(qzeros, {DType::I32}, {groups, rows / per_word}, "groups × outputs · bits / 32");
  m.check(scales, {DType::F16, DType::BF16, DType::F32}, {groups, rows}, "groups × outputs");
  const int32_t* order =
      awq ? nullptr : gptq_input_order(m, m.optional("g_idx"), cols, group, w, orders);

  auto packed_along_outputs = [=](const TensorInfo& t, int64_t i, int64_t row) {
    const int shift =
        (awq ? kAwqNibbleOfOutput[row % per_word] : static_cast<int>(row % per_word)) * bits;
    return static_cast<int>((word_at(t, i * (rows / per_word) + row / per_word) >> shift) & mask);
  };
  const int zero_offset = q.zeros_minus_one ? 1 : 0;
  auto scale_bias = [&](int64_t row, int64_t g) {
    const float scale = float_at(scales, g * rows + row);
    const int zero = packed_along_outputs(qzeros, g, row) + zero_offset;
    return std::pair{scale,
                     -scale * static_cast<float>(zero)};  // exact: see blocks/block_layouts.h
  };
  if (awq) {
    auto code = [&](int64_t row, int64_t input) {
      return packed_along_outputs(qweight, input, row);
    };
    return make_matrix({bits, group}, rows, cols, order, false, code, scale_bias, w);
  }
  auto code = [&](int64_t row, int64_t input) {
    const uint32_t word = word_at(qweight, input / per_word * rows + row);
    return static_cast<int>((word >> (input % per_word * bits)) & mask);
  };
  return make_matrix({bits, group}, rows, cols, order, false, code, scale_bias, w);
}

WeightMatrix read_mlx(const CheckpointQuantization& q, const ModuleTensors& m,
                      const std::string& module, const TensorInfo& scales, int64_t rows,
                      int64_t cols, ModelWeights& w) {
  const std::optional<AffineIntFormat> format = q.format_of(module);
  if (!format)
    m.fail("tensor '" + scales.name + "' quantizes module '" + module +
           "', which config.json's quantization leaves unquantized");
  const int bits = format->bits, group = format->group, per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  if (cols % group != 0)
    m.fail("module '" + module + "' has " + std::to_string(cols) +
           " inputs, which the group size " + std::to_string(group) + " does not divide");
  const TensorInfo& weight = m.required("weight", "MLX keeps the codes in the module's weight");
  const TensorInfo& biases = m.required("biases", "MLX's affine groups have a bias each");
  const std::string what = std::to_string(bits) + "-bit, groups of " + std::to_string(group) +
                           " as config.json's quantization says";
  m.check(weight, {DType::U32}, {rows, cols / per_word}, "outputs × inputs · bits / 32, " + what);
  m.check(scales, {DType::F16, DType::BF16, DType::F32}, {rows, cols / group},
          "outputs × groups, " + what);
  m.check(biases, {scales.dtype}, {rows, cols / group}, "outputs × groups, like the scales");
  const int64_t words = cols / per_word, groups = cols / group;
  auto code = [&](int64_t row, int64_t input) {
    const uint32_t word = word_at(weight, row * words + input / per_word);
    return static_cast<int>((word >> (input % per_word * bits)) & mask);
  };
  auto scale_bias = [&](int64_t row, int64_t g) {
    return std::pair{float_at(scales, row * groups + g), float_at(biases, row * groups + g)};
  };
  return make_matrix(*format, rows, cols, nullptr, true, code, scale_bias, w);
}

}  // namespace

const int32_t* InputOrders::intern(std::vector<int32_t> order, ModelWeights& w) {
  for (std::span<const int32_t> kept : kept_)
    if (std::equal(kept.begin(), kept.end(), order.begin(), order.end())) return kept.data();
  std::span<std::byte> bytes = w.own_bytes(order.size() * sizeof(int32_t));
  std::memcpy(bytes.data(), order.data(), bytes.size());
  kept_.emplace_back(reinterpret_cast<const int32_t*>(bytes.data()), order.size());
  return kept_.back().data();
}

std::optional<WeightMatrix> read_quantized_matrix(const CheckpointQuantization& q,
                                                  const FindTensor& find, const std::string& source,
                                                  const std::string& module, int64_t rows,
                                                  int64_t cols, ModelWeights& w,
                                                  InputOrders& orders) {
  const ModuleTensors m(find, source, module);
  if (q.method == QuantMethod::Mlx) {
    const TensorInfo* scales = m.optional("scales");
    if (scales == nullptr) return std::nullopt;
    return read_mlx(q, m, module, *scales, rows, cols, w);
  }
  const TensorInfo* qweight = m.optional("qweight");
  if (qweight == nullptr) return std::nullopt;
  return read_gptq_or_awq(q, m, *qweight, rows, cols, w, orders);
}

std::vector<TensorInfo> as_repacked_tensors(const CheckpointQuantization& q,
                                            const std::vector<TensorInfo>& tensors) {
  const bool mlx = q.method == QuantMethod::Mlx;
  std::map<std::string, const TensorInfo*, std::less<>> by_name;
  for (const TensorInfo& t : tensors) by_name[t.name] = &t;
  auto find = [&](const std::string& name) -> const TensorInfo* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  // The module of each quantized matrix, and its logical shape.
  std::map<std::string, TensorInfo> repacked;
  for (const TensorInfo& t : tensors) {
    const std::string_view marker = mlx ? ".scales" : ".qweight";
    if (!std::string_view(t.name).ends_with(marker) || t.shape.size() != 2) continue;
    const std::string module = t.name.substr(0, t.name.size() - marker.size());
    const TensorInfo* codes = mlx ? find(module + ".weight") : &t;
    if (codes == nullptr || codes->shape.size() != 2) continue;
    const std::optional<AffineIntFormat> f = mlx ? q.format_of(module) : q.format_of("");
    if (!f) continue;
    const int64_t per_word = 32 / f->bits;
    int64_t rows = 0, cols = 0;
    if (mlx) {
      rows = codes->shape[0], cols = codes->shape[1] * per_word;
    } else if (q.method == QuantMethod::Awq) {
      rows = codes->shape[1] * per_word, cols = codes->shape[0];
    } else {
      rows = codes->shape[1], cols = codes->shape[0] * per_word;
    }
    const DType dtype = *affine_int_dtype(f->bits, f->group);
    const std::optional<uint64_t> bytes =
        dtype_bytes(dtype, static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols));
    if (rows <= 0 || cols <= 0 || !bytes) continue;
    TensorInfo m;
    m.name = module + ".weight";
    m.dtype = dtype;
    m.shape = {rows, cols};
    m.nbytes = *bytes;
    repacked[module] = m;
  }
  std::vector<TensorInfo> out;
  std::set<std::string> emitted;
  // The tensors a quantized module is made of (a module's bias stays what it is).
  const std::set<std::string_view> parts =
      mlx ? std::set<std::string_view>{"weight", "scales", "biases"}
          : std::set<std::string_view>{"qweight", "qzeros", "scales", "g_idx"};
  for (const TensorInfo& t : tensors) {
    const size_t dot = t.name.rfind('.');
    const std::string module = dot == std::string::npos ? t.name : t.name.substr(0, dot);
    auto it = repacked.find(module);
    if (it == repacked.end() || !parts.contains(std::string_view(t.name).substr(dot + 1))) {
      out.push_back(t);
    } else if (emitted.insert(module).second) {
      out.push_back(it->second);  // in the place of the module's first tensor
    }
  }
  return out;
}

}  // namespace tern
