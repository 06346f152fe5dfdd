// What a --model argument names, and which files of a repository a command takes.
#include "tern/hub/model_spec.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"
#include "tern/hub/hub_cache.h"
#include "tern/hub/hub_download.h"

namespace tern::hub {
namespace {

TEST(ModelSpec, ExistingPathsAndNonHubNamesAreLocal) {
  EXPECT_EQ(parse_model_spec("/tmp").kind, ModelSpec::Kind::LocalPath);
  EXPECT_EQ(parse_model_spec("model.gguf").kind, ModelSpec::Kind::LocalPath);
  EXPECT_EQ(parse_model_spec("/no/such/model.gguf").kind, ModelSpec::Kind::LocalPath);
  EXPECT_EQ(parse_model_spec("./org/name").kind, ModelSpec::Kind::LocalPath);
  EXPECT_EQ(parse_model_spec("a--b/c").kind, ModelSpec::Kind::LocalPath);
  EXPECT_EQ(parse_model_spec("org/name").path, "org/name");
}

TEST(ModelSpec, HubForms) {
  ModelSpec repo = parse_model_spec("Qwen/Qwen3-0.6B");
  EXPECT_EQ(repo.kind, ModelSpec::Kind::Repo);
  EXPECT_EQ(repo.repo, "Qwen/Qwen3-0.6B");

  ModelSpec file = parse_model_spec("unsloth/Qwen3-0.6B-GGUF/sub/Qwen3-0.6B-Q4_0.gguf");
  EXPECT_EQ(file.kind, ModelSpec::Kind::RepoFile);
  EXPECT_EQ(file.repo, "unsloth/Qwen3-0.6B-GGUF");
  EXPECT_EQ(file.file, "sub/Qwen3-0.6B-Q4_0.gguf");

  ModelSpec quant = parse_model_spec("ggml-org/Qwen3-0.6B-GGUF:q8_0");
  EXPECT_EQ(quant.kind, ModelSpec::Kind::RepoQuant);
  EXPECT_EQ(quant.repo, "ggml-org/Qwen3-0.6B-GGUF");
  EXPECT_EQ(quant.quant, "q8_0");

  EXPECT_THROW(parse_model_spec("org/name:"), Error);
  EXPECT_THROW(parse_model_spec("org/name/weights.bin"), Error);
}

TEST(ModelSpec, QuantMatchesTheEndOfOneFileName) {
  const std::vector<std::string> files = {"README.md",   "m-Q4_K_M.gguf",      "m-Q4_K.gguf",
                                          "m.Q8_0.gguf", "mmproj-m-Q8_0.gguf", "m-f16.gguf"};
  EXPECT_EQ(select_gguf_file("o/m", files, "Q4_K_M"), "m-Q4_K_M.gguf");
  EXPECT_EQ(select_gguf_file("o/m", files, "q4_k_m"), "m-Q4_K_M.gguf");
  EXPECT_EQ(select_gguf_file("o/m", files, "Q4_K"), "m-Q4_K.gguf");
  EXPECT_EQ(select_gguf_file("o/m", files, "Q8_0"), "m.Q8_0.gguf");  // not the mmproj projector
  EXPECT_EQ(select_gguf_file("o/m", files, "F16"), "m-f16.gguf");
  try {
    select_gguf_file("o/m", files, "Q5_K_M");
    FAIL() << "no file should match";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m-Q4_K_M.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(select_gguf_file("o/m", {"a-Q4_0.gguf", "b-Q4_0.gguf"}, "Q4_0"), Error);
}

TEST(ModelSpec, SupportFilesByWhatTheCommandNeeds) {
  const std::vector<std::string> files = {"config.json",       "generation_config.json",
                                          "tokenizer.json",    "tokenizer_config.json",
                                          "model.safetensors", "README.md",
                                          "onnx/model.onnx",   "merges.txt"};
  EXPECT_EQ(select_support_files(files, RepoFiles::All),
            (std::vector<std::string>{"config.json", "generation_config.json", "merges.txt",
                                      "tokenizer.json", "tokenizer_config.json"}));
  EXPECT_EQ(select_support_files(files, RepoFiles::Tokenizer),
            (std::vector<std::string>{"config.json", "merges.txt", "tokenizer.json",
                                      "tokenizer_config.json"}));
}

TEST(ModelSpec, RefusesFileNamesThatLeaveTheSnapshot) {
  EXPECT_NO_THROW(check_repo_file_name("o/m", "sub/model.gguf"));
  EXPECT_THROW(check_repo_file_name("o/m", "../../../etc/passwd"), Error);
  EXPECT_THROW(check_repo_file_name("o/m", "/etc/passwd"), Error);
  EXPECT_THROW(check_repo_file_name("o/m", "a//b"), Error);
  EXPECT_THROW(check_repo_file_name("o/m", ""), Error);
}

TEST(ModelSpec, UrlEncodingOfRevisionsAndFiles) {
  EXPECT_EQ(url_encode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(url_encode("sub dir/a+b.gguf", true), "sub%20dir/a%2Bb.gguf");
  EXPECT_TRUE(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("main"));
}

}  // namespace
}  // namespace tern::hub
