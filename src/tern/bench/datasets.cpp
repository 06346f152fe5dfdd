// vLLM's random, ShareGPT and prefix-repetition benchmark datasets over a tern Tokenizer.
#include "tern/bench/datasets.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tern/core/error.h"
#include "tern/core/utf8.h"

namespace tern::bench {

int64_t DatasetRng::uniform_int(int64_t low, int64_t high) {
  if (high < low) throw Error("DatasetRng: empty range");
  const uint64_t span = static_cast<uint64_t>(high - low) + 1;
  if (span == 0) return static_cast<int64_t>(engine_());  // the whole 64-bit range
  // Reject the top partial copy of [0, span) so every value is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return low + static_cast<int64_t>(x % span);
}

namespace {

// Ids that may appear in a random prompt: every id but control / special ones, so the prompt
// text holds no special-token markup.
std::vector<int32_t> allowed_token_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id)
    if (!tokenizer.is_special(id)) ids.push_back(id);
  if (ids.empty()) throw Error("the tokenizer has no ordinary tokens to build random prompts from");
  return ids;
}

int32_t random_allowed(DatasetRng& rng, const std::vector<int32_t>& allowed) {
  return allowed[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(allowed.size()) - 1))];
}

// Decoded text (invalid UTF-8 replaced by U+FFFD, as Hugging Face's decode does) of ids.
std::string decode_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  return sanitize_utf8(tokenizer.decode(ids));
}

struct FittedPrompt {
  std::string text;
  std::vector<int32_t> ids;  // the text's own tokens (without special tokens)
};

// Token ids do not survive decode → encode one to one (GPT-2: "Ġcalls"+"here" re-encodes as
// "Ġcall"+"sh"+"ere"), so the text is re-encoded and cut or topped up with random tokens until
// its length is the target, for at most 10 rounds (vLLM's gen_prompt_decode_to_target_len).
FittedPrompt fit_to_length(const Tokenizer& tokenizer, std::vector<int32_t> ids, int64_t target,
                           DatasetRng& rng, const std::vector<int32_t>& allowed) {
  FittedPrompt fitted;
  for (int round = 0;; ++round) {
    fitted.text = decode_text(tokenizer, ids);
    ids = tokenizer.encode(fitted.text, /*add_special_tokens=*/false);
    const auto len = static_cast<int64_t>(ids.size());
    if (round >= 10 || len == target) break;
    if (len < target) {
      while (static_cast<int64_t>(ids.size()) < target) ids.push_back(random_allowed(rng, allowed));
    } else {
      ids.resize(static_cast<size_t>(target));
    }
  }
  fitted.ids = std::move(ids);
  return fitted;
}

void require_positive(int64_t value, const char* flag) {
  if (value <= 0)
    throw Error(std::string(flag) + " must be positive (got " + std::to_string(value) + ")");
}

}  // namespace

std::vector<SampleRequest> random_dataset(const Tokenizer& tokenizer,
                                          const RandomDatasetOptions& o) {
  require_positive(o.num_prompts, "--num-prompts");
  if (o.input_len < 0 || o.output_len < 0 || o.prefix_len < 0)
    throw Error("--random-input-len, --random-output-len and --random-prefix-len must be >= 0");
  if (!(o.range_ratio >= 0 && o.range_ratio < 1))
    throw Error("--random-range-ratio must be in [0, 1) (got " + std::to_string(o.range_ratio) +
                ")");
  // The tokens the server's tokenizer adds (a BOS) count toward the input length.
  const auto num_special = static_cast<int64_t>(tokenizer.encode("", true).size());
  const int64_t real_input_len = std::max<int64_t>(0, o.input_len - num_special);
  const auto input_low = static_cast<int64_t>(std::floor(real_input_len * (1 - o.range_ratio)));
  const auto input_high = static_cast<int64_t>(std::ceil(real_input_len * (1 + o.range_ratio)));
  const int64_t output_low =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(o.output_len * (1 - o.range_ratio))));
  const int64_t output_high =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.output_len * (1 + o.range_ratio))));
  if (o.prefix_len + input_low < 1)
    throw Error("--random-input-len is too small: with " + std::to_string(num_special) +
                " special tokens and --random-range-ratio " + std::to_string(o.range_ratio) +
                " a prompt could have no tokens");

  DatasetRng rng(o.seed);
  const std::vector<int32_t> allowed = allowed_token_ids(tokenizer);
  std::vector<int64_t> input_lens, output_lens, offsets;
  for (int64_t i = 0; i < o.num_prompts; ++i)
    input_lens.push_back(rng.uniform_int(input_low, input_high));
  for (int64_t i = 0; i < o.num_prompts; ++i)
    output_lens.push_back(rng.uniform_int(output_low, output_high));
  for (int64_t i = 0; i < o.num_prompts; ++i)
    offsets.push_back(rng.uniform_int(0, tokenizer.vocab_size() - 1));
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < o.prefix_len; ++i) prefix.push_back(random_allowed(rng, allowed));

  std::vector<SampleRequest> requests;
  requests.reserve(static_cast<size_t>(o.num_prompts));
  const auto n_allowed = static_cast<int64_t>(allowed.size());
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    std::vector<int32_t> ids = prefix;
    for (int64_t k = 0; k < input_lens[i]; ++k)
      ids.push_back(allowed[static_cast<size_t>((offsets[i] + i + k) % n_allowed)]);
    FittedPrompt fitted =
        fit_to_length(tokenizer, std::move(ids), o.prefix_len + input_lens[i], rng, allowed);
    requests.push_back(
        {std::move(fitted.text), static_cast<int64_t>(fitted.ids.size()), output_lens[i]});
  }
  return requests;
}

std::vector<SampleRequest> sharegpt_dataset(const Tokenizer& tokenizer, const ShareGptOptions& o) {
  std::ifstream in(o.path, std::ios::binary);
  if (!in) throw Error(o.path + ": cannot open the ShareGPT dataset");
  std::stringstream text;
  text << in.rdbuf();
  return sharegpt_dataset_from_text(tokenizer, text.str(), o.path, o);
}

std::vector<SampleRequest> sharegpt_dataset_from_text(const Tokenizer& tokenizer,
                                                      const std::string& json_text,
                                                      const std::string& name,
                                                      const ShareGptOptions& o) {
  require_positive(o.num_prompts, "--num-prompts");
  if (o.output_len && *o.output_len <= 0) throw Error("--sharegpt-output-len must be positive");
  nlohmann::json data;
  try {
    data = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": not valid JSON (" + e.what() + ")");
  }
  if (!data.is_array()) throw Error(name + ": a ShareGPT dataset is a JSON list of conversations");

  struct Turns {
    std::string prompt, completion;
  };
  std::vector<Turns> entries;
  for (size_t i = 0; i < data.size(); ++i) {
    const nlohmann::json& entry = data[i];
    if (!entry.is_object() || !entry.contains("conversations")) continue;
    const nlohmann::json& conv = entry["conversations"];
    if (!conv.is_array() || conv.size() < 2) continue;
    auto value_of = [&](const nlohmann::json& turn) {
      if (!turn.is_object() || !turn.contains("value") || !turn["value"].is_string())
        throw Error(name + ": conversation " + std::to_string(i) +
                    " has a turn without a string \"value\"");
      return turn["value"].get<std::string>();
    };
    entries.push_back({value_of(conv[0]), value_of(conv[1])});
  }
  DatasetRng rng(o.seed);
  rng.shuffle(entries);

  std::vector<SampleRequest> samples;
  for (const Turns& t : entries) {
    if (static_cast<int64_t>(samples.size()) >= o.num_prompts) break;
    // Counted as Hugging Face's tokenizer(text) does, with the special tokens it adds.
    const auto prompt_len = static_cast<int64_t>(tokenizer.encode(t.prompt, true).size());
    const int64_t output_len =
        o.output_len ? *o.output_len
                     : static_cast<int64_t>(tokenizer.encode(t.completion, true).size());
    const bool too_short = prompt_len < 4 || (!o.output_len && output_len < 4);
    const bool too_long = prompt_len > 1024 || prompt_len + output_len > 2048;
    if (too_short || too_long) continue;
    samples.push_back({t.prompt, prompt_len, output_len});
  }
  if (samples.empty())
    throw Error(name +
                ": no conversation fits (two turns, prompt of 4..1024 tokens, prompt + "
                "output <= 2048 tokens)");
  // Too few: repeat random picks, as vLLM's maybe_oversample_requests does.
  const size_t kept = samples.size();
  while (static_cast<int64_t>(samples.size()) < o.num_prompts)
    samples.push_back(
        samples[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(kept) - 1))]);
  return samples;
}

std::vector<SampleRequest> prefix_repetition_dataset(const Tokenizer& tokenizer,
                                                     const PrefixRepetitionOptions& o) {
  require_positive(o.num_prompts, "--num-prompts");
  require_positive(o.num_prefixes, "--prefix-repetition-num-prefixes");
  require_positive(o.output_len, "--prefix-repetition-output-len");
  if (o.prefix_len < 0 || o.suffix_len < 0 || o.prefix_len + o.suffix_len < 1)
    throw Error("--prefix-repetition-prefix-len and -suffix-len must be >= 0 and not both 0");
  const int64_t per_prefix = o.num_prompts / o.num_prefixes;
  if (per_prefix == 0)
    throw Error("--num-prompts (" + std::to_string(o.num_prompts) +
                ") must be at least --prefix-repetition-num-prefixes (" +
                std::to_string(o.num_prefixes) + ")");
  DatasetRng rng(o.seed);
  const std::vector<int32_t> allowed = allowed_token_ids(tokenizer);
  auto exact_length_tokens = [&](int64_t length) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < length; ++i) ids.push_back(random_allowed(rng, allowed));
    return fit_to_length(tokenizer, std::move(ids), length, rng, allowed).ids;
  };
  std::vector<SampleRequest> requests;
  for (int64_t p = 0; p < o.num_prefixes; ++p) {
    const std::vector<int32_t> prefix = exact_length_tokens(o.prefix_len);
    for (int64_t s = 0; s < per_prefix; ++s) {
      std::vector<int32_t> ids = prefix;
      const std::vector<int32_t> suffix = exact_length_tokens(o.suffix_len);
      ids.insert(ids.end(), suffix.begin(), suffix.end());
      requests.push_back(
          {decode_text(tokenizer, ids), static_cast<int64_t>(ids.size()), o.output_len});
    }
  }
  rng.shuffle(requests);
  return requests;
}

}  // namespace tern::bench
