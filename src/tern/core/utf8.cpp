#include "tern/core/utf8.h"

namespace tern {

Utf8Char next_utf8_char(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return {Utf8Status::Complete, 1};
  size_t need = 0;
  // The allowed range of the second byte encodes the overlong/surrogate/max rules
  // (Unicode Table 3-7, well-formed byte sequences).
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Status::Invalid, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= s.size()) return {Utf8Status::Incomplete, i};
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80;
    const unsigned char h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return {Utf8Status::Invalid, i};
  }
  return {Utf8Status::Complete, need};
}

std::optional<size_t> first_invalid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = next_utf8_char(s, pos);
    if (c.status != Utf8Status::Complete) return pos;
    pos += c.length;
  }
  return std::nullopt;
}

bool is_valid_utf8(std::string_view s) { return !first_invalid_utf8(s).has_value(); }

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = next_utf8_char(s, pos);
    if (c.status == Utf8Status::Complete) {
      out.append(s.substr(pos, c.length));
    } else {
      out.append(kReplacementChar);
    }
    pos += c.length;
  }
  return out;
}

}  // namespace tern
