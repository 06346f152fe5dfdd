// UCX context/worker ownership and the waits of the KV transfer (see ucx_worker.h).
#include "tern/disagg/ucx_worker.h"

#include <netdb.h>
#include <poll.h>

#include <cstdlib>
#include <cstring>

#include "tern/core/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_DISAGG_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TERN_DISAGG_ASAN 1
#endif

namespace tern::disagg {
namespace {

// UCX's memory hooks (UCM) patch malloc and mmap to keep the registration cache of RDMA
// transports right, and they can fight AddressSanitizer's own interceptors. With tcp and shared
// memory the suite is ASan/LSan-clean with them on or off (checked with UCX_MEM_MALLOC_HOOKS=yes
// UCX_MEM_EVENTS=yes); a sanitizer build turns them off anyway, unless the user chose, for
// machines whose IB devices would make UCX install them.
//
// A listener binds without SO_REUSEADDR by default, so a producer restarted on its kv_port
// could not listen again while the old connections sit in TIME_WAIT (a minute); the TCP
// connection manager's REUSEADDR lets it (two live listeners on one port are still refused).
void prepare_environment(bool listens) {
  if (listens) ::setenv("UCX_TCP_CM_REUSEADDR", "y", /*overwrite=*/0);
#ifdef TERN_DISAGG_ASAN
  ::setenv("UCX_MEM_MALLOC_HOOKS", "no", /*overwrite=*/0);
  ::setenv("UCX_MEM_EVENTS", "no", 0);
#endif
}

}  // namespace

std::string ucx_status_text(ucs_status_t status) { return ucs_status_string(status); }

sockaddr_storage resolve_address(const std::string& host, int port, socklen_t* length) {
  if (port < 0 || port > 65535)
    throw Error("kv transfer: port " + std::to_string(port) + " is out of range");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr)
    throw Error("kv transfer: cannot resolve host '" + host + "': " + ::gai_strerror(rc));
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

UcxWorker::UcxWorker(const char* name, bool listens) {
  prepare_environment(listens);
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK)
    throw Error(std::string("UCX: cannot read its configuration: ") + ucx_status_text(status));
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = name;
  status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (status != UCS_OK)
    throw Error(std::string("UCX: cannot initialize: ") + ucx_status_text(status));

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &wparams, &worker_);
  if (status != UCS_OK) {
    ucp_cleanup(context_);
    throw Error(std::string("UCX: cannot create a worker: ") + ucx_status_text(status));
  }
  status = ucp_worker_get_efd(worker_, &event_fd_);
  if (status != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw Error(std::string("UCX: worker has no event fd: ") + ucx_status_text(status));
  }
}

UcxWorker::~UcxWorker() {
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

bool UcxWorker::progress() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

void UcxWorker::wait(int timeout_ms, int extra_fd) {
  if (progress()) return;
  // arm says BUSY when events arrived since the last progress: progress again instead of sleeping.
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;
  pollfd fds[2] = {{event_fd_, POLLIN, 0}, {extra_fd, POLLIN, 0}};
  ::poll(fds, extra_fd >= 0 ? 2 : 1, timeout_ms);
}

void UcxWorker::close_endpoint(ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  (void)ucx_wait_request(*this, ucp_ep_close_nbx(ep, &param));
}

ucs_status_t ucx_wait_request(UcxWorker& worker, ucs_status_ptr_t request) {
  if (request == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS) worker.wait(10);
  ucp_request_free(request);
  return status;
}

}  // namespace tern::disagg
