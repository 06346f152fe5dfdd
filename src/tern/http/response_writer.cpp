#include "tern/http/response_writer.h"

#include <cstdio>

namespace tern::http {
namespace {

// A header's value without control characters (tab aside): no CR or LF can end the line early
// and start a header of the handler's making, and no byte an HTTP parser refuses goes out.
void append_clean(std::string& out, std::string_view text) {
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x20 && u != 0x7F) || c == '\t') out += c;
  }
}

void append_header(std::string& out, std::string_view name, std::string_view value) {
  append_clean(out, name);
  out += ": ";
  append_clean(out, value);
  out += "\r\n";
}

}  // namespace

std::string serialize_head(const Response& response, Framing framing, bool keep_alive) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
  if (!response.content_type.empty()) append_header(out, "Content-Type", response.content_type);
  for (const auto& [name, value] : response.headers) {
    // The framing is the writer's to say: a handler's own would contradict it.
    if (same_header_name(name, "Content-Length") || same_header_name(name, "Transfer-Encoding") ||
        same_header_name(name, "Connection") || same_header_name(name, "Content-Type"))
      continue;
    append_header(out, name, value);
  }
  switch (framing) {
    case Framing::Length:
      append_header(out, "Content-Length", std::to_string(response.body.size()));
      break;
    case Framing::Chunked:
      append_header(out, "Transfer-Encoding", "chunked");
      break;
    case Framing::UntilClose:
      keep_alive = false;
      break;
  }
  if (!keep_alive) append_header(out, "Connection", "close");
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view data) {
  if (data.empty()) return {};
  char size[24];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace tern::http
