// Safetensors: an mmapped reader that checks the header against the file before any tensor
// is touched, a writer, and the sharded layout of Hugging Face checkpoints
// (model.safetensors.index.json + model-0000i-of-0000N.safetensors).
//
// File layout: u64 little-endian N, N bytes of UTF-8 JSON (starting with '{', possibly padded
// with trailing spaces), then the data buffer. The JSON maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data buffer) and may hold
// a "__metadata__" object of string → string. As in the reference implementation, the
// tensors must tile the data buffer exactly: no overlap, no hole, nothing after the last one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/mapped_file.h"
#include "tern/formats/tensor_info.h"

namespace tern {

// Headers larger than this are refused, like the reference implementation does (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  // Maps and validates `path`. Every problem throws tern::Error whose message starts with the
  // path and says what is wrong.
  static SafetensorsFile open(const std::string& path);
  // The same checks on a file already in memory (tests, fuzzers).
  static SafetensorsFile parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  uint64_t header_bytes() const { return header_bytes_; }     // N, padding included
  uint64_t data_offset() const { return 8 + header_bytes_; }  // where the data buffer starts
  uint64_t file_size() const { return file_->size(); }

  // In header order. `offset` is from the start of the data buffer; `data` points into the
  // mapping and stays valid while any copy of this object lives.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The "__metadata__" object (empty when absent).
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  uint64_t header_bytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::map<std::string, std::string, std::less<>> metadata_;

  friend class SafetensorsParser;
};

// Builds a safetensors file. Tensors keep insertion order, their data is laid out in that
// order, and the header is padded with spaces so that the data buffer starts 8-byte aligned.
class SafetensorsWriter {
 public:
  void set_metadata(std::string key, std::string value);  // replaces an existing key
  // `shape` is outermost first. `data` must hold exactly nelements × element size bytes; it is
  // copied. Throws tern::Error on a duplicate or reserved name, a negative dimension, a dtype
  // safetensors cannot store, or a size mismatch.
  void add_tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                  std::span<const std::byte> data);

  // Writes to `path` through a temporary file renamed into place. Throws tern::Error.
  void write(const std::string& path) const;
  std::vector<std::byte> to_bytes() const;

  // Writes the tensors as Hugging Face shards into the folder `dir` (created if missing):
  // consecutive tensors are grouped so that each shard's data stays within `max_shard_bytes`
  // (a larger tensor gets a shard of its own). With one shard the result is a plain
  // `model.safetensors`; with more, `model-0000i-of-0000N.safetensors` files plus
  // `model.safetensors.index.json` (metadata.total_size and weight_map). Every shard carries
  // this writer's metadata. Returns the paths of the files written, the index last.
  std::vector<std::string> write_sharded(const std::string& dir, uint64_t max_shard_bytes) const;

  size_t num_tensors() const { return tensors_.size(); }

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };
  std::vector<std::byte> serialize(size_t first, size_t last) const;  // tensors [first, last)

  std::map<std::string, std::string, std::less<>> metadata_;
  std::vector<PendingTensor> tensors_;
  std::map<std::string, size_t, std::less<>> names_;
};

// A whole safetensors checkpoint: one file, or the shards an index names.
class SafetensorsModel {
 public:
  // `path` is one of:
  //   - a folder holding model.safetensors.index.json (sharded) or else model.safetensors;
  //   - an index file (*.safetensors.index.json);
  //   - a single .safetensors file.
  // Each shard is opened once. Throws tern::Error when the index names a shard that does not
  // exist or a tensor its shard lacks, or when a tensor is in two shards.
  static SafetensorsModel open(const std::string& path);

  // What was opened: the index path for a sharded model, else the file's path.
  const std::string& path() const { return path_; }
  bool sharded() const { return !index_path_.empty(); }
  const std::vector<SafetensorsFile>& shards() const { return shards_; }

  // Every tensor of every shard, shard by shard in header order; `offset` is relative to its
  // own shard's data buffer. A tensor that a shard holds but the index does not list is kept
  // (the index only says where to look); one held by two shards is an error.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The shard (index into shards()) that holds `name`, or -1.
  int shard_of(std::string_view name) const;
  // The first shard's "__metadata__".
  const std::map<std::string, std::string, std::less<>>& metadata() const;

 private:
  std::string path_;
  std::string index_path_;
  std::vector<SafetensorsFile> shards_;
  std::vector<TensorInfo> tensors_;
  std::vector<int> tensor_shard_;  // parallel to tensors_
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tern
