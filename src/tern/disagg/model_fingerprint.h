// Who may exchange KV blocks: two instances whose blocks mean the same thing, i.e. the same
// model (config and weights) and the same KV layout (dtype, block size, heads). The
// fingerprint is what their transfer sides compare before a block moves.
#pragma once

#include <string>

#include "tern/blocks/kv_cache_config.h"
#include "tern/models/language_model.h"

namespace tern::disagg {

// 32 hex digits: an XXH3-128 of the config's shape fields, the KV cache layout, and every
// weight's type and shape with a sample of its bytes (16 spans of 4 KiB spread over each
// matrix, and every norm and bias whole). Sampling keeps it quick for a model of many GB; it
// still tells apart two checkpoints, two quantizations or two KV dtypes of one model.
std::string model_fingerprint(const LanguageModel& decoder, const KvCacheConfig& kv);

}  // namespace tern::disagg
