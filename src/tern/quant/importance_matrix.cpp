// ImportanceMatrix: accumulation, llama.cpp's GGUF imatrix files, and the check against a model.
#include "tern/quant/importance_matrix.h"

#include <cmath>
#include <span>
#include <string_view>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"
#include "tern/models/model_weights.h"

namespace tern {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";

bool strip_suffix(std::string& s, std::string_view suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// GGUF name → column count of every matrix a model quantizes.
std::map<std::string, int64_t> matrix_columns(const ModelWeights& w) {
  std::map<std::string, int64_t> cols;
  cols["token_embd.weight"] = w.token_embedding.cols;
  if (!w.tied_embeddings) cols["output.weight"] = w.lm_head.cols;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    const auto layer = static_cast<int64_t>(i);
    const std::pair<const char*, const WeightMatrix*> matrices[] = {
        {"attn_q.weight", &l.wq},         {"attn_k.weight", &l.wk},     {"attn_v.weight", &l.wv},
        {"attn_output.weight", &l.wo},    {"ffn_gate.weight", &l.w_gate},
        {"ffn_up.weight", &l.w_up},       {"ffn_down.weight", &l.w_down}};
    for (const auto& [what, m] : matrices) cols[gguf_tensor_name(layer, what)] = m->cols;
  }
  return cols;
}

std::span<const float> f32_values(const TensorInfo& t, const std::string& path) {
  if (t.dtype != DType::F32)
    throw Error(path + ": imatrix tensor '" + t.name + "' is " + std::string(dtype_name(t.dtype)) +
                ", not F32");
  return {reinterpret_cast<const float*>(t.data), static_cast<size_t>(t.nelements())};
}

}  // namespace

void ImportanceMatrix::accumulate(const std::string& name, const float* x, int64_t num_tokens,
                                  int64_t cols) {
  ImportanceEntry& e = entries[name];
  if (e.sum_squares.empty()) e.sum_squares.assign(static_cast<size_t>(cols), 0.0);
  if (static_cast<int64_t>(e.sum_squares.size()) != cols)
    throw Error("importance matrix: '" + name + "' has " + std::to_string(e.sum_squares.size()) +
                " columns, its input " + std::to_string(cols));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = x + t * cols;
    for (int64_t j = 0; j < cols; ++j)
      e.sum_squares[static_cast<size_t>(j)] += static_cast<double>(row[j]) * row[j];
  }
  e.count += num_tokens;
}

std::vector<float> ImportanceMatrix::importance(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end() || it->second.count <= 0) return {};
  std::vector<float> mean(it->second.sum_squares.size());
  for (size_t j = 0; j < mean.size(); ++j)
    mean[j] = static_cast<float>(it->second.sum_squares[j] / static_cast<double>(it->second.count));
  return mean;
}

void ImportanceMatrix::check_fits(const ModelWeights& weights, const std::string& source) const {
  const std::map<std::string, int64_t> cols = matrix_columns(weights);
  for (const auto& [name, e] : entries) {
    const auto it = cols.find(name);
    if (it == cols.end())
      throw Error(source + ": importance matrix entry '" + name +
                  "' is not a matrix of this model (was it made for another one?)");
    if (static_cast<int64_t>(e.sum_squares.size()) != it->second)
      throw Error(source + ": importance matrix entry '" + name + "' has " +
                  std::to_string(e.sum_squares.size()) + " columns, the model's matrix " +
                  std::to_string(it->second));
  }
}

ImportanceMatrix ImportanceMatrix::read(const std::string& path) {
  return parse(std::make_shared<const MappedFile>(path));
}

ImportanceMatrix ImportanceMatrix::parse(std::shared_ptr<const MappedFile> file) {
  const GgufFile gguf = GgufFile::parse(std::move(file));
  const std::string& path = gguf.path();
  if (gguf.get_string("general.type") != "imatrix")
    throw Error(path + ": not an importance matrix (general.type is not \"imatrix\")");
  ImportanceMatrix m;
  m.datasets = gguf.get_string_array("imatrix.datasets").value_or(std::vector<std::string>{});
  m.chunk_count = gguf.get_int("imatrix.chunk_count").value_or(0);
  m.chunk_size = gguf.get_int("imatrix.chunk_size").value_or(0);
  std::map<std::string, std::pair<const TensorInfo*, const TensorInfo*>> parts;
  for (const TensorInfo& t : gguf.tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, kSumsSuffix))
      parts[name].first = &t;
    else if (strip_suffix(name, kCountsSuffix))
      parts[name].second = &t;
    else
      throw Error(path + ": imatrix tensor '" + t.name + "' is neither <name>.in_sum2 nor <name>.counts");
  }
  for (const auto& [name, p] : parts) {
    const auto [sums, counts] = p;
    if (sums == nullptr || counts == nullptr)
      throw Error(path + ": imatrix entry '" + name + "' has " + (sums ? "no .counts" : "no .in_sum2"));
    const std::span<const float> s = f32_values(*sums, path), c = f32_values(*counts, path);
    // Dense models have one matrix per entry; llama.cpp writes one row per expert for MoE.
    if (c.size() != 1)
      throw Error(path + ": imatrix entry '" + name + "' has " + std::to_string(c.size()) +
                  " counts (an expert model's); tern's models have one matrix per entry");
    if (s.empty()) throw Error(path + ": imatrix entry '" + name + "' has no values");
    // A token count, stored as a float: a whole number, and one an int64 holds (2^62 tokens is
    // beyond any calibration text).
    if (!std::isfinite(c[0]) || c[0] < 0.0f || c[0] != std::floor(c[0]) || c[0] > 0x1p62f)
      throw Error(path + ": imatrix entry '" + name + "' has an invalid count");
    ImportanceEntry e;
    e.count = static_cast<int64_t>(c[0]);
    e.sum_squares.reserve(s.size());
    for (const float v : s) {
      if (!std::isfinite(v) || v < 0.0f)
        throw Error(path + ": imatrix entry '" + name + "' has a negative or non-finite sum");
      e.sum_squares.push_back(v);
    }
    m.entries.emplace(name, std::move(e));
  }
  return m;
}

GgufWriter ImportanceMatrix::writer() const {
  GgufWriter g;
  g.set("general.type", GgufValue::string("imatrix"));
  g.set("imatrix.datasets", GgufValue::string_array(datasets));
  g.set("imatrix.chunk_count", GgufValue::u32(static_cast<uint32_t>(chunk_count)));
  g.set("imatrix.chunk_size", GgufValue::u32(static_cast<uint32_t>(chunk_size)));
  for (const auto& [name, e] : entries) {
    const std::vector<float> sums(e.sum_squares.begin(), e.sum_squares.end());
    const float count = static_cast<float>(e.count);
    g.add_tensor(name + std::string(kSumsSuffix), DType::F32, {1, static_cast<int64_t>(sums.size())},
                 std::as_bytes(std::span<const float>(sums)));
    g.add_tensor(name + std::string(kCountsSuffix), DType::F32, {1, 1},
                 std::as_bytes(std::span<const float>(&count, 1)));
  }
  return g;
}

std::vector<std::byte> ImportanceMatrix::to_bytes() const { return writer().to_bytes(); }
void ImportanceMatrix::write(const std::string& path) const { writer().write(path); }

}  // namespace tern
