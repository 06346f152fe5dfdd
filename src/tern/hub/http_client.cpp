// HttpClient over libcurl's easy interface: one handle per request (the hub makes few), header
// lines collected per response so a redirect chain leaves the last response's headers.
#include "tern/hub/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>

#include "tern/core/ascii.h"
#include "tern/core/error.h"

namespace tern::hub {
namespace {

constexpr size_t kMaxErrorBody = 4096;
constexpr size_t kMaxTextBody = 64u << 20;  // a repo listing is kilobytes; refuse a runaway body
constexpr char kUserAgent[] = "tern/0.1 (hf-hub compatible)";

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlHandle = std::unique_ptr<CURL, CurlDeleter>;
using HeaderList = std::unique_ptr<curl_slist, CurlDeleter>;

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// What the callbacks of one transfer share.
struct Transfer {
  HttpResponse response;
  bool keep_body = false;     // get_text: the whole body is the answer
  std::FILE* file = nullptr;  // download_to_file
  uint64_t file_offset = 0;   // bytes in the file before this transfer's first byte
  uint64_t written = 0;       // bytes this transfer wrote to the file
  bool started = false;       // the first body byte of the final response was seen
  bool refused = false;       // the body did not fit what we asked for
  uint64_t expected_total = 0;
  const ProgressCallback* progress = nullptr;
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response of the redirect chain: its headers replace the previous one's.
    t->response.headers.clear();
    const size_t space = line.find(' ');
    if (space != std::string_view::npos)
      t->response.status = std::atol(std::string(line.substr(space + 1, 3)).c_str());
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos)
    t->response.headers[ascii_lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return n;
}

// `bytes N-M/T` → N; -1 when absent or malformed.
long long content_range_start(const std::string& value) {
  if (value.rfind("bytes ", 0) != 0) return -1;
  char* end = nullptr;
  const long long start = std::strtoll(value.c_str() + 6, &end, 10);
  return end != nullptr && *end == '-' ? start : -1;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  const long status = t->response.status;
  if (t->file == nullptr || status < 200 || status >= 300) {
    const size_t cap = t->keep_body ? kMaxTextBody : kMaxErrorBody;
    if (t->keep_body && t->response.body.size() + n > cap) return 0;  // aborts the transfer
    t->response.body.append(data, std::min(n, cap - std::min(cap, t->response.body.size())));
    return n;
  }
  if (!t->started) {
    t->started = true;
    if (status == 206) {
      // Append only where we asked to start; anything else would corrupt the file.
      if (content_range_start(t->response.header("content-range")) !=
          static_cast<long long>(t->file_offset)) {
        t->refused = true;
        return 0;
      }
    } else if (t->file_offset > 0) {
      // A full body although we asked for a range: start the file over.
      if (::ftruncate(::fileno(t->file), 0) != 0) return 0;
      t->file_offset = 0;
    }
  }
  if (std::fwrite(data, 1, n, t->file) != n) return 0;
  t->written += n;
  if (t->progress != nullptr && *t->progress)
    (*t->progress)(t->file_offset + t->written, t->expected_total);
  return n;
}

CurlHandle new_handle(const std::string& url, Transfer& t, curl_slist* headers) {
  global_init();
  CurlHandle curl(curl_easy_init());
  if (!curl) throw Error("libcurl: cannot create a transfer handle");
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled connection (under 1 byte/s for a minute) fails instead of hanging forever.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  return curl;
}

HeaderList request_headers(const std::string& token, uint64_t range_start) {
  curl_slist* list = nullptr;
  // The hub's ETag is of the stored bytes; a compressed body would break size and resume.
  list = curl_slist_append(list, "Accept-Encoding: identity");
  if (!token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + token).c_str());
  if (range_start > 0)
    list = curl_slist_append(list, ("Range: bytes=" + std::to_string(range_start) + "-").c_str());
  return HeaderList(list);
}

void perform(CURL* c, Transfer& t) {
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) t.response.transport_error = curl_easy_strerror(rc);
  if (t.refused)
    t.response.transport_error = "the server sent a range other than the one asked for";
}

}  // namespace

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpClient::HttpClient(std::string token) : token_(std::move(token)) {}

HttpResponse HttpClient::head(const std::string& url) const {
  Transfer t;
  HeaderList headers = request_headers(token_, 0);
  CurlHandle curl = new_handle(url, t, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_NOBODY, 1L);
  perform(curl.get(), t);
  return std::move(t.response);
}

HttpResponse HttpClient::get_text(const std::string& url) const {
  Transfer t;
  t.keep_body = true;
  HeaderList headers = request_headers(token_, 0);
  CurlHandle curl = new_handle(url, t, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_MAXREDIRS, 10L);
  perform(curl.get(), t);
  return std::move(t.response);
}

HttpResponse HttpClient::download_to_file(const std::string& url, const std::filesystem::path& file,
                                          uint64_t expected_total,
                                          const ProgressCallback& progress) const {
  Transfer t;
  std::error_code ec;
  t.file_offset = std::filesystem::exists(file, ec) ? std::filesystem::file_size(file, ec) : 0;
  if (ec) t.file_offset = 0;
  t.expected_total = expected_total;
  t.progress = &progress;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(file.c_str(), "ab"), std::fclose);
  if (!out) throw Error(file.string() + ": cannot open for writing");
  t.file = out.get();
  HeaderList headers = request_headers(token_, t.file_offset);
  CurlHandle curl = new_handle(url, t, headers.get());
  curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_MAXREDIRS, 10L);
  perform(curl.get(), t);
  if (std::fflush(out.get()) != 0 && t.response.transport_error.empty())
    t.response.transport_error = "cannot write " + file.string();
  return std::move(t.response);
}

}  // namespace tern::hub
