// cpp-httplib's server as tern serve and tern router listen with it: bound with a backlog a burst
// of clients does not overflow.
#pragma once

#include <httplib.h>

#include <string>

namespace tern::server {

class HttpServer : public httplib::Server {
 public:
  // Binds host:port (0: any free port) and listens; returns the port. Debian's compiled
  // cpp-httplib listens with a backlog of 5: a burst of clients overflows it and their SYNs are
  // dropped (retried a second later, which some clients do not survive), so the backlog is
  // raised to SOMAXCONN (Linux lets listen() be called again on a listening socket). Throws
  // tern::Error when it cannot bind.
  int bind_listening(const std::string& host, int port);
};

}  // namespace tern::server
