#include "tern/http/request_reader.h"

#include <boost/beast/http.hpp>
#include <optional>

namespace tern::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

struct RequestReader::Parser {
  bhttp::request_parser<bhttp::string_body> parser;
};

RequestReader::RequestReader(ReaderLimits limits) : limits_(limits) { reset_parser(); }

RequestReader::~RequestReader() = default;

void RequestReader::reset_parser() {
  parser_ = std::make_unique<Parser>();
  parser_->parser.header_limit(static_cast<std::uint32_t>(
      std::min<size_t>(limits_.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
  parser_->parser.body_limit(limits_.max_body_bytes);
  parser_->parser.eager(true);
}

void RequestReader::append(std::string_view bytes) { buffer_.append(bytes); }

RequestReader::State RequestReader::parse() {
  if (error_status_ != 0) return State::Failed;
  auto& p = parser_->parser;
  size_t consumed_total = 0;
  while (!p.is_done() && consumed_total < buffer_.size()) {
    beast::error_code ec;
    const bool header_before = p.is_header_done();
    const size_t start = consumed_total;
    const size_t n = p.put(
        boost::asio::buffer(buffer_.data() + consumed_total, buffer_.size() - consumed_total), ec);
    consumed_total += n;
    // Beast holds a header to its limit only while the header is incomplete: one that arrives
    // whole is measured here, so that the limit does not depend on how the bytes came.
    if (!ec && !header_before && p.is_header_done()) {
      const size_t end = buffer_.find("\r\n\r\n", start);
      if (end != std::string::npos && end + 4 - start > limits_.max_header_bytes)
        ec = bhttp::error::header_limit;
    }
    if (ec == bhttp::error::need_more) {
      // The header is parsed whole: until it is complete, put() consumes nothing and the
      // bytes stay for the next try.
      if (!p.is_header_done() && buffer_.size() - consumed_total > limits_.max_header_bytes) {
        error_status_ = 431;
        error_message_ = "the request header is larger than " +
                         std::to_string(limits_.max_header_bytes) + " bytes";
        return State::Failed;
      }
      break;
    }
    if (ec) {
      if (ec == bhttp::error::body_limit) {
        error_status_ = 413;
        error_message_ =
            "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes";
      } else if (ec == bhttp::error::header_limit) {
        error_status_ = 431;
        error_message_ = "the request header is larger than " +
                         std::to_string(limits_.max_header_bytes) + " bytes";
      } else {
        error_status_ = 400;
        error_message_ = "malformed HTTP request: " + ec.message();
      }
      buffer_.erase(0, consumed_total);
      return State::Failed;
    }
    if (n == 0) break;
  }
  buffer_.erase(0, consumed_total);
  return p.is_done() ? State::Complete : State::NeedMore;
}

Request RequestReader::take() {
  auto message = parser_->parser.release();
  Request r;
  r.method = std::string(message.method_string());
  r.target = std::string(message.target());
  r.path = r.target.substr(0, r.target.find('?'));
  r.version = static_cast<int>(message.version());
  for (const auto& field : message)
    r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  r.body = std::move(message.body());
  keep_alive_ = message.keep_alive();
  reset_parser();
  return r;
}

Request RequestReader::failed_request() const {
  Request r;
  if (!parser_->parser.is_header_done()) return r;
  const auto& header = parser_->parser.get();
  r.method = std::string(header.method_string());
  r.target = std::string(header.target());
  r.path = r.target.substr(0, r.target.find('?'));
  r.version = static_cast<int>(header.version());
  return r;
}

bool RequestReader::started() const { return !buffer_.empty() || parser_->parser.got_some(); }

bool RequestReader::header_complete() const { return parser_->parser.is_header_done(); }

bool RequestReader::expects_continue() const {
  if (!parser_->parser.is_header_done()) return false;
  const auto& header = parser_->parser.get();
  const auto it = header.find(bhttp::field::expect);
  return it != header.end() && beast::iequals(it->value(), "100-continue");
}

}  // namespace tern::http
