// Where the hub cache and the token are, from the environment, as huggingface_hub reads them.
#include "tern/hub/hub_settings.h"

#include <gtest/gtest.h>

#include <fstream>

#include "hub/hub_test_util.h"
#include "models/model_test_util.h"

namespace tern::hub {
namespace {

using tern::testing::ScopedEnv;
using tern::testing::TempDir;

TEST(HubSettings, CacheDirDefaultsToHomeDotCache) {
  ScopedEnv env({{"HF_HUB_CACHE", std::nullopt},
                 {"HUGGINGFACE_HUB_CACHE", std::nullopt},
                 {"HF_HOME", std::nullopt},
                 {"XDG_CACHE_HOME", std::nullopt},
                 {"HOME", "/home/someone"}});
  EXPECT_EQ(hub_cache_dir(), "/home/someone/.cache/huggingface/hub");
  EXPECT_EQ(hf_home(), "/home/someone/.cache/huggingface");
}

TEST(HubSettings, XdgCacheHomeMovesHfHome) {
  ScopedEnv env({{"HF_HUB_CACHE", std::nullopt},
                 {"HUGGINGFACE_HUB_CACHE", std::nullopt},
                 {"HF_HOME", std::nullopt},
                 {"XDG_CACHE_HOME", "/xdg"},
                 {"HOME", "/home/someone"}});
  EXPECT_EQ(hub_cache_dir(), "/xdg/huggingface/hub");
}

TEST(HubSettings, HfHomeBeatsXdgAndHfHubCacheBeatsHfHome) {
  ScopedEnv env({{"HF_HUB_CACHE", std::nullopt},
                 {"HUGGINGFACE_HUB_CACHE", std::nullopt},
                 {"HF_HOME", "/hf-home"},
                 {"XDG_CACHE_HOME", "/xdg"}});
  EXPECT_EQ(hub_cache_dir(), "/hf-home/hub");
  {
    ScopedEnv legacy({{"HUGGINGFACE_HUB_CACHE", "/legacy"}});
    EXPECT_EQ(hub_cache_dir(), "/legacy");
    ScopedEnv cache({{"HF_HUB_CACHE", "/hub-cache"}});
    EXPECT_EQ(hub_cache_dir(), "/hub-cache");
  }
  ScopedEnv empty({{"HF_HUB_CACHE", ""}});  // empty counts as unset
  EXPECT_EQ(hub_cache_dir(), "/hf-home/hub");
}

TEST(HubSettings, TokenFromEnvThenTokenPathThenHfHomeFile) {
  TempDir dir("hub-token");
  std::ofstream(dir.file("token")) << "hf_fromfile\n";
  std::ofstream(dir.file("other")) << "  hf_frompath  \n";
  ScopedEnv env({{"HF_HOME", dir.path().string()},
                 {"HF_TOKEN", std::nullopt},
                 {"HUGGING_FACE_HUB_TOKEN", std::nullopt},
                 {"HF_TOKEN_PATH", std::nullopt}});
  EXPECT_EQ(hf_token(), "hf_fromfile");
  {
    ScopedEnv path({{"HF_TOKEN_PATH", dir.file("other")}});
    EXPECT_EQ(hf_token(), "hf_frompath");
    ScopedEnv token({{"HF_TOKEN", "hf_fromenv"}});
    EXPECT_EQ(hf_token(), "hf_fromenv");
  }
  std::filesystem::remove(dir.file("token"));
  EXPECT_EQ(hf_token(), "");
}

TEST(HubSettings, FromEnvReadsEndpointAndOfflineFlag) {
  ScopedEnv env({{"HF_ENDPOINT", "http://mirror.example:8080/"},
                 {"HF_HUB_OFFLINE", "1"},
                 {"HF_HUB_CACHE", "/c"},
                 {"HF_TOKEN", "hf_x"}});
  HubSettings s = HubSettings::from_env();
  EXPECT_EQ(s.endpoint, "http://mirror.example:8080");
  EXPECT_TRUE(s.offline);
  EXPECT_EQ(s.cache_dir, "/c");
  EXPECT_EQ(s.token, "hf_x");
  for (const char* yes : {"true", "YES", "On"}) {
    ScopedEnv flag({{"HF_HUB_OFFLINE", yes}});
    EXPECT_TRUE(HubSettings::from_env().offline) << yes;
  }
  for (const char* no : {"0", "", "false", "nope"}) {
    ScopedEnv flag({{"HF_HUB_OFFLINE", no}});
    EXPECT_FALSE(HubSettings::from_env().offline) << no;
  }
  ScopedEnv unset({{"HF_ENDPOINT", std::nullopt}});
  EXPECT_EQ(HubSettings::from_env().endpoint, "https://huggingface.co");
}

}  // namespace
}  // namespace tern::hub
