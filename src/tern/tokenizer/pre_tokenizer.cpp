// Pre-tokenizer regexes of the byte-level BPE models, matched with PCRE2's JIT.
#include "tern/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

// The strings of Hugging Face tokenizer.json files (Split pre-tokenizer, or ByteLevel with
// use_regex for GPT-2); `\s+(?!\S)` leaves the last space of a run to the next word.
constexpr std::string_view kGpt2Pattern =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kLlama3Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Pattern =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// tiktoken's o200k_base (gpt-oss's tokenizer.json writes the same string): a word is a run of
// upper/title-case letters then lower-case ones (or the reverse shape), so "HelloWorld" splits
// in two; marks (\p{M}) stay inside words; a contraction stays on its word ("HE'S"); "/" may
// trail a punctuation run.
constexpr std::string_view kO200kPattern =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

pcre2_code* as_code(void* code) { return static_cast<pcre2_code*>(code); }

// Match data (one ovector pair is all split() reads) and a JIT stack per thread, so that
// encode() allocates nothing per piece and PreTokenizerRegex stays usable from many threads.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() {
    if (context != nullptr && stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

// Length of the UTF-8 sequence a lead byte announces (1 for anything else), used only to
// step over a character the regex failed to consume.
size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0 && lead < 0xF8) return 4;
  if (lead >= 0xE0) return lead < 0xF0 ? 3 : 1;
  if (lead >= 0xC0) return 2;
  return 1;
}

}  // namespace

std::string_view pre_tokenizer_pattern(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::Gpt2:
      return kGpt2Pattern;
    case PreTokenizer::Llama3:
      return kLlama3Pattern;
    case PreTokenizer::Qwen2:
      return kQwen2Pattern;
    case PreTokenizer::O200k:
      return kO200kPattern;
  }
  return kGpt2Pattern;
}

std::optional<PreTokenizer> pre_tokenizer_from_pattern(std::string_view pattern) {
  for (PreTokenizer kind :
       {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2, PreTokenizer::O200k})
    if (pattern == pre_tokenizer_pattern(kind)) return kind;
  return std::nullopt;
}

PreTokenizerRegex::PreTokenizerRegex(PreTokenizer kind) : kind_(kind) {
  const std::string_view pattern = pre_tokenizer_pattern(kind);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: invalid UTF-8 in the input simply never matches instead of failing
  // the whole match, so arbitrary bytes can be tokenized.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw Error("pre-tokenizer regex: PCRE2 cannot compile it at offset " + std::to_string(offset) +
                ": " + reinterpret_cast<const char*>(message));
  }
  // Without JIT support pcre2_match still works, only slower; nothing to report.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

PreTokenizerRegex::~PreTokenizerRegex() { pcre2_code_free(as_code(code_)); }

PreTokenizerRegex::PreTokenizerRegex(PreTokenizerRegex&& other) noexcept
    : kind_(other.kind_), code_(other.code_) {
  other.code_ = nullptr;
}

PreTokenizerRegex& PreTokenizerRegex::operator=(PreTokenizerRegex&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(as_code(code_));
    kind_ = other.kind_;
    code_ = other.code_;
    other.code_ = nullptr;
  }
  return *this;
}

void PreTokenizerRegex::split(std::string_view text,
                              std::vector<std::pair<size_t, size_t>>& pieces) const {
  pieces.clear();
  MatchScratch& scratch = match_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t size = text.size();
  size_t start = 0;
  while (start < size) {
    int rc = PCRE2_ERROR_NOMEMORY;
    if (scratch.data != nullptr) {
      // pcre2_match uses the JIT code when there is some and falls back to the interpreter
      // otherwise; a JIT stack overflow (pathological whitespace runs) retries without JIT.
      rc = pcre2_match(as_code(code_), subject, size, start, 0, scratch.data, scratch.context);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(as_code(code_), subject, size, start, PCRE2_NO_JIT, scratch.data,
                         scratch.context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      pieces.emplace_back(start, size);
      break;
    }
    size_t begin = 0;
    size_t end = 0;
    if (rc > 0) {
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
      begin = ovector[0];
      end = ovector[1];
    }
    if (rc <= 0 || end <= begin || begin < start || end > size) {
      // A match error (resource limits) or an empty match: none of the patterns can
      // produce one on valid input, but never loop or throw here; step one character.
      const size_t step =
          std::min(utf8_length(static_cast<unsigned char>(text[start])), size - start);
      pieces.emplace_back(start, start + step);
      start += step;
      continue;
    }
    if (begin > start) pieces.emplace_back(start, begin);  // invalid UTF-8 the regex skipped
    pieces.emplace_back(begin, end);
    start = end;
  }
}

}  // namespace tern
