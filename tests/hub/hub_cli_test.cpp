// The tern binary with Hugging Face names: inspect, generate and tokenize against a fake hub
// (HF_ENDPOINT) that serves the shared fixtures, compared with the same commands on the
// fixture files themselves.
#include <gtest/gtest.h>

#include <span>
#include <string>

#include "fixtures.h"
#include "hub/fake_hub_server.h"
#include "hub/hub_test_util.h"
#include "models/model_test_util.h"
#include "run_process.h"
#include "tern/formats/safetensors.h"

namespace tern::hub {
namespace {

using tern::testing::FakeHubServer;
using tern::testing::FakeRepo;
using tern::testing::fixture;
using tern::testing::read_binary_file;
using tern::testing::run_tern;
using tern::testing::ScopedEnv;
using tern::testing::TempDir;

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Everything after the first line (which names the file's path).
std::string without_first_line(const std::string& text) {
  const size_t nl = text.find('\n');
  return nl == std::string::npos ? "" : text.substr(nl + 1);
}

class HubCli : public ::testing::Test {
 protected:
  HubCli() : home_("hub-cli") {}

  TempDir home_;
  FakeHubServer hub_;
};

TEST_F(HubCli, InspectAndGenerateAGgufFromTheHubThenOffline) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string gguf = read_binary_file(fixture("stories260K/stories260K.gguf"));
  FakeRepo models;  // where the file really lives on the hub: ggml-org/models, tinyllamas/
  models.commit = "1111111111111111111111111111111111111111";
  models.files["tinyllamas/stories260K.gguf"] = {gguf, true};
  models.files["README.md"] = {"# models", false};
  hub_.add_repo("ggml-org/models", models);
  FakeRepo quants;
  quants.commit = "2222222222222222222222222222222222222222";
  quants.files["stories260K-F32.gguf"] = {gguf, true};
  quants.files["stories260K-Q8_0.gguf"] = {"not fetched", true};
  hub_.add_repo("test-org/stories260K-GGUF", quants);
  ScopedEnv env({{"HF_ENDPOINT", hub_.endpoint()},
                 {"HF_HOME", home_.path().string()},
                 {"HF_HUB_CACHE", std::nullopt},
                 {"HF_TOKEN", std::nullopt},
                 {"HF_HUB_OFFLINE", std::nullopt}});

  auto local = run_tern({"inspect", fixture("stories260K/stories260K.gguf")});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto remote = run_tern({"inspect", "ggml-org/models/tinyllamas/stories260K.gguf"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_NE(remote.out.find("models--ggml-org--models/snapshots/" + models.commit +
                            "/tinyllamas/stories260K.gguf"),
            std::string::npos)
      << remote.out;
  EXPECT_EQ(without_first_line(remote.out), without_first_line(local.out));

  const std::vector<std::string> generate = {
      "generate", "--prompt", "Once upon a time", "-n", "12", "--temperature", "0"};
  auto args = generate;
  args.insert(args.begin() + 1, {"--model", fixture("stories260K/stories260K.gguf")});
  auto expected = run_tern(args);
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  args = generate;
  args.insert(args.begin() + 1, {"--model", "test-org/stories260K-GGUF:f32"});
  auto online = run_tern(args);
  ASSERT_EQ(online.exit_code, 0) << online.err;
  EXPECT_EQ(online.out, expected.out);
  EXPECT_NE(online.err.find("stories260K-F32.gguf"), std::string::npos)
      << online.err;  // progress line

  const int requests = hub_.requests();
  ScopedEnv offline({{"HF_HUB_OFFLINE", "1"}});
  auto cached = run_tern(args);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(cached.out, expected.out);
  auto missing = run_tern({"inspect", "test-org/stories260K-GGUF:Q8_0"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("HF_HUB_OFFLINE"), std::string::npos) << missing.err;
  EXPECT_EQ(hub_.requests(), requests);
}

// A GGUF repository named without :QUANT: one GGUF file is the model, online and then from the
// cache offline; of several, every command that resolves the name (generate, dummy weights,
// tokenize, serve) lists them with the ORG/NAME:QUANT that picks each, also offline, where the
// cache's snapshot lacked config.json and said only that.
TEST_F(HubCli, ABareGgufRepositoryNameUsesItsFileOrListsThem) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string gguf = read_binary_file(fixture("stories260K/stories260K.gguf"));
  FakeRepo one;
  one.commit = "5555555555555555555555555555555555555555";
  one.files["stories260K-F32.gguf"] = {gguf, true};
  hub_.add_repo("test-org/one-GGUF", one);
  FakeRepo two;
  two.commit = "6666666666666666666666666666666666666666";
  two.files["stories260K-F32.gguf"] = {gguf, true};
  two.files["stories260K.Q8_0.gguf"] = {gguf, true};
  hub_.add_repo("test-org/two-GGUF", two);
  ScopedEnv env({{"HF_ENDPOINT", hub_.endpoint()},
                 {"HF_HOME", home_.path().string()},
                 {"HF_HUB_CACHE", std::nullopt},
                 {"HF_TOKEN", std::nullopt},
                 {"HF_HUB_OFFLINE", std::nullopt}});
  const std::vector<std::string> prompt = {"--prompt", "Once upon a time", "-n", "4"};
  auto generate = [&](const std::string& model, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"generate", "--model", model};
    args.insert(args.end(), prompt.begin(), prompt.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tern(args);
  };
  const std::string choices =
      "test-org/two-GGUF:F32 (stories260K-F32.gguf), test-org/two-GGUF:Q8_0 "
      "(stories260K.Q8_0.gguf)";
  auto expect_choices = [&](const tern::testing::ProcessResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 1) << what;
    EXPECT_NE(r.err.find(choices), std::string::npos) << what << ": " << r.err;
    EXPECT_EQ(r.err.find("missing config.json"), std::string::npos) << what << ": " << r.err;
  };

  auto online = generate("test-org/one-GGUF");
  ASSERT_EQ(online.exit_code, 0) << online.err;
  expect_choices(generate("test-org/two-GGUF"), "generate");
  // Both files in the cache: offline, the bare name still has two to choose from.
  ASSERT_EQ(generate("test-org/two-GGUF:F32").exit_code, 0);
  ASSERT_EQ(generate("test-org/two-GGUF:q8_0").exit_code, 0);

  const int requests = hub_.requests();
  ScopedEnv offline({{"HF_HUB_OFFLINE", "1"}});
  auto cached = generate("test-org/one-GGUF");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(cached.out, online.out);
  expect_choices(generate("test-org/two-GGUF"), "generate offline");
  expect_choices(generate("test-org/two-GGUF", {"--load-format", "dummy"}), "dummy offline");
  expect_choices(run_tern({"tokenize", "--model", "test-org/two-GGUF", "--text", "Once"}),
                 "tokenize offline");
  expect_choices(run_tern({"serve", "test-org/two-GGUF", "--port", "0"}), "serve offline");
  auto plan = run_tern({"plan", "test-org/two-GGUF", "--bandwidth", "100GB/s"});
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_NE(plan.err.find("GGUF repository"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find(choices), std::string::npos) << plan.err;
  EXPECT_EQ(hub_.requests(), requests);
}

TEST_F(HubCli, InspectAShardedSafetensorsRepository) {
  TERN_REQUIRE_FIXTURE("model-configs/llama-3.2-1b/config.json");
  TempDir local("hub-cli-sharded");
  SafetensorsWriter writer;
  std::vector<float> values(4096);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f;
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"})
    writer.add_tensor(name, DType::F32, {64, 64}, std::as_bytes(std::span<const float>(values)));
  writer.write_sharded(local.path().string(), 20000);  // three shards and an index
  std::filesystem::copy_file(fixture("model-configs/llama-3.2-1b/config.json"),
                             local.path() / "config.json");
  FakeRepo repo;
  repo.commit = "4444444444444444444444444444444444444444";
  for (const auto& entry : std::filesystem::directory_iterator(local.path())) {
    const std::string name = entry.path().filename().string();
    repo.files[name] = {read_binary_file(entry.path()), entry.path().extension() == ".safetensors"};
  }
  ASSERT_EQ(repo.files.count("model.safetensors.index.json"), 1u);
  hub_.add_repo("test-org/tiny-sharded", repo);
  const std::filesystem::path cache = home_.path() / "cache";
  ScopedEnv env({{"HF_ENDPOINT", hub_.endpoint()},
                 {"HF_HOME", home_.path().string()},
                 {"HF_HUB_CACHE", cache.string()},
                 {"HF_TOKEN", std::nullopt},
                 {"HF_HUB_OFFLINE", std::nullopt}});

  auto expected = run_tern({"inspect", local.path().string()});
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  auto remote = run_tern({"inspect", "test-org/tiny-sharded"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  const std::string snapshot =
      (cache / "models--test-org--tiny-sharded" / "snapshots" / repo.commit).string();
  EXPECT_EQ(remote.out, replace_all(expected.out, local.path().string(), snapshot));
}

TEST_F(HubCli, TokenizeWithATokenizerRepository) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  FakeRepo repo;
  repo.commit = "3333333333333333333333333333333333333333";
  for (const char* file : {"vocab.json", "merges.txt", "tokenizer_config.json"})
    repo.files[file] = {read_binary_file(fixture(std::string("qwen-tokenizer/") + file)), false};
  hub_.add_repo("test-org/qwen-tokenizer", repo);
  ScopedEnv env({{"HF_ENDPOINT", hub_.endpoint()},
                 {"HF_HOME", home_.path().string()},
                 {"HF_HUB_CACHE", (home_.path() / "elsewhere").string()},
                 {"HF_TOKEN", "hf_cli_token"},
                 {"HF_HUB_OFFLINE", std::nullopt}});
  const std::string text = "Hello world, this is tern.";
  auto expected = run_tern({"tokenize", "--model", fixture("qwen-tokenizer"), "--text", text});
  ASSERT_EQ(expected.exit_code, 0) << expected.err;
  auto remote = run_tern({"tokenize", "--model", "test-org/qwen-tokenizer", "--text", text});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, expected.out);
  EXPECT_TRUE(std::filesystem::exists(home_.path() / "elsewhere" /
                                      "models--test-org--qwen-tokenizer" / "refs" / "main"));
  EXPECT_EQ(hub_.authorizations().back(), "Bearer hf_cli_token");

  auto absent = run_tern({"tokenize", "--model", "test-org/absent", "--text", text});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_NE(absent.err.find("test-org/absent: not found"), std::string::npos) << absent.err;
}

}  // namespace
}  // namespace tern::hub
