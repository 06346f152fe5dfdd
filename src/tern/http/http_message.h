// The requests and responses of tern's HTTP front end (tern serve, tern router) as route
// handlers see them: plain values, no HTTP library's types.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method;  // "GET", "POST", …
  std::string target;  // as the client sent it: path and query
  std::string path;    // the target without its query
  int version = 11;    // 10: HTTP/1.0, 11: HTTP/1.1
  Headers headers;
  std::string body;

  // The first header called `name` (case-insensitive), or "".
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

struct Response {
  int status = 200;
  // Besides Content-Type and the framing (Content-Length or Transfer-Encoding), which the
  // server writes itself.
  Headers headers;
  std::string content_type;
  std::string body;

  void set_header(std::string name, std::string value);
  void set_content(std::string content, std::string type);
};

// "OK", "Not Found", … ("Unknown" for a status without a standard phrase).
const char* reason_phrase(int status);

// Whether two header names are the same (HTTP names are case-insensitive).
bool same_header_name(std::string_view a, std::string_view b);

}  // namespace tern::http
