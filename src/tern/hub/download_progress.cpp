// DownloadProgress: a stderr progress bar, redrawn at most ten times a second.
#include "tern/hub/download_progress.h"

#include <unistd.h>

#include <algorithm>

namespace tern::hub {
namespace {

constexpr double kMB = 1e6;
constexpr int kBarWidth = 24;

}  // namespace

DownloadProgress::DownloadProgress(std::string name, uint64_t total, uint64_t resumed_from,
                                   std::FILE* out)
    : name_(std::move(name)),
      total_(total),
      resumed_from_(resumed_from),
      out_(out),
      terminal_(::isatty(::fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (terminal_) {
    draw(resumed_from, false);
  } else {
    std::fprintf(
        out_, "downloading %s (%.1f MB%s)\n", name_.c_str(), static_cast<double>(total_) / kMB,
        resumed_from_ > 0 ? (", resuming at " + std::to_string(resumed_from_) + " bytes").c_str()
                          : "");
    std::fflush(out_);
  }
}

void DownloadProgress::update(uint64_t done) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, false);
}

void DownloadProgress::finish(uint64_t done) { draw(done, true); }

void DownloadProgress::note(const std::string& line) {
  std::fprintf(out_, "%s%s\n", terminal_ ? "\n" : "", line.c_str());
  std::fflush(out_);
}

void DownloadProgress::draw(uint64_t done, bool final_line) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double speed =
      seconds > 0 ? static_cast<double>(done - std::min(done, resumed_from_)) / kMB / seconds : 0.0;
  if (!terminal_) {
    std::fprintf(out_, "downloaded %s: %.1f MB in %.1f s (%.1f MB/s)\n", name_.c_str(),
                 static_cast<double>(done) / kMB, seconds, speed);
    std::fflush(out_);
    return;
  }
  const double fraction =
      total_ > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total_)) : 0.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  std::fprintf(out_, "\r%s [%s] %.1f/%.1f MB %3d%% %.1f MB/s\033[K%s", name_.c_str(), bar.c_str(),
               static_cast<double>(done) / kMB, static_cast<double>(total_) / kMB,
               static_cast<int>(fraction * 100), speed, final_line ? "\n" : "");
  std::fflush(out_);
}

}  // namespace tern::hub
