// The UCX plumbing both ends of the KV transfer share: one context + worker (active messages,
// wakeup), a blocking wait that sleeps on the worker's event fd instead of spinning, endpoint
// close, sockaddr resolution and status text. Single-threaded: a Worker is progressed by one
// thread only.
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <string>

namespace tern::disagg {

// Text of a UCX status, e.g. "Connection reset by remote peer".
std::string ucx_status_text(ucs_status_t status);

// host:port as a socket address (numeric or a name getaddrinfo resolves); throws tern::Error.
sockaddr_storage resolve_address(const std::string& host, int port, socklen_t* length);

class UcxWorker {
 public:
  // `listens`: this worker will listen (a server), see prepare_environment in the .cpp.
  UcxWorker(const char* name, bool listens);  // throws tern::Error
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h get() const { return worker_; }

  // Progresses until no more work is pending right now; true if anything happened.
  bool progress();
  // Progresses; if nothing happened, sleeps until the worker has an event, `extra_fd` (-1:
  // none) is readable, or `timeout_ms` passes.
  void wait(int timeout_ms, int extra_fd = -1);

  // Closes an endpoint and progresses until UCX has released it. `force` (for a peer that
  // died or misbehaved) cancels its outstanding requests, which complete with an error.
  void close_endpoint(ucp_ep_h ep, bool force);

 private:
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
};

// Waits for a request returned by a UCX call (NULL: done at once; an error pointer: failed)
// by progressing `worker`, then frees it. For requests without a completion callback.
ucs_status_t ucx_wait_request(UcxWorker& worker, ucs_status_ptr_t request);

}  // namespace tern::disagg
