// Reads HTTP/1.x requests off a connection's bytes with Boost.Beast's parser (tern writes no
// HTTP parser of its own): one request at a time, bytes of a pipelined next request kept for
// it, limits on the header's and the body's size.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tern/http/http_message.h"

namespace tern::http {

struct ReaderLimits {
  size_t max_header_bytes = size_t{64} << 10;  // request line and headers together
  size_t max_body_bytes = size_t{16} << 20;
};

class RequestReader {
 public:
  explicit RequestReader(ReaderLimits limits);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Appends bytes the client sent.
  void append(std::string_view bytes);

  enum class State {
    NeedMore,  // the request is not complete yet
    Complete,  // take() it
    Failed,    // the bytes are no HTTP request, or one over a limit: error_status()
  };
  // Parses what has arrived.
  State parse();

  // The complete request; the reader then reads the next one from the bytes left over.
  Request take();
  // After Failed: 400 (malformed), 413 (body over the limit) or 431 (header over the limit),
  // and what was wrong in words.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // What of the failed request was read: method and path when its header was complete.
  Request failed_request() const;

  // Whether a byte of the current request has arrived / its header is complete.
  bool started() const;
  bool header_complete() const;
  // Whether the current request's header asks for "100 Continue" before its body.
  bool expects_continue() const;
  // Whether the connection stays open after the answer to the request last taken.
  bool keep_alive() const { return keep_alive_; }

 private:
  struct Parser;
  void reset_parser();

  ReaderLimits limits_;
  std::unique_ptr<Parser> parser_;
  std::string buffer_;  // bytes not yet consumed by the parser
  bool keep_alive_ = true;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace tern::http
