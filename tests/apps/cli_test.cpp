// The tern binary end to end: `tern tokenize` gives llama.cpp's ids for every fixture
// tokenizer, `tern inspect` shows a model, and errors are one line on stderr with exit code 1.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "run_process.h"
#include "tokenizer/llama_cpp_vectors.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

struct CliTokenizerCase {
  const char* model;    // fixture path given to --model
  const char* vectors;  // llama.cpp-vocab/NAME (without .inp/.out)
};

class CliTokenize : public ::testing::TestWithParam<CliTokenizerCase> {};

TEST_P(CliTokenize, GivesLlamaCppIds) {
  const auto& param = GetParam();
  TERN_REQUIRE_FIXTURE(param.model);
  const std::string base = fixture(std::string("llama.cpp-vocab/") + param.vectors);
  auto vectors = testing::read_llama_cpp_vectors(base + ".inp", base + ".out");
  // Every 9th string: the in-process tests cover all 46; this checks the command's plumbing
  // (loading by path, flags, JSON output) without starting the binary 92 times per tokenizer.
  for (size_t i = 1; i < vectors.size(); i += 9) {
    const auto& v = vectors[i];
    auto r = run_tern(
        {"tokenize", "--model", fixture(param.model), "--text", v.text, "--no-add-special-tokens"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).get<std::vector<int32_t>>(), v.ids)
        << "string " << i << ": '" << v.text << "'";
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;

    if (v.ids.empty()) continue;
    auto d = run_tern({"tokenize", "--model", fixture(param.model), "--detokenize", "--ids",
                       nlohmann::json(v.ids).dump()});
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_EQ(d.out, v.text + "\n");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CliTokenize,
    ::testing::Values(
        CliTokenizerCase{"qwen-tokenizer", "ggml-vocab-qwen2.gguf"},
        CliTokenizerCase{"llama3-tokenizer", "ggml-vocab-llama-bpe.gguf"},
        CliTokenizerCase{"llama.cpp-vocab/ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-spm.gguf"},
        CliTokenizerCase{"llama2-tokenizer", "ggml-vocab-llama-spm.gguf"},
        CliTokenizerCase{"llama.cpp-vocab/ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2.gguf"}));

TEST(CliTokenize, AddsBosWhereTheTokenizerAsks) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto r = run_tern({"tokenize", "--model", fixture("stories260K/stories260K.gguf"), "--text",
                     "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ids = nlohmann::json::parse(r.out).get<std::vector<int32_t>>();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);  // <s>
}

// Without --text or --file, the text comes from stdin (it used to print [] and ignore it).
TEST(CliTokenize, ReadsTheTextFromStdin) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const auto given = run_tern({"tokenize", "--model", model, "--text", "Once upon a time"});
  const std::vector<std::string> shell = {"/bin/sh", "-c",
                                          "printf 'Once upon a time' | " +
                                              std::string(TERN_BINARY) + " tokenize --model '" +
                                              model + "'"};
  const ProcessResult piped = tern::run_process(shell);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, given.out);
}

TEST(CliTokenize, QwenSpecialTokens) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  auto r = run_tern({"tokenize", "--model", fixture("qwen-tokenizer"), "--text",
                     "<|im_start|>user\nhi<|im_end|>"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[151644,872,198,6023,151645]\n");
}

TEST(CliInspect, ShowsGgufModel) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto r = run_tern({"inspect", fixture("stories260K/stories260K.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GGUF v3"), std::string::npos);
  EXPECT_NE(r.out.find("metadata (19)"), std::string::npos);
  EXPECT_NE(r.out.find("tensors (48)"), std::string::npos);
  EXPECT_NE(r.out.find("model: llama (llama), 5 layers, hidden 64"), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.ffn_down.weight"), std::string::npos);
}

TEST(CliInspect, ShowsConfigFolder) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  auto r = run_tern({"inspect", fixture("model-configs/qwen3-0.6b")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model: qwen3 (Qwen3ForCausalLM), 28 layers, hidden 1024"),
            std::string::npos)
      << r.out;
}

TEST(Cli, ErrorsAreOneLineAndExitCodeOne) {
  auto missing = run_tern({"inspect", "/nonexistent/model.gguf"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "tern: /nonexistent/model.gguf: no such file or folder\n");

  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  auto bad_ids = run_tern(
      {"tokenize", "--model", fixture("qwen-tokenizer"), "--detokenize", "--ids", "[1, \"x\"]"});
  EXPECT_EQ(bad_ids.exit_code, 1);
  EXPECT_EQ(bad_ids.err, "tern: --ids: every element must be an integer token id\n");

  auto out_of_range = run_tern(
      {"tokenize", "--model", fixture("qwen-tokenizer"), "--detokenize", "--ids", "[999999]"});
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_EQ(out_of_range.err.rfind("tern: ", 0), 0u) << out_of_range.err;
}

// --max-step-ms is auto or milliseconds; a limit under whole prefill, which could not act on
// it, is refused rather than ignored.
TEST(Cli, MaxStepMsIsAutoOrMilliseconds) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  auto generate = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"generate", "-m", model, "-p", "Once", "-n", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tern(args);
  };
  auto r = generate({"--max-step-ms", "soon"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tern: --max-step-ms must be auto or a number of ms >= 0, got 'soon'\n");
  r = generate({"--max-step-ms", "-5"});
  EXPECT_EQ(r.exit_code, 1);
  r = generate({"--max-step-ms", "100", "--no-enable-chunked-prefill"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--no-enable-chunked-prefill"), std::string::npos) << r.err;
  for (const char* ok : {"auto", "50", "0"}) {
    r = generate({"--max-step-ms", ok});
    EXPECT_EQ(r.exit_code, 0) << ok << ": " << r.err;
  }
  r = generate({"--max-step-ms", "auto", "--no-enable-chunked-prefill"});  // auto: off
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A file that is no model gets the same one line from every command that opens a model
// (generate and serve said "invalid JSON: [json.exception.parse_error.101]").
TEST(Cli, AFileThatIsNoModelIsNamedTheSameEverywhere) {
  testing::TempDir dir("not-a-model");
  const std::string html = dir.file("model.gguf");  // a download that went wrong
  std::ofstream(html) << "<html>404 Not Found</html>\n";
  const std::string want =
      "tern: " + html +
      ": not a model: neither a GGUF file (no GGUF magic), a .safetensors file, a Hugging Face "
      "folder nor a config.json\n";
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "-m", html, "-p", "x"},
      {"serve", html, "--port", "0"},
      {"inspect", html},
      {"plan", html},
      {"bench-model", html},
      {"bench", "throughput", "-m", html},
      {"perplexity", "-m", html, "-f", html},
      {"quantize", html, dir.file("out.gguf"), "q8_0"},
  };
  for (const auto& args : commands) {
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << args[0];
    EXPECT_EQ(r.err, want) << args[0];
  }
}

TEST(Cli, VersionEverywhere) {
  const std::string want = std::string("tern ") + "0.1.0\n";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--version"},
                                             {"version"},
                                             {"serve", "--version"},
                                             {"bench", "serve", "--version"},
                                             {"generate", "--version"}}) {
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << r.err;
    EXPECT_EQ(r.out, want) << args[0];
  }
}

TEST(Cli, AMisspelledFlagNamesTheNearestOne) {
  auto r = run_tern({"serve", "m.gguf", "--max-model-length", "512"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tern serve has no flag --max-model-length: did you mean --max-model-len?"),
            std::string::npos)
      << r.err;
  r = run_tern({"bench", "serve", "--num-prompt", "3"});
  EXPECT_NE(r.err.find("tern bench serve has no flag --num-prompt: did you mean --num-prompts?"),
            std::string::npos)
      << r.err;
  r = run_tern({"generate", "--zzzzzz"});  // nothing near: no guess
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}

// TERN_ISA naming no level this CPU runs used to run the default level without a word.
TEST(Cli, ABadTernIsaIsRefusedWithTheLevelsThisCpuRuns) {
  const ProcessResult r = tern::run_process({TERN_BINARY, "version"}, {{"TERN_ISA", "bogus"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("TERN_ISA=bogus: not a level this CPU runs (it runs scalar"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(tern::run_process({TERN_BINARY, "version"}, {{"TERN_ISA", "scalar"}}).exit_code, 0);
}

TEST(Cli, AMisspelledCommandNamesTheNearestOne) {
  auto r = run_tern({"genrate", "--prompt", "x"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tern has no command genrate: did you mean generate?"), std::string::npos)
      << r.err;
  r = run_tern({"bench", "serv"});
  EXPECT_NE(r.err.find("tern bench has no command serv: did you mean serve?"), std::string::npos)
      << r.err;
}

// `--served-model-name --disable-log-stats` served a model named "--disable-log-stats".
TEST(Cli, AFlagIsNeverAnotherFlagsValue) {
  const auto r = run_tern({"serve", "m.gguf", "--served-model-name", "--disable-log-stats"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--served-model-name needs a value, and the next word is the flag "
                       "--disable-log-stats"),
            std::string::npos)
      << r.err;
}

// What hands used to vLLM or llama.cpp type: done as they mean it, or one line saying what tern
// calls it, before any model loads (the model here does not exist).
TEST(Cli, VllmAndLlamaCppHabitsAreAnsweredInOneLine) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--enable-prefix-caching", "--no-enable-prefix-caching"},
       "give --enable-prefix-caching or --no-enable-prefix-caching, not both"},
      {{"-tp", "2"}, "--tensor-parallel-size 2: tern runs a model in one process"},
      {{"--tensor-parallel-size", "4"}, "put tern router in front"},
      {{"-pp", "2"}, "--pipeline-parallel-size 2"},
      {{"-ngl", "99"}, "-ngl 99: tern runs the whole model on one device, chosen by --device"},
      {{"-c", "100", "--max-model-len", "200"}, "give the context length once"},
  };
  for (const auto& [flags, message] : refused) {
    std::vector<std::string> args = {"serve", "/nonexistent/m.gguf"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << flags[0];
    EXPECT_NE(r.err.find(message), std::string::npos) << flags[0] << ": " << r.err;
  }
  // Accepted as they mean: these get as far as the missing model.
  const std::vector<std::vector<std::string>> accepted = {
      {"--enable-prefix-caching"},
      {"--trust-remote-code"},
      {"--disable-log-requests"},
      {"-tp", "1"},
      {"-ngl", "0"},
      {"--seed", "7"},
      {"--gpu-memory-utilization", "0.9"},
      {"-c", "512"},
      {"--ctx-size", "512"},
  };
  for (const auto& flags : accepted) {
    std::vector<std::string> args = {"serve", "/nonexistent/m.gguf", "--port", "0"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << flags[0];
    EXPECT_NE(r.err.find("/nonexistent/m.gguf"), std::string::npos) << flags[0] << ": " << r.err;
  }
}

// llama.cpp's -c and --temp on a real run: the context is the cache's limit, and --temp 0 greedy.
TEST(Cli, LlamaCppNamesOfContextAndTemperatureWork) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  const auto a = run_tern({"generate", "-m", model, "--prompt", "Once", "--max-tokens", "8",
                           "--temp", "0", "-c", "64"});
  const auto b = run_tern({"generate", "-m", model, "--prompt", "Once", "--max-tokens", "8",
                           "--temperature", "0", "--max-model-len", "64"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.err.find("max_model_len 64"), std::string::npos) << a.err;
}

// llama-bench takes the model as -m; so does every tern command that runs one.
TEST(Cli, TheModelIsAnArgumentOrDashM) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  for (const std::string flag : {"-m", "--model"}) {
    const auto r = run_tern({"bench-model", flag, model, "-p", "8", "-n", "4", "-r", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("tg4"), std::string::npos) << r.out;
  }
  auto r = run_tern({"plan", "-m", model, "--bandwidth", "100GB/s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_tern({"bench-model", model, "-m", "other.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tern: give the model once: as the argument or as --model\n");
  r = run_tern({"bench-model"});
  EXPECT_EQ(r.err, "tern: give a model: tern bench-model MODEL\n");
}

TEST(Cli, AFlagWithoutItsPartnerIsAnError) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string tokenizer = fixture("qwen-tokenizer");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"tokenize", "--model", tokenizer, "--ids", "[1, 2]"}, "--ids goes with --detokenize"},
      {{"tokenize", "--model", tokenizer, "--text", "hi", "--keep-special-tokens"},
       "--keep-special-tokens goes with --detokenize"},
      {{"tokenize", "--model", tokenizer, "--detokenize", "--ids", "[1]", "--text", "hi"},
       "give no --text or --file"},
      {{"tokenize", "--model", tokenizer, "--detokenize", "--ids", "[1]", "--no-parse-special"},
       "apply to tokenizing, not to --detokenize"},
      {{"generate", "--model", fixture("stories260K/stories260K.gguf"), "--prompt", "x", "--output",
        "/tmp/never-written.jsonl"},
       "--output goes with --prompts"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
}

}  // namespace
}  // namespace tern
