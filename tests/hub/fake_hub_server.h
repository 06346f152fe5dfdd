// A Hugging Face hub in a thread of the test binary (cpp-httplib on 127.0.0.1, a free port):
// the model listing API, resolve URLs with the hub's metadata headers, LFS files redirected
// to a "CDN" path, Range requests, gated repositories and the hub's error codes. It counts
// the requests and records the Range and Authorization headers it saw.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tern::testing {

struct FakeRepoFile {
  std::string content;
  bool lfs = false;  // served like the hub's LFS files: 302 to the CDN, X-Linked-Etag/Size
};

struct FakeRepo {
  std::string commit;  // 40 hex digits
  std::map<std::string, FakeRepoFile> files;
  std::string gated_token;  // non-empty: only `Authorization: Bearer <gated_token>` gets in
};

inline std::string read_binary_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FakeHubServer {
 public:
  FakeHubServer() {
    server_.Get(R"(/api/models/([^/]+)/([^/]+)/revision/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) { listing(req, res); });
    server_.Get(R"(/([^/]+)/([^/]+)/resolve/([^/]+)/(.+))",
                [this](const httplib::Request& req, httplib::Response& res) { resolve(req, res); });
    server_.Get(R"(/cdn/([^/]+)/([0-9a-f]+))",
                [this](const httplib::Request& req, httplib::Response& res) { cdn(req, res); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeHubServer() {
    server_.stop();
    thread_.join();
  }
  FakeHubServer(const FakeHubServer&) = delete;
  FakeHubServer& operator=(const FakeHubServer&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void add_repo(const std::string& name, FakeRepo repo) {
    std::lock_guard<std::mutex> lock(mutex_);
    repos_[name] = std::move(repo);
  }

  // The next CDN download of any file is cut after `bytes` bytes (the connection is closed).
  void cut_next_download_after(size_t bytes) { cut_after_ = static_cast<long long>(bytes); }

  // The blob name the hub gives a file: a sha256-like id for LFS files, a git-sha1-like one
  // for the others (any stable hex id serves).
  static std::string etag_of(const std::string& repo, const std::string& file,
                             const FakeRepoFile& f) {
    const size_t h1 = std::hash<std::string>{}(repo + "\n" + file + "\n" + f.content);
    const size_t h2 = std::hash<std::string>{}(f.content + "\n" + file);
    char buf[80];
    std::snprintf(buf, sizeof buf, "%016zx%016zx%016zx%016zx", h1, h2, h1 ^ 0x5bd1e995u,
                  h2 ^ 0x1b873593u);
    return std::string(buf).substr(0, f.lfs ? 64 : 40);
  }

  int requests() const { return requests_; }
  std::vector<std::string> ranges() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ranges_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return authorizations_;
  }

 private:
  // The repository of a request after the access checks, or nullptr with `res` set to the error.
  const FakeRepo* find_repo(const httplib::Request& req, httplib::Response& res,
                            const std::string& name) {
    ++requests_;
    authorizations_.push_back(req.get_header_value("Authorization"));
    auto it = repos_.find(name);
    if (it == repos_.end()) {
      res.status = 404;
      res.set_header("X-Error-Code", "RepoNotFound");
      res.set_header("X-Error-Message", "Repository not found");
      return nullptr;
    }
    const FakeRepo& repo = it->second;
    if (!repo.gated_token.empty() &&
        req.get_header_value("Authorization") != "Bearer " + repo.gated_token) {
      res.status = 401;
      res.set_header("X-Error-Code", "GatedRepo");
      res.set_header("X-Error-Message", "Access to model " + name + " is restricted");
      return nullptr;
    }
    return &repo;
  }

  static bool revision_ok(const FakeRepo& repo, const std::string& revision) {
    return revision == "main" || revision == repo.commit;
  }

  void listing(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = req.matches[1].str() + "/" + req.matches[2].str();
    const FakeRepo* repo = find_repo(req, res, name);
    if (repo == nullptr) return;
    if (!revision_ok(*repo, req.matches[3].str())) {
      res.status = 404;
      res.set_header("X-Error-Code", "RevisionNotFound");
      return;
    }
    // With ?blobs=true the hub adds each file's size.
    const bool blobs = req.get_param_value("blobs") == "true";
    std::string siblings;
    for (const auto& [file, f] : repo->files) {
      if (!siblings.empty()) siblings += ",";
      siblings += "{\"rfilename\":\"" + file + "\"";
      if (blobs) siblings += ",\"size\":" + std::to_string(f.content.size());
      siblings += "}";
    }
    res.set_content("{\"id\":\"" + name + "\",\"sha\":\"" + repo->commit + "\",\"siblings\":[" +
                        siblings + "]}",
                    "application/json");
  }

  void resolve(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = req.matches[1].str() + "/" + req.matches[2].str();
    const FakeRepo* repo = find_repo(req, res, name);
    if (repo == nullptr) return;
    if (!revision_ok(*repo, req.matches[3].str())) {
      res.status = 404;
      res.set_header("X-Error-Code", "RevisionNotFound");
      return;
    }
    const std::string file = req.matches[4].str();
    res.set_header("X-Repo-Commit", repo->commit);
    auto it = repo->files.find(file);
    if (it == repo->files.end()) {
      res.status = 404;
      res.set_header("X-Error-Code", "EntryNotFound");
      return;
    }
    const std::string etag = etag_of(name, file, it->second);
    if (it->second.lfs) {
      res.set_header("X-Linked-Etag", "\"" + etag + "\"");
      res.set_header("X-Linked-Size", std::to_string(it->second.content.size()));
      res.set_redirect("/cdn/" + req.matches[1].str() + "--" + req.matches[2].str() + "/" + etag,
                       302);
      return;
    }
    res.set_header("ETag", "\"" + etag + "\"");
    serve(req, res, it->second.content);
  }

  void cdn(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_;
    ranges_.push_back(req.get_header_value("Range"));
    const std::string etag = req.matches[2].str();
    for (const auto& [name, repo] : repos_)
      for (const auto& [file, f] : repo.files)
        if (f.lfs && etag_of(name, file, f) == etag) return serve(req, res, f.content);
    res.status = 404;
  }

  // The whole body (httplib answers a Range request with 206 itself), or, when a cut is armed,
  // a body that stops after that many bytes with the connection closed.
  void serve(const httplib::Request& req, httplib::Response& res, const std::string& content) {
    const long long cut = cut_after_.exchange(-1);
    if (cut < 0 || req.method == "HEAD") {
      if (cut >= 0) cut_after_ = cut;  // a HEAD does not use up the cut
      res.set_content(content, "application/octet-stream");
      return;
    }
    auto body = std::make_shared<std::string>(content);
    res.set_content_provider(content.size(), "application/octet-stream",
                             [body, cut](size_t offset, size_t length, httplib::DataSink& sink) {
                               if (offset >= static_cast<size_t>(cut)) return false;
                               const size_t n = std::min(length, static_cast<size_t>(cut) - offset);
                               sink.write(body->data() + offset, n);
                               return true;
                             });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::map<std::string, FakeRepo> repos_;
  std::atomic<int> requests_{0};
  std::atomic<long long> cut_after_{-1};
  std::vector<std::string> ranges_;
  std::vector<std::string> authorizations_;
};

}  // namespace tern::testing
