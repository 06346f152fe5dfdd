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

// The start of a figure: the XML declaration, the <svg> element of this size, a white
// background and `title` centred at the top (the caller closes it with "</svg>\n").
inline std::string document_header(double width, double height, const std::string& title) {
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", width) +
         "\" height=\"" + fmt("%.0f", height) + "\" viewBox=\"0 0 " + fmt("%.0f", width) + " " +
         fmt("%.0f", height) + "\" font-family=\"sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.1f", width / 2) +
         "\" y=\"26\" text-anchor=\"middle\" font-size=\"17\">" + escape_xml(title) + "</text>\n";
  return svg;
}

}  // namespace tern::bench::svg
