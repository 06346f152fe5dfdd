// ImportanceMatrix: accumulation, llama.cpp's GGUF imatrix files, and the check against a model.
#include "tern/quant/importance_matrix.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"

namespace tern {
namespace {

constexpr std::string_view kSumsSuffix = ".in_sum2";
constexpr std::string_view kCountsSuffix = ".counts";
constexpr std::string_view kOuterSuffix = ".in_sum_outer";

bool strip_suffix(std::string& s, std::string_view suffix) {
  if (s.size() <= suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  s.resize(s.size() - suffix.size());
  return true;
}

// sum[i, 0..i] += x_i · x[0..i] for every token: the lower triangle, a band of rows at a time
// (each band's rows stay in cache while the tokens pass, four tokens a pass), bands in parallel.
void add_outer_products(float* sum, const float* x, int64_t num_tokens, int64_t cols) {
  constexpr int64_t kBand = 16;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i0 = 0; i0 < cols; i0 += kBand) {
    const int64_t i1 = std::min(cols, i0 + kBand);
    int64_t t = 0;
    for (; t + 4 <= num_tokens; t += 4) {
      const float *r0 = x + t * cols, *r1 = r0 + cols, *r2 = r1 + cols, *r3 = r2 + cols;
      for (int64_t i = i0; i < i1; ++i) {
        float* out = sum + i * cols;
        const float a0 = r0[i], a1 = r1[i], a2 = r2[i], a3 = r3[i];
        for (int64_t j = 0; j <= i; ++j)
          out[j] += (a0 * r0[j] + a1 * r1[j]) + (a2 * r2[j] + a3 * r3[j]);
      }
    }
    for (; t < num_tokens; ++t) {
      const float* row = x + t * cols;
      for (int64_t i = i0; i < i1; ++i) {
        float* out = sum + i * cols;
        const float xi = row[i];
        for (int64_t j = 0; j <= i; ++j) out[j] += xi * row[j];
      }
    }
  }
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
  if (e.sum_squares.empty()) {
    e.sum_squares.assign(static_cast<size_t>(cols), 0.0);
    if (keep_outer) e.sum_outer.assign(static_cast<size_t>(cols * cols), 0.0f);
  }
  if (static_cast<int64_t>(e.sum_squares.size()) != cols || !e.expert_counts.empty())
    throw Error("importance matrix: '" + name + "' has " + std::to_string(e.experts()) +
                " rows of " + std::to_string(e.cols()) + " columns, its input one of " +
                std::to_string(cols));
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* row = x + t * cols;
    for (int64_t j = 0; j < cols; ++j)
      e.sum_squares[static_cast<size_t>(j)] += static_cast<double>(row[j]) * row[j];
  }
  if (!e.sum_outer.empty()) add_outer_products(e.sum_outer.data(), x, num_tokens, cols);
  e.count += num_tokens;
}

void ImportanceMatrix::accumulate_experts(const std::string& name, int64_t num_experts,
                                          const float* x, int64_t rows, int64_t cols,
                                          std::span<const int32_t> route_experts,
                                          int64_t routes_per_row) {
  if (keep_outer)
    throw Error("importance matrix: '" + name +
                "' is an expert tensor's; second moments (--hessian, for GPTQ) are not "
                "collected per expert");
  if (num_experts < 1 || routes_per_row < 1 ||
      static_cast<int64_t>(route_experts.size()) != rows * routes_per_row)
    throw Error("importance matrix: '" + name + "': " + std::to_string(route_experts.size()) +
                " routes for " + std::to_string(rows) + " rows");
  ImportanceEntry& e = entries[name];
  if (e.sum_squares.empty()) {
    e.sum_squares.assign(static_cast<size_t>(num_experts * cols), 0.0);
    e.expert_counts.assign(static_cast<size_t>(num_experts), 0);
  }
  if (e.experts() != num_experts || e.expert_counts.empty() || e.cols() != cols)
    throw Error("importance matrix: '" + name + "' has " + std::to_string(e.experts()) +
                " experts of " + std::to_string(e.cols()) + " columns, its input " +
                std::to_string(num_experts) + " of " + std::to_string(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    for (int64_t j = 0; j < routes_per_row; ++j) {
      const int32_t expert = route_experts[static_cast<size_t>(r * routes_per_row + j)];
      if (expert < 0 || expert >= num_experts)
        throw Error("importance matrix: '" + name + "': a route to expert " +
                    std::to_string(expert) + " of " + std::to_string(num_experts));
      double* sums = e.sum_squares.data() + expert * cols;
      for (int64_t c = 0; c < cols; ++c) sums[c] += static_cast<double>(row[c]) * row[c];
      ++e.expert_counts[static_cast<size_t>(expert)];
      ++e.count;
    }
  }
}

std::vector<float> ImportanceMatrix::second_moments(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end() || it->second.count <= 0 || it->second.sum_outer.empty()) return {};
  const ImportanceEntry& e = it->second;
  const auto cols = e.sum_squares.size();
  const float inv_count = 1.0f / static_cast<float>(e.count);
  std::vector<float> m(cols * cols);
  for (size_t i = 0; i < cols; ++i)
    for (size_t j = 0; j <= i; ++j)
      m[i * cols + j] = m[j * cols + i] = e.sum_outer[i * cols + j] * inv_count;
  return m;
}

std::vector<float> ImportanceMatrix::importance(const std::string& name) const {
  const auto it = entries.find(name);
  if (it == entries.end()) return {};
  const ImportanceEntry& e = it->second;
  if (e.expert_counts.empty() && e.count <= 0) return {};
  const int64_t cols = e.cols();
  std::vector<float> mean(e.sum_squares.size(), 1.0f);  // an unrouted expert's stay 1
  for (int64_t x = 0; x < e.experts(); ++x) {
    const int64_t count = e.expert_counts.empty() ? e.count : e.expert_counts[x];
    if (count <= 0) continue;
    for (int64_t j = x * cols; j < (x + 1) * cols; ++j)
      mean[static_cast<size_t>(j)] =
          static_cast<float>(e.sum_squares[static_cast<size_t>(j)] / static_cast<double>(count));
  }
  return mean;
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
  struct Parts {
    const TensorInfo* sums = nullptr;
    const TensorInfo* counts = nullptr;
    const TensorInfo* outer = nullptr;
  };
  std::map<std::string, Parts> parts;
  for (const TensorInfo& t : gguf.tensors()) {
    std::string name = t.name;
    if (strip_suffix(name, kSumsSuffix))
      parts[name].sums = &t;
    else if (strip_suffix(name, kCountsSuffix))
      parts[name].counts = &t;
    else if (strip_suffix(name, kOuterSuffix))
      parts[name].outer = &t;
    else
      throw Error(path + ": imatrix tensor '" + t.name +
                  "' is none of <name>.in_sum2, <name>.counts, <name>.in_sum_outer");
  }
  for (const auto& [name, p] : parts) {
    const TensorInfo *sums = p.sums, *counts = p.counts;
    if (sums == nullptr || counts == nullptr)
      throw Error(path + ": imatrix entry '" + name + "' has " +
                  (sums ? "no .counts" : "no .in_sum2"));
    const std::span<const float> s = f32_values(*sums, path), c = f32_values(*counts, path);
    if (s.empty() || c.empty()) throw Error(path + ": imatrix entry '" + name + "' has no values");
    // A dense matrix's entry has one row of sums and one count; an expert tensor's (what
    // llama-imatrix writes for MUL_MAT_ID) a row of sums and a count for each expert.
    const int64_t sum_rows = sums->shape.empty() ? 0 : sums->nelements() / sums->shape.back();
    if (sum_rows != static_cast<int64_t>(c.size()))
      throw Error(path + ": imatrix entry '" + name + "' has " + std::to_string(sum_rows) +
                  " rows of sums (" + shape_text(sums->shape) + ") and " +
                  std::to_string(c.size()) + " counts: it needs one count a row (an expert)");
    ImportanceEntry e;
    for (const float count : c) {
      // A token count, stored as a float: a whole number, and one an int64 holds (2^62 tokens
      // is beyond any calibration text).
      // The experts' together too, so that their sum never overflows.
      if (!std::isfinite(count) || count < 0.0f || count != std::floor(count) || count > 0x1p62f ||
          static_cast<int64_t>(count) > (int64_t{1} << 62) - e.count)
        throw Error(path + ": imatrix entry '" + name + "' has an invalid count");
      if (c.size() > 1) e.expert_counts.push_back(static_cast<int64_t>(count));
      e.count += static_cast<int64_t>(count);
    }
    if (p.outer != nullptr && c.size() > 1)
      throw Error(path + ": imatrix entry '" + name +
                  "' is an expert tensor's with sums of x xᵀ (in_sum_outer); second moments "
                  "per expert are not supported");
    e.sum_squares.reserve(s.size());
    for (const float v : s) {
      if (!std::isfinite(v) || v < 0.0f)
        throw Error(path + ": imatrix entry '" + name + "' has a negative or non-finite sum");
      e.sum_squares.push_back(v);
    }
    if (p.outer != nullptr) {
      const std::span<const float> o = f32_values(*p.outer, path);
      if (o.size() != s.size() * s.size())
        throw Error(path + ": imatrix entry '" + name + "' has " + std::to_string(o.size()) +
                    " sums of x xᵀ for " + std::to_string(s.size()) + " columns");
      for (const float v : o)
        if (!std::isfinite(v))
          throw Error(path + ": imatrix entry '" + name + "' has a non-finite sum of x xᵀ");
      e.sum_outer.assign(o.begin(), o.end());
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
    // One row of sums and one count per expert ([1, cols] and [1, 1] for a dense matrix).
    const std::vector<float> sums(e.sum_squares.begin(), e.sum_squares.end());
    std::vector<float> counts;
    if (e.expert_counts.empty()) counts.push_back(static_cast<float>(e.count));
    for (const int64_t c : e.expert_counts) counts.push_back(static_cast<float>(c));
    const auto rows = static_cast<int64_t>(counts.size());
    g.add_tensor(name + std::string(kSumsSuffix), DType::F32, {rows, e.cols()},
                 std::as_bytes(std::span<const float>(sums)));
    g.add_tensor(name + std::string(kCountsSuffix), DType::F32, {rows, 1},
                 std::as_bytes(std::span<const float>(counts)));
    if (!e.sum_outer.empty()) {
      const auto cols = static_cast<int64_t>(sums.size());
      std::vector<float> outer(e.sum_outer.size());
      for (int64_t i = 0; i < cols; ++i)
        for (int64_t j = 0; j <= i; ++j)
          outer[i * cols + j] = outer[j * cols + i] = e.sum_outer[i * cols + j];
      g.add_tensor(name + std::string(kOuterSuffix), DType::F32, {cols, cols},
                   std::as_bytes(std::span<const float>(outer)));
    }
  }
  return g;
}

std::vector<std::byte> ImportanceMatrix::to_bytes() const { return writer().to_bytes(); }
void ImportanceMatrix::write(const std::string& path) const { writer().write(path); }

}  // namespace tern
