#include "tern/tokenizer/vocab.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>

namespace tern {

std::optional<int32_t> Vocab::find(std::string_view text) const {
  if (index_.empty()) return std::nullopt;
  const uint64_t hash = XXH3_64bits(text.data(), text.size());
  const auto tag = static_cast<uint32_t>(hash >> 32);
  const size_t mask = index_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = index_[i];
    if (slot.id < 0) return std::nullopt;
    if (slot.tag == tag && tokens[static_cast<size_t>(slot.id)] == text) return slot.id;
  }
}

void Vocab::build_index() {
  index_.assign(std::bit_ceil(std::max<size_t>(16, tokens.size() * 2)), Slot{});
  const size_t mask = index_.size() - 1;
  for (int32_t id = 0; id < size(); ++id) {
    const std::string& text = tokens[static_cast<size_t>(id)];
    const uint64_t hash = XXH3_64bits(text.data(), text.size());
    const auto tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = index_[i];
      if (slot.id < 0) {
        slot = Slot{tag, id};
        break;
      }
      // A duplicate text keeps the lowest id, the one inserted first.
      if (slot.tag == tag && tokens[static_cast<size_t>(slot.id)] == text) break;
    }
  }
}

}  // namespace tern
