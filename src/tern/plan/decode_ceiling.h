// The fastest decode memory bandwidth allows: each step reads every weight it multiplies by
// once and each sequence's whole KV cache, so tokens/s ≤ bandwidth ÷ bytes read per token.
// Compute, attention's arithmetic and the rest only lower it.
#pragma once

#include <cstdint>
#include <string>

namespace tern::plan {

struct DecodeCeiling {
  double bandwidth = 0;            // bytes/s
  uint64_t weight_bytes = 0;       // read per step (WeightPlan::bytes_read_per_token)
  int64_t kv_bytes_per_token = 0;  // of the cache, per token of context

  // Tokens/s of `num_seqs` sequences decoding side by side, each with `context` tokens in
  // the cache: the weights are read once per step for all of them, each one's KV for itself.
  double tokens_per_s(int64_t context, int64_t num_seqs = 1) const;
};

// "936GB/s", "1.2TB/s", "400 GiB/s": bytes per second (the size as parse_byte_size reads it,
// then "/s"). Throws tern::Error naming the text otherwise.
double parse_bandwidth(const std::string& text);

// 936e9 → "936 GB/s" (decimal units, as vendors state bandwidth).
std::string format_bandwidth(double bytes_per_s);

}  // namespace tern::plan
