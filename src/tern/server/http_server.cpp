#include "tern/server/http_server.h"

#include <sys/socket.h>

#include "tern/core/error.h"

namespace tern::server {

int HttpServer::bind_listening(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
    if (port < 0) throw Error("cannot listen on " + host + " (any port)");
  } else if (!bind_to_port(host, port)) {
    throw Error("cannot listen on " + host + ":" + std::to_string(port) +
                " (in use, or not an address of this machine)");
  }
  ::listen(svr_sock_, SOMAXCONN);
  return port;
}

}  // namespace tern::server
