// RepoCache: paths, refs and snapshot links of one repository in the hub cache.
#include "tern/hub/hub_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <system_error>

#include "tern/core/error.h"

namespace tern::hub {

namespace fs = std::filesystem;

bool is_commit_hash(const std::string& revision) {
  return revision.size() == 40 && std::all_of(revision.begin(), revision.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

RepoCache::RepoCache(fs::path cache_dir, std::string repo)
    : cache_dir_(std::move(cache_dir)), repo_(std::move(repo)) {
  // "ORG/NAME" → "models--ORG--NAME": huggingface_hub's repo_folder_name for models.
  folder_name_ = "models--";
  for (char c : repo_) {
    if (c == '/')
      folder_name_ += "--";
    else
      folder_name_ += c;
  }
  repo_dir_ = cache_dir_ / folder_name_;
}

fs::path RepoCache::blob_path(const std::string& etag) const { return repo_dir_ / "blobs" / etag; }

fs::path RepoCache::incomplete_path(const std::string& etag) const {
  return repo_dir_ / "blobs" / (etag + ".incomplete");
}

fs::path RepoCache::lock_path(const std::string& etag) const {
  return cache_dir_ / ".locks" / folder_name_ / (etag + ".lock");
}

fs::path RepoCache::snapshot_dir(const std::string& commit) const {
  return repo_dir_ / "snapshots" / commit;
}

std::optional<std::string> RepoCache::commit_of(const std::string& revision) const {
  if (is_commit_hash(revision)) return revision;
  std::ifstream in(repo_dir_ / "refs" / revision);
  if (!in) return std::nullopt;
  std::string commit;
  std::getline(in, commit);
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back())))
    commit.pop_back();
  if (commit.empty()) return std::nullopt;
  return commit;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  const fs::path ref = repo_dir_ / "refs" / revision;
  if (commit_of(revision) == commit) return;
  fs::create_directories(ref.parent_path());
  // Write then rename, so a reader never sees half a hash.
  const fs::path tmp = ref.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << commit;
    if (!out) throw Error(tmp.string() + ": cannot write the hub cache's ref file");
  }
  fs::rename(tmp, ref);
}

fs::path RepoCache::link_snapshot_file(const std::string& commit, const std::string& file,
                                       const std::string& etag) const {
  const fs::path pointer = snapshot_dir(commit) / file;
  fs::create_directories(pointer.parent_path());
  std::error_code ec;
  fs::remove(pointer, ec);  // a stale or dangling link; remove() never follows it
  // Relative, as huggingface_hub makes it, so the cache can be moved or mounted elsewhere.
  const fs::path target = blob_path(etag).lexically_relative(pointer.parent_path());
  fs::create_symlink(target, pointer, ec);
  if (ec)
    throw Error(pointer.string() + ": cannot link it to " + target.string() + ": " + ec.message());
  return pointer;
}

std::optional<fs::path> RepoCache::cached_file(const std::string& commit,
                                               const std::string& file) const {
  const fs::path pointer = snapshot_dir(commit) / file;
  std::error_code ec;
  if (fs::is_regular_file(pointer, ec)) return pointer;  // follows the link: dangling → false
  return std::nullopt;
}

std::vector<std::string> RepoCache::snapshot_files(const std::string& commit) const {
  std::vector<std::string> files;
  const fs::path dir = snapshot_dir(commit);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (fs::is_regular_file(it->path(), ec))
      files.push_back(it->path().lexically_relative(dir).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tern::hub
