// Where the Hugging Face hub is and what tern may do with it, read from the same environment
// variables huggingface_hub reads, so tern and Python share one cache and one login.
#pragma once

#include <filesystem>
#include <string>

namespace tern::hub {

struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, without a trailing '/'
  std::filesystem::path cache_dir;                  // the hub cache (holds models--ORG--NAME/)
  std::string token;                                // empty: anonymous requests
  bool offline = false;                             // HF_HUB_OFFLINE: never touch the network

  // HF_ENDPOINT, the cache (see hub_cache_dir), the token (see hf_token) and HF_HUB_OFFLINE.
  static HubSettings from_env();
};

// $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
std::filesystem::path hf_home();
// $HF_HUB_CACHE, else the legacy $HUGGINGFACE_HUB_CACHE, else hf_home()/hub.
std::filesystem::path hub_cache_dir();
// $HF_TOKEN (or the legacy $HUGGING_FACE_HUB_TOKEN), else the file $HF_TOKEN_PATH, else
// hf_home()/token (what `huggingface-cli login` writes); whitespace around it is dropped.
std::string hf_token();
// huggingface_hub's truthy values: 1, ON, YES, TRUE in any case.
bool env_flag(const char* name);

}  // namespace tern::hub
