// A small JSON scanner that tells a complete value from one cut short (a stream's prefix) and
// from one that can never parse, and the two tool-call formats on top of it.
#include "tern/server/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "tern/server/harmony_channels.h"
#include "tern/server/partial_tag.h"

namespace tern::server {
namespace {

using std::string_view;

constexpr string_view kHermesOpen = "<tool_call>";
constexpr string_view kHermesClose = "</tool_call>";
constexpr string_view kPythonTag = "<|python_tag|>";
constexpr int kMaxDepth = 128;

enum class Scan { Complete, Incomplete, Invalid };

struct Scanned {
  Scan status;
  size_t end;  // one past the value when Complete; where the scan stopped otherwise
};

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

Scanned scan_value(string_view s, size_t i, int depth);

Scanned scan_string(string_view s, size_t i) {  // s[i] == '"'
  for (++i; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '"') return {Scan::Complete, i + 1};
    if (static_cast<unsigned char>(c) < 0x20) return {Scan::Invalid, i};
  }
  return {Scan::Incomplete, s.size()};
}

// An Invalid scan stops at the first character that cannot belong, so that what a stream sent
// of a prefix (up to the end of the text) stays a prefix of what the longer text reports.
Scanned scan_word(string_view s, size_t i, string_view word) {
  const string_view rest = s.substr(i);
  if (rest.starts_with(word)) return {Scan::Complete, i + word.size()};
  if (word.starts_with(rest)) return {Scan::Incomplete, s.size()};
  size_t k = 0;
  while (k < rest.size() && rest[k] == word[k]) ++k;
  return {Scan::Invalid, i + k};
}

// Loose (JSON's grammar is checked again by nlohmann::json::accept on a finished call): a run
// of number characters that ends before the text does.
Scanned scan_number(string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && string_view("-+.eE0123456789").find(s[j]) != string_view::npos) ++j;
  if (j == s.size()) return {Scan::Incomplete, j};
  return {j == i ? Scan::Invalid : Scan::Complete, j};
}

Scanned scan_container(string_view s, size_t i, int depth) {
  const bool object = s[i] == '{';
  const char close = object ? '}' : ']';
  if (depth > kMaxDepth) return {Scan::Invalid, i};
  i = skip_space(s, i + 1);
  if (i == s.size()) return {Scan::Incomplete, i};
  if (s[i] == close) return {Scan::Complete, i + 1};
  for (;;) {
    if (object) {
      if (s[i] != '"') return {Scan::Invalid, i};
      const Scanned key = scan_string(s, i);
      if (key.status != Scan::Complete) return key;
      i = skip_space(s, key.end);
      if (i == s.size()) return {Scan::Incomplete, i};
      if (s[i] != ':') return {Scan::Invalid, i};
      i = skip_space(s, i + 1);
    }
    const Scanned v = scan_value(s, i, depth + 1);
    if (v.status != Scan::Complete) return v;
    i = skip_space(s, v.end);
    if (i == s.size()) return {Scan::Incomplete, i};
    if (s[i] == close) return {Scan::Complete, i + 1};
    if (s[i] != ',') return {Scan::Invalid, i};
    i = skip_space(s, i + 1);
    if (i == s.size()) return {Scan::Incomplete, i};
  }
}

Scanned scan_value(string_view s, size_t i, int depth) {
  if (i >= s.size()) return {Scan::Incomplete, s.size()};
  switch (s[i]) {
    case '"':
      return scan_string(s, i);
    case '{':
    case '[':
      return scan_container(s, i, depth);
    case 't':
      return scan_word(s, i, "true");
    case 'f':
      return scan_word(s, i, "false");
    case 'n':
      return scan_word(s, i, "null");
    default:
      if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) return scan_number(s, i);
      return {Scan::Invalid, i};
  }
}

// One call object {"name": …, "arguments"/"parameters": …} starting at s[begin].
struct CallScan {
  Scan status = Scan::Invalid;
  size_t begin = 0, end = 0;
  std::optional<std::string> name;  // once its string is complete
  bool name_bad = false;            // "name" is not a string
  bool has_arguments = false;
  size_t arguments_begin = 0, arguments_end = 0;  // what is written of the value so far
};

bool is_arguments_key(ToolCallFormat format, const std::string& key) {
  return key == "arguments" || (format == ToolCallFormat::Llama3Json && key == "parameters");
}

CallScan scan_call(string_view s, size_t i, ToolCallFormat format) {
  CallScan c;
  c.begin = i;
  auto stop = [&](Scan status, size_t at) {
    c.status = status;
    c.end = at;
    return c;
  };
  if (i >= s.size() || s[i] != '{') return stop(Scan::Invalid, i);
  i = skip_space(s, i + 1);
  if (i == s.size()) return stop(Scan::Incomplete, i);
  if (s[i] == '}') return stop(Scan::Complete, i + 1);
  for (;;) {
    if (s[i] != '"') return stop(Scan::Invalid, i);
    const Scanned key_scan = scan_string(s, i);
    if (key_scan.status != Scan::Complete) return stop(key_scan.status, key_scan.end);
    std::string key;
    try {
      key = nlohmann::json::parse(s.substr(i, key_scan.end - i)).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      return stop(Scan::Invalid, i);
    }
    i = skip_space(s, key_scan.end);
    if (i == s.size()) return stop(Scan::Incomplete, i);
    if (s[i] != ':') return stop(Scan::Invalid, i);
    i = skip_space(s, i + 1);
    const size_t value_begin = i;
    const Scanned v = scan_value(s, i, 1);
    // A repeated key keeps its first value: what a stream sent of a call never changes.
    const bool repeated = (key == "name" && (c.name || c.name_bad)) ||
                          (is_arguments_key(format, key) && c.has_arguments);
    if (key == "name" && !repeated && v.status == Scan::Complete) {
      const auto name = nlohmann::json::parse(s.substr(value_begin, v.end - value_begin), nullptr,
                                              /*allow_exceptions=*/false);
      if (name.is_string())
        c.name = name.get<std::string>();
      else
        c.name_bad = true;
    }
    if (is_arguments_key(format, key) && !repeated) {
      c.has_arguments = true;
      c.arguments_begin = value_begin;
      c.arguments_end = v.end;
    }
    if (v.status != Scan::Complete) return stop(v.status, v.end);
    i = skip_space(s, v.end);
    if (i == s.size()) return stop(Scan::Incomplete, i);
    if (s[i] == '}') return stop(Scan::Complete, i + 1);
    if (s[i] != ',') return stop(Scan::Invalid, i);
    i = skip_space(s, i + 1);
    if (i == s.size()) return stop(Scan::Incomplete, i);
  }
}

// A finished call that becomes a tool call: complete, strict JSON, a string name, arguments.
bool is_good_call(string_view s, const CallScan& c) {
  return c.status == Scan::Complete && c.name && !c.name_bad && !c.name->empty() &&
         c.has_arguments && nlohmann::json::accept(s.substr(c.begin, c.end - c.begin));
}

ParsedToolCall to_call(string_view s, const CallScan& c) {
  ParsedToolCall call{*c.name, {}};
  if (c.has_arguments)
    call.arguments = std::string(s.substr(c.arguments_begin, c.arguments_end - c.arguments_begin));
  return call;
}

ToolCallParse all_content(string_view text) { return {std::string(text), {}}; }

ToolCallParse parse_hermes(string_view text, bool final) {
  ToolCallParse out;
  bool before_first_call = true;
  // Text before the first call is content as it stands (vLLM's); text between and after calls
  // is content only when it is more than whitespace.
  auto outside = [&](string_view segment, bool decided) {
    if (!decided) segment.remove_suffix(partial_tag_length(segment, kHermesOpen));
    if (before_first_call || segment.find_first_not_of(" \t\r\n") != string_view::npos)
      out.content += segment;
  };
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == string_view::npos) {
      outside(text.substr(pos), final);
      break;
    }
    outside(text.substr(pos, open - pos), true);
    before_first_call = false;
    const size_t body = open + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    string_view block =
        text.substr(body, close == string_view::npos ? string_view::npos : close - body);
    // The first "</tool_call>" ends the block even inside a JSON string (as vLLM's regex does),
    // so a prefix holds back what may become it.
    if (close == string_view::npos && !final)
      block.remove_suffix(partial_tag_length(block, kHermesClose));
    const size_t start = skip_space(block, 0);
    const CallScan c = scan_call(block, start, ToolCallFormat::Hermes);
    if (close != string_view::npos || final) {
      if (!is_good_call(block, c) || skip_space(block, c.end) != block.size()) {
        if (final) return all_content(text);
        if (c.name) out.calls.push_back(to_call(block, c));  // already streamed: keep it
        return out;
      }
      out.calls.push_back(to_call(block, c));
      if (close == string_view::npos) break;
      pos = close + kHermesClose.size();
      continue;
    }
    // A call still being written: reported from its complete name on.
    if (c.name) out.calls.push_back(to_call(block, c));
    break;
  }
  if (final && out.calls.empty()) return all_content(text);
  return out;
}

ToolCallParse parse_llama3_json(string_view text, bool final) {
  size_t i = skip_space(text, 0);
  const string_view rest = text.substr(i);
  if (!final && (rest.empty() || (rest.size() < kPythonTag.size() && kPythonTag.starts_with(rest))))
    return {};  // not yet known whether this is a call
  if (rest.starts_with(kPythonTag))
    i += kPythonTag.size();
  else if (rest.empty() || rest.front() != '{')
    return all_content(text);
  ToolCallParse out;
  for (;;) {
    i = skip_space(text, i);
    if (i == text.size()) break;
    const CallScan c = scan_call(text, i, ToolCallFormat::Llama3Json);
    if (c.status == Scan::Incomplete && !final) {
      if (c.name) out.calls.push_back(to_call(text, c));
      break;
    }
    if (!is_good_call(text, c)) {
      if (final) return all_content(text);
      if (c.name) out.calls.push_back(to_call(text, c));
      return out;
    }
    out.calls.push_back(to_call(text, c));
    i = skip_space(text, c.end);
    if (i == text.size()) break;
    if (text[i] != ';') {
      if (final) return all_content(text);
      return out;
    }
    ++i;
  }
  if (final && out.calls.empty()) return all_content(text);
  return out;
}

}  // namespace

ToolCallParse parse_required_tool_calls(std::string_view text, bool final) {
  size_t i = skip_space(text, 0);
  if (i == text.size()) return final ? all_content(text) : ToolCallParse{};
  if (text[i] != '[') return all_content(text);
  ToolCallParse out;
  // What a stream reports of a text that turns out not to be a list of calls: the calls whose
  // names it has read (a final text is then all content).
  auto broken = [&]() { return final ? all_content(text) : out; };
  i = skip_space(text, i + 1);
  for (;;) {
    if (i == text.size()) return broken();
    const CallScan c = scan_call(text, i, ToolCallFormat::Llama3Json);
    if (c.status == Scan::Incomplete && !final) {
      if (c.name) out.calls.push_back(to_call(text, c));
      return out;
    }
    if (!is_good_call(text, c)) {
      if (!final && c.name) out.calls.push_back(to_call(text, c));
      return broken();
    }
    out.calls.push_back(to_call(text, c));
    i = skip_space(text, c.end);
    if (i == text.size()) return broken();
    if (text[i] == ']') break;
    if (text[i] != ',') return broken();
    i = skip_space(text, i + 1);
  }
  if (final && skip_space(text, i + 1) != text.size()) return all_content(text);
  return out;
}

ToolCallParse parse_named_tool_call(std::string_view name, std::string_view text, bool /*final*/) {
  ToolCallParse out;
  if (!text.empty()) out.calls.push_back({std::string(name), std::string(text)});
  return out;
}

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::Hermes;
  if (name == "llama3_json") return ToolCallFormat::Llama3Json;
  if (name == "openai") return ToolCallFormat::Openai;
  return std::nullopt;
}

ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text, bool final) {
  switch (format) {
    case ToolCallFormat::Hermes:
      return parse_hermes(text, final);
    case ToolCallFormat::Llama3Json:
      return parse_llama3_json(text, final);
    case ToolCallFormat::Openai:
      return parse_harmony_tool_calls(text, final);
  }
  return all_content(text);
}

}  // namespace tern::server
