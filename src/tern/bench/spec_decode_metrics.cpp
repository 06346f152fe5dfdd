#include "tern/bench/spec_decode_metrics.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tern::bench {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string row(const char* label, double value) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%-40s %-10.2f\n", label, value);
  return buf;
}

}  // namespace

SpecDecodeCounters parse_spec_decode_counters(std::string_view text) {
  SpecDecodeCounters c;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    std::string_view name = line.substr(0, name_end);
    if (name.find("spec_decode_") == std::string_view::npos) continue;
    const size_t value_at = line.find_last_of(' ');
    const std::string value_text(line.substr(value_at + 1));
    char* parsed_end = nullptr;
    const double value = std::strtod(value_text.c_str(), &parsed_end);
    if (parsed_end == value_text.c_str() || *parsed_end != '\0') continue;
    if (ends_with(name, "_total")) name.remove_suffix(6);
    if (ends_with(name, "spec_decode_num_drafts")) {
      c.drafts += value;
    } else if (ends_with(name, "spec_decode_num_draft_tokens")) {
      c.draft_tokens += value;
    } else if (ends_with(name, "spec_decode_num_accepted_tokens")) {
      c.accepted_tokens += value;
    } else if (ends_with(name, "spec_decode_num_accepted_tokens_per_pos")) {
      const size_t label = line.find("position=\"");
      if (label == std::string_view::npos || label > value_at) continue;
      c.accepted_per_position[std::atoi(std::string(line.substr(label + 10)).c_str())] += value;
    } else {
      continue;
    }
    c.found = true;
  }
  return c;
}

std::string spec_decode_section(const SpecDecodeCounters& before, const SpecDecodeCounters& after) {
  const double drafts = after.drafts - before.drafts;
  const double drafted = after.draft_tokens - before.draft_tokens;
  const double accepted = after.accepted_tokens - before.accepted_tokens;
  if (!after.found || drafts <= 0 || drafted <= 0) return {};
  std::string out = "---------------Speculative Decoding---------------\n";
  out += row("Acceptance rate (%):", 100.0 * accepted / drafted);
  out += row("Acceptance length:", 1.0 + accepted / drafts);
  out += row("Drafts:", drafts);
  out += row("Draft tokens:", drafted);
  out += row("Accepted tokens:", accepted);
  out += "Per-position acceptance (%):\n";
  for (const auto& [position, count] : after.accepted_per_position) {
    const auto was = before.accepted_per_position.find(position);
    const double delta = count - (was == before.accepted_per_position.end() ? 0.0 : was->second);
    const std::string label = "  Position " + std::to_string(position) + ":";
    out += row(label.c_str(), 100.0 * delta / drafts);
  }
  return out + "==================================================\n";
}

nlohmann::ordered_json spec_decode_json(const SpecDecodeCounters& before,
                                        const SpecDecodeCounters& after) {
  const double drafts = after.drafts - before.drafts;
  const double drafted = after.draft_tokens - before.draft_tokens;
  const double accepted = after.accepted_tokens - before.accepted_tokens;
  if (!after.found || drafts <= 0 || drafted <= 0) return nullptr;
  nlohmann::ordered_json j;
  j["spec_decode_acceptance_rate"] = 100.0 * accepted / drafted;
  j["spec_decode_acceptance_length"] = 1.0 + accepted / drafts;
  j["spec_decode_num_drafts"] = drafts;
  j["spec_decode_draft_tokens"] = drafted;
  j["spec_decode_accepted_tokens"] = accepted;
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  for (const auto& [position, count] : after.accepted_per_position) {
    const auto was = before.accepted_per_position.find(position);
    per.push_back((count - (was == before.accepted_per_position.end() ? 0.0 : was->second)) /
                  drafts);
  }
  j["spec_decode_per_position_acceptance_rates"] = per;
  return j;
}

}  // namespace tern::bench
