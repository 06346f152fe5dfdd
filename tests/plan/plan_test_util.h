// Shared by the plan tests: the fixture configs as ModelConfig and PlanModel.
#pragma once

#include <string>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/model_config.h"
#include "tern/plan/plan_model.h"

namespace tern::testing {

// "qwen3-8b" → its config.json under model-configs/.
inline std::string model_config_fixture(const std::string& name) {
  return "model-configs/" + name + "/config.json";
}

inline ModelConfig fixture_config(const std::string& name) {
  const std::string path = fixture(model_config_fixture(name));
  return ModelConfig::from_hf_json(read_text_file(path), path);
}

// Qwen3-0.6B's features at a size a test can build weights for: `layers` layers of 256 hidden,
// 4 q heads and 2 kv heads of 64, ffn 512, vocabulary 512.
inline ModelConfig tiny_qwen3_config(int64_t layers, bool tied) {
  nlohmann::json overrides = {{"num_hidden_layers", layers},
                              {"vocab_size", 512},
                              {"hidden_size", 256},
                              {"intermediate_size", 512},
                              {"num_attention_heads", 4},
                              {"num_key_value_heads", 2},
                              {"head_dim", 64}};
  if (!tied) overrides["tie_word_embeddings"] = false;
  return shrunk_config("model-configs/qwen3-0.6b", overrides);
}

inline plan::PlanModel fixture_plan_model(const std::string& name) {
  return plan::open_plan_model(fixture(model_config_fixture(name)));
}

}  // namespace tern::testing
