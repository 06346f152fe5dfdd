// The GGUF v3 writer. Everything it is given is checked when it is given (set, add_tensor), so
// what it writes is a file its own reader accepts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "tern/core/error.h"
#include "tern/core/utf8.h"
#include "tern/formats/gguf.h"
#include "tern/formats/gguf_detail.h"

namespace tern {

namespace {

using Bytes = std::vector<std::byte>;

void put_le(Bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

void put_string(Bytes& out, std::string_view s) {
  put_le(out, s.size(), 8);
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

[[noreturn]] void bad_value(const std::string& key, const std::string& what) {
  throw Error("gguf writer: key '" + key + "': " + what);
}

// The integer payload of `v` as two's-complement bits, when it lies in [lo, hi].
std::optional<uint64_t> integer_bits(const GgufValue& v, int64_t lo, uint64_t hi) {
  if (const uint64_t* u = std::get_if<uint64_t>(&v.value)) {
    if (*u > hi) return std::nullopt;
    return *u;
  }
  if (const int64_t* i = std::get_if<int64_t>(&v.value)) {
    if (*i < lo || (*i >= 0 && static_cast<uint64_t>(*i) > hi)) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::string held_description(const GgufValue& v) {
  static constexpr const char* kAlternatives[] = {
      "an unsigned integer", "a signed integer", "a double", "a bool", "a string", "an array"};
  return kAlternatives[v.value.index()];
}

// Checks that `v` holds what its type says (and fits the width), and appends its encoding to
// `out` unless `out` is null. `depth` is the number of arrays around `v`.
void encode_value(Bytes* out, const GgufValue& v, const std::string& key, int depth) {
  auto type_name = std::string(gguf_type_name(v.type));
  auto integer = [&](int64_t lo, uint64_t hi, size_t n) {
    std::optional<uint64_t> bits = integer_bits(v, lo, hi);
    if (!bits) {
      if (std::holds_alternative<uint64_t>(v.value) || std::holds_alternative<int64_t>(v.value))
        bad_value(key, "value " + v.to_display() + " does not fit a " + type_name);
      bad_value(key, "a " + type_name + " value holds " + held_description(v));
    }
    if (out != nullptr) put_le(*out, *bits, n);
  };
  auto floating = [&]() -> double {
    if (const double* d = std::get_if<double>(&v.value)) return *d;
    if (const int64_t* i = std::get_if<int64_t>(&v.value)) return static_cast<double>(*i);
    if (const uint64_t* u = std::get_if<uint64_t>(&v.value)) return static_cast<double>(*u);
    bad_value(key, "a " + type_name + " value holds " + held_description(v));
  };
  constexpr int64_t kNoMin = 0;
  switch (v.type) {
    case GgufType::UINT8:
      return integer(kNoMin, 0xFF, 1);
    case GgufType::INT8:
      return integer(-128, 127, 1);
    case GgufType::UINT16:
      return integer(kNoMin, 0xFFFF, 2);
    case GgufType::INT16:
      return integer(-32768, 32767, 2);
    case GgufType::UINT32:
      return integer(kNoMin, 0xFFFFFFFFu, 4);
    case GgufType::INT32:
      return integer(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 4);
    case GgufType::UINT64:
      return integer(kNoMin, std::numeric_limits<uint64_t>::max(), 8);
    case GgufType::INT64:
      return integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 8);
    case GgufType::FLOAT32: {
      float f = static_cast<float>(floating());
      if (out != nullptr) put_le(*out, std::bit_cast<uint32_t>(f), 4);
      return;
    }
    case GgufType::FLOAT64: {
      double d = floating();
      if (out != nullptr) put_le(*out, std::bit_cast<uint64_t>(d), 8);
      return;
    }
    case GgufType::BOOL: {
      const bool* b = std::get_if<bool>(&v.value);
      if (b == nullptr) bad_value(key, "a bool value holds " + held_description(v));
      if (out != nullptr) put_le(*out, *b ? 1 : 0, 1);
      return;
    }
    case GgufType::STRING: {
      const std::string* s = std::get_if<std::string>(&v.value);
      if (s == nullptr) bad_value(key, "a string value holds " + held_description(v));
      if (out != nullptr) put_string(*out, *s);
      return;
    }
    case GgufType::ARRAY: {
      const auto* p = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
      if (p == nullptr || *p == nullptr)
        bad_value(key, "an array value holds " +
                           (p == nullptr ? held_description(v) : std::string("no array")));
      const GgufArray& a = **p;
      if (depth + 1 > kGgufMaxArrayDepth)
        bad_value(key, "arrays nested more than " + std::to_string(kGgufMaxArrayDepth) + " deep");
      if (!gguf_detail::is_known_type(static_cast<uint32_t>(a.elem_type)))
        bad_value(key, "unknown array element type " +
                           std::to_string(static_cast<uint32_t>(a.elem_type)));
      if (out != nullptr) {
        put_le(*out, static_cast<uint32_t>(a.elem_type), 4);
        put_le(*out, a.items.size(), 8);
      }
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (a.items[i].type != a.elem_type)
          bad_value(key, "array item " + std::to_string(i) + " is a " +
                             std::string(gguf_type_name(a.items[i].type)) + " in an array of " +
                             std::string(gguf_type_name(a.elem_type)));
        encode_value(out, a.items[i], key, depth + 1);
      }
      return;
    }
  }
  bad_value(key, "unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
}

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

}  // namespace

void GgufWriter::set(std::string key, GgufValue value) {
  if (key.empty()) throw Error("gguf writer: empty metadata key");
  if (!is_valid_utf8(key))
    throw Error("gguf writer: key " + gguf_detail::quoted(key) + " is not valid UTF-8");
  encode_value(nullptr, value, key, 0);
  if (key == "general.alignment") {
    std::optional<int64_t> a = value.type == GgufType::UINT32 ? value.as_int() : std::nullopt;
    if (!a || *a == 0 || !std::has_single_bit(static_cast<uint64_t>(*a)))
      throw Error("gguf writer: general.alignment must be a uint32 power of two, not " +
                  std::string(gguf_type_name(value.type)) + " " + value.to_display());
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

bool GgufWriter::has(std::string_view key) const {
  for (const auto& kv : metadata_)
    if (kv.first == key) return true;
  return false;
}

void GgufWriter::add_tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                            std::span<const std::byte> data) {
  check_tensor(name, dtype, shape, data);
  PendingTensor t{std::move(name), dtype, std::move(shape), {data.begin(), data.end()}, {}};
  t.data = t.owned;  // the vector's buffer stays put when the tensor moves into tensors_
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor_view(std::string name, DType dtype, std::vector<int64_t> shape,
                                 std::span<const std::byte> data) {
  check_tensor(name, dtype, shape, data);
  tensors_.push_back({std::move(name), dtype, std::move(shape), {}, data});
}

void GgufWriter::check_tensor(const std::string& name, DType dtype,
                              const std::vector<int64_t>& shape,
                              std::span<const std::byte> data) const {
  auto fail = [&](const std::string& what) {
    throw Error("gguf writer: tensor '" + name + "': " + what);
  };
  if (name.empty()) throw Error("gguf writer: empty tensor name");
  if (!is_valid_utf8(name))
    throw Error("gguf writer: tensor name " + gguf_detail::quoted(name) + " is not valid UTF-8");
  // ggml's GGML_MAX_NAME is 64 with the terminating NUL; llama.cpp refuses longer names.
  if (name.size() > 63)
    fail("name is " + std::to_string(name.size()) + " bytes; ggml allows at most 63");
  for (const auto& t : tensors_)
    if (t.name == name) fail("added twice");
  const DTypeTraits& traits = dtype_traits(dtype);
  if (traits.ggml_type < 0) fail(std::string(traits.name) + " has no ggml type id");
  if (shape.empty() || shape.size() > 4)
    fail(std::to_string(shape.size()) + " dimensions; GGUF tensors have 1 to 4");
  uint64_t nelements = 1;
  for (int64_t d : shape) {
    if (d <= 0) fail("dimension " + std::to_string(d) + " is not positive");
    if (nelements >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d))
      fail("element count overflows");
    nelements *= static_cast<uint64_t>(d);
  }
  if (shape.back() % traits.block_elems != 0)
    fail("row length " + std::to_string(shape.back()) + " is not a multiple of the " +
         std::string(traits.name) + " block size " + std::to_string(traits.block_elems));
  std::optional<uint64_t> nbytes = dtype_bytes(dtype, nelements);
  if (!nbytes) fail("byte size overflows");
  if (data.size() != *nbytes)
    fail("data is " + std::to_string(data.size()) + " bytes, but " + std::to_string(nelements) +
         " " + std::string(traits.name) + " elements take " + std::to_string(*nbytes));
}

void GgufWriter::serialize(const std::function<void(std::span<const std::byte>)>& sink) const {
  uint64_t alignment = gguf_detail::kDefaultAlignment;
  for (const auto& [key, value] : metadata_)
    if (key == "general.alignment") alignment = static_cast<uint64_t>(*value.as_int());

  Bytes head;
  const char magic[4] = {'G', 'G', 'U', 'F'};
  for (char c : magic) head.push_back(static_cast<std::byte>(c));
  put_le(head, 3, 4);
  put_le(head, tensors_.size(), 8);
  put_le(head, metadata_.size(), 8);
  for (const auto& [key, value] : metadata_) {
    put_string(head, key);
    put_le(head, static_cast<uint32_t>(value.type), 4);
    encode_value(&head, value, key, 0);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(head, t.name);
    put_le(head, t.shape.size(), 4);
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)  // ggml's ne: innermost first
      put_le(head, static_cast<uint64_t>(*it), 8);
    put_le(head, static_cast<uint32_t>(dtype_traits(t.dtype).ggml_type), 4);
    put_le(head, offset, 8);
    offset = align_up(offset + t.data.size(), alignment);
  }
  head.resize(align_up(head.size(), alignment), std::byte{0});
  sink(head);

  Bytes padding;
  for (const auto& t : tensors_) {
    sink(t.data);
    padding.assign(align_up(t.data.size(), alignment) - t.data.size(), std::byte{0});
    if (!padding.empty()) sink(padding);
  }
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  Bytes out;
  serialize(
      [&](std::span<const std::byte> chunk) { out.insert(out.end(), chunk.begin(), chunk.end()); });
  return out;
}

void GgufWriter::write(const std::string& path) const {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw Error(path + ": cannot create a temporary file: " + std::strerror(errno));
  auto fail = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + ": " + std::strerror(err));
  };
  try {
    serialize([&](std::span<const std::byte> chunk) {
      const std::byte* p = chunk.data();
      size_t left = chunk.size();
      while (left > 0) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0) {
          if (errno == EINTR) continue;
          fail("cannot write " + tmp, errno);
        }
        p += n;
        left -= static_cast<size_t>(n);
      }
    });
  } catch (const Error&) {
    throw;
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  // mkstemp creates the file 0600; a model file is for sharing. (Reading the umask would mean
  // changing it, which is not thread-safe.)
  if (::fchmod(fd, 0644) != 0) fail("cannot chmod " + tmp, errno);
  // No fsync: the rename shows readers the whole file or none, and syncing gigabytes of model
  // is seconds of waiting that llama.cpp's writers do not do either.
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot close " + tmp + ": " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " into place: " + std::strerror(err));
  }
}

}  // namespace tern
