// The router's top-k and the grouping by expert, in plain scalar code: their cost is a few
// hundred floats per token against the experts' megabytes of weights.
#include "tern/kernels/cpu/ops/expert_routing.h"

#include "tern/kernels/cpu/ops/row_ops.h"

namespace tern::cpu {

void route_top_k(float* logits, int64_t rows, int64_t n_experts, int64_t k, bool normalize,
                 int32_t* experts, float* weights) {
  softmax(logits, rows, n_experts);
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = logits + r * n_experts;
    int32_t* chosen = experts + r * k;
    float* w = weights + r * k;
    // Insertion into a sorted list of k: k is small (8 of 128 for Qwen3-30B-A3B).
    int64_t n = 0;
    for (int64_t e = 0; e < n_experts; ++e) {
      if (n == k && !(p[e] > w[k - 1])) continue;  // ties keep the earlier (lower) index
      int64_t at = n < k ? n++ : k - 1;
      while (at > 0 && p[e] > w[at - 1]) {
        w[at] = w[at - 1];
        chosen[at] = chosen[at - 1];
        --at;
      }
      w[at] = p[e];
      chosen[at] = static_cast<int32_t>(e);
    }
    if (!normalize) continue;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += w[j];
    for (int64_t j = 0; j < k; ++j) w[j] /= sum;
  }
}

void group_by_expert(const int32_t* experts, int64_t routes_count, int64_t n_experts,
                     int32_t* first, int32_t* routes, int32_t* slot) {
  for (int64_t e = 0; e <= n_experts; ++e) first[e] = 0;
  for (int64_t r = 0; r < routes_count; ++r) ++first[experts[r] + 1];
  for (int64_t e = 0; e < n_experts; ++e) first[e + 1] += first[e];
  // Filled in route order, so each expert's slice fills in token order; `first[e]` walks to
  // where first[e + 1] began, and is walked back after.
  for (int64_t r = 0; r < routes_count; ++r) {
    const int32_t e = experts[r];
    slot[r] = first[e];
    routes[first[e]++] = static_cast<int32_t>(r);
  }
  for (int64_t e = n_experts; e > 0; --e) first[e] = first[e - 1];
  first[0] = 0;
}

}  // namespace tern::cpu
