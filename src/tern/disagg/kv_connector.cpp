// KvConnector: leases and the transfer server on the prefill side, a queue and one pulling
// thread on the decode side. Pulls run one at a time: a pull is bounded by the link, and
// two at once would only share it.
#include "tern/disagg/kv_connector.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "tern/core/error.h"
#include "tern/disagg/kv_transfer_client.h"
#include "tern/disagg/kv_transfer_server.h"

namespace tern::disagg {
namespace {

std::string make_engine_id() {
  std::random_device device;
  char id[32];
  std::snprintf(id, sizeof id, "tern-%08x%08x", device(), device());
  return id;
}

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

KvConnector::KvConnector(const KvTransferConfig& config, KvCache& cache, std::string fingerprint)
    : config_(config),
      cache_(cache),
      fingerprint_(std::move(fingerprint)),
      engine_id_(config.engine_id.empty() ? make_engine_id() : config.engine_id),
      leases_(config.lease_seconds) {
  if (config_.produces()) {
    KvTransferServerConfig server;
    server.host = config_.ip;
    server.port = config_.port;
    server.fingerprint = fingerprint_;
    const int64_t num_blocks = cache_.config().num_blocks;
    server_ = std::make_unique<KvTransferServer>(
        server, [this, num_blocks](const PullRequest& r) -> std::variant<PullGrant, std::string> {
          for (int32_t b : r.block_ids)
            if (b < 0 || b >= num_blocks)
              return "block " + std::to_string(b) + " is not a block of this instance (0 to " +
                     std::to_string(num_blocks - 1) + ")";
          if (auto refused = leases_.begin_pull(r.lease_id, r.block_ids, steady_now()))
            return *refused;
          // The blocks in host memory until they are sent: on_done holds them.
          std::shared_ptr<HostBlocks> staged;
          try {
            staged = cache_.host_blocks(r.block_ids, BlockAccess::Read);
          } catch (const Error& e) {
            leases_.end_pull(r.lease_id, false);
            return std::string("could not read the blocks: ") + e.what();
          }
          PullGrant grant;
          grant.blocks.reserve(r.block_ids.size());
          for (const std::vector<std::span<std::byte>>& ranges : staged->ranges())
            grant.blocks.emplace_back(ranges.begin(), ranges.end());
          grant.on_done = [this, id = r.lease_id, staged](bool sent) {
            leases_.end_pull(id, sent);
            wake();
          };
          return grant;
        });
  }
  if (config_.consumes()) {
    client_ = std::make_unique<KvTransferClient>(fingerprint_);
    puller_ = std::thread([this] { pull_loop(); });
  }
}

KvConnector::~KvConnector() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    pulls_wanted_.notify_all();
  }
  if (puller_.joinable()) puller_.join();
  server_.reset();  // before the leases it reads
}

int KvConnector::port() const { return server_ ? server_->port() : 0; }

KvLease KvConnector::hold(std::vector<int32_t> block_ids, double now) {
  return leases_.grant(std::move(block_ids), now);
}

std::vector<KvLease> KvConnector::take_released(double now) { return leases_.take_released(now); }

void KvConnector::start_pull(Pull pull) {
  if (!client_) throw Error("this instance is not a KV consumer (--role decode or both)");
  if (pull.remote_blocks.size() != pull.local_blocks.size())
    throw Error("internal: a pull of " + std::to_string(pull.remote_blocks.size()) +
                " blocks into " + std::to_string(pull.local_blocks.size()));
  std::lock_guard lock(mutex_);
  queued_.push_back(std::move(pull));
  pulls_wanted_.notify_one();
}

std::vector<KvConnector::PullOutcome> KvConnector::take_finished_pulls() {
  std::lock_guard lock(mutex_);
  std::vector<PullOutcome> done;
  done.swap(finished_);
  return done;
}

void KvConnector::set_wakeup(std::function<void()> wakeup) {
  std::lock_guard lock(mutex_);
  wakeup_ = std::move(wakeup);
}

void KvConnector::wake() {
  std::function<void()> wakeup;
  {
    std::lock_guard lock(mutex_);
    wakeup = wakeup_;
  }
  if (wakeup) wakeup();
}

void KvConnector::pull_loop() {
  for (;;) {
    Pull pull;
    {
      std::unique_lock lock(mutex_);
      pulls_wanted_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
      if (stopping_) return;
      pull = std::move(queued_.front());
      queued_.pop_front();
    }
    PullRequest request;
    request.lease_id = pull.lease_id;
    request.block_ids = pull.remote_blocks;
    PullResult result;
    try {
      const std::unique_ptr<HostBlocks> dest =
          cache_.host_blocks(pull.local_blocks, BlockAccess::Write);
      result = client_->pull(pull.host, pull.port, request, dest->ranges(), kPullTimeoutSeconds);
      if (result.ok) dest->write_back();
    } catch (const Error& e) {
      result.ok = false;
      result.error = e.what();
    }
    PullOutcome outcome;
    outcome.ticket = pull.ticket;
    outcome.ok = result.ok;
    outcome.bytes = result.bytes;
    outcome.seconds = result.seconds;
    if (!result.ok) outcome.error = "could not pull the prompt's KV: " + result.error;
    {
      std::lock_guard lock(mutex_);
      ++(result.ok ? pulls_ok_ : pulls_failed_);
      finished_.push_back(std::move(outcome));
    }
    wake();
  }
}

KvConnectorStats KvConnector::stats() const {
  KvConnectorStats s;
  s.leases = leases_.stats();
  if (server_) {
    const KvTransferServer::Stats server = server_->stats();
    s.bytes_sent = server.bytes_sent;
    s.blocks_sent = server.blocks_sent;
    s.pulls_refused = static_cast<int64_t>(server.pulls_refused);
    s.bad_frames = static_cast<int64_t>(server.bad_frames);
  }
  if (client_) {
    const KvTransferClient::Stats client = client_->stats();
    s.bytes_received = client.bytes_received;
    s.blocks_received = client.blocks_received;
  }
  std::lock_guard lock(mutex_);
  s.pulls_ok = pulls_ok_;
  s.pulls_failed = pulls_failed_;
  return s;
}

}  // namespace tern::disagg
