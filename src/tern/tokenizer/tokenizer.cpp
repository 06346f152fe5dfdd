#include "tern/tokenizer/tokenizer.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer_impl.h"

namespace tern {

void Tokenizer::Impl::derive_token_flags() {
  const size_t n = vocab.tokens.size();
  match.assign(n, TokenMatch::Never);
  special.assign(n, 0);
  for (size_t id = 0; id < n && id < vocab.types.size(); ++id) {
    switch (vocab.types[id]) {
      case TokenType::Control:
        match[id] = TokenMatch::ParseSpecial;
        special[id] = 1;
        break;
      case TokenType::UserDefined:
        match[id] = TokenMatch::Always;
        break;
      case TokenType::Unknown:
        special[id] = 1;
        break;
      default:
        break;
    }
  }
}

void Tokenizer::Impl::finalize() {
  const int32_t n = vocab.size();
  if (n == 0) throw Error(name + ": the tokenizer has an empty vocabulary");
  if (vocab.types.size() != vocab.tokens.size())
    vocab.types.resize(vocab.tokens.size(), TokenType::Normal);
  if (match.size() != vocab.tokens.size() || special.size() != vocab.tokens.size())
    derive_token_flags();
  vocab.build_index();

  auto check = [&](const std::optional<int32_t>& id, const char* what) {
    if (id && (*id < 0 || *id >= n))
      throw Error(name + ": " + what + " id " + std::to_string(*id) +
                  " is outside the vocabulary of " + std::to_string(n) + " tokens");
  };
  check(bos, "bos");
  check(eos, "eos");
  check(unk, "unk");
  check(pad, "pad");
  for (int32_t id : eos_ids) check(id, "end-of-generation");
  if (eos && std::find(eos_ids.begin(), eos_ids.end(), *eos) == eos_ids.end())
    eos_ids.insert(eos_ids.begin(), *eos);

  piece_bytes.resize(vocab.tokens.size());
  if (kind == TokenizerKind::SentencePieceBpe) {
    spm_options.unk_id = unk;
    try {
      spm.emplace(vocab, spm_options);
    } catch (const Error& e) {
      throw Error(name + ": " + e.what());
    }
    strip_leading_space = spm_options.add_dummy_prefix;
    for (int32_t id = 0; id < n; ++id) {
      const auto i = static_cast<size_t>(id);
      const std::string& text = vocab.tokens[i];
      const TokenType type = vocab.types[i];
      std::string& bytes = piece_bytes[i];
      if (match[i] != TokenMatch::Never || special[i]) {
        bytes = text;  // matched literally in raw text, so shown literally
      } else if (auto b = parse_byte_piece(text);
                 b && (type == TokenType::Byte || type == TokenType::Normal ||
                       type == TokenType::Undefined)) {
        bytes.assign(1, static_cast<char>(*b));
      } else {
        for (size_t pos = 0; pos < text.size();) {
          if (text.compare(pos, kSpmSpace.size(), kSpmSpace) == 0) {
            bytes.push_back(' ');
            pos += kSpmSpace.size();
          } else {
            bytes.push_back(text[pos++]);
          }
        }
      }
    }
  } else {
    try {
      byte_bpe = std::make_unique<ByteLevelBpe>(vocab, merges, byte_level);
    } catch (const Error& e) {
      throw Error(name + ": " + e.what());
    }
    for (size_t i = 0; i < vocab.tokens.size(); ++i) {
      piece_bytes[i] = match[i] != TokenMatch::Never || special[i]
                           ? vocab.tokens[i]
                           : ByteLevelBpe::token_text_to_bytes(vocab.tokens[i]);
    }
  }

  for (auto& c : candidates) c.clear();
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab.tokens[static_cast<size_t>(id)];
    if (match[static_cast<size_t>(id)] == TokenMatch::Never || text.empty()) continue;
    candidates[static_cast<uint8_t>(text[0])].push_back(id);
  }
  for (auto& c : candidates) {
    std::stable_sort(c.begin(), c.end(), [&](int32_t a, int32_t b) {
      return vocab.tokens[static_cast<size_t>(a)].size() >
             vocab.tokens[static_cast<size_t>(b)].size();
    });
  }
}

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (spm)
    spm->encode(text, out);
  else
    byte_bpe->encode(text, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special) const {
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens && t.add_bos && t.bos) out.push_back(*t.bos);
  size_t segment = 0;
  for (size_t pos = 0; pos < text.size();) {
    int32_t hit = -1;
    for (int32_t id : t.candidates[static_cast<uint8_t>(text[pos])]) {
      const auto i = static_cast<size_t>(id);
      if (t.match[i] == TokenMatch::ParseSpecial && !parse_special) continue;
      if (text.substr(pos).starts_with(t.vocab.tokens[i])) {
        hit = id;
        break;  // candidates are sorted longest first
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    t.encode_plain(text.substr(segment, pos - segment), out);
    out.push_back(hit);
    pos += t.vocab.tokens[static_cast<size_t>(hit)].size();
    segment = pos;
  }
  t.encode_plain(text.substr(segment), out);
  if (add_special_tokens && t.add_eos && t.eos) out.push_back(*t.eos);
  return out;
}

void Tokenizer::decode_append(int32_t id, bool skip_special_tokens, bool& at_text_start,
                              std::string& out) const {
  const Impl& t = *impl_;
  const std::string& bytes = token_bytes(id);
  const auto i = static_cast<size_t>(id);
  if (t.special[i] && skip_special_tokens) return;
  if (t.match[i] != TokenMatch::Never || t.special[i]) {
    // encode adds a dummy prefix to the text after a matched token; take it off again.
    out += bytes;
    at_text_start = true;
    return;
  }
  if (at_text_start && t.strip_leading_space && !bytes.empty() && bytes[0] == ' ')
    out.append(bytes, 1);
  else
    out += bytes;
  at_text_start = false;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string out;
  bool at_text_start = true;
  for (int32_t id : ids) decode_append(id, skip_special_tokens, at_text_start, out);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size())
    throw Error(impl_->name + ": token id " + std::to_string(id) +
                " is outside the vocabulary of " + std::to_string(impl_->vocab.size()) + " tokens");
  return impl_->piece_bytes[static_cast<size_t>(id)];
}

TokenizerKind Tokenizer::kind() const { return impl_->kind; }
const Vocab& Tokenizer::vocab() const { return impl_->vocab; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->unk; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->eos_ids; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size()) return false;
  return impl_->special[static_cast<size_t>(id)] != 0;
}

}  // namespace tern
