// HubDownloader: the hub's listing and resolve URLs, its metadata headers, and resumable blob
// downloads under a per-blob lock file.
#include "tern/hub/hub_download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tern/core/error.h"
#include "tern/hub/download_progress.h"
#include "tern/hub/hub_cache.h"

namespace tern::hub {

namespace fs = std::filesystem;

namespace {

// Connection drops are retried from where the file stands, this many times in all.
constexpr int kMaxAttempts = 5;
constexpr int kMaxRelativeRedirects = 5;

// What the hub's answer means for people: the hub sets X-Error-Code on its errors
// (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) and answers 401 for a private or
// missing repository when the request has no token.
[[noreturn]] void throw_http_error(const HttpResponse& r, const HubSettings& s,
                                   const std::string& repo, const std::string& revision,
                                   const std::string& file, const std::string& url) {
  const std::string code = r.header("x-error-code");
  const std::string server_message = r.header("x-error-message");
  const std::string detail = server_message.empty() ? "" : " (server: " + server_message + ")";
  const std::string what = file.empty() ? repo : repo + "/" + file;
  if (r.status == 0)
    throw Error(what + ": cannot reach " + s.endpoint + ": " + r.transport_error +
                " (set HF_HUB_OFFLINE=1 to use only cached files)");
  if (code == "GatedRepo" || (r.status == 403 && server_message.find("gated") != std::string::npos))
    throw Error(repo + " is a gated repository: accept its conditions at " + s.endpoint + "/" +
                repo + " while logged in, and give that account's token in HF_TOKEN" + detail);
  if (r.status == 401)
    throw Error(what + ": 401 Unauthorized from " + s.endpoint + ": " +
                (s.token.empty()
                     ? "the repository is private, gated or does not exist; set HF_TOKEN "
                       "(or run `huggingface-cli login`) if you have access"
                     : "the token (HF_TOKEN or the saved login) was refused") +
                detail);
  if (r.status == 403)
    throw Error(what + ": 403 Forbidden from " + s.endpoint + ": the token has no access to " +
                repo + detail);
  if (r.status == 404) {
    if (code == "EntryNotFound")
      throw Error(repo + ": no file '" + file + "' at revision '" + revision + "'" + detail);
    if (code == "RevisionNotFound")
      throw Error(repo + ": no revision '" + revision + "' (a branch, tag or commit hash)" +
                  detail);
    throw Error(what + ": not found on " + s.endpoint + " (no such repository, revision '" +
                revision + "' or file), and no such local file or folder" + detail);
  }
  throw Error(what + ": HTTP " + std::to_string(r.status) + " from " + url + detail);
}

// The hub sends ETags quoted and, behind some proxies, weak (W/"…").
std::string normalize_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag.erase(0, 2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
    etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// An ETag becomes a file name in blobs/: only what hub ETags are made of (hex digests).
bool is_safe_blob_name(const std::string& etag) {
  if (etag.empty() || etag.size() > 128) return false;
  for (char c : etag) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

uint64_t parse_size(const std::string& value) {
  if (value.empty()) return 0;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
  return end != nullptr && *end == '\0' ? n : 0;
}

uint64_t size_of(const fs::path& path) {
  std::error_code ec;
  const uint64_t n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

// An exclusive flock held for the lifetime of the object: two processes downloading the same
// blob would otherwise append to one .incomplete file at once.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path.string() + ": cannot create the download lock file");
    if (::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      throw Error(path.string() + ": cannot lock it");
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

std::string url_encode(const std::string& text, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                            c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void check_repo_file_name(const std::string& repo, const std::string& file) {
  bool ok = !file.empty() && file.front() != '/' && file.find('\\') == std::string::npos &&
            file.find("//") == std::string::npos && file.find('\0') == std::string::npos;
  for (const auto& part : fs::path(file)) ok = ok && part != ".." && part != "." && !part.empty();
  if (!ok)
    throw Error(repo + ": refusing the file name '" + file + "' (not a plain relative path)");
}

HubDownloader::HubDownloader(HubSettings settings)
    : settings_(std::move(settings)), http_(settings_.token) {}

RepoListing HubDownloader::list_files(const std::string& repo, const std::string& revision,
                                      bool with_sizes) const {
  if (settings_.offline) throw Error(repo + ": HF_HUB_OFFLINE is set; not listing the repository");
  const std::string url = settings_.endpoint + "/api/models/" + url_encode(repo, true) +
                          "/revision/" + url_encode(revision, false) +
                          (with_sizes ? "?blobs=true" : "");
  const HttpResponse r = http_.get_text(url);
  if (r.status != 200 || !r.transport_error.empty())
    throw_http_error(r, settings_, repo, revision, "", url);
  const nlohmann::json listing = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!listing.is_object() || !listing.contains("sha") || !listing["sha"].is_string() ||
      !listing.contains("siblings") || !listing["siblings"].is_array())
    throw Error(url + ": not a hub model listing (no \"sha\" string and \"siblings\" list)");
  RepoListing out;
  out.commit = listing["sha"].get<std::string>();
  if (!is_commit_hash(out.commit))
    throw Error(url + ": \"sha\" is not a commit hash: '" + out.commit + "'");
  for (const auto& sibling : listing["siblings"]) {
    if (!sibling.is_object() || !sibling.contains("rfilename") || !sibling["rfilename"].is_string())
      continue;
    const std::string name = sibling["rfilename"].get<std::string>();
    out.files.push_back(name);
    if (sibling.contains("size") && sibling["size"].is_number_unsigned())
      out.sizes[name] = sibling["size"].get<uint64_t>();
  }
  return out;
}

fs::path HubDownloader::download_file(const std::string& repo, const std::string& revision,
                                      const std::string& file) const {
  if (settings_.offline)
    throw Error(repo + "/" + file + ": HF_HUB_OFFLINE is set; not downloading it");
  check_repo_file_name(repo, file);
  std::string url = settings_.endpoint;
  url += '/';
  url += url_encode(repo, true);
  url += "/resolve/";
  url += url_encode(revision, false);
  url += '/';
  url += url_encode(file, true);
  HttpResponse meta = http_.head(url);
  // A renamed repository answers with a relative redirect to its new name; an LFS file with an
  // absolute one to the CDN, whose headers are not the hub's, so only relative ones are followed.
  for (int i = 0;
       i < kMaxRelativeRedirects && meta.status >= 300 && meta.status < 400 &&
       meta.header("location").rfind("/", 0) == 0 && meta.header("x-repo-commit").empty();
       ++i) {
    url = settings_.endpoint + meta.header("location");
    meta = http_.head(url);
  }
  if (meta.status >= 400 || meta.status == 0)
    throw_http_error(meta, settings_, repo, revision, file, url);
  const std::string commit = meta.header("x-repo-commit");
  std::string etag = meta.header("x-linked-etag");
  if (etag.empty()) etag = meta.header("etag");
  etag = normalize_etag(etag);
  if (commit.empty() || etag.empty())
    throw Error(url + ": the answer has no X-Repo-Commit or ETag header (is HF_ENDPOINT=" +
                settings_.endpoint + " a Hugging Face hub?)");
  if (!is_commit_hash(commit))
    throw Error(url + ": X-Repo-Commit is not a commit hash: '" + commit + "'");
  if (!is_safe_blob_name(etag))
    throw Error(url + ": refusing the ETag '" + etag + "' as a blob name");
  uint64_t size = parse_size(meta.header("x-linked-size"));
  if (size == 0) size = parse_size(meta.header("content-length"));

  RepoCache cache(settings_.cache_dir, repo);
  cache.write_ref(revision, commit);
  if (auto cached = cache.cached_file(commit, file)) return *cached;
  const fs::path blob = cache.blob_path(etag);
  if (!fs::exists(blob)) {
    FileLock lock(cache.lock_path(etag));
    // Another process may have finished it while this one waited for the lock.
    if (!fs::exists(blob))
      fetch_blob(url, repo, revision, file, cache.incomplete_path(etag), blob, size);
  }
  return cache.link_snapshot_file(commit, file, etag);
}

void HubDownloader::fetch_blob(const std::string& url, const std::string& repo,
                               const std::string& revision, const std::string& file,
                               const fs::path& incomplete, const fs::path& blob,
                               uint64_t size) const {
  const std::string label = repo + "/" + file;
  fs::create_directories(blob.parent_path());
  DownloadProgress progress(label, size, size_of(incomplete));
  const ProgressCallback on_progress = [&progress](uint64_t done, uint64_t) {
    progress.update(done);
  };
  std::string last_error;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    const uint64_t before = size_of(incomplete);
    if (size > 0 && before > size) fs::remove(incomplete);  // not a prefix of this blob
    const HttpResponse r = http_.download_to_file(url, incomplete, size, on_progress);
    const uint64_t now = size_of(incomplete);
    if (r.status == 416) {
      // Nothing left to send from where the file stands: either it is whole, or it is not ours.
      if (size > 0 && now == size) break;
      fs::remove(incomplete);
      continue;
    }
    if (r.status >= 400) throw_http_error(r, settings_, repo, revision, file, url);
    if (r.transport_error.empty()) {
      if (size == 0 || now == size) break;
      fs::remove(incomplete);
      throw Error(label + ": the server sent " + std::to_string(now) + " bytes, expected " +
                  std::to_string(size));
    }
    last_error = r.transport_error;
    if (attempt + 1 == kMaxAttempts)
      throw Error(label + ": download interrupted at " + std::to_string(now) + " of " +
                  std::to_string(size) + " bytes: " + last_error + "; run again to resume from " +
                  incomplete.string());
    progress.note(label + ": transfer interrupted at " + std::to_string(now) + " bytes (" +
                  last_error + "); resuming");
  }
  const uint64_t done = size_of(incomplete);
  if (size > 0 && done != size)
    throw Error(label + ": download stopped at " + std::to_string(done) + " of " +
                std::to_string(size) + " bytes");
  progress.finish(done);
  fs::rename(incomplete, blob);
}

}  // namespace tern::hub
