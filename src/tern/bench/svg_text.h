// Text pieces of the benchmark's hand-written SVG figures: XML escaping and number formats.
#pragma once

#include <cstdio>
#include <string>

namespace tern::bench::svg {

inline std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A tick label without trailing zeros: 0, 2.5, 100, 0.25.
inline std::string tick_label(double v) {
  std::string s = fmt("%.3f", v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace tern::bench::svg
