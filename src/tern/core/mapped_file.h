// A read-only memory map of a whole file: weights are used in place, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tern {

class MappedFile {
 public:
  // Throws tern::Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  // An in-memory "file" under a display name, for tests and fuzzers: parsers take a
  // MappedFile, so they run the same code on both.
  MappedFile(std::string name, std::vector<std::byte> bytes);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

  // Lets the kernel unmap the whole pages of `range` (a part of this file) from the process
  // for now (madvise DONTNEED): they leave its resident memory, stay in the page cache, and
  // a later read maps them again from the file. No-op for an in-memory file or a range that
  // is not inside this one.
  void drop_resident(std::span<const std::byte> range) const;

 private:
  void release();

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::byte> owned_;  // backing store of an in-memory file; empty for a mapping
};

// Reads a whole (small) text file, e.g. a config.json. Throws tern::Error naming the path.
std::string read_text_file(const std::string& path);
// Writes `path` through a temporary file renamed into place, so that a reader sees the whole
// file or none. Throws tern::Error naming the path.
void write_file_atomically(const std::string& path, std::span<const std::byte> bytes);

}  // namespace tern
