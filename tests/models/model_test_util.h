// Shared by the model tests: configs shrunk for speed, temporary folders, logit comparisons.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "fixtures.h"
#include "tern/formats/model_config.h"

namespace tern::testing {

// A folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(std::filesystem::temp_directory_path() /
              ("tern-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A fixture config.json with some fields replaced ("num_hidden_layers": 1, …), as a ModelConfig.
inline ModelConfig shrunk_config(const std::string& fixture_dir, const nlohmann::json& overrides) {
  std::ifstream in(fixture(fixture_dir + "/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  for (auto it = overrides.begin(); it != overrides.end(); ++it) j[it.key()] = it.value();
  return ModelConfig::from_hf_json(j.dump(), fixture_dir + " (shrunk)");
}

// rms(a - b) / rms(b): the relative error of a against the reference b.
inline double relative_rms_error(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

inline bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace tern::testing
