// Tokenizers the tests of one process share. ctest runs a whole suite in one process, and the
// Qwen tokenizer takes most of a second to load (several under the sanitizers): load each
// folder once, hand out copies (a Tokenizer shares its immutable tables, so a copy is cheap).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "fixtures.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::testing {

// The tokenizer of a fixture, e.g. shared_tokenizer("qwen-tokenizer").
inline Tokenizer shared_tokenizer(const std::string& relative) {
  static std::mutex mutex;
  static std::map<std::string, Tokenizer> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(relative);
  if (it == loaded.end()) it = loaded.emplace(relative, Tokenizer::load(fixture(relative))).first;
  return it->second;
}

}  // namespace tern::testing
