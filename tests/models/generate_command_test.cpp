// `tern generate --json` through the built binary on stories260K: the greedy continuation
// from BOS is the reference's ids and text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "run_process.h"
#include "tern/formats/gguf.h"

namespace tern {
namespace {

// stdout of `command` (stderr discarded), and its exit status.
std::pair<std::string, int> run_command(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return {"", -1};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  return {out, ::pclose(pipe)};
}

std::string last_line(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t start = s.rfind('\n', end);
  return s.substr(start == std::string::npos ? 0 : start + 1,
                  end - (start == std::string::npos ? 0 : start + 1) + 1);
}

TEST(GenerateCommand, Stories260KGreedyJson) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  std::ifstream in(testing::fixture("stories260K/reference_greedy_from_bos.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string model = testing::fixture("stories260K/stories260K.gguf");
  auto [out, status] = run_command(std::string(TERN_BINARY) + " generate --model '" + model +
                                   "' --prompt '' -n 255 --json --threads 2");
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json result = nlohmann::json::parse(last_line(out));
  EXPECT_EQ(result["prompt_token_ids"], nlohmann::json::array({1}));
  EXPECT_EQ(result["token_ids"], ref["greedy_ids"]);
  // The reference text is llama2.c's 256-step sample: our 255 tokens are all of it but the
  // final ".".
  const std::string text = result["text"], want = ref["decoded_text"];
  EXPECT_EQ(text + ".", want);
  EXPECT_EQ(result["finish_reason"], "length");
  EXPECT_GT(result["timings"]["decode_tokens_per_s"].get<double>(), 0.0);
}

TEST(GenerateCommand, SampledRunsRepeatWithTheirSeed) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string cmd = std::string(TERN_BINARY) + " generate --model '" +
                          testing::fixture("stories260K/stories260K.gguf") +
                          "' --prompt 'Once upon a time' -n 24 --temperature 0.8 --top-k 40 "
                          "--top-p 0.95 --json --seed ";
  auto [a, sa] = run_command(cmd + "1");
  auto [b, sb] = run_command(cmd + "1");
  auto [c, sc] = run_command(cmd + "2");
  ASSERT_EQ(sa, 0);
  ASSERT_EQ(sc, 0);
  const auto ja = nlohmann::json::parse(last_line(a)), jb = nlohmann::json::parse(last_line(b)),
             jc = nlohmann::json::parse(last_line(c));
  EXPECT_EQ(ja["token_ids"], jb["token_ids"]);
  EXPECT_NE(ja["token_ids"], jc["token_ids"]);
  EXPECT_EQ(ja["prompt_token_ids"].size(), 5u);  // BOS + 4 pieces
}

TEST(BenchModelCommand, Stories260KJson) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto [out, status] = run_command(std::string(TERN_BINARY) + " bench-model '" +
                                   testing::fixture("stories260K/stories260K.gguf") +
                                   "' -p 16 -n 4 -r 2 --weight-type q8_0 --json");
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json result = nlohmann::json::parse(last_line(out));
  EXPECT_GT(result["pp_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(result["tg_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(result["pp_samples"].size(), 2u);
  EXPECT_NE(result["description"].get<std::string>().find("Q8_0"), std::string::npos);
  auto [skip, skip_status] =
      run_command(std::string(TERN_BINARY) + " bench-model '" +
                  testing::fixture("stories260K/stories260K.gguf") + "' -p 0 -n 2 -r 1 --json");
  ASSERT_EQ(skip_status, 0);
  EXPECT_TRUE(nlohmann::json::parse(last_line(skip))["pp_tokens_per_s"].is_null());
}

// --dtype is vLLM's compute type: a Q4_0 file loaded with --dtype half keeps its Q4_0 matrices
// (once every matrix became F16), and only the matrices stored float follow it; a quantized
// --dtype points at --weight-type, which still requantizes.
TEST(BenchModelCommand, DtypeConvertsOnlyFloatMatrices) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string stories = testing::fixture("stories260K/stories260K.gguf");
  testing::TempDir dir("bench-dtype");
  const std::string q4 = dir.file("q4.gguf");
  ASSERT_EQ(testing::run_tern({"generate", "--model", stories, "--weight-type", "q4_0", "--prompt",
                               "", "-n", "1", "--threads", "2", "--save-gguf", q4})
                .exit_code,
            0);
  auto description = [](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"bench-model", "-p", "0", "-n", "2", "-r", "1", "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    const testing::ProcessResult r = testing::run_tern(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0
               ? nlohmann::json::parse(last_line(r.out))["description"].get<std::string>()
               : r.err;
  };
  // stories260K's 172-wide ffn_down fits no Q4_0 block: it stays F16, the float matrix of the
  // file, which --dtype float32 converts.
  EXPECT_NE(description({q4}).find("Q4_0/F16"), std::string::npos);
  EXPECT_NE(description({q4, "--dtype", "half"}).find("Q4_0/F16"), std::string::npos);
  EXPECT_NE(description({q4, "--dtype", "float32"}).find("Q4_0/F32"), std::string::npos);
  EXPECT_NE(description({stories, "--dtype", "bfloat16"}).find("(GGUF, BF16)"), std::string::npos);
  EXPECT_NE(description({stories, "--weight-type", "q4_0"}).find("Q4_0/F16"), std::string::npos);
  EXPECT_NE(description({stories, "--weight-type", "q4_0", "--dtype", "bf16"}).find("Q4_0/BF16"),
            std::string::npos);

  const testing::ProcessResult quantized =
      testing::run_tern({"bench-model", stories, "--dtype", "q4_0"});
  EXPECT_EQ(quantized.exit_code, 1);
  EXPECT_NE(quantized.err.find("use --weight-type q4_0"), std::string::npos) << quantized.err;
  EXPECT_EQ(std::count(quantized.err.begin(), quantized.err.end(), '\n'), 1) << quantized.err;
  const testing::ProcessResult both =
      testing::run_tern({"bench-model", stories, "--weight-type", "f16", "--dtype", "bf16"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("two float types"), std::string::npos) << both.err;
}

// -d gives one JSON line per depth (shallowest first), with the KV dtype it ran.
TEST(BenchModelCommand, DepthsAndKvCacheDtype) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  auto [out, status] = run_command(std::string(TERN_BINARY) + " bench-model '" +
                                   testing::fixture("stories260K/stories260K.gguf") +
                                   "' -p 8 -n 4 -r 1 -d 40,0 --kv-cache-dtype fp8 --json");
  ASSERT_EQ(status, 0) << out;
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t end; (end = out.find('\n', start)) != std::string::npos; start = end + 1)
    if (out[start] == '{') lines.push_back(nlohmann::json::parse(out.substr(start, end - start)));
  ASSERT_EQ(lines.size(), 2u) << out;
  EXPECT_EQ(lines[0]["depth"], 0);
  EXPECT_EQ(lines[1]["depth"], 40);
  for (const auto& l : lines) {
    EXPECT_EQ(l["kv_cache_dtype"], "fp8_e4m3");
    EXPECT_GT(l["tg_tokens_per_s"].get<double>(), 0.0);
  }
  EXPECT_NE(run_command(std::string(TERN_BINARY) + " bench-model '" +
                        testing::fixture("stories260K/stories260K.gguf") +
                        "' -p 0 -n 2 -r 1 --kv-cache-dtype q8_0")
                .second,
            0);
}

// --kv-cache-dtype reaches the engine of `generate`: an int8 cache's greedy ids follow the
// reference (its KL divergence to f16's is ~0.002 on stories), and its log line says int8.
TEST(GenerateCommand, Int8KvCache) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  std::ifstream in(testing::fixture("stories260K/reference_greedy_from_bos.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string base = std::string(TERN_BINARY) + " generate --model '" +
                           testing::fixture("stories260K/stories260K.gguf") +
                           "' --prompt '' -n 12 --json --kv-cache-dtype ";
  auto [out, status] = run_command(base + "int8");
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json result = nlohmann::json::parse(last_line(out));
  const std::vector<int> want(ref["greedy_ids"].begin(), ref["greedy_ids"].begin() + 12);
  EXPECT_EQ(result["token_ids"].get<std::vector<int>>(), want);
  auto [log, log_status] = run_command(base + "int8 2>&1 >/dev/null; true");
  EXPECT_NE(log.find("KV cache (int8)"), std::string::npos) << log;
  EXPECT_NE(run_command(base + "int4").second, 0);
}

// --weight-type q4_k_m requantizes with llama.cpp's mixture, and --save-gguf names the file Q4_K_M.
TEST(GenerateCommand, Q4_K_M_IsSavedWithItsFileType) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = testing::fixture("stories260K/stories260K.gguf");
  testing::TempDir dir("generate-q4km");
  const std::string saved = dir.file("s.gguf");
  auto [out, status] = run_command(
      std::string(TERN_BINARY) + " generate --model '" + model +
      "' --prompt '' -n 4 --json --threads 2 --weight-type q4_k_m --save-gguf '" + saved + "'");
  ASSERT_EQ(status, 0) << out;
  const GgufFile g = GgufFile::open(saved);
  EXPECT_EQ(g.get_int("general.file_type"), 15);
  // 5 layers: use_more_bits picks 2 and 4 for Q6_K, which 64-wide rows turn into Q8_0 (and
  // Q4_K into Q5_0).
  EXPECT_EQ(g.find_tensor("blk.2.attn_v.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(g.find_tensor("blk.1.attn_v.weight")->dtype, DType::Q5_0);
  auto [help, help_status] = run_command(std::string(TERN_BINARY) + " generate --help");
  EXPECT_NE(help.find("q4_k_m"), std::string::npos);
}

// What the output of a run needs is checked before the model loads.
TEST(GenerateCommand, OutputsAreCheckedBeforeTheModelLoads) {
  testing::ProcessResult r =
      testing::run_tern({"generate", "--model", "/nonexistent.gguf", "--prompts", "p.jsonl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--prompts needs --output FILE.jsonl"), std::string::npos) << r.err;
  r = testing::run_tern({"generate", "--model", "/nonexistent.gguf", "--prompts", "p.jsonl",
                         "--output", "/nonexistent/dir/out.jsonl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--output /nonexistent/dir/out.jsonl: the folder /nonexistent/dir does "
                       "not exist"),
            std::string::npos)
      << r.err;
}

TEST(GenerateCommand, MissingModelIsOneLineError) {
  auto [out, status] =
      run_command(std::string(TERN_BINARY) + " generate --model /nonexistent.gguf --prompt x");
  EXPECT_NE(status, 0);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace tern
