// resolve_model against a fake hub on a loopback port: the cache layout it writes, cache hits
// without the network, resumed downloads, offline mode, tokens, GGUF quantizations and errors.
#include "tern/hub/resolve_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hub/fake_hub_server.h"
#include "models/model_test_util.h"
#include "tern/core/error.h"

namespace tern::hub {
namespace {

namespace fs = std::filesystem;
using tern::testing::FakeHubServer;
using tern::testing::FakeRepo;
using tern::testing::FakeRepoFile;
using tern::testing::read_binary_file;
using tern::testing::TempDir;

constexpr char kCommit[] = "0123456789abcdef0123456789abcdef01234567";
constexpr char kRepo[] = "test-org/tiny";
constexpr char kGgufRepo[] = "test-org/tiny-GGUF";
constexpr char kGatedRepo[] = "test-org/gated";

// Bytes that differ at every offset, so a resume from the wrong place shows.
std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 251) & 0xff);
  return s;
}

FakeRepo safetensors_repo() {
  FakeRepo r;
  r.commit = kCommit;
  r.files["config.json"] = {R"({"model_type": "llama"})", false};
  r.files["generation_config.json"] = {R"({"do_sample": false})", false};
  r.files["tokenizer.json"] = {R"({"model": {}})", false};
  r.files["tokenizer_config.json"] = {R"({"bos_token": "<s>"})", false};
  r.files["model.safetensors.index.json"] = {
      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
          "b": "model-00002-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})",
      false};
  r.files["model-00001-of-00002.safetensors"] = {pattern(300000, 1), true};
  r.files["model-00002-of-00002.safetensors"] = {pattern(120000, 2), true};
  r.files["consolidated.safetensors"] = {pattern(1000, 3),
                                         true};  // not in the index: never fetched
  r.files["README.md"] = {"# tiny", false};
  return r;
}

FakeRepo gguf_repo() {
  FakeRepo r;
  r.commit = "89abcdef0123456789abcdef0123456789abcdef";
  r.files["tiny-Q4_K_M.gguf"] = {pattern(200000, 4), true};
  r.files["tiny-Q8_0.gguf"] = {pattern(250000, 5), true};
  r.files["README.md"] = {"# gguf", false};
  return r;
}

class ResolveModel : public ::testing::Test {
 protected:
  ResolveModel() : cache_("hub-resolve") {
    hub_.add_repo(kRepo, safetensors_repo());
    hub_.add_repo(kGgufRepo, gguf_repo());
    FakeRepo gated = safetensors_repo();
    gated.gated_token = "hf_secret";
    hub_.add_repo(kGatedRepo, gated);
    settings_.endpoint = hub_.endpoint();
    settings_.cache_dir = cache_.path();
  }

  std::string resolve(const std::string& spec, ResolveOptions options = {}) {
    return resolve_model(spec, options, settings_);
  }
  fs::path repo_dir(const std::string& folder) const { return cache_.path() / folder; }
  std::string etag(const std::string& repo, const std::string& file, const FakeRepo& r) const {
    return FakeHubServer::etag_of(repo, file, r.files.at(file));
  }
  std::string error_of(const std::string& spec, ResolveOptions options = {}) {
    try {
      resolve(spec, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  FakeHubServer hub_;
  TempDir cache_;
  HubSettings settings_;
};

TEST_F(ResolveModel, LocalPathsAreReturnedAsTheyAre) {
  EXPECT_EQ(resolve(cache_.path().string()), cache_.path().string());
  EXPECT_EQ(hub_.requests(), 0);
}

TEST_F(ResolveModel, FreshDownloadWritesTheHubCacheLayout) {
  const fs::path snapshot = resolve(kRepo);
  const fs::path dir = repo_dir("models--test-org--tiny");
  EXPECT_EQ(snapshot, dir / "snapshots" / kCommit);
  EXPECT_EQ(read_binary_file(dir / "refs" / "main"), kCommit);
  const FakeRepo repo = safetensors_repo();
  for (const char* file :
       {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "model.safetensors.index.json", "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors"}) {
    const fs::path pointer = snapshot / file;
    ASSERT_TRUE(fs::is_symlink(pointer)) << file;
    EXPECT_EQ(fs::read_symlink(pointer), fs::path("../../blobs") / etag(kRepo, file, repo)) << file;
    EXPECT_EQ(read_binary_file(pointer), repo.files.at(file).content) << file;
    EXPECT_TRUE(fs::is_regular_file(dir / "blobs" / etag(kRepo, file, repo))) << file;
  }
  EXPECT_FALSE(fs::exists(snapshot / "consolidated.safetensors"));
  EXPECT_FALSE(fs::exists(snapshot / "README.md"));
  for (const auto& blob : fs::directory_iterator(dir / "blobs"))
    EXPECT_EQ(blob.path().extension(), "") << "left over: " << blob.path();
}

TEST_F(ResolveModel, SecondResolveIsAnsweredByTheCacheWithoutTheNetwork) {
  const std::string first = resolve(kRepo);
  const std::string gguf = resolve(std::string(kGgufRepo) + ":Q8_0");
  const std::string file = resolve(std::string(kGgufRepo) + "/tiny-Q4_K_M.gguf");
  const int requests = hub_.requests();
  EXPECT_GT(requests, 0);
  EXPECT_EQ(resolve(kRepo), first);
  EXPECT_EQ(resolve(std::string(kGgufRepo) + ":q8_0"), gguf);
  EXPECT_EQ(resolve(std::string(kGgufRepo) + "/tiny-Q4_K_M.gguf"), file);
  EXPECT_EQ(hub_.requests(), requests);
}

TEST_F(ResolveModel, ReusesFilesThatAnotherRunLeftInTheCache) {
  // A snapshot written by hand in huggingface-cli's layout, with a hub that is not there.
  const fs::path dir = repo_dir("models--other--model");
  fs::create_directories(dir / "blobs");
  fs::create_directories(dir / "snapshots" / kCommit);
  fs::create_directories(dir / "refs");
  std::ofstream(dir / "refs" / "main") << kCommit;
  for (const char* file : {"config.json", "model.safetensors"}) {
    std::ofstream(dir / "blobs" / (std::string("blob-") + file)) << file;
    fs::create_symlink(fs::path("../../blobs") / (std::string("blob-") + file),
                       dir / "snapshots" / kCommit / file);
  }
  settings_.endpoint = "http://127.0.0.1:1";  // nothing listens there
  EXPECT_EQ(resolve("other/model"), (dir / "snapshots" / kCommit).string());
}

TEST_F(ResolveModel, InterruptedDownloadResumesWithARangeRequest) {
  hub_.cut_next_download_after(70000);
  const std::string path = resolve(std::string(kGgufRepo) + ":Q4_K_M");
  EXPECT_EQ(read_binary_file(path), gguf_repo().files.at("tiny-Q4_K_M.gguf").content);
  const std::vector<std::string> ranges = hub_.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=70000-");
}

TEST_F(ResolveModel, IncompleteBlobOfAnEarlierRunIsResumed) {
  const FakeRepo repo = gguf_repo();
  const std::string& content = repo.files.at("tiny-Q8_0.gguf").content;
  const fs::path blobs = repo_dir("models--test-org--tiny-GGUF") / "blobs";
  fs::create_directories(blobs);
  std::ofstream(blobs / (etag(kGgufRepo, "tiny-Q8_0.gguf", repo) + ".incomplete"), std::ios::binary)
      << content.substr(0, 12345);
  const std::string path = resolve(std::string(kGgufRepo) + "/tiny-Q8_0.gguf");
  EXPECT_EQ(read_binary_file(path), content);
  EXPECT_EQ(hub_.ranges(), (std::vector<std::string>{"bytes=12345-"}));
}

TEST_F(ResolveModel, OfflineNeverTouchesTheNetworkAndNamesWhatIsMissing) {
  settings_.offline = true;
  EXPECT_NE(error_of(kRepo).find("refs/main"), std::string::npos) << error_of(kRepo);
  const std::string file_error = error_of(std::string(kGgufRepo) + "/tiny-Q8_0.gguf");
  EXPECT_NE(file_error.find("HF_HUB_OFFLINE"), std::string::npos) << file_error;
  EXPECT_NE(file_error.find("tiny-Q8_0.gguf"), std::string::npos) << file_error;
  EXPECT_EQ(hub_.requests(), 0);

  settings_.offline = false;
  const std::string snapshot = resolve(kRepo);
  const std::string gguf = resolve(std::string(kGgufRepo) + ":Q8_0");
  const int requests = hub_.requests();
  settings_.offline = true;
  EXPECT_EQ(resolve(kRepo), snapshot);
  EXPECT_EQ(resolve(std::string(kGgufRepo) + ":Q8_0"), gguf);
  fs::remove(fs::path(snapshot) / "model-00002-of-00002.safetensors");
  const std::string shard_error = error_of(kRepo);
  EXPECT_NE(shard_error.find("model-00002-of-00002.safetensors"), std::string::npos) << shard_error;
  const std::string quant_error = error_of(std::string(kGgufRepo) + ":Q4_K_M");
  EXPECT_NE(quant_error.find("tiny-Q8_0.gguf"), std::string::npos)
      << quant_error;  // lists what is cached
  EXPECT_EQ(hub_.requests(), requests);
}

TEST_F(ResolveModel, TokenIsSentAsBearerAndGatedRepositoriesExplainThemselves) {
  const std::string error = error_of(kGatedRepo);
  EXPECT_NE(error.find("gated"), std::string::npos) << error;
  EXPECT_NE(error.find("HF_TOKEN"), std::string::npos) << error;
  settings_.token = "hf_secret";
  EXPECT_NO_THROW(resolve(kGatedRepo));
  const std::vector<std::string> auth = hub_.authorizations();
  EXPECT_EQ(auth.front(), "");
  EXPECT_EQ(auth.back(), "Bearer hf_secret");
}

TEST_F(ResolveModel, GgufQuantizationIsChosenFromTheListing) {
  const std::string path = resolve(std::string(kGgufRepo) + ":q4_k_m");
  EXPECT_EQ(fs::path(path).filename(), "tiny-Q4_K_M.gguf");
  EXPECT_EQ(read_binary_file(path), gguf_repo().files.at("tiny-Q4_K_M.gguf").content);
  const std::string error = error_of(std::string(kGgufRepo) + ":Q5_K_S");
  EXPECT_NE(error.find("tiny-Q4_K_M.gguf, tiny-Q8_0.gguf"), std::string::npos) << error;
  // A bare GGUF repository name with several files asks which one.
  const std::string bare = error_of(kGgufRepo);
  EXPECT_NE(bare.find(":QUANT"), std::string::npos) << bare;
}

TEST_F(ResolveModel, RevisionsByBranchAndByCommit) {
  const std::string by_commit = resolve(kRepo, {kCommit, RepoFiles::NoWeights});
  EXPECT_EQ(by_commit, (repo_dir("models--test-org--tiny") / "snapshots" / kCommit).string());
  EXPECT_FALSE(
      fs::exists(fs::path(by_commit) / "model-00001-of-00002.safetensors"));  // dummy weights
  EXPECT_TRUE(fs::exists(fs::path(by_commit) / "config.json"));
  const std::string error = error_of(kRepo, {"v9", RepoFiles::All});
  EXPECT_NE(error.find("no revision 'v9'"), std::string::npos) << error;
}

TEST_F(ResolveModel, MissingRepositoriesAndFilesAreClearErrors) {
  const std::string repo_error = error_of("test-org/missing");
  EXPECT_NE(repo_error.find("test-org/missing"), std::string::npos) << repo_error;
  EXPECT_NE(repo_error.find("not found"), std::string::npos) << repo_error;
  const std::string file_error = error_of(std::string(kRepo) + "/nope.gguf");
  EXPECT_NE(file_error.find("no file 'nope.gguf'"), std::string::npos) << file_error;
  const std::string dead = [&] {
    settings_.endpoint = "http://127.0.0.1:1";
    return error_of("test-org/elsewhere");
  }();
  EXPECT_NE(dead.find("cannot reach"), std::string::npos) << dead;
}

}  // namespace
}  // namespace tern::hub
