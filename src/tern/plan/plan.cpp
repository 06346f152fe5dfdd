// make_plan: the weights, cache and working memory added up, the changes that would fit, and
// the decode ceilings here and on the known devices.
#include "tern/plan/plan.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/engine/engine_config.h"
#include "tern/models/model_loader.h"
#include "tern/plan/known_devices.h"

namespace tern::plan {
namespace {

// Smaller weight types to suggest, most bits first: the first that fits loses the least.
constexpr const char* kSmallerTypes[] = {"q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"};

struct Totals {
  const PlanModel& model;
  const PlanOptions& options;
  const Device& device;

  int64_t logit_rows(int64_t seqs) const { return std::min(seqs, options.max_num_batched_tokens); }

  MemoryTotal memory(const WeightPlan& w, KvDtype kv, int64_t len, int64_t seqs) const {
    MemoryTotal m;
    m.weights = w.total_bytes();
    m.repacked = w.repacked_bytes(device);
    m.kv_cache = plan_kv(model.config, kv, len, seqs, options.block_size, device).bytes;
    m.working = plan_working_memory(model.config, w, options.max_num_batched_tokens,
                                    logit_rows(seqs), device)
                    .total();
    return m;
  }
  bool fits(const WeightPlan& w, KvDtype kv, int64_t len, int64_t seqs) const {
    return memory(w, kv, len, seqs).total() <= options.device_memory;
  }
  // The longest context below `below` (whole blocks) that fits; 0 when not even one block does.
  int64_t longest_context(const WeightPlan& w, KvDtype kv, int64_t below, int64_t seqs) const {
    const int64_t b = options.block_size;
    int64_t lo = 0,
            hi = (below - 1) / b;  // in blocks; lo fits (0 = none), hi is the largest to try
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(w, kv, mid * b, seqs))
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo * b;
  }
};

std::vector<Suggestion> suggestions(const Totals& t, const WeightPlan& weights) {
  const PlanOptions& o = t.options;
  const KvDtype kv = o.kv_cache_dtype;
  const int64_t len = o.max_model_len, seqs = o.max_num_seqs;
  std::vector<Suggestion> out;
  auto add = [&](std::vector<std::pair<std::string, std::string>> flags, const WeightPlan& w,
                 KvDtype k, int64_t l, int64_t s) {
    out.push_back({std::move(flags), t.memory(w, k, l, s).total()});
  };

  std::optional<std::pair<std::string, WeightPlan>> smallest;
  for (const char* type : kSmallerTypes) {
    WeightPlan w = plan_weights(t.model, parse_weight_recipe(type));
    if (w.total_bytes() >= weights.total_bytes()) continue;
    const bool fits = t.fits(w, kv, len, seqs);
    if (fits) {
      add({{"--weight-type", type}}, w, kv, len, seqs);
      break;
    }
    smallest = {type, std::move(w)};
  }
  if (const int64_t l = t.longest_context(weights, kv, len, seqs); l > 0)
    add({{"--max-model-len", std::to_string(l)}}, weights, kv, l, seqs);
  const KvDtype fp8 = KvDtype::Fp8E4M3;
  const int block = o.block_size;
  if (kv_shape(t.model.config, kv, block).bytes_per_token() >
          kv_shape(t.model.config, fp8, block).bytes_per_token() &&
      t.fits(weights, fp8, len, seqs))
    add({{"--kv-cache-dtype", "fp8"}}, weights, fp8, len, seqs);
  if (seqs > 1) {
    int64_t lo = 0, hi = seqs - 1;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (t.fits(weights, kv, len, mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    if (lo > 0) add({{"--max-num-seqs", std::to_string(lo)}}, weights, kv, len, lo);
  }
  if (out.empty()) {
    // No one change is enough: the smallest weights, an 8-bit cache, one sequence, and the
    // longest context they leave room for.
    const WeightPlan& w = smallest ? smallest->second : weights;
    const KvDtype k = kv_shape(t.model.config, kv, block).bytes_per_token() >
                              kv_shape(t.model.config, fp8, block).bytes_per_token()
                          ? fp8
                          : kv;
    if (const int64_t l = t.longest_context(w, k, len + 1, 1); l > 0) {
      std::vector<std::pair<std::string, std::string>> flags;
      if (smallest) flags.emplace_back("--weight-type", smallest->first);
      if (k != kv) flags.emplace_back("--kv-cache-dtype", "fp8");
      if (seqs != 1) flags.emplace_back("--max-num-seqs", "1");
      if (l != len) flags.emplace_back("--max-model-len", std::to_string(l));
      add(std::move(flags), w, k, l, 1);
    }
  }
  return out;
}

}  // namespace

WeightPlan plan_weights(const PlanModel& model, const std::optional<QuantRecipe>& recipe) {
  if (recipe) return plan_recipe_weights(model.config, *recipe, model.tensors);
  if (!model.tensors.empty()) return plan_file_weights(model.config, model.tensors);
  return plan_checkpoint_weights(model.config, torch_dtype_weight_type(model.config.torch_dtype));
}

Plan make_plan(const PlanModel& model, const PlanOptions& options) {
  if (options.max_num_seqs < 1)
    throw Error("--max-num-seqs must be >= 1, got " + std::to_string(options.max_num_seqs));
  if (options.max_num_batched_tokens < 1)
    throw Error("--max-num-batched-tokens must be >= 1, got " +
                std::to_string(options.max_num_batched_tokens));
  if (options.block_size < 1)
    throw Error("--block-size must be >= 1, got " + std::to_string(options.block_size));
  if (options.max_model_len < 0)
    throw Error("--max-model-len must be >= 0, got " + std::to_string(options.max_model_len));
  check_max_model_len(options.max_model_len, model.config.max_position_embeddings);
  Plan p;
  p.model = model;
  p.options = options;
  if (p.options.max_model_len == 0) p.options.max_model_len = model.config.max_position_embeddings;
  if (p.options.max_model_len < 1)
    throw Error(model.name + ": the model states no context length; give --max-model-len");
  const PlanOptions& o = p.options;

  p.weights = plan_weights(model, o.recipe);
  std::vector<KvDtype> kv_dtypes = listed_kv_dtypes();
  if (std::find(kv_dtypes.begin(), kv_dtypes.end(), o.kv_cache_dtype) == kv_dtypes.end())
    kv_dtypes.push_back(o.kv_cache_dtype);
  const Device& device = find_device(o.device);
  for (KvDtype d : kv_dtypes)
    p.kv.push_back(plan_kv(model.config, d, o.max_model_len, o.max_num_seqs, o.block_size, device));
  p.chosen_kv = plan_kv(model.config, o.kv_cache_dtype, o.max_model_len, o.max_num_seqs,
                        o.block_size, device);

  const Totals totals{p.model, p.options, device};
  p.working = plan_working_memory(model.config, p.weights, o.max_num_batched_tokens,
                                  totals.logit_rows(o.max_num_seqs), device);
  p.memory = totals.memory(p.weights, o.kv_cache_dtype, o.max_model_len, o.max_num_seqs);
  p.fits = p.memory.total() <= o.device_memory;
  if (!p.fits) p.suggestions = suggestions(totals, p.weights);

  p.ceiling.bandwidth = o.bandwidth;
  p.ceiling.weight_bytes = p.weights.bytes_read_per_token();
  p.ceiling.kv_bytes_per_token = p.chosen_kv.bytes_per_token;
  for (const KnownDevice& d : known_devices()) {
    DecodeCeiling c = p.ceiling;
    c.bandwidth = d.bandwidth;
    p.devices.push_back({std::string(d.name), d.bandwidth, d.memory, p.memory.total() <= d.memory,
                         c.tokens_per_s(0), c.tokens_per_s(o.max_model_len)});
  }
  return p;
}

}  // namespace tern::plan
