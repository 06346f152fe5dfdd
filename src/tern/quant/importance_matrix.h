// llama.cpp's importance matrix: for every weight matrix, the sum over calibration tokens of
// each input column's squared activation, and the number of tokens. Its mean, E[x_j²], weighs
// the error of column j in the weight quantizers: for a row w, the output error of w·x is
// Σ_j E[x_j²] (w_j − ŵ_j)² when the columns' errors are uncorrelated. Files are llama.cpp's
// GGUF imatrix format (`general.type` "imatrix", `<tensor>.in_sum2` [1, cols] and
// `<tensor>.counts` [1, 1] as F32, `imatrix.datasets`, `imatrix.chunk_count`,
// `imatrix.chunk_size`), so llama-quantize takes tern's files and tern takes llama-imatrix's.
// tern can also keep each input's second-moment matrix Σ x xᵀ (`<tensor>.in_sum_outer`
// [cols, cols] F32, which llama.cpp's loader skips): the whole H of GPTQ (quant/gptq.h), of
// which the importances are the diagonal.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/core/mapped_file.h"

namespace tern {

class GgufWriter;

struct ImportanceEntry {
  // [experts × cols]: Σ over tokens of x_j², each expert's tokens in its own row (one row for a
  // dense matrix).
  std::vector<double> sum_squares;
  std::vector<float> sum_outer;  // [cols × cols]: Σ over tokens of x xᵀ (its lower triangle
                                 // is read), empty when not kept; never kept per expert
  int64_t count = 0;             // tokens seen (by all the experts together)
  // An expert tensor's entry: the tokens routed to each expert [experts]. Empty for a dense
  // matrix's entry.
  std::vector<int64_t> expert_counts;

  int64_t experts() const {
    return expert_counts.empty() ? 1 : static_cast<int64_t>(expert_counts.size());
  }
  int64_t cols() const { return static_cast<int64_t>(sum_squares.size()) / experts(); }
};

class ImportanceMatrix {
 public:
  // Keyed by GGUF tensor name ("blk.0.attn_q.weight").
  std::map<std::string, ImportanceEntry> entries;
  std::vector<std::string> datasets;  // the calibration files' names
  int64_t chunk_count = 0;            // windows of calibration text
  int64_t chunk_size = 0;             // tokens per window
  bool keep_outer = false;            // accumulate also sums Σ x xᵀ (cols² values a matrix)

  // Adds `num_tokens` rows x [num_tokens, cols] to the entry `name` (created on first use).
  // Throws tern::Error when cols differs from the entry's.
  void accumulate(const std::string& name, const float* x, int64_t num_tokens, int64_t cols);
  // Adds the rows x [rows, cols] to the expert entry `name` of `num_experts` experts (created on
  // first use), as llama-imatrix does for MUL_MAT_ID: row r was routed to the experts
  // route_experts[r · routes_per_row …] (the top-k choices of its token, or one route a row),
  // and each of them sums its squares and counts it once. Throws tern::Error when the entry's
  // shape differs, an expert index is out of range, or second moments are kept (keep_outer:
  // GPTQ's sums of x xᵀ are not collected per expert).
  void accumulate_experts(const std::string& name, int64_t num_experts, const float* x,
                          int64_t rows, int64_t cols, std::span<const int32_t> route_experts,
                          int64_t routes_per_row);

  // E[x_j²] of the entry [cols]; empty when there is no entry or it saw no tokens. An expert
  // entry's is [experts × cols], expert e's in row e; an expert no token was routed to gets
  // uniform importances (all 1), as llama-quantize gives it.
  std::vector<float> importance(const std::string& name) const;
  // E[x xᵀ] of the entry [cols × cols]; empty when there is none, or no sums of x xᵀ.
  std::vector<float> second_moments(const std::string& name) const;

  // llama.cpp's GGUF imatrix format. Throws tern::Error naming the file for anything else (a
  // model GGUF, an entry without its counts, a non-F32 tensor, sizes that disagree, NaNs).
  static ImportanceMatrix read(const std::string& path);
  static ImportanceMatrix parse(std::shared_ptr<const MappedFile> file);
  void write(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;

 private:
  GgufWriter writer() const;
};

}  // namespace tern
