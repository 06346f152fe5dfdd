// libFuzzer target for tern's HTTP server's reading and writing: any bytes, in any pieces,
// give the same requests (and a refusal, 400, 413 or 431, at the same one) as the same bytes at
// once, and whatever pieces a stream writes come back whole through an HTTP parser (Boost.Beast's,
// the one the reader uses, as a client would read them).
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tern/http/request_reader.h"
#include "tern/http/response_writer.h"

namespace {

namespace bhttp = boost::beast::http;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "http_request_fuzz: %s\n", what);
  std::abort();
}

// What a reader made of the bytes: one line per request, then the refusal, if any.
std::string read_all(std::string_view bytes, size_t piece) {
  tern::http::ReaderLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_body_bytes = 4096;
  tern::http::RequestReader reader(limits);
  std::string out;
  for (size_t at = 0; at < bytes.size() || at == 0;) {
    const size_t n = std::min(piece, bytes.size() - at);
    reader.append(bytes.substr(at, n));
    at += n;
    for (;;) {
      const tern::http::RequestReader::State s = reader.parse();
      if (s == tern::http::RequestReader::State::NeedMore) break;
      if (s == tern::http::RequestReader::State::Failed) {
        const int status = reader.error_status();
        if (status != 400 && status != 413 && status != 431)
          die("a refusal other than 400/413/431");
        // Which refusal may differ: bytes that break both a limit and the syntax are refused
        // for whichever the reader meets first, which depends on how they arrive.
        return out + "refused\n";
      }
      const tern::http::Request r = reader.take();
      if (r.target.compare(0, r.path.size(), r.path) != 0)
        die("the path is not the target's start");
      if (r.body.size() > limits.max_body_bytes) die("a body over the limit");
      out += r.method + " " + r.target + " " + std::to_string(r.body.size()) + " " + r.body + "\n";
    }
    if (bytes.empty()) break;
  }
  return out + (reader.started() ? "waiting\n" : "");
}

void check_reader(std::string_view bytes, uint8_t split) {
  const std::string whole = read_all(bytes, bytes.size() + 1);
  const std::string pieces = read_all(bytes, 1 + split % 64);
  // Beast may see that an unfinished header is bad only when it comes whole: then the other
  // reading still waits for more (the header deadline ends it).
  const auto same_up_to_the_end = [](const std::string& refused, const std::string& waiting) {
    const std::string r = "refused\n", w = "waiting\n";
    return refused.size() >= r.size() && waiting.size() >= w.size() &&
           refused.compare(refused.size() - r.size(), r.size(), r) == 0 &&
           waiting.compare(waiting.size() - w.size(), w.size(), w) == 0 &&
           refused.substr(0, refused.size() - r.size()) ==
               waiting.substr(0, waiting.size() - w.size());
  };
  if (whole != pieces && !same_up_to_the_end(whole, pieces) && !same_up_to_the_end(pieces, whole))
    die("the same bytes in pieces read differently");
}

void check_writer(std::string_view bytes) {
  // The pieces: the input cut at each 0xFF byte; a header value made of the first piece (with
  // whatever CR/LF it has, which must not start a header of its own).
  std::vector<std::string> pieces(1);
  for (char c : bytes) {
    if (static_cast<uint8_t>(c) == 0xFF)
      pieces.emplace_back();
    else
      pieces.back() += c;
  }
  tern::http::Response head;
  head.content_type = "text/event-stream";
  head.set_header("X-Value", pieces.front());
  std::string wire = tern::http::serialize_head(head, tern::http::Framing::Chunked, true);
  std::string expected;
  for (const std::string& p : pieces) {
    wire += tern::http::chunk(p);
    expected += p;
  }
  wire += tern::http::kLastChunk;

  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(1 << 24);
  parser.eager(true);
  boost::beast::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(wire), ec);
  if (ec || !parser.is_done() || used != wire.size()) die("a written stream does not parse");
  const auto& message = parser.get();
  if (message.body() != expected) die("a written stream's body differs from its pieces");
  size_t fields = 0;
  for ([[maybe_unused]] const auto& f : message) ++fields;
  if (fields != 3) die("a header value started a header of its own");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_reader(bytes, data[0]);
  check_writer(bytes);
  return 0;
}
