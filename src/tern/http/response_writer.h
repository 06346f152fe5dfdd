// The bytes of an HTTP/1.1 answer: the status line and headers, then the body whole (with its
// Content-Length), in chunks (Transfer-Encoding: chunked, for streams), or until the connection
// closes (a stream to an HTTP/1.0 client, which knows no chunks).
#pragma once

#include <string>
#include <string_view>

#include "tern/http/http_message.h"

namespace tern::http {

enum class Framing { Length, Chunked, UntilClose };

// The status line and headers of `response` (its body not included), with Content-Type when it
// has one, the framing's header (Content-Length: response.body.size() for Length) and
// Connection: close when `keep_alive` is false. Control characters inside names and values are
// dropped, so that no value a handler passes on can start a header of its own.
std::string serialize_head(const Response& response, Framing framing, bool keep_alive);

// One chunk of a chunked body ("" gives nothing: an empty chunk would end the body).
std::string chunk(std::string_view data);
// The chunk that ends a chunked body.
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace tern::http
