// `tern plan`: the sums careful users do by hand before running a model. Does it fit in this
// much memory (weights, KV cache for a context × sequences, the engine's working memory), what
// would fit when it does not, and how fast can decode go at this memory bandwidth.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tern/blocks/kv_dtype.h"
#include "tern/plan/decode_ceiling.h"
#include "tern/plan/memory_plan.h"
#include "tern/plan/plan_model.h"
#include "tern/plan/weight_plan.h"
#include "tern/quant/quant_recipe.h"

namespace tern::plan {

struct PlanOptions {
  std::optional<QuantRecipe>
      recipe;  // --weight-type; nullopt: the file's types (a config: torch_dtype)
  KvDtype kv_cache_dtype = KvDtype::F16;
  int64_t max_model_len = 0;  // 0: the model's context
  int64_t max_num_seqs = 1;   // sequences of max_model_len held at once
  int64_t max_num_batched_tokens = 512;
  int block_size = 16;
  uint64_t device_memory = 0;        // bytes the plan must fit in
  std::string device_memory_source;  // "--device-memory", "MemAvailable of this machine"
  double bandwidth = 0;              // bytes/s
  std::string bandwidth_source;      // "--bandwidth", "measured on this machine (2 threads)"
  std::string device;  // --device: whose layouts and buffers are counted ("": default)
};

// One change of the settings that makes the plan fit, with the total it gives.
struct Suggestion {
  std::vector<std::pair<std::string, std::string>> flags;  // {"--weight-type", "q4_k_m"}, …
  uint64_t total_bytes = 0;
};

struct DeviceFit {
  std::string name;
  double bandwidth = 0;
  uint64_t memory = 0;
  bool fits = false;
  double tokens_per_s = 0;       // one sequence at context 0
  double tokens_per_s_full = 0;  // one sequence at max_model_len
};

struct Plan {
  PlanModel model;
  PlanOptions options;  // max_model_len resolved
  WeightPlan weights;
  std::vector<KvPlan> kv;  // listed_kv_dtypes (and the chosen one if not among them)
  KvPlan chosen_kv;
  WorkingMemory working;
  MemoryTotal memory;
  bool fits = false;
  std::vector<Suggestion> suggestions;  // when it does not fit
  DecodeCeiling ceiling;
  std::vector<DeviceFit> devices;
};

// Throws tern::Error for settings out of range (a context beyond the model's is allowed: RoPE
// scaling may stretch it, and the sums still hold).
Plan make_plan(const PlanModel& model, const PlanOptions& options);

// The weights as `options` makes them: the file's, the recipe's, or a config's torch_dtype.
WeightPlan plan_weights(const PlanModel& model, const std::optional<QuantRecipe>& recipe);

}  // namespace tern::plan
