// HubSettings from the environment, with huggingface_hub's defaults and precedence.
#include "tern/hub/hub_settings.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tern::hub {
namespace {

// An unset and an empty variable mean the same, as in huggingface_hub.
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string trim(const std::string& s) {
  auto is_space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(s.begin(), s.end(), is_space);
  auto end = std::find_if_not(s.rbegin(), s.rend(), is_space).base();
  return begin < end ? std::string(begin, end) : std::string();
}

std::filesystem::path home_dir() {
  if (std::string home = env("HOME"); !home.empty()) return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr)
    return pw->pw_dir;
  return ".";
}

}  // namespace

bool env_flag(const char* name) {
  std::string value = trim(env(name));
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return value == "1" || value == "ON" || value == "YES" || value == "TRUE";
}

std::filesystem::path hf_home() {
  if (std::string home = env("HF_HOME"); !home.empty()) return home;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty())
    return std::filesystem::path(xdg) / "huggingface";
  return home_dir() / ".cache" / "huggingface";
}

std::filesystem::path hub_cache_dir() {
  if (std::string cache = env("HF_HUB_CACHE"); !cache.empty()) return cache;
  if (std::string legacy = env("HUGGINGFACE_HUB_CACHE"); !legacy.empty()) return legacy;
  return hf_home() / "hub";
}

std::string hf_token() {
  if (std::string token = trim(env("HF_TOKEN")); !token.empty()) return token;
  if (std::string legacy = trim(env("HUGGING_FACE_HUB_TOKEN")); !legacy.empty()) return legacy;
  std::string path = env("HF_TOKEN_PATH");
  std::ifstream in(path.empty() ? hf_home() / "token" : std::filesystem::path(path));
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return trim(text.str());
}

HubSettings HubSettings::from_env() {
  HubSettings s;
  if (std::string endpoint = trim(env("HF_ENDPOINT")); !endpoint.empty()) s.endpoint = endpoint;
  while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
  s.cache_dir = hub_cache_dir();
  s.token = hf_token();
  s.offline = env_flag("HF_HUB_OFFLINE");
  return s;
}

}  // namespace tern::hub
