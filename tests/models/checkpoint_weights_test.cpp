// GPTQ, AWQ and MLX checkpoints: their settings read and refused (checkpoint_quantization.h),
// and their matrices repacked into tern's affine groups with exactly the values each format's
// rules define. The checkpoints are written here from known codes, scales and zeros by the
// test's own packers, which follow the formats' writers (AutoGPTQ's and GPTQModel's pack,
// AutoAWQ's GEMM pack, mlx.core.quantize) and share nothing with the loader.
#include "tern/models/checkpoint_weights.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "run_process.h"
#include "tern/blocks/quantize_row.h"
#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/checkpoint_quantization.h"
#include "tern/formats/safetensors.h"
#include "tern/models/model_loader.h"

namespace tern {
namespace {

// ---- settings --------------------------------------------------------------------------------

CheckpointQuantization parsed(const std::string& config_json) {
  std::optional<CheckpointQuantization> q =
      parse_checkpoint_quantization(config_json, "config.json");
  EXPECT_TRUE(q.has_value()) << config_json;
  return q.value_or(CheckpointQuantization{});
}

void expect_refused(const std::string& config_json, const std::string& phrase) {
  try {
    parse_checkpoint_quantization(config_json, "config.json");
    ADD_FAILURE() << "accepted: " << config_json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

TEST(CheckpointQuantization, ReadsGptqAwqAndMlx) {
  EXPECT_FALSE(parse_checkpoint_quantization(R"({"hidden_size": 8})", "config.json"));

  // AutoGPTQ / transformers' GPTQConfig, with fields that do not change the tensors.
  CheckpointQuantization q = parsed(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
          "desc_act": true, "sym": false, "damp_percent": 0.01, "use_exllama": true,
          "exllama_config": {"version": 1}}})");
  EXPECT_EQ(q.method, QuantMethod::Gptq);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_TRUE(q.desc_act);
  EXPECT_FALSE(q.sym);
  EXPECT_TRUE(q.zeros_minus_one);
  EXPECT_EQ(q.dtype(), DType::INT4_G128);

  // GPTQModel's v2 zeros.
  q = parsed(R"({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 32,
                 "checkpoint_format": "gptq_v2", "pack_dtype": "int32", "dynamic": null}})");
  EXPECT_FALSE(q.zeros_minus_one);
  EXPECT_EQ(q.dtype(), DType::INT8_G32);

  // AutoAWQ as transformers saves it, and AutoAWQ's own key names.
  q = parsed(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64,
                 "version": "GEMM", "zero_point": true, "modules_to_not_convert": null}})");
  EXPECT_EQ(q.method, QuantMethod::Awq);
  EXPECT_EQ(q.dtype(), DType::INT4_G64);
  q = parsed(R"({"quantization_config": {"quant_method": "awq", "w_bit": 4,
                 "q_group_size": 128, "version": "gemm"}})");
  EXPECT_EQ(q.dtype(), DType::INT4_G128);

  // mlx-lm, with a module of its own and one left float; newer versions repeat it under
  // quantization_config without a quant_method.
  q = parsed(R"({"quantization": {"group_size": 64, "bits": 4,
                 "model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8},
                 "lm_head": false}})");
  EXPECT_EQ(q.method, QuantMethod::Mlx);
  EXPECT_EQ(q.dtype(), DType::INT4_G64);
  EXPECT_EQ(q.format_of("model.layers.0.mlp.down_proj")->bits, 8);
  EXPECT_EQ(q.format_of("model.layers.0.mlp.down_proj")->group, 32);
  EXPECT_FALSE(q.format_of("lm_head").has_value());
  EXPECT_EQ(q.format_of("model.layers.1.mlp.down_proj")->group, 64);
  q = parsed(R"({"quantization": {"group_size": 32, "bits": 8, "mode": "affine"},
                 "quantization_config": {"group_size": 32, "bits": 8, "mode": "affine"}})");
  EXPECT_EQ(q.dtype(), DType::INT8_G32);

  // AutoGPTQ's older quantize_config.json beside a config without one.
  q = parse_checkpoint_quantization(R"({"hidden_size": 8})", "config.json",
                                    R"({"bits": 4, "group_size": 64, "desc_act": false})",
                                    "quantize_config.json")
          .value();
  EXPECT_EQ(q.method, QuantMethod::Gptq);
  EXPECT_EQ(q.dtype(), DType::INT4_G64);
}

TEST(CheckpointQuantization, RefusesWhatItDoesNotLoadNamingTheField) {
  auto gptq = [](const std::string& fields) {
    return R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, )" +
           fields + "}}";
  };
  expect_refused(R"({"quantization_config": {"quant_method": "gptq", "bits": 3,
                     "group_size": 128}})",
                 "'quantization_config.bits' is 3");
  expect_refused(R"({"quantization_config": {"quant_method": "gptq", "bits": 4,
                     "group_size": -1}})",
                 "'quantization_config.group_size' is -1");
  expect_refused(R"({"quantization_config": {"quant_method": "gptq", "bits": 4,
                     "group_size": 256}})",
                 "group_size' is 256");
  expect_refused(gptq(R"("checkpoint_format": "marlin")"), "'marlin'");
  expect_refused(gptq(R"("is_marlin_format": true)"), "is_marlin_format");
  expect_refused(gptq(R"("pack_dtype": "int16")"), "'int16'");
  expect_refused(gptq(R"("dynamic": {"-:.*down_proj": {}})"), "dynamic");
  expect_refused(gptq(R"("desc_act": "yes")"), "desc_act");
  expect_refused(R"({"quantization_config": {"quant_method": "awq", "bits": 4,
                     "group_size": 128, "version": "gemv"}})",
                 "'gemv'");
  expect_refused(R"({"quantization_config": {"quant_method": "awq", "bits": 8,
                     "group_size": 128}})",
                 "4-bit");
  expect_refused(R"({"quantization_config": {"quant_method": "awq", "bits": 4,
                     "group_size": 128, "zero_point": false}})",
                 "zero_point");
  expect_refused(R"({"quantization_config": {"quant_method": "compressed-tensors"}})",
                 "'compressed-tensors'");
  expect_refused(R"({"quantization_config": {"quant_method": "bitsandbytes"}})", "'bitsandbytes'");
  expect_refused(R"({"quantization": {"group_size": 32, "bits": 4, "mode": "mxfp4"}})", "'mxfp4'");
  expect_refused(R"({"quantization": {"group_size": 64, "bits": 2}})", "bits' is 2");
  expect_refused(R"({"quantization": {"group_size": 64, "bits": 4, "lm_head": 3}})",
                 "'quantization.lm_head'");
  expect_refused(R"({"quantization": {"group_size": 64, "bits": 4,
                     "model.layers.0.mlp.down_proj": {"group_size": 16, "bits": 4}}})",
                 "'quantization.model.layers.0.mlp.down_proj.group_size' is 16");
  EXPECT_EQ(quant_method_from_name("awq"), QuantMethod::Awq);
  EXPECT_EQ(quant_method_from_name("marlin"), std::nullopt);
}

// ---- the packings ----------------------------------------------------------------------------

// A matrix as its checkpoint holds it: codes, and per group a scale and an integer zero point
// (GPTQ, AWQ) or a bias (MLX), with each input's group (g_idx).
struct Known {
  int bits = 4, group = 128;
  int64_t rows = 0, cols = 0;
  std::vector<int> code;     // [rows][cols]
  std::vector<float> scale;  // [rows][groups], f16 (or bf16) values
  std::vector<int> zero;     // [rows][groups]
  std::vector<float> bias;   // [rows][groups], MLX
  std::vector<int32_t> g_idx;

  int64_t groups() const { return cols / group; }
  int64_t group_of(int64_t k) const { return g_idx.empty() ? k / group : g_idx[k]; }
  // The value each format's rules give the weight.
  float value(int64_t r, int64_t k, bool mlx) const {
    const int64_t g = r * groups() + group_of(k);
    const float q = static_cast<float>(code[r * cols + k]);
    return mlx ? std::fma(scale[g], q, bias[g]) : scale[g] * (q - static_cast<float>(zero[g]));
  }
};

Known random_known(int bits, int group, int64_t rows, int64_t cols, uint32_t seed, bool bf16,
                   int zero_lo, int zero_hi) {
  Known m;
  m.bits = bits, m.group = group, m.rows = rows, m.cols = cols;
  std::mt19937 rng(seed);
  const int max_q = (1 << bits) - 1;
  for (int64_t i = 0; i < rows * cols; ++i) m.code.push_back(static_cast<int>(rng() % (max_q + 1)));
  std::uniform_real_distribution<float> s(1e-3f, 2e-2f), b(-0.2f, 0.2f);
  for (int64_t i = 0; i < rows * m.groups(); ++i) {
    m.scale.push_back(bf16 ? bf16_to_f32(f32_to_bf16(s(rng))) : f16_to_f32(f32_to_f16(s(rng))));
    m.zero.push_back(zero_lo +
                     static_cast<int>(rng() % static_cast<unsigned>(zero_hi - zero_lo + 1)));
    m.bias.push_back(bf16 ? bf16_to_f32(f32_to_bf16(b(rng))) : f16_to_f32(f32_to_f16(b(rng))));
  }
  return m;
}

// An act-order g_idx: the inputs shuffled, then grouped G at a time in the shuffled order (as
// GPTQ quantizes columns by decreasing Hessian diagonal and records each one's group).
void act_order(Known& m, uint32_t seed) {
  std::vector<int32_t> perm(static_cast<size_t>(m.cols));
  for (int64_t k = 0; k < m.cols; ++k) perm[k] = static_cast<int32_t>(k);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  m.g_idx.assign(static_cast<size_t>(m.cols), 0);
  for (int64_t i = 0; i < m.cols; ++i) m.g_idx[perm[i]] = static_cast<int32_t>(i / m.group);
}

std::span<const std::byte> bytes_of(const auto& v) { return std::as_bytes(std::span(v)); }

std::vector<uint16_t> halves(const std::vector<float>& v, DType dtype) {
  std::vector<uint16_t> h;
  for (float f : v) h.push_back(dtype == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f));
  return h;
}

// `values` [outer][inner] transposed to [inner][outer].
std::vector<float> transposed(const std::vector<float>& values, int64_t outer, int64_t inner) {
  std::vector<float> t(values.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) t[i * outer + o] = values[o * inner + i];
  return t;
}

// GPTQ: qweight [K·bits/32, N] along the inputs, qzeros [groups, N·bits/32] along the outputs
// (zero − 1 in v1), scales [groups, N] f16, g_idx [K].
void write_gptq(SafetensorsWriter& st, const std::string& module, const Known& m, bool v1) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1;
  std::vector<uint32_t> qweight(static_cast<size_t>(m.cols / per * m.rows), 0);
  for (int64_t k = 0; k < m.cols; ++k)
    for (int64_t n = 0; n < m.rows; ++n)
      qweight[k / per * m.rows + n] |= static_cast<uint32_t>(m.code[n * m.cols + k])
                                       << (k % per * m.bits);
  std::vector<uint32_t> qzeros(static_cast<size_t>(m.groups() * m.rows / per), 0);
  for (int64_t g = 0; g < m.groups(); ++g)
    for (int64_t n = 0; n < m.rows; ++n) {
      const auto stored = static_cast<uint32_t>(m.zero[n * m.groups() + g] - (v1 ? 1 : 0)) & mask;
      qzeros[g * (m.rows / per) + n / per] |= stored << (n % per * m.bits);
    }
  std::vector<int32_t> g_idx(static_cast<size_t>(m.cols));
  for (int64_t k = 0; k < m.cols; ++k) g_idx[k] = static_cast<int32_t>(m.group_of(k));
  st.add_tensor(module + ".qweight", DType::I32, {m.cols / per, m.rows}, bytes_of(qweight));
  st.add_tensor(module + ".qzeros", DType::I32, {m.groups(), m.rows / per}, bytes_of(qzeros));
  st.add_tensor(module + ".scales", DType::F16, {m.groups(), m.rows},
                bytes_of(halves(transposed(m.scale, m.rows, m.groups()), DType::F16)));
  st.add_tensor(module + ".g_idx", DType::I32, {m.cols}, bytes_of(g_idx));
}

// AWQ (GEMM): qweight [K, N/8] and qzeros [groups, N/8] along the outputs, nibble i of a word
// holding output 8c + order[i] (AutoAWQ's pack), scales [groups, N] f16.
void write_awq(SafetensorsWriter& st, const std::string& module, const Known& m) {
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  auto pack = [&](int64_t outer, auto value) {
    std::vector<uint32_t> words(static_cast<size_t>(outer * m.rows / 8), 0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < m.rows / 8; ++c)
        for (int i = 0; i < 8; ++i)
          words[o * (m.rows / 8) + c] |= static_cast<uint32_t>(value(o, 8 * c + kOrder[i]))
                                         << (4 * i);
    return words;
  };
  st.add_tensor(
      module + ".qweight", DType::I32, {m.cols, m.rows / 8},
      bytes_of(pack(m.cols, [&](int64_t k, int64_t n) { return m.code[n * m.cols + k]; })));
  st.add_tensor(
      module + ".qzeros", DType::I32, {m.groups(), m.rows / 8},
      bytes_of(pack(m.groups(), [&](int64_t g, int64_t n) { return m.zero[n * m.groups() + g]; })));
  st.add_tensor(module + ".scales", DType::F16, {m.groups(), m.rows},
                bytes_of(halves(transposed(m.scale, m.rows, m.groups()), DType::F16)));
}

// MLX: weight U32 [N, K·bits/32] along the inputs, scales and biases [N, groups].
void write_mlx(SafetensorsWriter& st, const std::string& module, const Known& m, DType scales) {
  const int per = 32 / m.bits;
  std::vector<uint32_t> weight(static_cast<size_t>(m.rows * m.cols / per), 0);
  for (int64_t n = 0; n < m.rows; ++n)
    for (int64_t k = 0; k < m.cols; ++k)
      weight[n * (m.cols / per) + k / per] |= static_cast<uint32_t>(m.code[n * m.cols + k])
                                              << (k % per * m.bits);
  st.add_tensor(module + ".weight", DType::U32, {m.rows, m.cols / per}, bytes_of(weight));
  if (scales == DType::F32) {
    st.add_tensor(module + ".scales", DType::F32, {m.rows, m.groups()}, bytes_of(m.scale));
    st.add_tensor(module + ".biases", DType::F32, {m.rows, m.groups()}, bytes_of(m.bias));
  } else {
    st.add_tensor(module + ".scales", scales, {m.rows, m.groups()},
                  bytes_of(halves(m.scale, scales)));
    st.add_tensor(module + ".biases", scales, {m.rows, m.groups()},
                  bytes_of(halves(m.bias, scales)));
  }
}

struct Loaded {
  ModelWeights owner;
  WeightMatrix m;
};

Loaded load(const SafetensorsWriter& st, const CheckpointQuantization& q, int64_t rows,
            int64_t cols) {
  const SafetensorsFile file =
      SafetensorsFile::parse(std::make_shared<const MappedFile>("ckpt.safetensors", st.to_bytes()));
  Loaded l;
  InputOrders orders;
  const std::optional<WeightMatrix> m = read_quantized_matrix(
      q, [&](std::string_view name) { return file.find_tensor(name); }, "ckpt", "layer.proj", rows,
      cols, l.owner, orders);
  EXPECT_TRUE(m.has_value());
  l.m = m.value_or(WeightMatrix{});
  return l;
}

// Every weight of the repacked matrix, dequantized by tern, is the value the format defines.
void expect_exact(const WeightMatrix& got, const Known& m, bool mlx, const std::string& what) {
  ASSERT_EQ(got.dtype, *affine_int_dtype(m.bits, m.group)) << what;
  EXPECT_EQ(
      got.input_order != nullptr, !m.g_idx.empty() &&
                                      [&] {
                                        for (int64_t k = 0; k < m.cols; ++k)
                                          if (m.g_idx[k] != k / m.group) return true;
                                        return false;
                                      }())
      << what;
  std::vector<float> row(static_cast<size_t>(m.cols));
  int mismatches = 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(got.dtype, got.row(r), row.data(), m.cols);
    for (int64_t j = 0; j < m.cols; ++j) {
      const int64_t input = got.input_order != nullptr ? got.input_order[j] : j;
      mismatches += row[j] != m.value(r, input, mlx);
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

CheckpointQuantization gptq(int bits, int group, bool v1) {
  CheckpointQuantization q;
  q.method = QuantMethod::Gptq, q.bits = bits, q.group_size = group, q.zeros_minus_one = v1;
  return q;
}

TEST(CheckpointWeights, GptqGroupsAreExact) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (bool v1 : {true, false})
        for (bool ordered : {false, true}) {
          const int max_zero = (1 << bits) - 1;
          // v1 stores zero − 1 in `bits` bits: zeros 1 … 2^bits (AutoGPTQ's kernels add the 1).
          Known m = random_known(bits, group, 24, 256, static_cast<uint32_t>(bits * group), false,
                                 v1 ? 1 : 0, v1 ? max_zero + 1 : max_zero);
          if (ordered) act_order(m, 7);
          SafetensorsWriter st;
          write_gptq(st, "layer.proj", m, v1);
          const Loaded l = load(st, gptq(bits, group, v1), m.rows, m.cols);
          expect_exact(l.m, m, false,
                       "GPTQ " + std::to_string(bits) + "-bit g" + std::to_string(group) +
                           (v1 ? " v1" : " v2") + (ordered ? " act-order" : ""));
        }
}

TEST(CheckpointWeights, AwqGroupsAreExact) {
  for (int group : {32, 64, 128}) {
    const Known m = random_known(4, group, 32, 384, static_cast<uint32_t>(group), false, 0, 15);
    SafetensorsWriter st;
    write_awq(st, "layer.proj", m);
    CheckpointQuantization q;
    q.method = QuantMethod::Awq, q.bits = 4, q.group_size = group, q.zeros_minus_one = false;
    expect_exact(load(st, q, m.rows, m.cols).m, m, false, "AWQ g" + std::to_string(group));
  }
}

TEST(CheckpointWeights, MlxGroupsAreExact) {
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType scales : {DType::F16, DType::BF16, DType::F32}) {
        const Known m = random_known(bits, group, 20, 256, static_cast<uint32_t>(group + bits),
                                     scales == DType::BF16, 0, 0);
        SafetensorsWriter st;
        write_mlx(st, "layer.proj", m, scales);
        CheckpointQuantization q;
        q.method = QuantMethod::Mlx, q.bits = bits, q.group_size = group;
        expect_exact(load(st, q, m.rows, m.cols).m, m, true,
                     "MLX " + std::to_string(bits) + "-bit g" + std::to_string(group) + " " +
                         std::string(dtype_name(scales)));
      }
}

// q, k and v quantized with one input's act order share one permutation, so one gathering.
TEST(CheckpointWeights, EqualInputOrdersAreShared) {
  Known a = random_known(4, 32, 16, 128, 1, false, 1, 15),
        b = random_known(4, 32, 8, 128, 2, false, 1, 15);
  act_order(a, 3);
  act_order(b, 3);
  SafetensorsWriter st;
  write_gptq(st, "a", a, true);
  write_gptq(st, "b", b, true);
  const SafetensorsFile file =
      SafetensorsFile::parse(std::make_shared<const MappedFile>("ckpt.safetensors", st.to_bytes()));
  const FindTensor find = [&](std::string_view name) { return file.find_tensor(name); };
  ModelWeights w;
  InputOrders orders;
  const WeightMatrix ma =
      *read_quantized_matrix(gptq(4, 32, true), find, "ckpt", "a", 16, 128, w, orders);
  const WeightMatrix mb =
      *read_quantized_matrix(gptq(4, 32, true), find, "ckpt", "b", 8, 128, w, orders);
  ASSERT_NE(ma.input_order, nullptr);
  EXPECT_EQ(ma.input_order, mb.input_order);
  // A float module beside them is not the reader's.
  EXPECT_FALSE(read_quantized_matrix(gptq(4, 32, true), find, "ckpt", "c", 8, 128, w, orders));
}

// For tern plan: a module's tensors become one matrix of its type and logical shape, with the
// bytes of the repacked rows; its bias and the float tensors stay as they are.
TEST(CheckpointWeights, RepackedTensorsForPlanning) {
  const Known m = random_known(4, 64, 32, 256, 5, false, 1, 15);
  SafetensorsWriter st;
  write_gptq(st, "model.layers.0.self_attn.q_proj", m, true);
  const std::vector<float> bias(32, 0.5f), norm(256, 1.0f);
  st.add_tensor("model.layers.0.self_attn.q_proj.bias", DType::F32, {32}, bytes_of(bias));
  st.add_tensor("model.norm.weight", DType::F32, {256}, bytes_of(norm));
  const SafetensorsFile file =
      SafetensorsFile::parse(std::make_shared<const MappedFile>("ckpt.safetensors", st.to_bytes()));
  const std::vector<TensorInfo> t = as_repacked_tensors(gptq(4, 64, true), file.tensors());
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(t[0].dtype, DType::INT4_G64);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{32, 256}));
  EXPECT_EQ(t[0].nbytes, *dtype_bytes(DType::INT4_G64, 32 * 256));
  EXPECT_EQ(t[1].name, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(t[2].name, "model.norm.weight");
  // MLX and AWQ: the shapes come out the same.
  for (QuantMethod method : {QuantMethod::Awq, QuantMethod::Mlx}) {
    SafetensorsWriter other;
    if (method == QuantMethod::Awq) write_awq(other, "m", m);
    if (method == QuantMethod::Mlx) write_mlx(other, "m", m, DType::F16);
    const SafetensorsFile f = SafetensorsFile::parse(
        std::make_shared<const MappedFile>("ckpt.safetensors", other.to_bytes()));
    CheckpointQuantization q = gptq(4, 64, false);
    q.method = method;
    const std::vector<TensorInfo> r = as_repacked_tensors(q, f.tensors());
    ASSERT_EQ(r.size(), 1u) << quant_method_name(method);
    EXPECT_EQ(r[0].name, "m.weight");
    EXPECT_EQ(r[0].shape, (std::vector<int64_t>{32, 256})) << quant_method_name(method);
  }
}

// Malformed checkpoints are refused naming the file and the tensor.
TEST(CheckpointWeights, RefusesMalformedTensors) {
  const Known m = random_known(4, 32, 16, 128, 4, false, 1, 15);
  auto expect_refused_matrix = [&](const std::function<void(SafetensorsWriter&)>& write,
                                   const CheckpointQuantization& q, int64_t rows, int64_t cols,
                                   const std::string& phrase) {
    SafetensorsWriter st;
    write(st);
    try {
      load(st, q, rows, cols);
      ADD_FAILURE() << "accepted: " << phrase;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ckpt"), std::string::npos) << e.what();
    }
  };
  auto without = [&](const std::string& drop) {
    return [&, drop](SafetensorsWriter& st) {
      SafetensorsWriter all;
      write_gptq(all, "layer.proj", m, true);
      const SafetensorsFile f =
          SafetensorsFile::parse(std::make_shared<const MappedFile>("all", all.to_bytes()));
      for (const TensorInfo& t : f.tensors())
        if (t.name != drop) st.add_tensor(t.name, t.dtype, t.shape, std::span(t.data, t.nbytes));
    };
  };
  const CheckpointQuantization q4 = gptq(4, 32, true);
  expect_refused_matrix(without("layer.proj.qzeros"), q4, 16, 128,
                        "'layer.proj.qzeros' is missing");
  expect_refused_matrix(without("layer.proj.scales"), q4, 16, 128,
                        "'layer.proj.scales' is missing");
  // The config says other shapes than the tensors have.
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", m, true); }, q4,
                        16, 256, "'layer.proj.qweight' has shape [16, 16], expected [32, 16]");
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", m, true); },
                        gptq(8, 32, true), 16, 128, "'layer.proj.qweight' has shape");
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", m, true); },
                        gptq(4, 64, true), 16, 128, "'layer.proj.qzeros' has shape");
  // A group size that does not divide the inputs.
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", m, true); },
                        gptq(4, 64, true), 16, 96, "group size 64 does not divide");
  // g_idx out of range, and groups of unequal size.
  Known bad = m;
  bad.g_idx.assign(128, 0);
  for (int64_t k = 0; k < 128; ++k) bad.g_idx[k] = static_cast<int32_t>(k / 32);
  bad.g_idx[5] = 4;
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", bad, true); }, q4,
                        16, 128, "gives input 5 group 4, outside [0, 4)");
  bad.g_idx[5] = 1;
  expect_refused_matrix([&](SafetensorsWriter& st) { write_gptq(st, "layer.proj", bad, true); }, q4,
                        16, 128, "puts 31 inputs in group 0");
  // A qweight of floats.
  expect_refused_matrix(
      [&](SafetensorsWriter& st) {
        without("layer.proj.qweight")(st);
        st.add_tensor("layer.proj.qweight", DType::F32, {16, 16},
                      std::vector<std::byte>(16 * 16 * 4));
      },
      q4, 16, 128, "has type F32, expected I32");
  // MLX without biases; MLX modules the config leaves float.
  CheckpointQuantization mlx;
  mlx.method = QuantMethod::Mlx, mlx.bits = 4, mlx.group_size = 32;
  expect_refused_matrix(
      [&](SafetensorsWriter& st) {
        SafetensorsWriter all;
        write_mlx(all, "layer.proj", m, DType::F16);
        const SafetensorsFile f =
            SafetensorsFile::parse(std::make_shared<const MappedFile>("all", all.to_bytes()));
        for (const TensorInfo& t : f.tensors())
          if (t.name != "layer.proj.biases")
            st.add_tensor(t.name, t.dtype, t.shape, std::span(t.data, t.nbytes));
      },
      mlx, 16, 128, "'layer.proj.biases' is missing");
  mlx.mlx_modules["layer.proj"] = std::nullopt;
  expect_refused_matrix([&](SafetensorsWriter& st) { write_mlx(st, "layer.proj", m, DType::F16); },
                        mlx, 16, 128, "leaves unquantized");
}

// ---- whole models ----------------------------------------------------------------------------

// The test's round to nearest of a float matrix [rows][cols] into a format's groups (GPTQ's
// and AWQ's s · (q − z), MLX's s · q + b), each input in the group g_idx gives it.
Known quantize_known(const WeightMatrix& f32, int bits, int group, bool mlx,
                     const std::vector<int32_t>& g_idx) {
  Known m;
  m.bits = bits, m.group = group, m.rows = f32.rows, m.cols = f32.cols, m.g_idx = g_idx;
  const auto* w = reinterpret_cast<const float*>(f32.data);
  const int max_q = (1 << bits) - 1;
  m.code.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t g = 0; g < m.groups(); ++g) {
      float lo = 0.0f, hi = 0.0f;
      for (int64_t k = 0; k < m.cols; ++k)
        if (m.group_of(k) == g)
          lo = std::min(lo, w[r * m.cols + k]), hi = std::max(hi, w[r * m.cols + k]);
      const float scale = f16_to_f32(f32_to_f16((hi - lo) / static_cast<float>(max_q)));
      const int zero = std::clamp(static_cast<int>(std::lround(-lo / scale)), 0, max_q);
      const float bias = mlx ? f16_to_f32(f32_to_f16(lo)) : 0.0f;
      m.scale.push_back(scale);
      m.zero.push_back(zero);
      m.bias.push_back(bias);
      for (int64_t k = 0; k < m.cols; ++k) {
        if (m.group_of(k) != g) continue;
        const float x = w[r * m.cols + k];
        const long q = mlx ? std::lround((x - bias) / scale) : std::lround(x / scale) + zero;
        m.code[r * m.cols + k] = static_cast<int>(std::clamp<long>(q, 0, max_q));
      }
    }
  return m;
}

struct Variant {
  std::string name;
  QuantMethod method;
  int bits, group;
  bool v1 = true, act_order = false;
  nlohmann::json quantization;  // what config.json says
};

// A tiny qwen3 checkpoint folder in `v`'s format from `f32`'s matrices, and those same
// matrices dequantized by the format's rules into `reference` (a copy of f32's other weights).
void write_checkpoint(const testing::TempDir& dir, const ModelConfig& c, const ModelWeights& f32,
                      const Variant& v, ModelWeights& reference) {
  const bool mlx = v.method == QuantMethod::Mlx;
  nlohmann::json config = testing::tiny_qwen3_overrides(static_cast<int64_t>(c.num_layers));
  std::ifstream in(testing::fixture("model-configs/qwen3-0.6b/config.json"));
  nlohmann::json full = nlohmann::json::parse(in);
  for (auto it = config.begin(); it != config.end(); ++it) full[it.key()] = it.value();
  if (mlx) {
    full["quantization"] = v.quantization;
  } else {
    full["quantization_config"] = v.quantization;
  }
  std::ofstream(dir.file("config.json")) << full.dump();
  SafetensorsWriter st;
  uint32_t seed = 1;
  auto matrix = [&](const std::string& module, const WeightMatrix& m, WeightMatrix& ref) {
    std::vector<int32_t> g_idx;
    if (v.act_order) {
      Known shuffled;
      shuffled.group = v.group, shuffled.cols = m.cols;
      act_order(shuffled, seed++);
      g_idx = shuffled.g_idx;
    }
    const Known known = quantize_known(m, v.bits, v.group, mlx, g_idx);
    if (v.method == QuantMethod::Gptq) write_gptq(st, module, known, v.v1);
    if (v.method == QuantMethod::Awq) write_awq(st, module, known);
    if (mlx) write_mlx(st, module, known, DType::F16);
    std::span<float> values = reference.own_floats(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t k = 0; k < m.cols; ++k) values[r * m.cols + k] = known.value(r, k, mlx);
    ref.data = reinterpret_cast<const std::byte*>(values.data());
  };
  auto floats = [&](const std::string& name, std::span<const float> v) {
    std::vector<int64_t> shape = {static_cast<int64_t>(v.size())};
    st.add_tensor(name, DType::F32, shape, std::as_bytes(v));
  };
  // MLX quantizes the embedding (and so the tied head) too.
  if (mlx) {
    matrix("model.embed_tokens", f32.token_embedding, reference.token_embedding);
    reference.lm_head = reference.token_embedding;
  } else {
    st.add_tensor(
        "model.embed_tokens.weight", DType::F32, {c.vocab_size, c.hidden_size},
        std::span(f32.token_embedding.data, static_cast<size_t>(c.vocab_size * c.hidden_size) * 4));
  }
  for (size_t i = 0; i < f32.layers.size(); ++i) {
    const LayerWeights& l = f32.layers[i];
    LayerWeights& r = reference.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    floats(p + "input_layernorm.weight", l.attn_norm);
    floats(p + "post_attention_layernorm.weight", l.ffn_norm);
    floats(p + "self_attn.q_norm.weight", l.q_norm);
    floats(p + "self_attn.k_norm.weight", l.k_norm);
    matrix(p + "self_attn.q_proj", l.wq, r.wq);
    matrix(p + "self_attn.k_proj", l.wk, r.wk);
    matrix(p + "self_attn.v_proj", l.wv, r.wv);
    matrix(p + "self_attn.o_proj", l.wo, r.wo);
    matrix(p + "mlp.gate_proj", l.w_gate, r.w_gate);
    matrix(p + "mlp.up_proj", l.w_up, r.w_up);
    matrix(p + "mlp.down_proj", l.w_down, r.w_down);
  }
  floats("model.norm.weight", f32.output_norm);
  st.write(dir.file("model.safetensors"));
}

// Each format's checkpoint runs with the logits of its weights dequantized to F32: what is
// left is the activations' 8-bit quantization (Q8_0's blocks of 32, measured 0.0094-0.0106),
// a tenth of what the 4-bit weights themselves cost (0.126-0.160).
TEST(CheckpointWeights, WholeModelsComputeTheirDequantizedWeights) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  const ModelWeights f32 = make_dummy_weights(c, DType::F32, 11);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 33, 7, 480, 2};
  const std::vector<float> original = testing::prefill_logits(c, f32, tokens);
  const std::vector<Variant> variants = {
      {"gptq-4bit-g128",
       QuantMethod::Gptq,
       4,
       128,
       true,
       false,
       {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", false}}},
      {"gptq-4bit-g32-act-order",
       QuantMethod::Gptq,
       4,
       32,
       true,
       true,
       {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", true}}},
      {"gptq-v2-8bit-g64",
       QuantMethod::Gptq,
       8,
       64,
       false,
       false,
       {{"quant_method", "gptq"},
        {"bits", 8},
        {"group_size", 64},
        {"checkpoint_format", "gptq_v2"}}},
      {"awq-4bit-g128",
       QuantMethod::Awq,
       4,
       128,
       false,
       false,
       {{"quant_method", "awq"},
        {"bits", 4},
        {"group_size", 128},
        {"version", "gemm"},
        {"zero_point", true}}},
      {"mlx-4bit-g64", QuantMethod::Mlx, 4, 64, false, false, {{"group_size", 64}, {"bits", 4}}},
  };
  for (const Variant& v : variants) {
    testing::TempDir dir("ckpt-" + v.name);
    ModelWeights reference = make_dummy_weights(c, DType::F32, 11);
    write_checkpoint(dir, c, f32, v, reference);
    LoadOptions options;
    options.model = dir.path().string();
    const LoadedModel loaded = load_model(options);
    EXPECT_EQ(loaded.weights.layers[0].wq.dtype, *affine_int_dtype(v.bits, v.group)) << v.name;
    EXPECT_EQ(loaded.weights.layers[0].wq.input_order != nullptr, v.act_order) << v.name;
    const std::vector<float> got = testing::prefill_logits(c, loaded.weights, tokens);
    const std::vector<float> want = testing::prefill_logits(c, reference, tokens);
    const double err = testing::relative_rms_error(got, want);
    const double weights_err = testing::relative_rms_error(want, original);
    std::printf(
        "%s: relative RMS logit error %.5f against its dequantized weights, %.5f of "
        "those against the float model\n",
        v.name.c_str(), err, weights_err);
    EXPECT_LT(err, 0.016) << v.name;
    if (v.bits == 4) {
      EXPECT_LT(err, weights_err / 4) << v.name;
    }
    // And the method is checked when asked for, as vLLM's --quantization.
    options.quantization = v.method == QuantMethod::Awq ? QuantMethod::Gptq : QuantMethod::Awq;
    EXPECT_THROW(load_model(options), Error) << v.name;
    // The command line runs it, and says what it read.
    const std::string method(quant_method_name(v.method));
    const testing::ProcessResult run = testing::run_tern(
        {"bench-model", dir.path().string(), "-q", method, "-p", "8", "-n", "4", "-r", "1"});
    EXPECT_EQ(run.exit_code, 0) << v.name << ": " << run.err;
    EXPECT_NE(run.out.find("safetensors, " + method), std::string::npos) << run.out;
    // tern plan sizes the matrices as tern repacks them.
    const testing::ProcessResult plan = testing::run_tern({"plan", dir.path().string()});
    EXPECT_EQ(plan.exit_code, 0) << v.name << ": " << plan.err;
    EXPECT_NE(plan.out.find(std::string(dtype_name(*affine_int_dtype(v.bits, v.group)))),
              std::string::npos)
        << plan.out;
    const testing::ProcessResult wrong = testing::run_tern(
        {"bench-model", dir.path().string(), "-q", method == "mlx" ? "gptq" : "mlx", "-n", "1"});
    EXPECT_NE(wrong.exit_code, 0) << v.name;
    EXPECT_NE(wrong.err.find("--quantization"), std::string::npos) << wrong.err;
  }
}

}  // namespace
}  // namespace tern
