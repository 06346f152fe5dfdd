// The output options of a request that names these parsers, the rest at their defaults (an
// aggregate initializer that leaves members out would have GCC warn of each).
#pragma once

#include <optional>

#include "tern/server/chat_output.h"

namespace tern::testing {

inline server::ChatOutputOptions parsers(std::optional<server::ReasoningFormat> reasoning,
                                         std::optional<server::ToolCallFormat> tool_calls,
                                         bool parallel_tool_calls = true) {
  server::ChatOutputOptions o;
  o.reasoning = reasoning;
  o.tool_calls = tool_calls;
  o.parallel_tool_calls = parallel_tool_calls;
  return o;
}

}  // namespace tern::testing
