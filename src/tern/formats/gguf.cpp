// The GGUF reader: one pass over the mapped bytes that checks every read against the end of
// the file and every count against the bytes left before anything is allocated, then checks
// the tensors against each other and the file.
#include "tern/formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>

#include "tern/core/error.h"
#include "tern/core/utf8.h"
#include "tern/formats/gguf_detail.h"

namespace tern {

using gguf_detail::quoted;

namespace {

// The fewest bytes of one metadata entry (empty key, u32 type, 1-byte value) and one tensor
// info (empty name, n_dims, one ne, type, offset): counts are checked against these.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr uint32_t kMaxDims = 4;
// Each array item becomes a GgufValue (48 bytes), so a file of a few GB could otherwise ask for
// a hundred GB of memory. Real vocabularies need about 1M items (tokens, scores, types, merges).
constexpr uint64_t kMaxMetadataItems = uint64_t{1} << 24;

}  // namespace

class GgufParser {
 public:
  explicit GgufParser(std::shared_ptr<const MappedFile> file)
      : file_(std::move(file)),
        data_(reinterpret_cast<const unsigned char*>(file_->data())),
        size_(file_->size()) {}

  GgufFile run() {
    GgufFile out;
    out.file_ = file_;
    read_header(out);
    read_metadata(out);
    read_alignment(out);
    read_tensor_infos(out);
    place_tensors(out);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::string msg = file_->path() + ": ";
    if (!context_.empty()) msg += context_ + ": ";
    throw Error(msg + what);
  }

  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail(std::string("truncated: ") + what + " at byte " + std::to_string(pos_) + " needs " +
           std::to_string(n) + " bytes, but the file ends at byte " + std::to_string(size_));
  }

  template <typename T>
  T read_le(const char* what) {
    need(sizeof(T), what);
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T{data_[pos_ + i]} << (8 * i));
    pos_ += sizeof(T);
    return v;
  }
  uint8_t u8(const char* what) { return read_le<uint8_t>(what); }
  uint16_t u16(const char* what) { return read_le<uint16_t>(what); }
  uint32_t u32(const char* what) { return read_le<uint32_t>(what); }
  uint64_t u64(const char* what) { return read_le<uint64_t>(what); }

  std::string_view str(const char* what) {
    uint64_t at = pos_;
    uint64_t len = u64(what);
    if (len > remaining())
      fail(std::string(what) + " at byte " + std::to_string(at) + " has length " +
           std::to_string(len) + ", past the end of the file (" + std::to_string(size_) +
           " bytes): truncated or corrupt");
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  void read_header(GgufFile& out) {
    context_ = "header";
    need(4, "magic");
    if (std::memcmp(data_, "GGUF", 4) != 0) {
      std::string_view magic(reinterpret_cast<const char*>(data_), 4);
      fail("not a GGUF file: magic is " + quoted(magic) + ", expected \"GGUF\"");
    }
    pos_ = 4;
    uint32_t version = u32("version");
    if (version == 1)
      fail(
          "GGUF version 1 is not supported (tern reads versions 2 and 3; re-convert the model "
          "with a current llama.cpp)");
    if (version != 2 && version != 3) {
      uint32_t swapped = (version >> 24) | ((version >> 8) & 0xFF00) | ((version << 8) & 0xFF0000) |
                         (version << 24);
      if (swapped >= 1 && swapped <= 3)
        fail("unsupported GGUF version: the file is big-endian (version " +
             std::to_string(swapped) + "), and tern reads only little-endian files");
      fail("unsupported GGUF version " + std::to_string(version) +
           " (tern reads versions 2 and 3)");
    }
    out.version_ = version;
    tensor_count_ = u64("tensor_count");
    kv_count_ = u64("kv_count");
    if (kv_count_ > remaining() / kMinKvBytes)
      fail("kv_count " + std::to_string(kv_count_) + " cannot fit in the " +
           std::to_string(remaining()) + " bytes after the header (each entry takes at least " +
           std::to_string(kMinKvBytes) + "): truncated or corrupt");
    if (tensor_count_ > remaining() / kMinTensorInfoBytes)
      fail("tensor_count " + std::to_string(tensor_count_) + " cannot fit in the " +
           std::to_string(remaining()) +
           " bytes after the header (each tensor info takes at least " +
           std::to_string(kMinTensorInfoBytes) + "): truncated or corrupt");
    if (kv_count_ * kMinKvBytes + tensor_count_ * kMinTensorInfoBytes > remaining())
      fail("kv_count " + std::to_string(kv_count_) + " and tensor_count " +
           std::to_string(tensor_count_) + " cannot fit in the " + std::to_string(remaining()) +
           " bytes after the header: truncated or corrupt");
  }

  GgufValue value(uint32_t raw_type, int depth) {
    switch (static_cast<GgufType>(raw_type)) {
      case GgufType::UINT8:
        return {GgufType::UINT8, uint64_t{u8("uint8 value")}};
      case GgufType::INT8:
        return {GgufType::INT8, int64_t{static_cast<int8_t>(u8("int8 value"))}};
      case GgufType::UINT16:
        return {GgufType::UINT16, uint64_t{u16("uint16 value")}};
      case GgufType::INT16:
        return {GgufType::INT16, int64_t{static_cast<int16_t>(u16("int16 value"))}};
      case GgufType::UINT32:
        return {GgufType::UINT32, uint64_t{u32("uint32 value")}};
      case GgufType::INT32:
        return {GgufType::INT32, int64_t{static_cast<int32_t>(u32("int32 value"))}};
      case GgufType::UINT64:
        return {GgufType::UINT64, u64("uint64 value")};
      case GgufType::INT64:
        return {GgufType::INT64, static_cast<int64_t>(u64("int64 value"))};
      case GgufType::FLOAT32:
        return {GgufType::FLOAT32, double{std::bit_cast<float>(u32("float32 value"))}};
      case GgufType::FLOAT64:
        return {GgufType::FLOAT64, std::bit_cast<double>(u64("float64 value"))};
      case GgufType::BOOL: {
        uint64_t at = pos_;
        uint8_t b = u8("bool value");
        if (b > 1)
          fail("bool value at byte " + std::to_string(at) + " is " + std::to_string(b) +
               ", not 0 or 1");
        return {GgufType::BOOL, b == 1};
      }
      case GgufType::STRING:
        return {GgufType::STRING, std::string(str("string value"))};
      case GgufType::ARRAY:
        return array(depth + 1);
    }
    fail("unknown value type " + std::to_string(raw_type) + " at byte " + std::to_string(pos_ - 4));
  }

  // `depth` counts this array: 1 for an array that is the value of a key.
  GgufValue array(int depth) {
    if (depth > kGgufMaxArrayDepth)
      fail("arrays nested more than " + std::to_string(kGgufMaxArrayDepth) + " deep (at byte " +
           std::to_string(pos_) + ")");
    uint64_t type_at = pos_;
    uint32_t elem_type = u32("array element type");
    if (!gguf_detail::is_known_type(elem_type))
      fail("unknown array element type " + std::to_string(elem_type) + " at byte " +
           std::to_string(type_at));
    auto type = static_cast<GgufType>(elem_type);
    uint64_t count_at = pos_;
    uint64_t count = u64("array count");
    uint64_t min_size = gguf_detail::min_encoded_size(type);
    if (count > remaining() / min_size)
      fail("array count " + std::to_string(count) + " at byte " + std::to_string(count_at) +
           " cannot fit: " + std::to_string(count) + " " + std::string(gguf_type_name(type)) +
           " items need at least " + std::to_string(min_size) +
           (min_size == 1 ? " byte" : " bytes") + " each, and " + std::to_string(remaining()) +
           " bytes are left in the file");
    if (count > kMaxMetadataItems - metadata_items_)
      fail("array count " + std::to_string(count) + " at byte " + std::to_string(count_at) +
           " takes the metadata past " + std::to_string(kMaxMetadataItems) +
           " array items in all, more than tern accepts");
    metadata_items_ += count;
    auto arr = std::make_shared<GgufArray>();
    arr->elem_type = type;
    arr->items.reserve(count);
    for (uint64_t i = 0; i < count; ++i) arr->items.push_back(value(elem_type, depth));
    return {GgufType::ARRAY, std::move(arr)};
  }

  void read_metadata(GgufFile& out) {
    out.metadata_.reserve(kv_count_);
    for (uint64_t i = 0; i < kv_count_; ++i) {
      context_ = "metadata entry " + std::to_string(i);
      uint64_t key_at = pos_;
      std::string_view key = str("key");
      if (key.empty()) fail("empty key at byte " + std::to_string(key_at));
      if (!is_valid_utf8(key))
        fail("key " + quoted(key) + " at byte " + std::to_string(key_at) + " is not valid UTF-8");
      context_ = "key '" + std::string(key) + "'";
      if (out.metadata_index_.find(key) != out.metadata_index_.end())
        fail("duplicate key (at byte " + std::to_string(key_at) + ")");
      uint64_t type_at = pos_;
      uint32_t type = u32("value type");
      if (!gguf_detail::is_known_type(type))
        fail("unknown value type " + std::to_string(type) + " at byte " + std::to_string(type_at));
      GgufValue v = value(type, 0);
      out.metadata_index_.emplace(std::string(key), out.metadata_.size());
      out.metadata_.emplace_back(std::string(key), std::move(v));
    }
  }

  void read_alignment(GgufFile& out) {
    out.alignment_ = gguf_detail::kDefaultAlignment;
    const GgufValue* v = out.find("general.alignment");
    if (v == nullptr) return;
    context_ = "key 'general.alignment'";
    if (v->type != GgufType::UINT32)
      fail("general.alignment must be a uint32, not a " + std::string(gguf_type_name(v->type)));
    uint64_t a = std::get<uint64_t>(v->value);
    if (a == 0) fail("general.alignment is 0; it must be a nonzero power of two");
    if (!std::has_single_bit(a))
      fail("general.alignment " + std::to_string(a) + " is not a power of two");
    out.alignment_ = a;
  }

  void read_tensor_infos(GgufFile& out) {
    context_ = "tensor infos";
    if (tensor_count_ > remaining() / kMinTensorInfoBytes)
      fail("tensor_count " + std::to_string(tensor_count_) + " cannot fit in the " +
           std::to_string(remaining()) + " bytes left after the metadata: truncated or corrupt");
    out.tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      context_ = "tensor info " + std::to_string(i);
      uint64_t name_at = pos_;
      std::string_view name = str("tensor name");
      if (name.empty()) fail("empty tensor name at byte " + std::to_string(name_at));
      if (!is_valid_utf8(name))
        fail("tensor name " + quoted(name) + " at byte " + std::to_string(name_at) +
             " is not valid UTF-8");
      context_ = "tensor '" + std::string(name) + "'";
      if (out.tensor_index_.find(name) != out.tensor_index_.end())
        fail("duplicate tensor name (at byte " + std::to_string(name_at) + ")");

      uint32_t n_dims = u32("n_dims");
      if (n_dims == 0 || n_dims > kMaxDims)
        fail("n_dims is " + std::to_string(n_dims) + "; ggml tensors have 1 to " +
             std::to_string(kMaxDims) + " dimensions");
      std::vector<int64_t> ne(n_dims);
      uint64_t nelements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t v = u64("tensor dimension");
        if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          fail("ne[" + std::to_string(d) + "] is " + std::to_string(static_cast<int64_t>(v)) +
               "; every dimension must be at least 1");
        if (nelements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / v)
          fail("element count overflows (ne[" + std::to_string(d) + "] = " + std::to_string(v) +
               ")");
        nelements *= v;
        ne[d] = static_cast<int64_t>(v);
      }
      uint64_t type_at = pos_;
      uint32_t ggml_type = u32("tensor type");
      std::optional<DType> dtype = dtype_from_ggml(ggml_type);
      if (!dtype) {
        std::string_view tname = ggml_type_name(ggml_type);
        if (tname == "unknown")
          fail("unknown ggml type " + std::to_string(ggml_type) + " at byte " +
               std::to_string(type_at));
        fail("ggml type " + std::string(tname) + " (" + std::to_string(ggml_type) +
             ") is not supported");
      }
      const DTypeTraits& traits = dtype_traits(*dtype);
      if (static_cast<uint64_t>(ne[0]) % static_cast<uint64_t>(traits.block_elems) != 0)
        fail("row length " + std::to_string(ne[0]) + " (ne[0]) is not a multiple of the " +
             std::string(traits.name) + " block size " + std::to_string(traits.block_elems));
      std::optional<uint64_t> nbytes = dtype_bytes(*dtype, nelements);
      if (!nbytes) fail("byte size of " + std::to_string(nelements) + " elements overflows");
      uint64_t offset_at = pos_;
      uint64_t offset = u64("tensor offset");
      if (offset % out.alignment_ != 0)
        fail("offset " + std::to_string(offset) + " (at byte " + std::to_string(offset_at) +
             ") is not a multiple of the alignment " + std::to_string(out.alignment_));

      TensorInfo info;
      info.name = std::string(name);
      info.dtype = *dtype;
      info.shape.assign(ne.rbegin(), ne.rend());  // ggml's ne is innermost first
      info.offset = offset;
      info.nbytes = *nbytes;
      out.tensor_index_.emplace(info.name, out.tensors_.size());
      out.tensors_.push_back(std::move(info));
    }
  }

  void place_tensors(GgufFile& out) {
    // pos_ <= size_ and the alignment is at most 2^31, so this cannot overflow.
    out.data_offset_ = (pos_ + out.alignment_ - 1) / out.alignment_ * out.alignment_;
    for (TensorInfo& t : out.tensors_) {
      context_ = "tensor '" + t.name + "'";
      if (t.offset > size_)
        fail("data offset " + std::to_string(t.offset) + " is past the end of the file (" +
             std::to_string(size_) + " bytes)");
      // data_offset_ and t.offset are both at most size_ + 2^31, so neither sum overflows
      // except the last, which is checked.
      uint64_t start = out.data_offset_ + t.offset;
      if (start > size_ || t.nbytes > size_ - start) {
        bool wraps = t.nbytes > std::numeric_limits<uint64_t>::max() - start;
        fail("data ends at byte " +
             (wraps ? std::string("beyond 2^64") : std::to_string(start + t.nbytes)) +
             ", past the end of the file (" + std::to_string(size_) + ")");
      }
      t.data = file_->data() + start;
    }
    std::vector<size_t> order(out.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.tensors_[a].offset < out.tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const TensorInfo& prev = out.tensors_[order[i - 1]];
      const TensorInfo& cur = out.tensors_[order[i]];
      if (cur.offset < prev.offset + prev.nbytes) {
        context_.clear();
        fail("tensors '" + prev.name + "' (data bytes " + std::to_string(prev.offset) + " to " +
             std::to_string(prev.offset + prev.nbytes) + ") and '" + cur.name + "' (bytes " +
             std::to_string(cur.offset) + " to " + std::to_string(cur.offset + cur.nbytes) +
             ") overlap");
      }
    }
  }

  std::shared_ptr<const MappedFile> file_;
  const unsigned char* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t metadata_items_ = 0;  // array items read so far, nested ones included
  std::string context_;
};

GgufFile GgufFile::open(const std::string& path) {
  return parse(std::make_shared<const MappedFile>(path));
}

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  if (file == nullptr) throw Error("GgufFile::parse: no file");
  return GgufParser(std::move(file)).run();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v,
                             std::string_view wanted) {
  std::string have(gguf_type_name(v.type));
  if (const GgufArray* a = v.as_array())
    have = "array of " + std::string(gguf_type_name(a->elem_type));
  throw Error(f.path() + ": key '" + std::string(key) + "' is " + have + ", not " +
              std::string(wanted));
}

const GgufArray* array_of(const GgufFile& f, std::string_view key, const GgufValue& v,
                          std::string_view wanted) {
  const GgufArray* a = v.as_array();
  if (a == nullptr) wrong_type(f, key, v, wanted);
  return a;
}

}  // namespace

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::string* s = v->as_string();
  if (s == nullptr) wrong_type(*this, key, *v, "a string");
  return *s;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  std::optional<int64_t> i = v->as_int();
  if (!i) {
    if (v->is_integer())
      throw Error(path() + ": key '" + std::string(key) + "' is " + v->to_display() +
                  ", too large for a signed 64-bit integer");
    wrong_type(*this, key, *v, "an integer");
  }
  return i;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  std::optional<double> d = v->as_float();
  if (!d) wrong_type(*this, key, *v, "a number");
  return d;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const bool* b = v->type == GgufType::BOOL ? std::get_if<bool>(&v->value) : nullptr;
  if (b == nullptr) wrong_type(*this, key, *v, "a bool");
  return *b;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_of(*this, key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) {
    const std::string* s = item.as_string();
    if (s == nullptr) wrong_type(*this, key, *v, "an array of strings");
    out.push_back(*s);
  }
  return out;
}

std::optional<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_of(*this, key, *v, "an array of numbers");
  std::vector<float> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) {
    std::optional<double> d = item.as_float();
    if (!d) wrong_type(*this, key, *v, "an array of numbers");
    out.push_back(static_cast<float>(*d));
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  const GgufArray* a = array_of(*this, key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(a->items.size());
  for (const GgufValue& item : a->items) {
    std::optional<int64_t> i = item.is_integer() ? item.as_int() : std::nullopt;
    if (!i) {
      if (item.is_integer())
        throw Error(path() + ": key '" + std::string(key) + "' holds " + item.to_display() +
                    ", too large for a signed 64-bit integer");
      wrong_type(*this, key, *v, "an array of integers");
    }
    out.push_back(*i);
  }
  return out;
}

}  // namespace tern
