// What a download prints when stderr is not a terminal (logs, CI): a line per file start and end.
#include "tern/hub/download_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

namespace tern::hub {
namespace {

std::string read_back(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) text.append(buf, n);
  return text;
}

TEST(DownloadProgress, WithoutATerminalOneLineWhenAFileStartsAndOneWhenItEnds) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::tmpfile(), std::fclose);
  ASSERT_NE(out, nullptr);
  {
    DownloadProgress progress("org/name/model.gguf", 2'500'000, 500'000, out.get());
    progress.update(1'000'000);  // silent: no bar without a terminal
    progress.note("org/name/model.gguf: transfer interrupted at 1000000 bytes; resuming");
    progress.finish(2'500'000);
  }
  const std::string text = read_back(out.get());
  EXPECT_EQ(text.rfind("downloading org/name/model.gguf (2.5 MB, resuming at 500000 bytes)\n"
                       "org/name/model.gguf: transfer interrupted at 1000000 bytes; resuming\n"
                       "downloaded org/name/model.gguf: 2.5 MB in ",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find(" MB/s)\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tern::hub
