// See backend_probe.h.
#include "tern/router/backend_probe.h"

namespace tern::router {

std::string describe_http_error(httplib::Error error, const BackendAddress& to) {
  const std::string where = to.host + ":" + std::to_string(to.port);
  switch (error) {
    case httplib::Error::Connection:
      return "could not connect to " + where +
             " (connection refused or host unreachable: is the instance running there?)";
    case httplib::Error::ConnectionTimeout:
      return "no connection to " + where + " within the connect timeout";
    case httplib::Error::Read:
      return where + " closed the connection, or sent nothing within the read timeout";
    case httplib::Error::Write:
      return "could not send the request to " + where + " (the connection closed)";
    case httplib::Error::Canceled:
      return "the call to " + where + " was cancelled";
    case httplib::Error::BindIPAddress:
      return "could not bind a local address to reach " + where;
    case httplib::Error::ExceedRedirectCount:
      return where + " redirected too many times";
    case httplib::Error::Compression:
      return "could not decompress the answer of " + where;
    default:
      return "the call to " + where + " failed (httplib error " + httplib::to_string(error) + ")";
  }
}

}  // namespace tern::router
