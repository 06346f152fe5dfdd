// The router's short GETs to its backends outside relaying: health checks (on their own thread,
// with their own timeouts) and /v1/models (on an HTTP worker), made with httplib's blocking
// client, and their failures in words.
#pragma once

#include <httplib.h>

#include <string>

#include "tern/router/backend_pool.h"

namespace tern::router {

// A failed GET to `to` in words, for logs and error bodies: httplib's names alone
// ("Connection", "Read") say neither what failed nor where.
std::string describe_http_error(httplib::Error error, const BackendAddress& to);

}  // namespace tern::router
