// SamplingParams::validate: the ranges vLLM accepts, each failure naming the field, the allowed
// range and the value, so the server can return it as a 400 message as is.
#include "tern/sampling/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "tern/core/error.h"
#include "tern/core/utf8.h"

namespace tern {
namespace {

// Tern's sanity cap on completions per prompt (vLLM has none; each one holds a sequence slot).
constexpr int32_t kMaxCompletionsPerPrompt = 128;
constexpr int32_t kMaxLogprobs = 20;  // OpenAI's limit on top logprobs

std::string show(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

[[noreturn]] void fail(const std::string& field, const std::string& range, const std::string& got) {
  throw Error(field + " must be " + range + ", got " + got);
}

// NaN fails every comparison, so each check is written to reject it.
bool in_closed(float v, float lo, float hi) { return v >= lo && v <= hi; }

}  // namespace

void SamplingParams::validate() const {
  if (n < 1 || n > kMaxCompletionsPerPrompt)
    fail("n",
         "in [1, " + std::to_string(kMaxCompletionsPerPrompt) +
             "] (at least 1; tern caps completions per prompt at " +
             std::to_string(kMaxCompletionsPerPrompt) + ")",
         std::to_string(n));
  if (!in_closed(presence_penalty, -2.0f, 2.0f))
    fail("presence_penalty", "in [-2, 2]", show(presence_penalty));
  if (!in_closed(frequency_penalty, -2.0f, 2.0f))
    fail("frequency_penalty", "in [-2, 2]", show(frequency_penalty));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    fail("repetition_penalty", "a finite number > 0 (1 = off)", show(repetition_penalty));
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    fail("temperature", "a finite number >= 0 (0 = greedy)", show(temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p", "in (0, 1]", show(top_p));
  if (top_k < -1) fail("top_k", "-1 or 0 (all tokens) or at least 1", std::to_string(top_k));
  if (!in_closed(min_p, 0.0f, 1.0f)) fail("min_p", "in [0, 1]", show(min_p));
  if (max_tokens < 1) fail("max_tokens", "at least 1", std::to_string(max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens)
    fail("min_tokens", "in [0, max_tokens = " + std::to_string(max_tokens) + "]",
         std::to_string(min_tokens));
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs))
    fail("logprobs", "in [0, " + std::to_string(kMaxLogprobs) + "]", std::to_string(*logprobs));
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string field = "stop[" + std::to_string(i) + "]";
    if (stop[i].empty()) fail(field, "a non-empty string", "\"\"");
    // Matching works on bytes; valid UTF-8 makes every match start and end on a character.
    if (!is_valid_utf8(stop[i])) fail(field, "valid UTF-8", "invalid bytes");
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i)
    if (stop_token_ids[i] < 0)
      fail("stop_token_ids[" + std::to_string(i) + "]", "a token id >= 0",
           std::to_string(stop_token_ids[i]));
}

}  // namespace tern
