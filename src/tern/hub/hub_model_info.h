// What `tern plan` asks of a Hugging Face repository: its config.json and the size of every
// file, with no weights downloaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tern/hub/hub_settings.h"

namespace tern::hub {

struct HubModelInfo {
  std::string repo;
  std::string commit;
  std::filesystem::path config;                // config.json, in the cache like any download
  std::vector<std::string> files;              // every file of the revision
  std::map<std::string, uint64_t> file_sizes;  // bytes of those the hub (or the cache) sized
};

// Online: the listing with sizes, then config.json into the cache. Offline (HF_HUB_OFFLINE), or
// when the cache already has the revision's config.json and nothing else is wanted: the cache
// alone, sizes of the files it holds. Throws tern::Error for a repository without config.json
// (a GGUF repository: its types are in the file's header, which this does not download).
HubModelInfo fetch_config_and_sizes(const std::string& repo, const std::string& revision,
                                    const HubSettings& settings);

}  // namespace tern::hub
