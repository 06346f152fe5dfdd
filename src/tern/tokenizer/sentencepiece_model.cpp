#include "tern/tokenizer/sentencepiece_model.h"

#include <cstring>
#include <string_view>

#include "tern/core/error.h"
#include "tern/core/mapped_file.h"
#include "tern/core/utf8.h"

namespace tern {
namespace {

enum class WireType : uint32_t { Varint = 0, Fixed64 = 1, Len = 2, Fixed32 = 5 };

std::string_view wire_type_name(uint32_t wire) {
  switch (wire) {
    case 0:
      return "varint";
    case 1:
      return "fixed64";
    case 2:
      return "length-delimited";
    case 3:
      return "start-group";
    case 4:
      return "end-group";
    case 5:
      return "fixed32";
    default:
      return "invalid";
  }
}

// Reads one protobuf message (a byte range of the file); `where` names it in errors, e.g.
// "trainer_spec". Offsets in messages are absolute file offsets so a reader can find the spot.
class WireReader {
 public:
  WireReader(std::span<const std::byte> bytes, size_t begin, size_t end, const std::string& name,
             std::string where)
      : bytes_(bytes), pos_(begin), end_(end), name_(name), where_(std::move(where)) {}

  bool done() const { return pos_ >= end_; }
  size_t pos() const { return pos_; }

  // Reads a field key; returns false at the end of the message.
  bool next(uint32_t& field, uint32_t& wire) {
    if (done()) return false;
    const size_t at = pos_;
    const uint64_t key = varint();
    wire = static_cast<uint32_t>(key & 7);
    const uint64_t number = key >> 3;
    if (number == 0 || number > 0x1FFFFFFF)
      fail(at, "invalid field number " + std::to_string(number));
    field = static_cast<uint32_t>(number);
    if (wire == 3 || wire == 4 || wire > 5)
      fail(at, "field " + std::to_string(field) + " has unsupported wire type " +
                   std::to_string(wire) + " (" + std::string(wire_type_name(wire)) + ")");
    return true;
  }

  void expect(uint32_t field, uint32_t wire, WireType want, std::string_view field_name) {
    if (wire != static_cast<uint32_t>(want))
      fail(pos_, std::string(field_name) + " (field " + std::to_string(field) + ") has wire type " +
                     std::string(wire_type_name(wire)) + ", expected " +
                     std::string(wire_type_name(static_cast<uint32_t>(want))));
  }

  uint64_t varint() {
    const size_t at = pos_;
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= end_) fail(at, "varint runs past the end of the message");
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      // The tenth byte may only carry the top bit of a 64-bit value.
      if (i == 9 && b > 1) fail(at, "varint overflows 64 bits");
      value |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) return value;
    }
    fail(at, "varint longer than 10 bytes");
  }

  float fixed32_float() {
    if (end_ - pos_ < 4) fail(pos_, "fixed32 runs past the end of the message");
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }

  // A length-delimited payload: returns its [begin, end) and moves past it.
  std::pair<size_t, size_t> bytes_field() {
    const size_t at = pos_;
    const uint64_t len = varint();
    if (len > end_ - pos_)
      fail(at, "length " + std::to_string(len) + " runs past the end of the " + where_ + " (" +
                   std::to_string(end_ - pos_) + " bytes left)");
    const size_t begin = pos_;
    pos_ += static_cast<size_t>(len);
    return {begin, pos_};
  }

  std::string_view string_field() {
    auto [b, e] = bytes_field();
    return {reinterpret_cast<const char*>(bytes_.data()) + b, e - b};
  }

  void skip(uint32_t wire) {
    switch (wire) {
      case 0:
        varint();
        break;
      case 1:
        if (end_ - pos_ < 8) fail(pos_, "fixed64 runs past the end of the message");
        pos_ += 8;
        break;
      case 2:
        bytes_field();
        break;
      case 5:
        if (end_ - pos_ < 4) fail(pos_, "fixed32 runs past the end of the message");
        pos_ += 4;
        break;
      default:
        fail(pos_, "cannot skip wire type " + std::to_string(wire));
    }
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw Error(name_ + ": malformed SentencePiece model: " + where_ + " at byte " +
                std::to_string(at) + ": " + what);
  }

 private:
  std::span<const std::byte> bytes_;
  size_t pos_;
  size_t end_;
  const std::string& name_;
  std::string where_;
};

void parse_piece(std::span<const std::byte> bytes, size_t begin, size_t end,
                 const std::string& name, SentencePieceModel& model) {
  const size_t index = model.vocab.tokens.size();
  WireReader r(bytes, begin, end, name, "piece " + std::to_string(index));
  std::string piece;
  float score = 0.0f;
  int64_t type = 1;  // NORMAL
  uint32_t field, wire;
  while (r.next(field, wire)) {
    switch (field) {
      case 1:
        r.expect(field, wire, WireType::Len, "piece");
        piece = r.string_field();
        break;
      case 2:
        r.expect(field, wire, WireType::Fixed32, "score");
        score = r.fixed32_float();
        break;
      case 3:
        r.expect(field, wire, WireType::Varint, "type");
        type = static_cast<int64_t>(r.varint());
        break;
      default:
        r.skip(wire);
    }
  }
  if (piece.empty()) r.fail(begin, "empty piece");
  if (!is_valid_utf8(piece)) r.fail(begin, "piece is not valid UTF-8");
  if (type < 1 || type > 6) r.fail(begin, "unknown piece type " + std::to_string(type));
  model.vocab.tokens.push_back(std::move(piece));
  model.vocab.scores.push_back(score);
  model.vocab.types.push_back(static_cast<TokenType>(type));
}

// proto int32 fields travel as 64-bit varints; the value is the low 32 bits, sign included.
int32_t as_int32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

void parse_trainer_spec(std::span<const std::byte> bytes, size_t begin, size_t end,
                        const std::string& name, SentencePieceModel& model, int32_t (&ids)[4]) {
  WireReader r(bytes, begin, end, name, "trainer_spec");
  uint32_t field, wire;
  while (r.next(field, wire)) {
    switch (field) {
      case 3:
        r.expect(field, wire, WireType::Varint, "model_type");
        model.model_type = static_cast<SentencePieceModelType>(as_int32(r.varint()));
        break;
      case 35:
        r.expect(field, wire, WireType::Varint, "byte_fallback");
        model.byte_fallback = r.varint() != 0;
        break;
      case 40:
      case 41:
      case 42:
      case 43:
        r.expect(field, wire, WireType::Varint, "special id");
        ids[field - 40] = as_int32(r.varint());
        break;
      default:
        r.skip(wire);
    }
  }
}

void parse_normalizer_spec(std::span<const std::byte> bytes, size_t begin, size_t end,
                           const std::string& name, SentencePieceModel& model) {
  WireReader r(bytes, begin, end, name, "normalizer_spec");
  uint32_t field, wire;
  while (r.next(field, wire)) {
    switch (field) {
      case 3:
        r.expect(field, wire, WireType::Varint, "add_dummy_prefix");
        model.add_dummy_prefix = r.varint() != 0;
        break;
      case 4:
        r.expect(field, wire, WireType::Varint, "remove_extra_whitespaces");
        model.remove_extra_whitespaces = r.varint() != 0;
        break;
      case 5:
        r.expect(field, wire, WireType::Varint, "escape_whitespaces");
        model.escape_whitespaces = r.varint() != 0;
        break;
      default:
        r.skip(wire);
    }
  }
}

std::string_view model_type_name(SentencePieceModelType type) {
  switch (type) {
    case SentencePieceModelType::Unigram:
      return "UNIGRAM";
    case SentencePieceModelType::Bpe:
      return "BPE";
    case SentencePieceModelType::Word:
      return "WORD";
    case SentencePieceModelType::Char:
      return "CHAR";
  }
  return "unknown";
}

}  // namespace

SentencePieceModel parse_sentencepiece_model(std::span<const std::byte> bytes,
                                             const std::string& name) {
  SentencePieceModel model;
  int32_t ids[4] = {0, 1, 2, -1};  // unk, bos, eos, pad: the TrainerSpec defaults
  WireReader r(bytes, 0, bytes.size(), name, "ModelProto");
  uint32_t field, wire;
  while (r.next(field, wire)) {
    switch (field) {
      case 1: {
        r.expect(field, wire, WireType::Len, "pieces");
        auto [b, e] = r.bytes_field();
        parse_piece(bytes, b, e, name, model);
        break;
      }
      case 2: {
        r.expect(field, wire, WireType::Len, "trainer_spec");
        auto [b, e] = r.bytes_field();
        parse_trainer_spec(bytes, b, e, name, model, ids);
        break;
      }
      case 3: {
        r.expect(field, wire, WireType::Len, "normalizer_spec");
        auto [b, e] = r.bytes_field();
        parse_normalizer_spec(bytes, b, e, name, model);
        break;
      }
      default:
        r.skip(wire);
    }
  }

  if (model.vocab.tokens.empty()) throw Error(name + ": SentencePiece model has no pieces");
  if (model.model_type != SentencePieceModelType::Bpe) {
    const int32_t t = static_cast<int32_t>(model.model_type);
    throw Error(name + ": SentencePiece model_type " + std::to_string(t) + " (" +
                std::string(model_type_name(model.model_type)) +
                ") is not supported; tern reads only BPE models");
  }

  const char* id_names[4] = {"unk_id", "bos_id", "eos_id", "pad_id"};
  std::optional<int32_t>* id_slots[4] = {&model.unk_id, &model.bos_id, &model.eos_id,
                                         &model.pad_id};
  for (int i = 0; i < 4; ++i) {
    if (ids[i] < 0) continue;
    if (ids[i] >= model.vocab.size())
      throw Error(name + ": SentencePiece " + id_names[i] + " " + std::to_string(ids[i]) +
                  " is outside the vocabulary of " + std::to_string(model.vocab.size()) +
                  " pieces");
    *id_slots[i] = ids[i];
  }
  model.vocab.build_index();
  return model;
}

SentencePieceModel read_sentencepiece_model(const std::string& path) {
  MappedFile file(path);
  return parse_sentencepiece_model(file.bytes(), path);
}

}  // namespace tern
