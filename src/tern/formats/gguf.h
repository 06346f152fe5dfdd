// GGUF (versions 2 and 3): an mmapped reader that checks every offset, count and length
// against the file, and a writer. Layout: header, metadata key/values, tensor infos, padding
// to general.alignment, tensor data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/tensor_info.h"

namespace tern {

// The value types of GGUF metadata, with their ids in the file.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType type);

struct GgufValue;
struct GgufArray {
  GgufType elem_type = GgufType::UINT8;  // ARRAY for nested arrays
  std::vector<GgufValue> items;
};

// One metadata value. Integers of every width are held as int64_t or uint64_t (by signedness),
// floats as double; `type` remembers the width in the file so a writer can reproduce it.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GgufArray>> value;

  static GgufValue u8(uint8_t v) { return {GgufType::UINT8, uint64_t{v}}; }
  static GgufValue i8(int8_t v) { return {GgufType::INT8, int64_t{v}}; }
  static GgufValue u16(uint16_t v) { return {GgufType::UINT16, uint64_t{v}}; }
  static GgufValue i16(int16_t v) { return {GgufType::INT16, int64_t{v}}; }
  static GgufValue u32(uint32_t v) { return {GgufType::UINT32, uint64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufType::INT32, int64_t{v}}; }
  static GgufValue u64(uint64_t v) { return {GgufType::UINT64, v}; }
  static GgufValue i64(int64_t v) { return {GgufType::INT64, v}; }
  static GgufValue f32(float v) { return {GgufType::FLOAT32, double{v}}; }
  static GgufValue f64(double v) { return {GgufType::FLOAT64, v}; }
  static GgufValue boolean(bool v) { return {GgufType::BOOL, v}; }
  static GgufValue string(std::string v) { return {GgufType::STRING, std::move(v)}; }
  static GgufValue array(GgufType elem_type, std::vector<GgufValue> items);
  static GgufValue string_array(const std::vector<std::string>& items);
  static GgufValue f32_array(const std::vector<float>& items);
  static GgufValue i32_array(const std::vector<int32_t>& items);

  bool is_integer() const;
  bool is_float() const;                   // FLOAT32 / FLOAT64
  std::optional<int64_t> as_int() const;   // any integer type (or bool) that fits int64
  std::optional<double> as_float() const;  // any float or integer type
  const std::string* as_string() const;
  const GgufArray* as_array() const;
  // For `tern inspect`: numbers in their shortest round-trip form, strings quoted with
  // control characters and invalid UTF-8 bytes escaped, arrays cut after max_items items.
  std::string to_display(size_t max_items = 8) const;
};

// Nested arrays deeper than this are rejected by the reader and the writer.
inline constexpr int kGgufMaxArrayDepth = 8;

class GgufFile {
 public:
  // Maps and validates `path`. Every problem (bad magic, unsupported version, a count or
  // length past the end, a tensor whose data lies outside the file or overlaps another,
  // an unsupported ggml type, invalid UTF-8 in a key, a duplicate key or tensor name, …)
  // throws tern::Error whose message starts with the path and says what is wrong.
  static GgufFile open(const std::string& path);
  // The same checks on a file already in memory (tests, fuzzers).
  static GgufFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Where tensor data starts: the end of the tensor infos rounded up to the alignment. A file
  // without tensors may end before it (llama.cpp writes vocab-only files without padding).
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_->size(); }
  // The mapping every TensorInfo::data points into; hold it to keep tensor data alive.
  const std::shared_ptr<const MappedFile>& mapped_file() const { return file_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent; tern::Error naming the key when it is
  // present with an incompatible type.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;

  friend class GgufParser;
};

// Builds a GGUF v3 file. Metadata keeps insertion order; tensor data is padded to the
// alignment (general.alignment if set, else 32).
class GgufWriter {
 public:
  // Movable, not copyable: a copy's tensors would point into the original's copies of them.
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  GgufWriter(GgufWriter&&) = default;
  GgufWriter& operator=(GgufWriter&&) = default;

  // Replaces an existing key in place. Throws tern::Error when the key is empty or not UTF-8,
  // the value does not hold what its type says (or does not fit its width), an array item's
  // type differs from the array's, arrays nest deeper than kGgufMaxArrayDepth, or
  // general.alignment is not a uint32 power of two.
  void set(std::string key, GgufValue value);
  bool has(std::string_view key) const;
  // `shape` is outermost first, like TensorInfo::shape. `data` must hold exactly
  // dtype_bytes(dtype, nelements) bytes; it is copied. Throws tern::Error on a duplicate, empty,
  // non-UTF-8 or over-63-byte name (llama.cpp's limit), a dtype without a ggml id (U8), 0 or
  // more than 4 dimensions, a dimension < 1, or a row length that is not whole blocks.
  void add_tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                  std::span<const std::byte> data);
  // add_tensor without the copy: `data` must stay valid until the last write / to_bytes.
  void add_tensor_view(std::string name, DType dtype, std::vector<int64_t> shape,
                       std::span<const std::byte> data);
  // Writes to `path` (through a temporary file renamed into place). Throws tern::Error.
  void write(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;

 private:
  // Emits the file in order: header, metadata and tensor infos, then each tensor's data.
  void serialize(const std::function<void(std::span<const std::byte>)>& sink) const;

  void check_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                    std::span<const std::byte> data) const;

  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> owned;     // add_tensor's copy
    std::span<const std::byte> data;  // the copy, or add_tensor_view's bytes
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tern
