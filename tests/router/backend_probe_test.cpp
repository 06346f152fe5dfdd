// A failed call to a backend in words: what failed and where, for the router's log lines and
// error bodies (httplib's own names, "Connection", said neither).
#include "tern/router/backend_probe.h"

#include <gtest/gtest.h>

#include <string>

#include "closed_port.h"

namespace tern::router {
namespace {

TEST(BackendProbe, ErrorsNameWhatFailedAndWhere) {
  const BackendAddress a = parse_backend_url("http://127.0.0.1:18002");
  EXPECT_NE(describe_http_error(httplib::Error::Connection, a)
                .find("could not connect to 127.0.0.1:18002 (connection refused"),
            std::string::npos);
  EXPECT_NE(describe_http_error(httplib::Error::ConnectionTimeout, a)
                .find("no connection to 127.0.0.1:18002 within the connect timeout"),
            std::string::npos);
  EXPECT_NE(describe_http_error(httplib::Error::Read, a).find("127.0.0.1:18002 closed"),
            std::string::npos);
  for (httplib::Error e :
       {httplib::Error::Unknown, httplib::Error::Connection, httplib::Error::BindIPAddress,
        httplib::Error::Read, httplib::Error::Write, httplib::Error::ExceedRedirectCount,
        httplib::Error::Canceled, httplib::Error::SSLConnection, httplib::Error::Compression,
        httplib::Error::ConnectionTimeout}) {
    const std::string m = describe_http_error(e, a);
    EXPECT_NE(m.find("127.0.0.1:18002"), std::string::npos) << m;
    EXPECT_GT(m.size(), httplib::to_string(e).size() + 20) << m;
  }
}

TEST(BackendProbe, AHealthCheckOfAClosedPortSaysItCouldNotConnect) {
  const int port = testing::closed_loopback_port();
  ASSERT_GT(port, 0);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  const BackendAddress a = parse_backend_url("http://" + where);
  httplib::Client client(a.host, a.port);
  const httplib::Result r = client.Get("/health");
  ASSERT_FALSE(r);
  EXPECT_NE(describe_http_error(r.error(), a).find("could not connect to " + where),
            std::string::npos)
      << describe_http_error(r.error(), a);
}

}  // namespace
}  // namespace tern::router
