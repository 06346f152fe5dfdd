// Python str semantics over UTF-8, with utf8proc for Unicode categories and case mapping.
#include "tern/jinja/text.h"

#include <utf8proc.h>

namespace tern::jinja {

char32_t decode_utf8(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i);
  utf8proc_int32_t cp = 0;
  const utf8proc_ssize_t n = utf8proc_iterate(p, static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    const char32_t byte = static_cast<unsigned char>(s[i]);
    ++i;
    return byte;
  }
  i += static_cast<size_t>(n);
  return static_cast<char32_t>(cp);
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(decode_utf8(s, i));
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(cp, out);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) decode_utf8(s, i);
  return n;
}

static utf8proc_category_t category(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

bool py_isspace(char32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F) || cp == 0x85)
    return true;
  if (cp < 0x80) return false;
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool py_isalpha(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

bool py_isdigit(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_ND; }

bool py_isalnum(char32_t cp) {
  const auto c = category(cp);
  return py_isalpha(cp) || c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL ||
         c == UTF8PROC_CATEGORY_NO;
}

bool py_isprintable(char32_t cp) {
  if (cp == ' ') return true;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool py_islower_cased(char32_t cp) { return category(cp) == UTF8PROC_CATEGORY_LL; }
bool py_isupper_cased(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT;
}

static char32_t to_upper(char32_t cp) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
static char32_t to_lower(char32_t cp) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
static char32_t to_title(char32_t cp) {
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

// utf8proc maps one code point to one; Python uses the full mappings, where the common
// difference is German sharp s ("ß".upper() == "SS") and dotted capital I.
std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = decode_utf8(s, i);
    if (cp == 0xDF)
      out += "SS";
    else
      append_utf8(to_upper(cp), out);
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = decode_utf8(s, i);
    if (cp == 0x130)
      out += "i\xCC\x87";  // U+0130 → "i" + combining dot above
    else
      append_utf8(to_lower(cp), out);
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = decode_utf8(s, i);
    const bool cased = py_islower_cased(cp) || py_isupper_cased(cp);
    append_utf8(!cased ? cp : (previous_cased ? to_lower(cp) : to_title(cp)), out);
    previous_cased = cased;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = decode_utf8(s, i);
    append_utf8(first ? to_title(cp) : to_lower(cp), out);
    first = false;
  }
  return out;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<char32_t> cps = to_code_points(s);
  std::vector<char32_t> set;
  if (chars) set = to_code_points(*chars);
  auto strip_it = [&](char32_t cp) {
    if (!chars) return py_isspace(cp);
    for (char32_t c : set)
      if (c == cp) return true;
    return false;
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strip_it(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip_it(cps[end - 1])) --end;
  return from_code_points(std::vector<char32_t>(cps.begin() + static_cast<ptrdiff_t>(begin),
                                                cps.begin() + static_cast<ptrdiff_t>(end)));
}

static std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit,
                                                 bool from_right) {
  const std::vector<char32_t> cps = to_code_points(s);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < cps.size() && py_isspace(cps[i])) ++i;
      if (i == cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        // The rest, with its trailing whitespace stripped, is the last part.
        size_t end = cps.size();
        while (end > i && py_isspace(cps[end - 1])) --end;
        parts.push_back(from_code_points(
            {cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(end)}));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !py_isspace(cps[j])) ++j;
      parts.push_back(from_code_points(
          {cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(j)}));
      i = j;
    }
    return parts;
  }
  size_t end = cps.size();
  while (true) {
    while (end > 0 && py_isspace(cps[end - 1])) --end;
    if (end == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t begin = 0;
      while (begin < end && py_isspace(cps[begin])) ++begin;
      parts.push_back(from_code_points({cps.begin() + static_cast<ptrdiff_t>(begin),
                                        cps.begin() + static_cast<ptrdiff_t>(end)}));
      break;
    }
    size_t j = end;
    while (j > 0 && !py_isspace(cps[j - 1])) --j;
    parts.push_back(from_code_points(
        {cps.begin() + static_cast<ptrdiff_t>(j), cps.begin() + static_cast<ptrdiff_t>(end)}));
    end = j;
  }
  return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
    }
    parts.emplace_back(s.substr(pos));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = s.rfind(*sep, end - sep->size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  parts.emplace_back(s.substr(0, end));
  return {parts.rbegin(), parts.rend()};
}

static bool is_line_break(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  std::string line;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t cp = decode_utf8(s, i);
    if (!is_line_break(cp)) {
      line.append(s.substr(start, i - start));
      continue;
    }
    size_t end = i;
    if (cp == '\r' && i < s.size() && s[i] == '\n') end = ++i;
    if (keepends) line.append(s.substr(start, end - start));
    lines.push_back(std::move(line));
    line.clear();
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    int64_t done = 0;
    for (size_t i = 0; i < s.size();) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      const size_t start = i;
      decode_utf8(s, i);
      out.append(s.substr(start, i - start));
    }
    if (count < 0 || done < count) out.append(repl);
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(code_point_count(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

int64_t py_find(std::string_view s, std::string_view sub, bool from_right) {
  const size_t hit = from_right ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(code_point_count(s.substr(0, hit)));
}

}  // namespace tern::jinja
