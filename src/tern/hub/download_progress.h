// What a download shows on stderr: on a terminal, one bar redrawn in place (bytes, %, MB/s);
// elsewhere (logs, CI), one line when a file starts and one when it ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tern::hub {

class DownloadProgress {
 public:
  // resumed_from: bytes already on disk, not counted in the speed.
  DownloadProgress(std::string name, uint64_t total, uint64_t resumed_from,
                   std::FILE* out = stderr);
  void update(uint64_t done);
  void finish(uint64_t done);
  // A line about the transfer (an interruption), below the bar on a terminal.
  void note(const std::string& line);

 private:
  void draw(uint64_t done, bool final_line);

  std::string name_;
  uint64_t total_;
  uint64_t resumed_from_;
  std::FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tern::hub
