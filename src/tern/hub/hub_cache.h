// One model repository's folder in the Hugging Face hub cache, in huggingface_hub's layout:
//   models--ORG--NAME/blobs/<etag>                      file contents, named by their ETag
//   models--ORG--NAME/snapshots/<commit>/<file>         relative symlink → ../../blobs/<etag>
//   models--ORG--NAME/refs/<revision>                   the commit hash a branch or tag pointed to
// so files that huggingface-cli downloaded are found here, and files tern downloads are
// usable by transformers or vLLM later.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tern::hub {

// True for a full 40-hex-digit git commit hash (a revision that needs no refs/ lookup).
bool is_commit_hash(const std::string& revision);

class RepoCache {
 public:
  // repo: "ORG/NAME".
  RepoCache(std::filesystem::path cache_dir, std::string repo);

  const std::string& repo() const { return repo_; }
  // cache_dir/models--ORG--NAME
  const std::filesystem::path& repo_dir() const { return repo_dir_; }
  std::filesystem::path blob_path(const std::string& etag) const;
  // Where a blob grows while it downloads; a later download resumes it.
  std::filesystem::path incomplete_path(const std::string& etag) const;
  // cache_dir/.locks/models--ORG--NAME/<etag>.lock (huggingface_hub's lock folder)
  std::filesystem::path lock_path(const std::string& etag) const;
  std::filesystem::path snapshot_dir(const std::string& commit) const;

  // The commit a revision names: itself when it is a commit hash, else what refs/<revision>
  // holds. nullopt when the cache has never seen it.
  std::optional<std::string> commit_of(const std::string& revision) const;
  // Records that `revision` pointed at `commit` (nothing to record when they are equal).
  void write_ref(const std::string& revision, const std::string& commit) const;
  // snapshots/<commit>/<file> → its blob, replacing whatever link was there.
  std::filesystem::path link_snapshot_file(const std::string& commit, const std::string& file,
                                           const std::string& etag) const;
  // The snapshot's file when it is there and its link is not dangling.
  std::optional<std::filesystem::path> cached_file(const std::string& commit,
                                                   const std::string& file) const;
  // Every file of a snapshot (paths relative to it, '/'-separated, sorted).
  std::vector<std::string> snapshot_files(const std::string& commit) const;

 private:
  std::filesystem::path cache_dir_;
  std::string repo_;
  std::string folder_name_;  // models--ORG--NAME
  std::filesystem::path repo_dir_;
};

}  // namespace tern::hub
