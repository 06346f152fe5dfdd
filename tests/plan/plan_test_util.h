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

inline plan::PlanModel fixture_plan_model(const std::string& name) {
  return plan::open_plan_model(fixture(model_config_fixture(name)));
}

}  // namespace tern::testing
