// `tern plan` through the binary: --json's figures for a fixture config, the "does not fit"
// advice in text, a GGUF that `tern quantize` wrote planned to its exact tensor bytes (and
// equal to the plan of --weight-type on its input), a Hugging Face name planned from config.json
// and the listing's sizes with no weights downloaded, a hub GGUF only from the cache, and refused
// flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "fixtures.h"
#include "hub/fake_hub_server.h"
#include "hub/hub_test_util.h"
#include "models/model_test_util.h"
#include "plan/plan_test_util.h"
#include "run_process.h"
#include "tern/formats/gguf.h"
#include "tern/models/gguf_export.h"
#include "tern/models/weight_loader.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;
using testing::TempDir;

nlohmann::json plan_json(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"plan"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  const auto r = run_tern(all);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(PlanCli, JsonOfQwen3_8bAtQ4_0On936GBps) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-8b/config.json");
  const nlohmann::json j = plan_json({fixture("model-configs/qwen3-8b"), "--weight-type", "q4_0",
                                      "--bandwidth", "936GB/s", "--device-memory", "24GiB",
                                      "--max-model-len", "8192", "--kv-cache-dtype", "int8"});
  // 8,190,427,136 matrix weights at 18 bytes per 32, 308,224 f32 norm weights.
  EXPECT_EQ(j["weights"]["bytes"], 8'190'427'136ull / 32 * 18 + 308'224ull * 4);
  EXPECT_EQ(j["weights"]["by_type"][0]["type"], "Q4_0");
  EXPECT_EQ(j["weights"]["bytes_read_per_token"], 4'258'287'616ull);
  // int8 KV: 2 · 36 layers · 8 heads · (128 + a 2-byte scale); 512 blocks of 16 tokens.
  EXPECT_EQ(j["kv_cache"]["dtype"], "int8");
  EXPECT_EQ(j["kv_cache"]["bytes_per_token"], 74880);
  EXPECT_EQ(j["kv_cache"]["bytes"], 512ull * 16 * 74880 + 4 * 36 * 64);
  int chosen = 0;
  for (const auto& kv : j["kv_cache"]["per_dtype"]) chosen += kv["chosen"].get<bool>() ? 1 : 0;
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(j["kv_cache"]["per_dtype"].size(), 5u);
  EXPECT_EQ(j["memory"]["device_memory_bytes"], 24ull << 30);
  EXPECT_EQ(j["memory"]["device_memory_source"], "--device-memory");
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
  EXPECT_EQ(j["memory"]["total_bytes"].get<uint64_t>(),
            j["memory"]["weights_bytes"].get<uint64_t>() +
                j["memory"]["repacked_bytes"].get<uint64_t>() +
                j["memory"]["kv_cache_bytes"].get<uint64_t>() +
                j["memory"]["working_bytes"].get<uint64_t>());
  EXPECT_DOUBLE_EQ(j["decode"]["bandwidth_bytes_per_s"].get<double>(), 936e9);
  EXPECT_NEAR(j["decode"]["tokens_per_s_context_0"].get<double>(), 936e9 / 4'258'287'616.0, 1e-6);
  EXPECT_NEAR(j["decode"]["tokens_per_s_max_model_len"].get<double>(),
              936e9 / (4'258'287'616.0 + 8192.0 * 74880), 1e-6);
  ASSERT_EQ(j["devices"].size(), 6u);
  EXPECT_EQ(j["devices"][4]["name"], "H200");
  EXPECT_NEAR(j["devices"][4]["tokens_per_s_context_0"].get<double>(), 4800e9 / 4'258'287'616.0,
              1e-6);
}

TEST(PlanCli, TextSaysWhatWouldFit) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-8b/config.json");
  const auto r =
      run_tern({"plan", fixture("model-configs/qwen3-8b"), "--weight-type", "f16", "--bandwidth",
                "936GB/s", "--device-memory", "24GiB", "--max-num-seqs", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("does not fit. What would:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--max-num-seqs 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--max-model-len "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RTX 3090"), std::string::npos);
  EXPECT_NE(r.out.find("61.8"), std::string::npos) << r.out;  // 936 GB/s over 15.1 GB a token
}

TEST(PlanCli, AQuantizedGgufIsPlannedAsItsTensorBytesAndAsDtypePredicted) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TempDir dir("plan-cli-gguf");
  const ModelConfig c = testing::tiny_qwen3_config(8, /*tied=*/true);
  const std::string f32 = dir.file("f32.gguf");
  save_gguf(f32, make_dummy_weights(c, DType::F32, 11), c, nullptr, "tiny");
  const std::string q = dir.file("q4_k_m.gguf");
  ASSERT_EQ(run_tern({"quantize", f32, q, "q4_k_m"}).exit_code, 0);

  uint64_t tensor_bytes = 0;
  const GgufFile quantized = GgufFile::open(q);
  for (const TensorInfo& t : quantized.tensors()) tensor_bytes += t.nbytes;
  const nlohmann::json file = plan_json({q, "--bandwidth", "10GB/s", "--device-memory", "1GiB"});
  EXPECT_EQ(file["format"], "GGUF");
  EXPECT_EQ(file["weights"]["bytes"], tensor_bytes);
  const nlohmann::json predicted = plan_json(
      {f32, "--weight-type", "q4_k_m", "--bandwidth", "10GB/s", "--device-memory", "1GiB"});
  EXPECT_EQ(predicted["weights"]["bytes"], tensor_bytes);
  EXPECT_EQ(predicted["weights"]["by_type"], file["weights"]["by_type"]);
}

TEST(PlanCli, AHuggingFaceNameNeedsOnlyItsConfigAndTheListing) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-1.7b/config.json");
  testing::FakeHubServer hub;
  TempDir home("plan-cli-hub");
  testing::FakeRepo repo;
  repo.commit = "5555555555555555555555555555555555555555";
  repo.files["config.json"] = {
      testing::read_binary_file(fixture("model-configs/qwen3-1.7b/config.json")), false};
  // Stand-ins for the weights: only their sizes may be asked for.
  repo.files["model-00001-of-00002.safetensors"] = {std::string(3000, 'a'), true};
  repo.files["model-00002-of-00002.safetensors"] = {std::string(1000, 'b'), true};
  hub.add_repo("Qwen/Qwen3-1.7B", repo);
  testing::ScopedEnv env({{"HF_ENDPOINT", hub.endpoint()},
                          {"HF_HOME", home.path().string()},
                          {"HF_HUB_CACHE", std::nullopt},
                          {"HF_TOKEN", std::nullopt},
                          {"HF_HUB_OFFLINE", std::nullopt}});
  const nlohmann::json remote =
      plan_json({"Qwen/Qwen3-1.7B", "--bandwidth", "936GB/s", "--device-memory", "24GiB"});
  EXPECT_EQ(remote["format"], "Hugging Face config.json");
  EXPECT_EQ(remote["weights"]["repo_safetensors_bytes"], 4000);
  EXPECT_TRUE(hub.ranges().empty());  // nothing fetched from the "CDN", where LFS files live
  const nlohmann::json local = plan_json(
      {fixture("model-configs/qwen3-1.7b"), "--bandwidth", "936GB/s", "--device-memory", "24GiB"});
  // The same plan as the config.json on disk, the listing's sizes beside it.
  nlohmann::json remote_weights = remote["weights"], local_weights = local["weights"];
  remote_weights.erase("repo_safetensors_bytes");
  local_weights.erase("repo_safetensors_bytes");
  EXPECT_EQ(remote_weights, local_weights);
  EXPECT_EQ(remote["kv_cache"], local["kv_cache"]);

  // Offline, the cached config.json is enough.
  testing::ScopedEnv offline({{"HF_HUB_OFFLINE", "1"}});
  const int requests = hub.requests();
  const nlohmann::json cached =
      plan_json({"Qwen/Qwen3-1.7B", "--bandwidth", "936GB/s", "--device-memory", "24GiB"});
  EXPECT_EQ(cached["weights"]["bytes"], local["weights"]["bytes"]);
  EXPECT_EQ(hub.requests(), requests);
}

TEST(PlanCli, AHubGgufIsPlannedFromTheCacheOnly) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::FakeHubServer hub;
  TempDir home("plan-cli-hub-gguf");
  testing::FakeRepo repo;
  repo.commit = "6666666666666666666666666666666666666666";
  repo.files["stories260K-F32.gguf"] = {
      testing::read_binary_file(fixture("stories260K/stories260K.gguf")), true};
  hub.add_repo("test-org/stories260K-GGUF", repo);
  testing::ScopedEnv env({{"HF_ENDPOINT", hub.endpoint()},
                          {"HF_HOME", home.path().string()},
                          {"HF_HUB_CACHE", std::nullopt},
                          {"HF_TOKEN", std::nullopt},
                          {"HF_HUB_OFFLINE", std::nullopt}});
  // Not cached: refused with what to do, nothing fetched.
  auto r = run_tern(
      {"plan", "test-org/stories260K-GGUF:F32", "--bandwidth", "1GB/s", "--device-memory", "1GiB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("downloads no weights"), std::string::npos) << r.err;
  EXPECT_EQ(hub.requests(), 0);
  // Once another command brought it into the cache, its header is planned like the file's.
  ASSERT_EQ(run_tern({"inspect", "test-org/stories260K-GGUF:F32"}).exit_code, 0);
  const nlohmann::json cached = plan_json(
      {"test-org/stories260K-GGUF:F32", "--bandwidth", "1GB/s", "--device-memory", "1GiB"});
  const nlohmann::json local = plan_json(
      {fixture("stories260K/stories260K.gguf"), "--bandwidth", "1GB/s", "--device-memory", "1GiB"});
  EXPECT_EQ(cached["format"], "GGUF");
  EXPECT_EQ(cached["weights"], local["weights"]);
}

TEST(PlanCli, RefusesBadFlags) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-8b/config.json");
  const std::string model = fixture("model-configs/qwen3-8b");
  auto r = run_tern({"plan", model, "--bandwidth", "936GB", "--device-memory", "24GiB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'936GB' is not a bandwidth"), std::string::npos) << r.err;
  r = run_tern({"plan", model, "--bandwidth", "936GB/s", "--device-memory", "lots"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'lots' is not a memory size"), std::string::npos) << r.err;
  r = run_tern({"plan", model, "--bandwidth", "936GB/s", "--kv-cache-dtype", "fp4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kv-cache-dtype 'fp4'"), std::string::npos) << r.err;
  r = run_tern({"plan", model, "--bandwidth", "936GB/s", "--weight-type", "q3_k_xl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--weight-type 'q3_k_xl'"), std::string::npos) << r.err;
  r = run_tern({"plan", model, "--bandwidth", "936GB/s", "--max-num-seqs", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--max-num-seqs must be >= 1"), std::string::npos) << r.err;
  r = run_tern({"plan", "/nonexistent/model.gguf", "--bandwidth", "936GB/s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no such file or folder"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tern
