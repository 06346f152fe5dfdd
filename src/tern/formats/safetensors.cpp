#include "tern/formats/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "tern/core/error.h"
#include "tern/core/utf8.h"
#include "tern/formats/json_util.h"

namespace tern {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string supported_dtypes() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto& t = dtype_traits(static_cast<DType>(i));
    if (t.safetensors.empty()) continue;
    if (!s.empty()) s += ", ";
    s += t.safetensors;
  }
  return s;
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

void put_u64_le(std::vector<std::byte>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

// The JSON value of a shape or offset entry as an unsigned integer, if it is one.
std::optional<uint64_t> as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reader

class SafetensorsParser {
 public:
  explicit SafetensorsParser(std::shared_ptr<const MappedFile> file) : file_(std::move(file)) {}

  SafetensorsFile run() {
    SafetensorsFile out;
    out.file_ = file_;
    const uint64_t size = file_->size();
    if (size < 8)
      fail("file is " + std::to_string(size) +
           " bytes, too short for the 8-byte header length (truncated?)");
    const uint64_t n = read_u64_le(file_->data());
    if (n > kSafetensorsMaxHeaderBytes)
      fail("header length " + std::to_string(n) + " is absurd (limit " +
           std::to_string(kSafetensorsMaxHeaderBytes) + " bytes)");
    if (n > size - 8)
      fail("header length " + std::to_string(n) + " runs past the end of the file (" +
           std::to_string(size) + " bytes; truncated?)");
    out.header_bytes_ = n;
    std::string_view header(reinterpret_cast<const char*>(file_->data()) + 8, n);
    if (header.empty() || header.front() != '{')
      fail("header does not start with '{' (not a safetensors file?)");
    if (auto bad = first_invalid_utf8(header))
      fail("header is not valid UTF-8 (bad byte at header offset " + std::to_string(*bad) + ")");

    json root;
    std::vector<std::string> keys;  // header order
    try {
      root = parse_json_strict(header, /*max_depth=*/2, &keys);
    } catch (const JsonStrictError& e) {
      if (!e.key().empty() && e.depth() == 1) fail("duplicate tensor name " + quote_name(e.key()));
      fail(e.what());
    } catch (const json::exception& e) {
      fail(std::string("invalid JSON header: ") + e.what());
    }
    if (!root.is_object()) fail("header is not a JSON object");

    const uint64_t data_size = size - 8 - n;
    const std::byte* data = file_->data() + 8 + n;
    out.tensors_.reserve(keys.size());
    for (const std::string& name : keys) {
      const json& entry = root.at(name);
      if (name == "__metadata__") {
        parse_metadata(entry, out);
        continue;
      }
      out.tensor_index_.emplace(name, out.tensors_.size());
      out.tensors_.push_back(parse_entry(name, entry, data, data_size));
    }
    check_layout(out.tensors_, data_size);
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file_->path() + ": " + what);
  }
  [[noreturn]] void fail_tensor(std::string_view name, const std::string& what) const {
    fail("tensor " + quote_name(name) + ": " + what);
  }

  void parse_metadata(const json& entry, SafetensorsFile& out) const {
    if (!entry.is_object()) fail("__metadata__ is not an object of string values");
    for (const auto& [key, value] : entry.items()) {
      if (!value.is_string())
        fail("__metadata__ value of " + quote_name(key) + " is not a string (" + value.type_name() +
             ")");
      out.metadata_.emplace(key, value.get<std::string>());
    }
  }

  TensorInfo parse_entry(const std::string& name, const json& entry, const std::byte* data,
                         uint64_t data_size) const {
    if (!entry.is_object())
      fail_tensor(name, std::string("entry is a JSON ") + entry.type_name() +
                            ", not an object with dtype, shape and data_offsets");
    for (const auto& [key, value] : entry.items()) {
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        fail_tensor(name, "unexpected key " + quote_name(key) + " in its entry");
    }
    TensorInfo t;
    t.name = name;

    auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end()) fail_tensor(name, "entry has no dtype");
    if (!dtype_it->is_string()) fail_tensor(name, "dtype is not a string");
    const auto& dtype_name = dtype_it->get_ref<const std::string&>();
    auto dtype = dtype_from_safetensors(dtype_name);
    if (!dtype)
      fail_tensor(name, "unknown or unsupported dtype " + quote_name(dtype_name) + " (tern reads " +
                            supported_dtypes() + ")");
    t.dtype = *dtype;

    auto shape_it = entry.find("shape");
    if (shape_it == entry.end()) fail_tensor(name, "entry has no shape");
    if (!shape_it->is_array()) fail_tensor(name, "shape is not an array");
    uint64_t nelements = 1;
    bool overflow = false;
    for (const auto& d : *shape_it) {
      if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
        fail_tensor(name, "negative dimension " + std::to_string(d.get<int64_t>()) + " in shape");
      auto dim = as_u64(d);
      if (!dim) fail_tensor(name, "shape holds " + d.dump() + ", not a non-negative integer");
      if (*dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_tensor(name, "dimension " + std::to_string(*dim) + " overflows int64");
      t.shape.push_back(static_cast<int64_t>(*dim));
      if (__builtin_mul_overflow(nelements, *dim, &nelements)) overflow = true;
    }
    // A zero dimension makes the element count 0 whatever the others are.
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) {
      overflow = false;
      nelements = 0;
    }
    if (overflow) fail_tensor(name, "element count of shape " + shape_text(t.shape) + " overflows");
    auto expected = dtype_bytes(t.dtype, nelements);
    if (!expected) fail_tensor(name, "byte size of shape " + shape_text(t.shape) + " overflows");

    auto off_it = entry.find("data_offsets");
    if (off_it == entry.end()) fail_tensor(name, "entry has no data_offsets");
    if (!off_it->is_array() || off_it->size() != 2)
      fail_tensor(name, "data_offsets is not an array of two integers");
    auto begin = as_u64((*off_it)[0]);
    auto end = as_u64((*off_it)[1]);
    if (!begin || !end)
      fail_tensor(name, "data_offsets " + off_it->dump() + " are not two non-negative integers");
    if (*begin > *end)
      fail_tensor(
          name, "data_offsets begin " + std::to_string(*begin) + " > end " + std::to_string(*end));
    if (*end - *begin != *expected)
      fail_tensor(name, "size mismatch: shape " + shape_text(t.shape) + " of " + dtype_name +
                            " needs " + std::to_string(*expected) + " bytes but data_offsets [" +
                            std::to_string(*begin) + ", " + std::to_string(*end) + "] hold " +
                            std::to_string(*end - *begin));
    if (*end > data_size)
      fail_tensor(name, "data_offsets end " + std::to_string(*end) +
                            " is past the end of the data buffer (" + std::to_string(data_size) +
                            " bytes; truncated?)");
    t.offset = *begin;
    t.nbytes = *expected;
    t.data = data + *begin;
    return t;
  }

  // The tensors must tile the data buffer: sorted by offset, each begins where the previous
  // one ended, and the last ends at the end of the file.
  void check_layout(const std::vector<TensorInfo>& tensors, uint64_t data_size) const {
    std::vector<const TensorInfo*> order;
    order.reserve(tensors.size());
    for (const auto& t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
      return std::pair(a->offset, a->nbytes) < std::pair(b->offset, b->nbytes);
    });
    uint64_t cursor = 0;
    const TensorInfo* prev = nullptr;
    for (const TensorInfo* t : order) {
      if (t->offset < cursor)
        fail_tensor(t->name, "data [" + std::to_string(t->offset) + ", " +
                                 std::to_string(t->offset + t->nbytes) + ") overlaps tensor " +
                                 quote_name(prev->name) + " (ends at " + std::to_string(cursor) +
                                 ")");
      if (t->offset > cursor)
        fail("bytes [" + std::to_string(cursor) + ", " + std::to_string(t->offset) +
             ") of the data buffer belong to no tensor (a hole before tensor " +
             quote_name(t->name) + ")");
      cursor = t->offset + t->nbytes;
      prev = t;
    }
    if (cursor != data_size)
      fail("data buffer has " + std::to_string(data_size - cursor) +
           " bytes after the last tensor (tensors cover " + std::to_string(cursor) + " of " +
           std::to_string(data_size) + ")");
  }

  std::shared_ptr<const MappedFile> file_;
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  return parse(std::make_shared<const MappedFile>(path));
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  return SafetensorsParser(std::move(file)).run();
}

const TensorInfo* SafetensorsFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------------------------------------
// Writer

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  if (first_invalid_utf8(key) || first_invalid_utf8(value))
    throw Error("safetensors writer: metadata " + quote_name(key) + " is not valid UTF-8");
  metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::add_tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                                   std::span<const std::byte> data) {
  const std::string what = "safetensors writer: tensor " + quote_name(name);
  if (name == "__metadata__") throw Error(what + ": the name is reserved");
  if (first_invalid_utf8(name)) throw Error(what + ": the name is not valid UTF-8");
  if (names_.count(name)) throw Error(what + ": duplicate name");
  if (dtype_traits(dtype).safetensors.empty())
    throw Error(what + ": safetensors has no dtype for " + std::string(dtype_name(dtype)));
  uint64_t nelements = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(what + ": negative dimension in shape " + shape_text(shape));
    if (__builtin_mul_overflow(nelements, static_cast<uint64_t>(d), &nelements))
      throw Error(what + ": element count of shape " + shape_text(shape) + " overflows");
  }
  auto expected = dtype_bytes(dtype, nelements);
  if (!expected || *expected != data.size())
    throw Error(what + ": data has " + std::to_string(data.size()) + " bytes, shape " +
                shape_text(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
                (expected ? std::to_string(*expected) : std::string("too many")));
  names_.emplace(name, tensors_.size());
  tensors_.push_back(
      {std::move(name), dtype, std::move(shape), std::vector<std::byte>(data.begin(), data.end())});
}

std::vector<std::byte> SafetensorsWriter::serialize(size_t first, size_t last) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) meta[k] = v;
  }
  uint64_t offset = 0;
  for (size_t i = first; i < last; ++i) {
    const auto& t = tensors_[i];
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(dtype_traits(t.dtype).safetensors);
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + t.data.size()};
    header[t.name] = std::move(entry);
    offset += t.data.size();
  }
  std::string text = header.dump();
  // Pad with spaces so that the data buffer (at 8 + N) starts 8-byte aligned.
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  std::vector<std::byte> out;
  out.reserve(8 + text.size() + offset);
  put_u64_le(out, text.size());
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  for (size_t i = first; i < last; ++i)
    out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
  return out;
}

std::vector<std::byte> SafetensorsWriter::to_bytes() const { return serialize(0, tensors_.size()); }

void SafetensorsWriter::write(const std::string& path) const {
  write_file_atomically(path, to_bytes());
}

std::vector<std::string> SafetensorsWriter::write_sharded(const std::string& dir,
                                                          uint64_t max_shard_bytes) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create folder: " + ec.message());

  // Group consecutive tensors: [groups[i], groups[i+1]) is shard i.
  std::vector<size_t> groups = {0};
  uint64_t in_shard = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    uint64_t n = tensors_[i].data.size();
    if (i > groups.back() && in_shard + n > max_shard_bytes) {
      groups.push_back(i);
      in_shard = 0;
    }
    in_shard += n;
  }
  groups.push_back(tensors_.size());
  const size_t num_shards = groups.size() - 1;

  std::vector<std::string> written;
  if (num_shards == 1) {
    std::string path = (fs::path(dir) / "model.safetensors").string();
    write(path);
    written.push_back(path);
    return written;
  }

  json weight_map = json::object();
  uint64_t total_size = 0;
  for (size_t s = 0; s < num_shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, num_shards);
    std::string path = (fs::path(dir) / name).string();
    write_file_atomically(path, serialize(groups[s], groups[s + 1]));
    written.push_back(path);
    for (size_t i = groups[s]; i < groups[s + 1]; ++i) {
      weight_map[tensors_[i].name] = name;
      total_size += tensors_[i].data.size();
    }
  }
  json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  std::string text = index.dump(2) + "\n";
  std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  write_file_atomically(index_path, std::as_bytes(std::span(text.data(), text.size())));
  written.push_back(index_path);
  return written;
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints

namespace {

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A shard name from an index must stay inside the index's folder.
bool safe_relative_path(const std::string& name) {
  if (name.empty()) return false;
  fs::path p(name);
  if (p.is_absolute() || p.has_root_name() || p.has_root_directory()) return false;
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
}

}  // namespace

SafetensorsModel SafetensorsModel::open(const std::string& path) {
  SafetensorsModel m;
  std::string index_path;
  std::string single_path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path index = fs::path(path) / kIndexName;
    fs::path single = fs::path(path) / kSingleName;
    if (fs::exists(index, ec)) {
      index_path = index.string();
    } else if (fs::exists(single, ec)) {
      single_path = single.string();
    } else {
      throw Error(path + ": folder holds neither " + std::string(kIndexName) + " nor " +
                  std::string(kSingleName));
    }
  } else if (ends_with(path, ".index.json")) {
    index_path = path;
  } else {
    single_path = path;
  }

  if (!single_path.empty()) {
    m.path_ = single_path;
    m.shards_.push_back(SafetensorsFile::open(single_path));
    m.tensors_ = m.shards_[0].tensors();
    m.tensor_shard_.assign(m.tensors_.size(), 0);
    for (size_t i = 0; i < m.tensors_.size(); ++i) m.tensor_index_.emplace(m.tensors_[i].name, i);
    return m;
  }

  m.path_ = index_path;
  m.index_path_ = index_path;
  auto fail = [&](const std::string& what) -> void { throw Error(index_path + ": " + what); };

  json index;
  try {
    index = parse_json_strict(read_text_file(index_path), /*max_depth=*/3);
  } catch (const JsonStrictError& e) {
    fail(e.what());
  } catch (const json::exception& e) {
    fail(std::string("invalid JSON: ") + e.what());
  }
  if (!index.is_object()) fail("not a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) fail("no 'weight_map' object");

  // Shards in name order, each opened once.
  std::map<std::string, std::string> first_tensor_of;  // shard name → a tensor it should hold
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) fail("weight_map entry of " + quote_name(tensor) + " is not a string");
    const auto& shard_name = shard.get_ref<const std::string&>();
    if (!safe_relative_path(shard_name))
      fail("weight_map names shard " + quote_name(shard_name) + " outside the index's folder");
    first_tensor_of.emplace(shard_name, tensor);
  }
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<std::string> shard_names;
  for (const auto& [shard_name, tensor] : first_tensor_of) {
    fs::path shard_path = dir / shard_name;
    if (!fs::is_regular_file(shard_path, ec))
      fail("shard " + quote_name(shard_name) + " (holding tensor " + quote_name(tensor) +
           ") is missing: no file " + shard_path.string());
    shard_names.push_back(shard_name);
    m.shards_.push_back(SafetensorsFile::open(shard_path.string()));
  }

  for (size_t s = 0; s < m.shards_.size(); ++s) {
    for (const auto& t : m.shards_[s].tensors()) {
      auto [it, inserted] = m.tensor_index_.emplace(t.name, m.tensors_.size());
      if (!inserted)
        fail("tensor " + quote_name(t.name) + " is in two shards, " +
             quote_name(shard_names[m.tensor_shard_[it->second]]) + " and " +
             quote_name(shard_names[s]));
      m.tensors_.push_back(t);
      m.tensor_shard_.push_back(static_cast<int>(s));
    }
  }
  for (const auto& [tensor, shard] : wm->items()) {
    const auto& shard_name = shard.get_ref<const std::string&>();
    int found = m.shard_of(tensor);
    if (found < 0)
      fail("tensor " + quote_name(tensor) + " listed in the index is missing from its shard " +
           quote_name(shard_name));
    if (shard_names[static_cast<size_t>(found)] != shard_name)
      fail("tensor " + quote_name(tensor) + " is listed in shard " + quote_name(shard_name) +
           " but is missing from it (found in " +
           quote_name(shard_names[static_cast<size_t>(found)]) + ")");
  }
  return m;
}

const TensorInfo* SafetensorsModel::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

int SafetensorsModel::shard_of(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? -1 : tensor_shard_[it->second];
}

const std::map<std::string, std::string, std::less<>>& SafetensorsModel::metadata() const {
  static const std::map<std::string, std::string, std::less<>> kEmpty;
  return shards_.empty() ? kEmpty : shards_[0].metadata();
}

}  // namespace tern
