// MappedFile::drop_resident: the pages leave the process's resident memory and read back the
// same; an in-memory file is left alone.
#include "tern/core/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "models/model_test_util.h"

namespace tern {
namespace {

// Kilobytes of the mapping that starts at `start` resident in this process (/proc/self/smaps).
int64_t resident_kb(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    // A mapping's header line starts "lo-hi perms …"; its fields ("Rss:   12 kB") follow.
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {
      in_mapping = lo == reinterpret_cast<uintptr_t>(start);
      continue;
    }
    long kb = 0;
    if (in_mapping && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::byte>((i * 131 + 7) % 251);
  return bytes;
}

TEST(MappedFile, DropResidentLeavesTheBytesReadable) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE)), size = 64 * page;
  const std::vector<std::byte> want = pattern(size);
  testing::TempDir dir("mapped-file");
  {
    std::ofstream out(dir.file("f.bin"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(want.data()), static_cast<std::streamsize>(size));
  }
  const MappedFile file(dir.file("f.bin"));
  ASSERT_EQ(std::vector<std::byte>(file.bytes().begin(), file.bytes().end()),
            want);  // every page read
  EXPECT_GE(resident_kb(file.data()), static_cast<int64_t>(size / 1024));
  // From the middle of page 0 to the middle of page 63: pages 1-62 go.
  file.drop_resident(file.bytes().subspan(page / 2, size - page));
  EXPECT_LE(resident_kb(file.data()), static_cast<int64_t>(2 * page / 1024));
  EXPECT_EQ(std::vector<std::byte>(file.bytes().begin(), file.bytes().end()), want);
  // A range outside the file is ignored.
  const std::vector<std::byte> other = pattern(page);
  file.drop_resident(other);
}

TEST(MappedFile, DropResidentLeavesAnInMemoryFileAlone) {
  const std::vector<std::byte> want = pattern(3 * static_cast<size_t>(::sysconf(_SC_PAGESIZE)));
  const MappedFile file("bytes", want);
  file.drop_resident(file.bytes());
  EXPECT_EQ(std::vector<std::byte>(file.bytes().begin(), file.bytes().end()), want);
}

}  // namespace
}  // namespace tern
