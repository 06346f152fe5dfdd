// Constrained decoding's costs on the Qwen3 vocabulary (151,669 tokenizer tokens): building the
// vocabulary trie, compiling a nested tool-style JSON schema, and the per-token mask (fill +
// applying it to a logits row) along a real tokenized output, cold (a fresh compiled constraint:
// every automaton state and mask computed) and warm (the same text again: masks cached).
// Counters: mean and p99 thread-CPU microseconds per token. Tokenizer from
// $TERN_FIXTURES/qwen-tokenizer.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tern/structured/json_schema.h"
#include "tern/structured/structured_outputs.h"
#include "tern/tokenizer/tokenizer.h"

namespace {

using namespace tern;
using namespace tern::structured;

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 64},
  "arguments": {"type": "object", "properties": {
    "location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer"},
    "options": {"type": "array", "items": {"type": "object", "properties": {
      "key": {"type": "string"}, "value": {"type": ["number", "string", "boolean", "null"]}},
      "required": ["key", "value"]}, "maxItems": 8},
    "when": {"type": "string", "format": "date-time"}},
    "required": ["location", "unit"]}},
  "required": ["name", "arguments"]})";

const char* kOutput =
    R"({"arguments": {"days": 3, "location": "San Francisco, CA \u00e9t\u00e9 caf\u00e9", "options": [{"key": "precision", "value": 0.5}, {"key": "verbose", "value": true}, {"key": "lang", "value": "en-US"}], "unit": "celsius", "when": "2025-06-01T12:30:00Z"}, "name": "get_weather_forecast"})";

struct Setup {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string error;
};

Setup& setup() {
  static Setup s = [] {
    Setup out;
    const char* env = std::getenv("TERN_FIXTURES");
    const std::filesystem::path dir =
        std::filesystem::path(env && *env ? env : "../shared/fixtures") / "qwen-tokenizer";
    if (!std::filesystem::exists(dir)) {
      out.error = dir.string() + " missing (set TERN_FIXTURES)";
      return out;
    }
    out.tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(dir.string()));
    return out;
  }();
  return s;
}

// Thread CPU time: the machine is shared, and wall time would count other processes' turns.
double cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

double p99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(v.size())))];
}

void BM_TrieBuild(benchmark::State& state) {
  if (!setup().tokenizer) return state.SkipWithError(setup().error.c_str());
  const std::vector<std::string> bytes = grammar_token_bytes(*setup().tokenizer);
  for (auto _ : state) {
    TokenTrie trie(bytes, setup().tokenizer->eos_ids());
    benchmark::DoNotOptimize(trie.num_nodes());
  }
}

void BM_SchemaCompile(benchmark::State& state) {
  if (!setup().tokenizer) return state.SkipWithError(setup().error.c_str());
  StructuredOutputs so(*setup().tokenizer, setup().tokenizer->eos_ids());
  auto trie = so.trie();
  const StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonSchema, kSchema, "bench"};
  for (auto _ : state) {
    CompiledConstraint c(flatten(grammar_of(spec)), trie);
    benchmark::DoNotOptimize(c.mask_words());
  }
}

// Per token of kOutput: ConstraintState::apply (mask fill + -inf over the row) and advance.
void BM_MaskPerToken(benchmark::State& state) {
  if (!setup().tokenizer) return state.SkipWithError(setup().error.c_str());
  const bool warm = state.range(0) != 0;
  StructuredOutputs so(*setup().tokenizer, setup().tokenizer->eos_ids());
  auto trie = so.trie();
  const StructuredOutputSpec spec{StructuredOutputSpec::Kind::kJsonSchema, kSchema, "bench"};
  const std::vector<int32_t> ids = setup().tokenizer->encode(kOutput, false);
  std::vector<float> logits(151936, 0.0f);  // Qwen3's embedding rows
  std::vector<double> times;
  std::shared_ptr<CompiledConstraint> shared =
      std::make_shared<CompiledConstraint>(flatten(grammar_of(spec)), trie);
  for (auto _ : state) {
    if (!warm) shared = std::make_shared<CompiledConstraint>(flatten(grammar_of(spec)), trie);
    ConstraintState cs(shared, ids.size());
    for (int32_t id : ids) {
      const double t0 = cpu_us();
      cs.apply(logits);
      times.push_back(cpu_us() - t0);
      if (logits[static_cast<size_t>(id)] < 0.0f)
        state.SkipWithError("the output's token was masked");
      std::fill(logits.begin(), logits.end(), 0.0f);
      cs.advance(id);
    }
    if (!cs.finished()) state.SkipWithError("the output did not complete the grammar");
  }
  double sum = 0.0;
  for (double t : times) sum += t;
  state.counters["mean_us"] = sum / static_cast<double>(times.size());
  state.counters["p99_us"] = p99(times);
  state.counters["tokens"] = static_cast<double>(ids.size());
}

BENCHMARK(BM_TrieBuild)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchemaCompile)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MaskPerToken)->Arg(0)->Arg(1)->ArgNames({"warm"})->Unit(benchmark::kMillisecond);

}  // namespace
