#include "tern/tokenizer/sentencepiece_bpe.h"

#include <cstdio>
#include <queue>

#include "tern/core/error.h"
#include "tern/core/utf8.h"

namespace tern {
namespace {

// A run of the normalised text that is one token candidate; symbols form a linked list that
// shrinks as pairs merge (the left symbol absorbs the right one).
struct Symbol {
  uint32_t start;
  uint32_t length;
  int32_t prev;
  int32_t next;
  int32_t id;  // vocabulary id of this text, -1 if none
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // left.length + right.length when queued: detects stale entries
  int32_t id;
};

struct BigramOrder {
  // std::priority_queue pops the largest: highest score, then the leftmost pair.
  bool operator()(const Bigram& a, const Bigram& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::optional<uint8_t> parse_byte_piece(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  const int hi = hex_value(text[3]), lo = hex_value(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

SentencePieceBpe::SentencePieceBpe(const Vocab& vocab, SentencePieceBpeOptions options)
    : vocab_(&vocab), options_(options) {
  if (vocab.scores.size() != vocab.tokens.size())
    throw Error("SentencePiece BPE: the vocabulary has " + std::to_string(vocab.scores.size()) +
                " scores for " + std::to_string(vocab.tokens.size()) + " tokens");
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    const auto id = vocab.find(text);
    byte_tokens_[static_cast<size_t>(b)] = id ? *id : -1;
    all_bytes = all_bytes && id.has_value();
  }
  if (options_.unk_id && (*options_.unk_id < 0 || *options_.unk_id >= vocab.size()))
    throw Error("SentencePiece BPE: unk id " + std::to_string(*options_.unk_id) +
                " is outside the vocabulary");
  if (!options_.unk_id && !(options_.byte_fallback && all_bytes))
    throw Error(
        "SentencePiece BPE: the vocabulary has neither an unknown token nor all 256 "
        "byte-fallback pieces, so some text could not be encoded");
}

bool SentencePieceBpe::mergeable(int32_t id) const {
  // Control, unknown and byte pieces are never the result of a merge (SentencePiece keeps
  // them out of its piece table); "<0x41>" typed by a user stays six characters.
  const TokenType t =
      vocab_->types.empty() ? TokenType::Normal : vocab_->types[static_cast<size_t>(id)];
  return t != TokenType::Control && t != TokenType::Unknown && t != TokenType::Byte;
}

std::string SentencePieceBpe::normalize(std::string_view text) const {
  std::string spaced;
  if (options_.remove_extra_whitespaces) {
    spaced.reserve(text.size());
    bool pending_space = false;
    for (char c : text) {
      if (c == ' ') {
        pending_space = !spaced.empty();
        continue;
      }
      if (pending_space) spaced.push_back(' ');
      pending_space = false;
      spaced.push_back(c);
    }
  } else {
    spaced.assign(text);
  }
  if (spaced.empty()) return spaced;

  std::string out;
  out.reserve(spaced.size() + spaced.size() / 4 + 3);
  const std::string_view space = options_.escape_whitespaces ? kSpmSpace : std::string_view(" ");
  if (options_.add_dummy_prefix) out.append(space);
  for (char c : spaced) {
    if (c == ' ')
      out.append(space);
    else
      out.push_back(c);
  }
  return out;
}

void SentencePieceBpe::encode(std::string_view raw, std::vector<int32_t>& out) const {
  const std::string text = normalize(raw);
  if (text.empty()) return;

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = next_utf8_char(text, pos);
    // An ill-formed byte is a symbol of its own; byte fallback keeps it intact.
    const size_t len = c.status == Utf8Status::Complete ? c.length : 1;
    const auto id = vocab_->find(std::string_view(text).substr(pos, len));
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), index - 1, index + 1,
                       id ? *id : -1});
    pos += len;
  }
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const uint32_t length = l.length + r.length;
    const auto id = vocab_->find(std::string_view(text).substr(l.start, length));
    if (!id || !mergeable(*id)) return;
    queue.push({vocab_->scores[static_cast<size_t>(*id)], left, right, length, *id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) try_pair(i, i + 1);

  while (!queue.empty()) {
    const Bigram top = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(top.left)];
    Symbol& r = symbols[static_cast<size_t>(top.right)];
    // Stale: one side was merged away or grew since this pair was queued.
    if (l.length == 0 || r.length == 0 || l.next != top.right || l.length + r.length != top.length)
      continue;
    l.length = top.length;
    l.id = top.id;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = top.left;
    r.length = 0;
    try_pair(l.prev, top.left);
    try_pair(top.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    bool bytes_ok = options_.byte_fallback;
    for (uint32_t k = 0; k < s.length && bytes_ok; ++k)
      bytes_ok = byte_tokens_[static_cast<uint8_t>(text[s.start + k])] >= 0;
    if (bytes_ok) {
      for (uint32_t k = 0; k < s.length; ++k)
        out.push_back(byte_tokens_[static_cast<uint8_t>(text[s.start + k])]);
    } else {
      out.push_back(*options_.unk_id);
    }
  }
}

}  // namespace tern
