// Timing a model's forward before any request runs, for the drafting policy's first cost
// estimates (Speculator::calibrate).
#pragma once

#include <cstdint>

#include "tern/backend/kv_cache.h"
#include "tern/models/language_model.h"

namespace tern {

// Seconds of one forward of `num_tokens` made-up tokens of one sequence over blocks 0, 1, … of
// `cache` (capped to the cache), with the last row's logits or every row's (as a verify asks).
// Overwrites those blocks, so call it only while the cache holds nothing anyone will read.
double time_forward(LanguageModel& decoder, KvCache& cache, int64_t num_tokens, bool all_logits);

}  // namespace tern
