// The few HTTP requests the hub needs, over libcurl: a HEAD that reports headers without
// following redirects, a GET of a small JSON body, and a resumable GET into a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace tern::hub {

struct HttpResponse {
  long status = 0;                             // 0 when the transfer failed before a response
  std::map<std::string, std::string> headers;  // of the last response, names lower-cased
  std::string body;                            // text bodies and error bodies (capped)
  std::string transport_error;                 // curl's message when the transfer failed

  std::string header(const std::string& lower_name) const;
};

// Progress of one transfer: bytes in the file so far and the expected total (0: unknown).
using ProgressCallback = std::function<void(uint64_t done, uint64_t total)>;

class HttpClient {
 public:
  // token: sent as `Authorization: Bearer` to the first host only; curl drops it when a
  // redirect leads elsewhere (the LFS CDN), as it must.
  explicit HttpClient(std::string token);

  // No redirects followed: the hub's metadata (X-Repo-Commit, X-Linked-Etag) is on the
  // first response, the CDN's on the last.
  HttpResponse head(const std::string& url) const;
  // Follows redirects; the body is kept whole (for small JSON documents).
  HttpResponse get_text(const std::string& url) const;
  // Follows redirects. Appends to `file` from its current size with `Range: bytes=N-`; when the
  // server answers 200 instead of 206 the file is started over. An error status writes nothing
  // to the file (its body goes to `body`). The status is that of the last response.
  HttpResponse download_to_file(const std::string& url, const std::filesystem::path& file,
                                uint64_t expected_total, const ProgressCallback& progress) const;

 private:
  std::string token_;
};

}  // namespace tern::hub
