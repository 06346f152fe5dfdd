#include "tern/tokenizer/vocab.h"

namespace tern {

std::optional<int32_t> Vocab::find(std::string_view text) const {
  auto it = index_.find(text);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

void Vocab::build_index() {
  index_.clear();
  index_.reserve(tokens.size());
  for (int32_t id = 0; id < size(); ++id) index_.emplace(tokens[static_cast<size_t>(id)], id);
}

}  // namespace tern
