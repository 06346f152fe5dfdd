// KvTransferClient: one blocking pull at a time over the client's own UCX worker(). UCX callbacks
// record what arrived into the active pull; the pull's loop starts the rendezvous receives and
// decides when it is done, failed or timed out. A failed pull closes its connection (force),
// which cancels every receive still aimed at the caller's memory before pull() returns.
#include "tern/disagg/kv_transfer_client.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>

#include "tern/core/error.h"
#include "tern/disagg/kv_wire.h"
#include "tern/disagg/ucx_worker.h"

namespace tern::disagg {
namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  ucp_ep_h ep = nullptr;
  bool dead = false;
  ucs_status_t error = UCS_OK;
  std::array<std::byte, kBlockHeaderBytes>
      cancel_header{};  // kAmPullCancel's header, alive while sent
  void* cancel_request = nullptr;
};

struct Stashed {
  uint32_t block;
  void* desc;  // a rendezvous descriptor held until the reply has been checked
};

// A block receive's user data, owned by its ActivePull (which outlives every receive).
struct RecvOp {
  void* self;  // the client's Impl
  uint32_t block;
};

struct ActivePull {
  uint64_t id = 0;
  std::string peer;  // host:port, for messages
  std::span<const std::vector<std::span<std::byte>>> dest;
  std::vector<uint64_t> dest_bytes;             // [num_blocks] sum of dest[i]'s range sizes
  std::vector<std::vector<ucp_dt_iov_t>> iovs;  // [num_blocks] dest[i]'s non-empty ranges
  std::vector<uint8_t> arrived;                 // [num_blocks] 1 once its message arrived
  std::vector<Stashed> stash;
  std::vector<RecvOp> recv_ops;  // [num_blocks]
  std::vector<int32_t> block_ids;
  std::vector<std::byte> request_bytes;  // the request frame, alive until its send completes
  bool replied = false;
  bool clean_refusal = false;  // failed by a well-formed reply: the connection is still good
  std::string error;
  size_t blocks_done = 0;
  uint64_t bytes = 0;

  bool failed() const { return !error.empty(); }
  void fail(std::string why) {
    if (error.empty()) error = std::move(why);
  }
};

std::string sizes_text(std::span<const uint64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  if (sizes.size() > 8) s += ", …";
  return s + "] (" + std::to_string(sizes.size()) + " ranges)";
}

}  // namespace

struct KvTransferClient::Impl {
  std::string fingerprint;
  std::unique_ptr<UcxWorker> ucx = std::make_unique<UcxWorker>("tern-kv-client", /*listens=*/false);
  std::string ucx_error;  // why ucx is null (a restart failed)
  UcxWorker& worker() { return *ucx; }
  std::map<std::string, std::unique_ptr<Connection>> connections;  // by host:port
  ActivePull* active = nullptr;
  int ops_in_flight = 0;       // request sends and block receives not yet completed
  int receives_in_flight = 0;  // of which block receives (aimed at the caller's memory)
  uint64_t next_pull_id;
  std::atomic<uint64_t> bytes_received{0}, blocks_received{0};

  explicit Impl(std::string fp);
  ~Impl();
  Connection* connect(const std::string& host, int port, const std::string& key, bool* fresh,
                      std::string* error);
  void drop(const std::string& key);
  void register_handlers();
  void restart_worker();
  void drain();
  // Gives up on a live connection after a failed pull (see the .cpp); `receives_in_flight`:
  // UCX may still write into the caller's memory, so it must be closed before returning.
  void abandon(const std::string& key, uint64_t pull_id, bool receives_in_flight);
  void close_retired(Connection& conn);
  void sweep_retired(bool all);
  std::vector<std::unique_ptr<Connection>> retired;  // abandoned, waiting for the producer to close
  enum class Outcome { kDone, kRetry };
  Outcome attempt(Connection* conn, bool fresh, const std::string& key, const PullRequest& request,
                  ActivePull& pull, Clock::time_point deadline, double timeout_seconds);
  void start_receives(ActivePull& pull);

  static void on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* conn = static_cast<Connection*>(arg);
    conn->dead = true;
    conn->error = status;
  }
  static void on_send(void* request, ucs_status_t, void* user_data) {
    --static_cast<Impl*>(user_data)
          ->ops_in_flight;  // a failed send also shows as an endpoint error
    ucp_request_free(request);
  }
  static void on_recv(void* request, ucs_status_t status, size_t, void* user_data) {
    const RecvOp* op = static_cast<const RecvOp*>(user_data);
    ucp_request_free(request);
    static_cast<Impl*>(op->self)->recv_done(op->block, status);
  }
  void recv_done(uint32_t block, ucs_status_t status) {
    --ops_in_flight;
    --receives_in_flight;
    if (active == nullptr) return;
    if (status != UCS_OK) {
      // Over a live connection a receive fails only when the producer went away.
      active->fail("producer " + active->peer + " died mid-transfer, after " +
                   std::to_string(active->blocks_done) + " of " +
                   std::to_string(active->dest.size()) + " blocks (UCX: receiving block " +
                   std::to_string(block) + ": " + ucx_status_text(status) + ")");
      return;
    }
    ++active->blocks_done;
    active->bytes += active->dest_bytes[block];
  }
  static ucs_status_t on_reply(void* arg, const void*, size_t, void* data, size_t length,
                               const ucp_am_recv_param_t* param);
  static ucs_status_t on_block(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);
};

KvTransferClient::Impl::Impl(std::string fp) : fingerprint(std::move(fp)) {
  if (fingerprint.size() > kMaxFingerprintBytes)
    throw Error("kv transfer client: fingerprint of " + std::to_string(fingerprint.size()) +
                " bytes, the limit is " + std::to_string(kMaxFingerprintBytes));
  // Pull ids start at a random point so that a reply meant for another client object (or an
  // earlier run) is never taken for this one's.
  next_pull_id = std::random_device{}() * 0x9e3779b97f4a7c15ULL + 1;
  register_handlers();
}

void KvTransferClient::Impl::register_handlers() {
  for (auto [id, cb] :
       {std::pair{kAmPullReply, &Impl::on_reply}, std::pair{kAmBlockData, &Impl::on_block}}) {
    ucp_am_handler_param_t am{};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    am.id = id;
    am.flags = UCP_AM_FLAG_WHOLE_MSG;
    am.cb = cb;
    am.arg = this;
    const ucs_status_t status = ucp_worker_set_am_recv_handler(worker().get(), &am);
    if (status != UCS_OK)
      throw Error("kv transfer client: UCX active messages: " + ucx_status_text(status));
  }
}

void KvTransferClient::Impl::restart_worker() {
  for (auto& conn : retired) close_retired(*conn);
  retired.clear();
  for (auto& [key, conn] : connections) worker().close_endpoint(conn->ep, /*force=*/true);
  connections.clear();
  ucx.reset();  // destroys the stuck requests with the worker
  ops_in_flight = 0;
  receives_in_flight = 0;
  try {
    ucx = std::make_unique<UcxWorker>("tern-kv-client", /*listens=*/false);
    register_handlers();
  } catch (const Error& e) {
    ucx.reset();
    ucx_error = e.what();
  }
}

// Waits for the operations still in flight after their endpoint was closed. UCX 1.13 does not
// always complete a rendezvous receive whose endpoint was force-closed (seen with
// UCX_MM_ERROR_HANDLING=y, a producer killed mid-transfer): then only destroying the worker
// makes sure nothing writes into the caller's memory any more.
void KvTransferClient::Impl::drain() {
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (ops_in_flight > 0 && Clock::now() < until) worker().wait(10);
  if (ops_in_flight > 0) restart_worker();
}

KvTransferClient::Impl::~Impl() {
  if (!ucx) return;
  sweep_retired(/*all=*/true);
  for (auto& [key, conn] : connections) worker().close_endpoint(conn->ep, /*force=*/true);
  connections.clear();
  drain();
}

ucs_status_t KvTransferClient::Impl::on_reply(void* arg, const void*, size_t, void* data,
                                              size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  ActivePull* pull = self->active;
  if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
    if (pull)
      pull->fail("producer " + pull->peer + " sent its reply by rendezvous (protocol error)");
    return UCS_ERR_REJECTED;
  }
  if (pull == nullptr || pull->failed()) return UCS_OK;
  ReplyFrame reply;
  try {
    reply = decode_reply({static_cast<const std::byte*>(data), length});
  } catch (const Error& e) {
    pull->fail(std::string("bad reply from producer ") + pull->peer + ": " + e.what());
    return UCS_OK;
  }
  if (reply.pull_id != pull->id) return UCS_OK;  // meant for an earlier, abandoned pull
  if (pull->replied) {
    pull->fail("producer " + pull->peer + " replied twice");
    return UCS_OK;
  }
  pull->replied = true;
  switch (reply.status) {
    case ReplyStatus::kOk:
      break;
    case ReplyStatus::kFingerprintMismatch:
      pull->clean_refusal = true;
      pull->fail("fingerprint mismatch: producer " + pull->peer + " has '" + reply.message +
                 "', this consumer has '" + self->fingerprint + "'");
      return UCS_OK;
    case ReplyStatus::kRefused:
    case ReplyStatus::kBadRequest:
      pull->clean_refusal = true;
      pull->fail("refused by producer " + pull->peer + ": " + reply.message);
      return UCS_OK;
  }
  const size_t n = pull->dest.size();
  if (reply.block_layout.size() != n) {
    pull->fail("producer " + pull->peer + " granted " + std::to_string(reply.block_layout.size()) +
               " blocks, the consumer asked for " + std::to_string(n));
    return UCS_OK;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& sizes = reply.layouts[reply.block_layout[i]];
    const auto& ranges = pull->dest[i];
    bool same = sizes.size() == ranges.size();
    for (size_t r = 0; same && r < sizes.size(); ++r) same = sizes[r] == ranges[r].size();
    if (!same) {
      std::vector<uint64_t> mine;
      for (const auto& range : ranges) mine.push_back(range.size());
      pull->fail("range size mismatch at block " + std::to_string(i) + " (producer block id " +
                 std::to_string(pull->block_ids[i]) + "): producer " + pull->peer + " has " +
                 sizes_text(sizes) + ", this consumer has " + sizes_text(mine));
      return UCS_OK;
    }
  }
  return UCS_OK;
}

ucs_status_t KvTransferClient::Impl::on_block(void* arg, const void* header, size_t header_length,
                                              void* data, size_t length,
                                              const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Impl*>(arg);
  ActivePull* pull = self->active;
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const ucs_status_t drop = rndv ? UCS_ERR_CANCELED : UCS_OK;
  if (pull == nullptr || pull->failed()) return drop;
  BlockHeader h;
  try {
    h = decode_block_header({static_cast<const std::byte*>(header), header_length});
  } catch (const Error& e) {
    pull->fail(std::string("bad block message from producer ") + pull->peer + ": " + e.what());
    return drop;
  }
  if (h.pull_id != pull->id) return drop;  // a late block of an earlier pull
  const size_t n = pull->dest.size();
  if (h.block_index >= n || pull->arrived[h.block_index]) {
    pull->fail("producer " + pull->peer + " sent block " + std::to_string(h.block_index) +
               (h.block_index >= n ? " of " + std::to_string(n) : " twice"));
    return drop;
  }
  // Checked before a byte is placed: a block's message is exactly its ranges, so a length
  // that differs can never write past the caller's spans.
  if (length != pull->dest_bytes[h.block_index]) {
    pull->fail("block " + std::to_string(h.block_index) + " from producer " + pull->peer + " has " +
               std::to_string(length) + " bytes, this consumer's ranges hold " +
               std::to_string(pull->dest_bytes[h.block_index]));
    return drop;
  }
  pull->arrived[h.block_index] = 1;
  if (rndv) {
    // Received by the pull loop (outside UCX's progress), once the reply's layout is checked.
    pull->stash.push_back(Stashed{h.block_index, data});
    return UCS_INPROGRESS;
  }
  // Small block, delivered eagerly: scatter it into the caller's ranges.
  const auto* src = static_cast<const std::byte*>(data);
  for (const auto& range : pull->dest[h.block_index]) {
    std::memcpy(range.data(), src, range.size());
    src += range.size();
  }
  ++pull->blocks_done;
  pull->bytes += length;
  return UCS_OK;
}

void KvTransferClient::Impl::start_receives(ActivePull& pull) {
  for (const Stashed& s : pull.stash) {
    if (pull.failed()) {
      ucp_am_data_release(worker().get(), s.desc);
      continue;
    }
    const auto& iov = pull.iovs[s.block];
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
    param.cb.recv_am = &Impl::on_recv;
    RecvOp* op = &pull.recv_ops[s.block];
    *op = RecvOp{this, s.block};
    param.user_data = op;
    param.datatype = ucp_dt_make_iov();
    ++ops_in_flight;
    ++receives_in_flight;
    ucs_status_ptr_t request = ucp_am_recv_data_nbx(
        worker().get(), s.desc, const_cast<ucp_dt_iov_t*>(iov.data()), iov.size(), &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request))
      recv_done(s.block, request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
  }
  pull.stash.clear();
}

Connection* KvTransferClient::Impl::connect(const std::string& host, int port,
                                            const std::string& key, bool* fresh,
                                            std::string* error) {
  sweep_retired(false);  // progresses: an error on an idle connection surfaces before it is reused
  auto it = connections.find(key);
  if (it != connections.end() && !it->second->dead) {
    *fresh = false;
    return it->second.get();
  }
  if (it != connections.end()) drop(key);
  *fresh = true;
  socklen_t addr_len = 0;
  sockaddr_storage addr;
  try {
    addr = resolve_address(host, port, &addr_len);
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
  auto conn = std::make_unique<Connection>();
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  ep.sockaddr.addrlen = addr_len;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead producer fails the pull instead of hanging it
  ep.err_handler.cb = &Impl::on_ep_error;
  ep.err_handler.arg = conn.get();
  const ucs_status_t status = ucp_ep_create(worker().get(), &ep, &conn->ep);
  if (status != UCS_OK) {
    *error = "cannot connect to producer " + key + " (UCX: " + ucx_status_text(status) + ")";
    return nullptr;
  }
  return connections.emplace(key, std::move(conn)).first->second.get();
}

void KvTransferClient::Impl::drop(const std::string& key) {
  auto it = connections.find(key);
  if (it == connections.end()) return;
  // Force: the peer may be dead or stuck; outstanding receives complete (canceled) inside.
  worker().close_endpoint(it->second->ep, /*force=*/true);
  connections.erase(it);
}

void KvTransferClient::Impl::abandon(const std::string& key, uint64_t pull_id,
                                     bool receives_in_flight) {
  auto it = connections.find(key);
  if (it == connections.end()) return;
  std::unique_ptr<Connection> conn = std::move(it->second);
  connections.erase(it);
  if (!conn->dead) {
    // Tell the producer, which then closes the connection and fails the pull's sends
    // (on_done(false)): over shared memory it would not notice a force-closed endpoint of a
    // live process, and would hold the pull's blocks until its pull timeout.
    encode_block_header(BlockHeader{pull_id, 0}, conn->cancel_header.data());
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t sent = ucp_am_send_nbx(conn->ep, kAmPullCancel, conn->cancel_header.data(),
                                            conn->cancel_header.size(), nullptr, 0, &param);
    if (sent != nullptr && !UCS_PTR_IS_ERR(sent)) conn->cancel_request = sent;
  }
  if (!receives_in_flight && !conn->dead) {
    // Nothing is aimed at the caller's memory: let the cancel go out as UCX progresses (a stuck
    // producer may not have finished wiring the connection up yet) and close it later.
    retired.push_back(std::move(conn));
    sweep_retired(false);
    return;
  }
  // Receives into dest are in flight: only closing the endpoint stops them, now.
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (conn->cancel_request && ucp_request_check_status(conn->cancel_request) == UCS_INPROGRESS &&
         !conn->dead && Clock::now() < until)
    worker().wait(10);
  close_retired(*conn);
}

void KvTransferClient::Impl::close_retired(Connection& conn) {
  if (conn.cancel_request)
    ucp_request_free(conn.cancel_request);  // still in flight: the close cancels it
  conn.cancel_request = nullptr;
  worker().close_endpoint(conn.ep, /*force=*/true);
}

void KvTransferClient::Impl::sweep_retired(bool all) {
  worker().progress();
  for (auto it = retired.begin(); it != retired.end();) {
    Connection& conn = **it;
    // The producer closes its side on our cancel; a few that never do are closed by age.
    if (all || conn.dead || retired.size() > 8) {
      close_retired(conn);
      it = retired.erase(it);
    } else {
      ++it;
    }
  }
}

KvTransferClient::Impl::Outcome KvTransferClient::Impl::attempt(
    Connection* conn, bool fresh, const std::string& key, const PullRequest& request,
    ActivePull& pull, Clock::time_point deadline, double timeout_seconds) {
  RequestFrame frame;
  frame.pull_id = pull.id;
  frame.fingerprint = fingerprint;
  frame.lease_id = request.lease_id;
  frame.block_ids = request.block_ids;
  pull.request_bytes = encode_request(frame);
  const auto& bytes = pull.request_bytes;

  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &Impl::on_send;
  param.user_data = this;
  // REPLY: the producer answers on this endpoint. EAGER: the producer takes requests only eagerly.
  param.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
  ++ops_in_flight;
  ucs_status_ptr_t sent =
      ucp_am_send_nbx(conn->ep, kAmPullRequest, nullptr, 0, bytes.data(), bytes.size(), &param);
  if (sent == nullptr || UCS_PTR_IS_ERR(sent)) --ops_in_flight;
  if (UCS_PTR_IS_ERR(sent))
    pull.fail("cannot send the request to producer " + key +
              " (UCX: " + ucx_status_text(UCS_PTR_STATUS(sent)) + ")");

  const size_t n = pull.dest.size();
  while (!pull.failed()) {
    if (!pull.stash.empty() && pull.replied) start_receives(pull);
    if (pull.replied && pull.blocks_done == n) break;
    if (conn->dead) {
      const std::string cause = " (UCX: " + ucx_status_text(conn->error) + ")";
      if (!pull.replied && !fresh)
        return Outcome::kRetry;  // a stale connection: try a new one once
      if (!pull.replied && conn->error == UCS_ERR_UNREACHABLE)
        pull.fail("cannot connect to producer " + key + ": nothing listening or unreachable" +
                  cause);
      else if (!pull.replied)
        pull.fail("connection to producer " + key + " failed or was lost before its reply" + cause);
      else
        pull.fail("producer " + key + " died mid-transfer, after " +
                  std::to_string(pull.blocks_done) + " of " + std::to_string(n) + " blocks" +
                  cause);
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_seconds);
      pull.fail("timed out after " + std::string(secs) + " s waiting for producer " + key +
                (pull.replied ? ", " + std::to_string(pull.blocks_done) + " of " +
                                    std::to_string(n) + " blocks received"
                              : ", no reply"));
      break;
    }
    worker().wait(static_cast<int>(std::min<long long>(left, 100)));
  }
  for (const Stashed& s : pull.stash) ucp_am_data_release(worker().get(), s.desc);
  pull.stash.clear();
  return Outcome::kDone;
}

KvTransferClient::KvTransferClient(std::string fingerprint)
    : impl_(std::make_unique<Impl>(std::move(fingerprint))) {}

KvTransferClient::~KvTransferClient() = default;

PullResult KvTransferClient::pull(const std::string& host, int port, const PullRequest& request,
                                  std::span<const std::vector<std::span<std::byte>>> dest,
                                  double timeout_seconds) {
  Impl& im = *impl_;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds));
  const std::string key = host + ":" + std::to_string(port);
  PullResult result;
  auto finish = [&](std::string error) {
    result.error = std::move(error);
    result.ok = result.error.empty();
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
  };
  if (request.lease_id.size() > kMaxLeaseIdBytes)
    return finish("lease id of " + std::to_string(request.lease_id.size()) +
                  " bytes, the limit is " + std::to_string(kMaxLeaseIdBytes));
  if (request.block_ids.size() > kMaxBlocksPerPull)
    return finish(std::to_string(request.block_ids.size()) +
                  " block ids in one pull, the limit is " + std::to_string(kMaxBlocksPerPull));
  if (dest.size() != request.block_ids.size())
    return finish("pull of " + std::to_string(request.block_ids.size()) + " block ids into " +
                  std::to_string(dest.size()) + " destination blocks");

  for (int tries = 0;; ++tries) {
    if (!im.ucx) return finish("kv transfer client: UCX could not restart: " + im.ucx_error);
    bool fresh = false;
    std::string error;
    Connection* conn = im.connect(host, port, key, &fresh, &error);
    if (conn == nullptr) return finish(error);

    ActivePull pull;
    pull.id = im.next_pull_id++;
    pull.peer = key;
    pull.dest = dest;
    pull.block_ids = request.block_ids;
    pull.dest_bytes.assign(dest.size(), 0);
    pull.iovs.resize(dest.size());
    pull.recv_ops.resize(dest.size());
    pull.arrived.assign(dest.size(), 0);
    for (size_t i = 0; i < dest.size(); ++i)
      for (const auto& range : dest[i]) {
        pull.dest_bytes[i] += range.size();
        if (!range.empty()) pull.iovs[i].push_back(ucp_dt_iov_t{range.data(), range.size()});
      }
    im.active = &pull;
    const Impl::Outcome outcome =
        im.attempt(conn, fresh, key, request, pull, deadline, timeout_seconds);
    // Anything but a clean refusal leaves the connection suspect, and receives may still be aimed
    // at dest: those are cancelled (the endpoint closed) and complete before we return.
    if (outcome == Impl::Outcome::kRetry || conn->dead)
      im.drop(key);
    else if (pull.failed() && (!pull.clean_refusal || im.ops_in_flight > 0))
      im.abandon(key, pull.id, /*receives_in_flight=*/im.receives_in_flight > 0);
    im.drain();
    im.active = nullptr;
    if (outcome == Impl::Outcome::kRetry && tries == 0) continue;
    if (outcome == Impl::Outcome::kRetry)
      return finish("connection to producer " + key + " was lost before its reply, twice");
    if (pull.failed()) return finish(pull.error);
    im.bytes_received += pull.bytes;
    im.blocks_received += pull.blocks_done;
    result.bytes = pull.bytes;
    return finish("");
  }
}

KvTransferClient::Stats KvTransferClient::stats() const {
  return Stats{impl_->bytes_received.load(), impl_->blocks_received.load()};
}

}  // namespace tern::disagg
