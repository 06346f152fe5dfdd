// Talking to a Hugging Face hub (or any server with its URL layout): list a repository at a
// revision, and bring one file into the cache the way huggingface_hub's hf_hub_download does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tern/hub/http_client.h"
#include "tern/hub/hub_settings.h"

namespace tern::hub {

struct RepoListing {
  std::string commit;              // the commit the revision points at ("sha")
  std::vector<std::string> files;  // every file of the repository ("siblings[].rfilename")
  // Bytes of each file, when the listing was asked with sizes ("siblings[].size"); files the
  // hub gave no size for are missing.
  std::map<std::string, uint64_t> sizes;
};

class HubDownloader {
 public:
  explicit HubDownloader(HubSettings settings);

  const HubSettings& settings() const { return settings_; }

  // GET {endpoint}/api/models/{repo}/revision/{revision}; `with_sizes` adds `?blobs=true`,
  // for which the hub gives each file's size (no file is downloaded).
  RepoListing list_files(const std::string& repo, const std::string& revision,
                         bool with_sizes = false) const;

  // HEAD {endpoint}/{repo}/resolve/{revision}/{file} gives the commit (X-Repo-Commit) and the
  // blob name (X-Linked-Etag, else ETag); when the blob is missing it is downloaded into
  // blobs/<etag>.incomplete (resuming what an earlier run left), then renamed, and
  // snapshots/<commit>/<file> is linked to it. Records refs/<revision>. Returns the snapshot path.
  std::filesystem::path download_file(const std::string& repo, const std::string& revision,
                                      const std::string& file) const;

 private:
  void fetch_blob(const std::string& url, const std::string& repo, const std::string& revision,
                  const std::string& file, const std::filesystem::path& incomplete,
                  const std::filesystem::path& blob, uint64_t size) const;

  HubSettings settings_;
  HttpClient http_;
};

// A repository file name tern is willing to create under a snapshot folder: relative, without
// "..", "." or empty components. Throws tern::Error otherwise.
void check_repo_file_name(const std::string& repo, const std::string& file);

// Percent-encoding of a URL path segment (keep_slash: a multi-segment path such as a file in a
// subfolder).
std::string url_encode(const std::string& text, bool keep_slash);

}  // namespace tern::hub
