// KvTransferServer: the producer's listener and its progress thread. UCX callbacks only record
// what happened (new connection, request bytes, endpoint error, send completion); the loop then
// acts on it outside UCX's progress, so endpoints are created and closed, and the handler runs,
// where UCX allows it.
#include "tern/disagg/kv_transfer_server.h"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <thread>

#include "tern/core/error.h"
#include "tern/disagg/kv_wire.h"
#include "tern/disagg/ucx_worker.h"

namespace tern::disagg {
namespace {

struct Pull;

// A send's user data: which pull, and which block (-1: the reply). Owned by its Pull.
struct SendOp {
  void* owner;  // the server's Impl
  Pull* pull;
  int block;
};

struct Peer {
  ucp_ep_h ep = nullptr;
  bool closing = false;  // error seen or misbehaved: close once its sends have drained
  int pulls_in_flight = 0;
};

// One granted pull while its messages are in flight. Everything UCX reads from (reply bytes,
// block headers, IOV arrays, the cache's memory) lives here until the last send completes.
struct Pull {
  Peer* conn = nullptr;
  PullGrant grant;
  std::vector<std::byte> reply;
  std::vector<std::array<std::byte, kBlockHeaderBytes>> headers;  // [num_blocks]
  std::vector<std::vector<ucp_dt_iov_t>> iovs;                    // [num_blocks][non-empty ranges]
  std::vector<uint64_t> block_bytes;                              // [num_blocks]
  std::vector<SendOp> ops;  // [1 + num_blocks] (the reply first); sized once, never moved
  int outstanding = 0;
  bool failed = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

}  // namespace

struct KvTransferServer::Impl {
  KvTransferServerConfig config;
  PullHandler handler;
  std::unique_ptr<UcxWorker> ucx = std::make_unique<UcxWorker>("tern-kv-server", /*listens=*/true);
  UcxWorker& worker() { return *ucx; }
  bool abandoned = false;  // shutting down with sends UCX never completed: completions are ignored
  ucp_listener_h listener = nullptr;
  int port = 0;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  std::thread thread;

  std::list<Peer> connections;
  std::map<ucp_ep_h, Peer*> by_ep;
  std::list<Pull> pulls;
  std::deque<ucp_conn_request_h> new_connections;
  std::deque<std::pair<ucp_ep_h, std::vector<std::byte>>> requests;

  std::atomic<uint64_t> bytes_sent{0}, blocks_sent{0}, pulls_served{0}, pulls_refused{0},
      bad_frames{0};

  Impl(KvTransferServerConfig c, PullHandler h);
  ~Impl();
  void run();
  void accept_connections();
  void serve_requests();
  void serve(Peer& conn, std::span<const std::byte> bytes);
  void reply_error(Peer& conn, uint64_t pull_id, ReplyStatus status, const std::string& message);
  void start_pull(Peer& conn, uint64_t pull_id, PullGrant grant, size_t num_ids);
  void send(Peer& conn, Pull* pull, int block, const void* header, size_t header_length,
            const void* buffer, size_t count, ucp_datatype_t datatype, uint32_t flags);
  void send_done(Pull* pull, int block, ucs_status_t status);
  void finish(Pull* pull);
  void close_drained();
  void shutdown();

  static void on_connection(ucp_conn_request_h request, void* arg) {
    static_cast<Impl*>(arg)->new_connections.push_back(request);
  }
  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t) {
    static_cast<Peer*>(arg)->closing = true;
  }
  static ucs_status_t on_cancel(void* arg, const void*, size_t, void*, size_t,
                                const ucp_am_recv_param_t* param) {
    auto* self = static_cast<Impl*>(arg);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) {
      auto it = self->by_ep.find(param->reply_ep);
      if (it != self->by_ep.end()) it->second->closing = true;
    }
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? UCS_ERR_REJECTED : UCS_OK;
  }
  void expire_pulls() {
    const auto now = std::chrono::steady_clock::now();
    for (Pull& p : pulls)
      if (std::chrono::duration<double>(now - p.started).count() > config.pull_timeout_seconds)
        p.conn->closing = true;
  }
  static ucs_status_t on_request(void* arg, const void*, size_t, void* data, size_t length,
                                 const ucp_am_recv_param_t* param);
  static void on_send(void* request, ucs_status_t status, void* user_data) {
    const SendOp* op = static_cast<const SendOp*>(user_data);
    ucp_request_free(request);
    static_cast<Impl*>(op->owner)->send_done(op->pull, op->block, status);  // may free the Pull
  }
};

KvTransferServer::Impl::Impl(KvTransferServerConfig c, PullHandler h)
    : config(std::move(c)), handler(std::move(h)) {
  if (config.fingerprint.size() > kMaxFingerprintBytes)
    throw Error("kv transfer server: fingerprint of " + std::to_string(config.fingerprint.size()) +
                " bytes, the limit is " + std::to_string(kMaxFingerprintBytes));
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                  UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = kAmPullRequest;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  am.cb = &Impl::on_request;
  am.arg = this;
  ucs_status_t status = ucp_worker_set_am_recv_handler(worker().get(), &am);
  if (status == UCS_OK) {
    am.id = kAmPullCancel;
    am.cb = &Impl::on_cancel;
    status = ucp_worker_set_am_recv_handler(worker().get(), &am);
  }
  if (status != UCS_OK)
    throw Error("kv transfer server: UCX active messages: " + ucx_status_text(status));

  socklen_t addr_len = 0;
  const sockaddr_storage addr = resolve_address(config.host, config.port, &addr_len);
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  lp.sockaddr.addrlen = addr_len;
  lp.conn_handler.cb = &Impl::on_connection;
  lp.conn_handler.arg = this;
  status = ucp_listener_create(worker().get(), &lp, &listener);
  // UCX reports bind's EADDRINUSE as UCS_ERR_BUSY, "Device is busy".
  if (status == UCS_ERR_BUSY && config.port != 0)
    throw Error("kv transfer server: cannot listen on " + config.host + ":" +
                std::to_string(config.port) + ": port " + std::to_string(config.port) +
                " in use (another instance or program listens there: give another kv_port)");
  // Any other bind failure is UCS_ERR_IO_ERROR, "Input/output error": the likely causes named.
  if (status != UCS_OK)
    throw Error("kv transfer server: cannot listen on " + config.host + ":" +
                std::to_string(config.port) + ": UCX: " + ucx_status_text(status) + " (is " +
                config.host + " an address of this machine, and the port one this user may bind?)");
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(listener, &attr) == UCS_OK) {
    if (attr.sockaddr.ss_family == AF_INET)
      port = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
    else if (attr.sockaddr.ss_family == AF_INET6)
      port = ntohs(reinterpret_cast<const sockaddr_in6*>(&attr.sockaddr)->sin6_port);
  }
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    ucp_listener_destroy(listener);
    throw Error("kv transfer server: eventfd: " + std::string(std::strerror(errno)));
  }
  // From here on only the thread touches UCX.
  thread = std::thread([this] { run(); });
}

KvTransferServer::Impl::~Impl() {
  stop = true;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  thread.join();
  ::close(wake_fd);
}

void KvTransferServer::Impl::run() {
  while (!stop) {
    worker().progress();
    accept_connections();
    serve_requests();
    expire_pulls();
    close_drained();
    if (new_connections.empty() && requests.empty()) worker().wait(100, wake_fd);
  }
  shutdown();
}

void KvTransferServer::Impl::accept_connections() {
  while (!new_connections.empty()) {
    ucp_conn_request_h request = new_connections.front();
    new_connections.pop_front();
    Peer& conn = connections.emplace_back();
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.conn_request = request;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead consumer fails its sends, never hangs them
    ep.err_handler.cb = &Impl::on_ep_error;
    ep.err_handler.arg = &conn;
    if (ucp_ep_create(worker().get(), &ep, &conn.ep) != UCS_OK) {
      connections.pop_back();
      continue;
    }
    by_ep[conn.ep] = &conn;
  }
}

ucs_status_t KvTransferServer::Impl::on_request(void* arg, const void*, size_t, void* data,
                                                size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  // Refusing a rendezvous descriptor drops it unread and fails the sender's send.
  const ucs_status_t drop = rndv ? UCS_ERR_REJECTED : UCS_OK;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
    ++self->bad_frames;  // no endpoint to answer or close
    return drop;
  }
  // A request is small and sent eagerly; a rendezvous or oversized one is refused unread.
  if (rndv || length > kMaxRequestBytes) {
    ++self->bad_frames;
    auto it = self->by_ep.find(param->reply_ep);
    if (it != self->by_ep.end()) it->second->closing = true;
    return drop;
  }
  const auto* p = static_cast<const std::byte*>(data);
  self->requests.emplace_back(param->reply_ep, std::vector<std::byte>(p, p + length));
  return UCS_OK;
}

void KvTransferServer::Impl::serve_requests() {
  while (!requests.empty()) {
    auto [ep, bytes] = std::move(requests.front());
    requests.pop_front();
    auto it = by_ep.find(ep);
    if (it == by_ep.end() || it->second->closing) continue;
    serve(*it->second, bytes);
  }
}

void KvTransferServer::Impl::serve(Peer& conn, std::span<const std::byte> bytes) {
  RequestFrame request;
  try {
    request = decode_request(bytes);
  } catch (const Error&) {
    ++bad_frames;
    conn.closing = true;
    return;
  }
  if (request.fingerprint != config.fingerprint) {
    ++pulls_refused;
    reply_error(conn, request.pull_id, ReplyStatus::kFingerprintMismatch, config.fingerprint);
    return;
  }
  std::variant<PullGrant, std::string> answer;
  try {
    answer = handler(PullRequest{std::move(request.lease_id), request.block_ids});
  } catch (const std::exception& e) {
    answer = std::string(e.what());
  }
  if (auto* message = std::get_if<std::string>(&answer)) {
    ++pulls_refused;
    reply_error(conn, request.pull_id, ReplyStatus::kRefused, *message);
    return;
  }
  start_pull(conn, request.pull_id, std::move(std::get<PullGrant>(answer)),
             request.block_ids.size());
}

void KvTransferServer::Impl::reply_error(Peer& conn, uint64_t pull_id, ReplyStatus status,
                                         const std::string& message) {
  ReplyFrame frame;
  frame.pull_id = pull_id;
  frame.status = status;
  frame.message = message;
  Pull& pull = pulls.emplace_back();  // holds the reply bytes until sent; no on_done
  pull.conn = &conn;
  ++conn.pulls_in_flight;
  pull.reply = encode_reply(frame);
  pull.failed = true;  // not a served pull
  pull.ops.resize(1);
  ++pull.outstanding;
  send(conn, &pull, -1, nullptr, 0, pull.reply.data(), pull.reply.size(), ucp_dt_make_contig(1),
       UCP_AM_SEND_FLAG_EAGER);
}

void KvTransferServer::Impl::start_pull(Peer& conn, uint64_t pull_id, PullGrant grant,
                                        size_t num_ids) {
  auto refuse = [&](const std::string& why) {
    ++pulls_refused;
    if (grant.on_done) grant.on_done(false);
    reply_error(conn, pull_id, ReplyStatus::kBadRequest, why);
  };
  if (grant.blocks.size() != num_ids)
    return refuse("producer granted " + std::to_string(grant.blocks.size()) + " blocks for " +
                  std::to_string(num_ids) + " block ids");
  ReplyFrame frame;
  frame.pull_id = pull_id;
  std::map<std::vector<uint64_t>, uint16_t> layout_index;
  for (const auto& block : grant.blocks) {
    if (block.size() > kMaxRangesPerBlock)
      return refuse("a block has " + std::to_string(block.size()) + " ranges, the limit is " +
                    std::to_string(kMaxRangesPerBlock));
    std::vector<uint64_t> sizes;
    sizes.reserve(block.size());
    for (const auto& range : block) sizes.push_back(range.size());
    auto [it, added] = layout_index.try_emplace(sizes, static_cast<uint16_t>(frame.layouts.size()));
    if (added) {
      if (frame.layouts.size() == kMaxLayouts)
        return refuse("more than " + std::to_string(kMaxLayouts) +
                      " distinct block layouts in one pull");
      frame.layouts.push_back(std::move(sizes));
    }
    frame.block_layout.push_back(it->second);
  }

  Pull& pull = pulls.emplace_back();
  pull.conn = &conn;
  ++conn.pulls_in_flight;
  pull.grant = std::move(grant);
  pull.reply = encode_reply(frame);
  const size_t n = pull.grant.blocks.size();
  pull.headers.resize(n);
  pull.iovs.resize(n);
  pull.ops.resize(n + 1);
  pull.block_bytes.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    encode_block_header(BlockHeader{pull_id, static_cast<uint32_t>(i)}, pull.headers[i].data());
    for (const auto& range : pull.grant.blocks[i]) {
      if (range.empty()) continue;  // nothing to move; the layout still says it is there
      pull.iovs[i].push_back(ucp_dt_iov_t{const_cast<std::byte*>(range.data()), range.size()});
      pull.block_bytes[i] += range.size();
    }
  }
  // All sends are posted at once; UCX pipelines them (rendezvous for the large ones, the data read
  // in place from the cache). outstanding counts the reply plus one message per block.
  pull.outstanding = static_cast<int>(n) + 1;
  // A send that fails at once fails the pull; the rest are still posted (and fail at once on
  // the closing endpoint), so every completion is counted the same way. The last one can end
  // the pull (and free it): nothing touches `pull` after the loop.
  send(conn, &pull, -1, nullptr, 0, pull.reply.data(), pull.reply.size(), ucp_dt_make_contig(1),
       UCP_AM_SEND_FLAG_EAGER);
  for (size_t i = 0; i < n; ++i) {
    const auto& iov = pull.iovs[i];
    send(conn, &pull, static_cast<int>(i), pull.headers[i].data(), kBlockHeaderBytes,
         iov.empty() ? nullptr : iov.data(), iov.size(), ucp_dt_make_iov(), 0);
  }
}

// Posts one active message; its completion (now or later) goes through send_done.
void KvTransferServer::Impl::send(Peer& conn, Pull* pull, int block, const void* header,
                                  size_t header_length, const void* buffer, size_t count,
                                  ucp_datatype_t datatype, uint32_t flags) {
  if (conn.closing) {
    send_done(pull, block, UCS_ERR_CANCELED);
    return;
  }
  SendOp* op = &pull->ops[block + 1];
  *op = SendOp{this, pull, block};
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &Impl::on_send;
  param.user_data = op;
  param.datatype = datatype;
  param.flags = flags;
  ucs_status_ptr_t request = ucp_am_send_nbx(conn.ep, block < 0 ? kAmPullReply : kAmBlockData,
                                             header, header_length, buffer, count, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request))
    send_done(pull, block, request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
}

void KvTransferServer::Impl::send_done(Pull* pull, int block, ucs_status_t status) {
  if (abandoned) return;
  if (status != UCS_OK) {
    pull->failed = true;
    pull->conn->closing = true;  // a failed send means the endpoint is no good
  } else if (block >= 0) {
    bytes_sent += pull->block_bytes[block];
    ++blocks_sent;
  }
  if (--pull->outstanding == 0) finish(pull);
}

void KvTransferServer::Impl::finish(Pull* pull) {
  --pull->conn->pulls_in_flight;
  const bool served = !pull->failed;
  if (served) ++pulls_served;
  if (pull->grant.on_done) pull->grant.on_done(served);
  for (auto it = pulls.begin(); it != pulls.end(); ++it)
    if (&*it == pull) {
      pulls.erase(it);
      break;
    }
}

void KvTransferServer::Impl::close_drained() {
  for (auto it = connections.begin(); it != connections.end();) {
    if (!it->closing) {
      ++it;
      continue;
    }
    if (it->ep != nullptr) {
      // A force close cancels the endpoint's outstanding sends: their callbacks run (failing
      // their pulls, on_done(false)) before it returns, so no send outlives the endpoint.
      by_ep.erase(it->ep);
      ucp_ep_h ep = it->ep;
      it->ep = nullptr;
      worker().close_endpoint(ep, /*force=*/true);
    }
    if (it->pulls_in_flight > 0) {
      ++it;  // callbacks still pending: forget it once they have run
      continue;
    }
    it = connections.erase(it);
  }
}

void KvTransferServer::Impl::shutdown() {
  for (ucp_conn_request_h request : new_connections) ucp_listener_reject(listener, request);
  new_connections.clear();
  ucp_listener_destroy(listener);
  listener = nullptr;
  requests.clear();
  for (auto& conn : connections) conn.closing = true;
  close_drained();
  // Force-closed endpoints complete their sends at once, as a rule; UCX 1.13 has been seen not
  // to (with UCX_MM_ERROR_HANDLING=y), and the destructor must not hang on it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!pulls.empty() && std::chrono::steady_clock::now() < until) {
    worker().wait(10);
    close_drained();
  }
  if (!pulls.empty()) {
    abandoned = true;
    for (Pull& pull : pulls)
      if (pull.grant.on_done) pull.grant.on_done(false);
  }
  ucx.reset();  // first: its leftover requests point into the pulls
  pulls.clear();
  connections.clear();
}

KvTransferServer::KvTransferServer(KvTransferServerConfig config, PullHandler handler)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(handler))) {}

KvTransferServer::~KvTransferServer() = default;

int KvTransferServer::port() const { return impl_->port; }

KvTransferServer::Stats KvTransferServer::stats() const {
  return Stats{impl_->bytes_sent.load(), impl_->blocks_sent.load(), impl_->pulls_served.load(),
               impl_->pulls_refused.load(), impl_->bad_frames.load()};
}

}  // namespace tern::disagg
