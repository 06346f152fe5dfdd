// The decode ceiling's arithmetic and the bandwidth flag's syntax.
#include "tern/plan/decode_ceiling.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "tern/core/error.h"
#include "tern/engine/engine_config.h"

namespace tern::plan {

double DecodeCeiling::tokens_per_s(int64_t context, int64_t num_seqs) const {
  const double bytes = static_cast<double>(weight_bytes) +
                       static_cast<double>(num_seqs) * static_cast<double>(context) *
                           static_cast<double>(kv_bytes_per_token);
  return bytes > 0 ? static_cast<double>(num_seqs) * bandwidth / bytes : 0.0;
}

double parse_bandwidth(const std::string& text) {
  std::string s = text;
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
          s.end());
  const bool per_second = s.size() > 2 && (s.compare(s.size() - 2, 2, "/s") == 0 ||
                                           s.compare(s.size() - 2, 2, "/S") == 0);
  if (per_second) {
    try {
      return static_cast<double>(parse_byte_size(s.substr(0, s.size() - 2)));
    } catch (const Error&) {
    }
  }
  throw Error("'" + text + "' is not a bandwidth (e.g. 936GB/s, 1.2TB/s, 400GiB/s)");
}

std::string format_bandwidth(double bytes_per_s) {
  char buf[48];
  if (bytes_per_s >= 1e12)
    std::snprintf(buf, sizeof buf, "%.2f TB/s", bytes_per_s / 1e12);
  else
    std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_s / 1e9);
  return buf;
}

}  // namespace tern::plan
