// A mixture of experts' routing on the host: which experts each token goes to, with what weight,
// and the step's tokens grouped by expert so that each chosen expert runs once over all of its
// tokens. Each token's choice depends only on its own router logits.
#pragma once

#include <cstdint>

namespace tern::cpu {

// For each of `rows` tokens: the softmax of its router logits (in place: `logits` holds the
// probabilities after), its top `k` experts into experts[row, :] (the higher probability
// first, the lower index on a tie) and their probabilities into weights[row, :], renormalised
// to sum 1 when `normalize` (Qwen3-MoE's norm_topk_prob; llama.cpp's qwen3moe always does).
// logits: [rows, n_experts]; experts, weights: [rows, k]; 1 ≤ k ≤ n_experts
void route_top_k(float* logits, int64_t rows, int64_t n_experts, int64_t k, bool normalize,
                 int32_t* experts, float* weights);

// The routes (row · k + j: a token's j-th choice) grouped by expert, in token order within
// each: expert e's are routes[first[e] .. first[e + 1]), and route r sits at routes[slot[r]].
// experts: [rows · k] as route_top_k wrote them; first: [n_experts + 1];
// routes, slot: [rows · k]
void group_by_expert(const int32_t* experts, int64_t routes_count, int64_t n_experts,
                     int32_t* first, int32_t* routes, int32_t* slot);

}  // namespace tern::cpu
