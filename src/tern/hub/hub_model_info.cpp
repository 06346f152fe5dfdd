// fetch_config_and_sizes: one listing request and, when the cache lacks it, one config.json.
#include "tern/hub/hub_model_info.h"

#include <algorithm>

#include "tern/core/error.h"
#include "tern/hub/hub_cache.h"
#include "tern/hub/hub_download.h"
#include "tern/hub/model_spec.h"

namespace tern::hub {

namespace fs = std::filesystem;

namespace {

std::string gguf_hint(const std::string& repo, const std::vector<std::string>& files,
                      const std::map<std::string, uint64_t>& sizes) {
  const std::vector<std::string> ggufs = gguf_files(files);
  if (ggufs.empty()) return "";
  std::string list;
  for (const std::string& f : ggufs) {
    const auto it = sizes.find(f);
    list += (list.empty() ? "" : ", ") + f +
            (it == sizes.end() ? "" : " (" + std::to_string(it->second) + " bytes)");
  }
  return "; it is a GGUF repository, whose tensor types are in each file's header: download one "
         "and plan it as " +
         gguf_choices(repo, ggufs) + " (" + list + ")";
}

}  // namespace

HubModelInfo fetch_config_and_sizes(const std::string& repo, const std::string& revision,
                                    const HubSettings& settings) {
  HubModelInfo info;
  info.repo = repo;
  const RepoCache cache(settings.cache_dir, repo);
  if (settings.offline) {
    const auto commit = cache.commit_of(revision);
    const auto config = commit ? cache.cached_file(*commit, "config.json") : std::nullopt;
    if (!config) {
      // The snapshot may hold the GGUF files of an earlier ORG/NAME:QUANT: they are the hint.
      const std::vector<std::string> files =
          commit ? cache.snapshot_files(*commit) : std::vector<std::string>{};
      std::map<std::string, uint64_t> sizes;
      for (const std::string& f : files) {
        std::error_code ec;
        if (const uint64_t n = fs::file_size(cache.snapshot_dir(*commit) / f, ec); !ec)
          sizes[f] = n;
      }
      throw Error("HF_HUB_OFFLINE is set and " + repo + " (revision '" + revision +
                  "') has no config.json in the cache " + cache.repo_dir().string() +
                  gguf_hint(repo, files, sizes));
    }
    info.commit = *commit;
    info.config = *config;
    info.files = cache.snapshot_files(*commit);
    for (const std::string& f : info.files) {
      std::error_code ec;
      const uint64_t n = fs::file_size(cache.snapshot_dir(*commit) / f, ec);
      if (!ec) info.file_sizes[f] = n;
    }
    return info;
  }
  const HubDownloader hub(settings);
  RepoListing listing = hub.list_files(repo, revision, /*with_sizes=*/true);
  cache.write_ref(revision, listing.commit);
  if (std::find(listing.files.begin(), listing.files.end(), "config.json") == listing.files.end())
    throw Error(repo + " has no config.json" + gguf_hint(repo, listing.files, listing.sizes));
  info.commit = listing.commit;
  info.config = hub.download_file(repo, listing.commit, "config.json");
  info.files = std::move(listing.files);
  info.file_sizes = std::move(listing.sizes);
  return info;
}

}  // namespace tern::hub
