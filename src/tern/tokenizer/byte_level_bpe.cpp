// Byte-level BPE encoding: NFC, regex pre-tokens, GPT-2 byte alphabet, rank-ordered merges
// with a heap over candidate pairs (O(n log n) per pre-token, no per-token allocation).
#include "tern/tokenizer/byte_level_bpe.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

#include "tern/core/error.h"
#include "tern/tokenizer/pre_tokenizer.h"

namespace tern {
namespace {

// GPT-2's byte → unicode alphabet: printable Latin-1 bytes stand for themselves, the other 68
// (controls, space, 0x7F..0xA0, 0xAD) become U+0100.. in byte order, so that every byte has a
// visible, non-space character.
struct ByteAlphabet {
  std::array<char32_t, 256> code_point{};
  std::array<std::array<char, 2>, 256> utf8{};  // each code point is < U+0800: 1 or 2 bytes
  std::array<uint8_t, 256> utf8_length{};
  std::array<int16_t, 324> byte_of{};  // code point → byte, -1 outside the alphabet

  ByteAlphabet() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      code_point[b] = cp;
      byte_of[cp] = static_cast<int16_t>(b);
      if (cp < 0x80) {
        utf8[b] = {static_cast<char>(cp), 0};
        utf8_length[b] = 1;
      } else {
        utf8[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
        utf8_length[b] = 2;
      }
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

}  // namespace

// (left id, right id) → (rank, merged id), open addressing with linear probing: the lookup
// runs for every candidate pair, so it must be a couple of cache misses at most. Outside the
// anonymous namespace, as ByteLevelBpe::Impl (the header's) holds one.
class BpeMergeTable {
 public:
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t merged = 0;
  };

  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
  }

  // Keeps the first (lowest-rank) entry of a duplicated pair.
  void insert(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, rank, merged};
        return;
      }
    }
  }

  const Slot* find(int32_t left, int32_t right) const {
    const uint64_t key = make_key(left, right);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative: never a real key
  static uint64_t make_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t hash(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 29) & mask_;
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

namespace {

// A pair of adjacent symbols that could merge. Symbols are identified by the byte offset they
// start at within the pre-token; the pair is still current when both symbols still have the
// lengths recorded here (a symbol's content is fixed by its start and length).
struct Candidate {
  int32_t rank;
  uint32_t start;
  uint32_t left_length;
  uint32_t right_length;
  int32_t merged;
};

// Min-heap order: lowest rank first, the leftmost pair among equal ranks (as Hugging Face does).
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.start > b.start;
  }
};

// Buffers reused across the pre-tokens of one encode() call.
struct Scratch {
  std::vector<std::pair<size_t, size_t>> pieces;
  std::vector<int32_t> id;       // id[start] of the symbol starting at `start`
  std::vector<uint32_t> length;  // 0 for offsets inside a symbol
  std::vector<uint32_t> prev;    // start of the previous symbol (valid for live symbols)
  std::vector<Candidate> heap;
  std::string token_text;
};

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// NFC of `text` into `out`. Only runs of non-ASCII characters (with the ASCII character before
// them, which a combining mark may compose with) go through utf8proc: ASCII characters are
// NFC starters that nothing composes onto, so cutting before them does not change the result.
// A run that is not valid UTF-8 is kept as it is.
void append_nfc(std::string_view text, std::string& out) {
  out.reserve(out.size() + text.size());
  size_t i = 0;
  while (i < text.size()) {
    const bool ascii = static_cast<unsigned char>(text[i]) < 0x80;
    if (ascii && (i + 1 == text.size() || static_cast<unsigned char>(text[i + 1]) < 0x80)) {
      out.push_back(text[i++]);
      continue;
    }
    size_t end = i + 1;
    while (end < text.size() && static_cast<unsigned char>(text[end]) >= 0x80) ++end;
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                     static_cast<utf8proc_ssize_t>(end - i), &mapped,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n >= 0)
      out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    else
      out.append(text.substr(i, end - i));
    std::free(mapped);
    i = end;
  }
}

}  // namespace

PreTokenizer pre_tokenizer_from_gguf(std::string_view pre) {
  // The names llama.cpp's converter writes for these regexes (llama-vocab.cpp maps the same
  // names to its GPT2, LLAMA3, QWEN2 and GPT4O pre-tokenizer types). "default" is not GPT-2:
  // llama.cpp splits it with a different set of regexes.
  if (pre == "gpt-2") return PreTokenizer::Gpt2;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return PreTokenizer::Llama3;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return PreTokenizer::Qwen2;
  if (pre == "gpt-4o") return PreTokenizer::O200k;
  throw Error("tokenizer.ggml.pre: pre-tokenizer '" + std::string(pre) +
              "' is not supported (known: gpt-2, llama-bpe, llama3, llama-v3, qwen2, "
              "deepseek-r1-qwen, gpt-4o)");
}

ByteLevelBpeOptions default_byte_level_options(PreTokenizer pre_tokenizer) {
  ByteLevelBpeOptions options;
  options.pre_tokenizer = pre_tokenizer;
  options.nfc = pre_tokenizer == PreTokenizer::Qwen2;
  // Both vocabularies come from tiktoken, which looks a whole pre-token up in its ranks before
  // merging (llama.cpp leaves this off for gpt-4o; tiktoken is the reference gpt-oss was
  // trained with, so tern follows it).
  options.ignore_merges =
      pre_tokenizer == PreTokenizer::Llama3 || pre_tokenizer == PreTokenizer::O200k;
  return options;
}

struct ByteLevelBpe::Impl {
  const Vocab* vocab;
  ByteLevelBpeOptions options;
  PreTokenizerRegex regex;
  std::array<int32_t, 256> byte_id{};  // -1: the vocabulary lacks that byte
  BpeMergeTable merges;

  Impl(const Vocab& v, ByteLevelBpeOptions o) : vocab(&v), options(o), regex(o.pre_tokenizer) {}

  void push_candidate(Scratch& s, uint32_t left, uint32_t right) const {
    const int32_t a = s.id[left];
    const int32_t b = s.id[right];
    if (a < 0 || b < 0) return;
    const BpeMergeTable::Slot* slot = merges.find(a, b);
    if (slot == nullptr) return;
    s.heap.push_back(Candidate{slot->rank, left, s.length[left], s.length[right], slot->merged});
    std::push_heap(s.heap.begin(), s.heap.end(), LaterCandidate{});
  }

  void encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
    const ByteAlphabet& abc = alphabet();
    if (piece.size() == 1) {
      const int32_t id = byte_id[static_cast<unsigned char>(piece[0])];
      if (id >= 0) out.push_back(id);
      return;
    }
    if (options.ignore_merges) {
      s.token_text.clear();
      for (char c : piece) {
        const auto b = static_cast<unsigned char>(c);
        s.token_text.append(abc.utf8[b].data(), abc.utf8_length[b]);
      }
      if (std::optional<int32_t> whole = vocab->find(s.token_text)) {
        out.push_back(*whole);
        return;
      }
    }
    const auto n = static_cast<uint32_t>(piece.size());
    s.id.resize(n);
    s.length.resize(n);
    s.prev.resize(n);
    s.heap.clear();
    for (uint32_t i = 0; i < n; ++i) {
      s.id[i] = byte_id[static_cast<unsigned char>(piece[i])];
      s.length[i] = 1;
      s.prev[i] = i - 1;  // wraps for i == 0; never read there
    }
    for (uint32_t i = 0; i + 1 < n; ++i) push_candidate(s, i, i + 1);
    while (!s.heap.empty()) {
      std::pop_heap(s.heap.begin(), s.heap.end(), LaterCandidate{});
      const Candidate c = s.heap.back();
      s.heap.pop_back();
      const uint32_t right = c.start + c.left_length;
      if (s.length[c.start] != c.left_length || right >= n || s.length[right] != c.right_length)
        continue;  // one side has merged with something else since
      s.id[c.start] = c.merged;
      s.length[c.start] += s.length[right];
      s.length[right] = 0;
      const uint32_t next = c.start + s.length[c.start];
      if (next < n) s.prev[next] = c.start;
      if (c.start > 0) push_candidate(s, s.prev[c.start], c.start);
      if (next < n) push_candidate(s, c.start, next);
    }
    for (uint32_t i = 0; i < n; i += s.length[i])
      if (s.id[i] >= 0) out.push_back(s.id[i]);
  }
};

ByteLevelBpe::ByteLevelBpe(const Vocab& vocab, const std::vector<std::string>& merges,
                           ByteLevelBpeOptions options)
    : impl_(std::make_unique<Impl>(vocab, options)) {
  for (int b = 0; b < 256; ++b) {
    const std::string text = bytes_to_token_text(std::string(1, static_cast<char>(b)));
    impl_->byte_id[b] = vocab.find(text).value_or(-1);
  }
  impl_->merges.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    const auto where = [&] {
      return "byte-level BPE: merge " + std::to_string(rank + 1) + " '" + merge + "'";
    };
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos)
      throw Error(where() + " is not two tokens separated by one space");
    const std::string_view left = std::string_view(merge).substr(0, space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    joined.assign(left).append(right);
    const std::optional<int32_t> left_id = vocab.find(left);
    const std::optional<int32_t> right_id = vocab.find(right);
    const std::optional<int32_t> merged_id = vocab.find(joined);
    if (!left_id) throw Error(where() + ": '" + std::string(left) + "' is not in the vocabulary");
    if (!right_id) throw Error(where() + ": '" + std::string(right) + "' is not in the vocabulary");
    if (!merged_id) throw Error(where() + ": the result '" + joined + "' is not in the vocabulary");
    impl_->merges.insert(*left_id, *right_id, static_cast<int32_t>(rank), *merged_id);
  }
}

ByteLevelBpe::~ByteLevelBpe() = default;
ByteLevelBpe::ByteLevelBpe(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe& ByteLevelBpe::operator=(ByteLevelBpe&&) noexcept = default;

void ByteLevelBpe::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::string normalized;
  if (impl_->options.nfc && !is_ascii(text)) {
    append_nfc(text, normalized);
    text = normalized;
  }
  Scratch scratch;
  impl_->regex.split(text, scratch.pieces);
  for (const auto& [begin, end] : scratch.pieces)
    impl_->encode_piece(text.substr(begin, end - begin), scratch, out);
}

std::string ByteLevelBpe::token_text_to_bytes(std::string_view token_text) {
  const ByteAlphabet& abc = alphabet();
  std::string bytes;
  bytes.reserve(token_text.size());
  size_t i = 0;
  while (i < token_text.size()) {
    const auto lead = static_cast<unsigned char>(token_text[i]);
    if (lead < 0x80) {
      const int16_t b = abc.byte_of[lead];
      bytes.push_back(b >= 0 ? static_cast<char>(b) : static_cast<char>(lead));
      ++i;
      continue;
    }
    // The alphabet's other characters are all two-byte sequences (U+00A1..U+0143).
    if (lead >= 0xC2 && lead <= 0xDF && i + 1 < token_text.size()) {
      const auto trail = static_cast<unsigned char>(token_text[i + 1]);
      if ((trail & 0xC0) == 0x80) {
        const char32_t cp = (static_cast<char32_t>(lead & 0x1F) << 6) | (trail & 0x3F);
        if (cp < abc.byte_of.size() && abc.byte_of[cp] >= 0) {
          bytes.push_back(static_cast<char>(abc.byte_of[cp]));
          i += 2;
          continue;
        }
      }
    }
    bytes.push_back(static_cast<char>(lead));  // outside the alphabet: kept as it is
    ++i;
  }
  return bytes;
}

std::string ByteLevelBpe::bytes_to_token_text(std::string_view bytes) {
  const ByteAlphabet& abc = alphabet();
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    text.append(abc.utf8[b].data(), abc.utf8_length[b]);
  }
  return text;
}

}  // namespace tern
