// GGUF metadata values: type names, accessors, display, and the byte-level helpers the reader
// and writer share.
#include <algorithm>
#include <charconv>
#include <limits>

#include "tern/core/utf8.h"
#include "tern/formats/gguf.h"
#include "tern/formats/gguf_detail.h"

namespace tern {

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
      return "uint8";
    case GgufType::INT8:
      return "int8";
    case GgufType::UINT16:
      return "uint16";
    case GgufType::INT16:
      return "int16";
    case GgufType::UINT32:
      return "uint32";
    case GgufType::INT32:
      return "int32";
    case GgufType::FLOAT32:
      return "float32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::UINT64:
      return "uint64";
    case GgufType::INT64:
      return "int64";
    case GgufType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::array(GgufType elem_type, std::vector<GgufValue> items) {
  auto arr = std::make_shared<GgufArray>();
  arr->elem_type = elem_type;
  arr->items = std::move(items);
  return {GgufType::ARRAY, std::move(arr)};
}

GgufValue GgufValue::string_array(const std::vector<std::string>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (const auto& s : items) values.push_back(string(s));
  return array(GgufType::STRING, std::move(values));
}

GgufValue GgufValue::f32_array(const std::vector<float>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (float f : items) values.push_back(f32(f));
  return array(GgufType::FLOAT32, std::move(values));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& items) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (int32_t i : items) values.push_back(i32(i));
  return array(GgufType::INT32, std::move(values));
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const { return type == GgufType::FLOAT32 || type == GgufType::FLOAT64; }

std::optional<int64_t> GgufValue::as_int() const {
  if (type == GgufType::BOOL) {
    if (const bool* b = std::get_if<bool>(&value)) return *b ? 1 : 0;
    return std::nullopt;
  }
  if (!is_integer()) return std::nullopt;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return *i;
  if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (!is_float() && !is_integer()) return std::nullopt;
  if (const double* d = std::get_if<double>(&value)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  if (const uint64_t* u = std::get_if<uint64_t>(&value)) return static_cast<double>(*u);
  return std::nullopt;
}

const std::string* GgufValue::as_string() const {
  return type == GgufType::STRING ? std::get_if<std::string>(&value) : nullptr;
}

const GgufArray* GgufValue::as_array() const {
  if (type != GgufType::ARRAY) return nullptr;
  const auto* p = std::get_if<std::shared_ptr<GgufArray>>(&value);
  return p != nullptr ? p->get() : nullptr;
}

namespace {

template <typename T>
std::string shortest(T v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

void display(const GgufValue& v, size_t max_items, std::string& out) {
  struct Visitor {
    const GgufValue& v;
    size_t max_items;
    std::string& out;
    void operator()(uint64_t u) const { out += std::to_string(u); }
    void operator()(int64_t i) const { out += std::to_string(i); }
    void operator()(double d) const {
      out += v.type == GgufType::FLOAT32 ? shortest(static_cast<float>(d)) : shortest(d);
    }
    void operator()(bool b) const { out += b ? "true" : "false"; }
    void operator()(const std::string& s) const { out += gguf_detail::quoted(s); }
    void operator()(const std::shared_ptr<GgufArray>& a) const {
      if (a == nullptr) {
        out += "[]";
        return;
      }
      out += '[';
      size_t shown = std::min(a->items.size(), max_items);
      for (size_t i = 0; i < shown; ++i) {
        if (i > 0) out += ", ";
        display(a->items[i], max_items, out);
      }
      if (shown < a->items.size()) {
        if (shown > 0) out += ", ";
        out += "... " + std::to_string(a->items.size() - shown) + " more";
      }
      out += ']';
    }
  };
  std::visit(Visitor{v, max_items, out}, v.value);
}

}  // namespace

std::string GgufValue::to_display(size_t max_items) const {
  std::string out;
  display(*this, max_items, out);
  return out;
}

namespace gguf_detail {

uint32_t scalar_size(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    case GgufType::STRING:
    case GgufType::ARRAY:
      return 0;
  }
  return 0;
}

uint32_t min_encoded_size(GgufType type) {
  if (type == GgufType::STRING) return 8;  // u64 length
  if (type == GgufType::ARRAY) return 12;  // u32 element type + u64 count
  return scalar_size(type);
}

std::string quoted(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    const Utf8Char ch = next_utf8_char(s, i);
    const size_t len = ch.status == Utf8Status::Complete ? ch.length : 0;
    if (len > 1) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    ++i;
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || len == 0) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace gguf_detail
}  // namespace tern
