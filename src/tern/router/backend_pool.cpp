// Backend URLs, pools and the in-flight count (see backend_pool.h).
#include "tern/router/backend_pool.h"

#include <charconv>

#include "tern/core/error.h"

namespace tern::router {

BackendAddress parse_backend_url(const std::string& url) {
  const std::string_view scheme = "http://";
  auto bad = [&](const std::string& why) {
    return Error("backend URL '" + url + "': " + why + " (expected http://HOST:PORT)");
  };
  if (url.rfind("https://", 0) == 0) throw bad("https is not supported");
  if (url.rfind(scheme, 0) != 0) throw bad("it must start with http://");
  std::string_view rest = std::string_view(url).substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) throw bad("a path is not supported");
  if (rest.find_first_of("@?# ") != std::string_view::npos) throw bad("unexpected character");
  BackendAddress a;
  a.url = std::string(scheme) + std::string(rest);
  std::string_view host = rest;
  if (!rest.empty() && rest.front() == '[') {  // [::1]:8000
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) throw bad("unclosed '['");
    host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') throw bad("unexpected text after ']'");
  } else {
    const size_t colon = rest.find(':');
    host = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon);
  }
  if (host.empty()) throw bad("no host");
  if (!rest.empty()) {
    const std::string_view port = rest.substr(1);
    int p = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535)
      throw bad("the port must be a number in [1, 65535]");
    a.port = p;
  }
  a.host = std::string(host);
  return a;
}

const char* role_name(BackendRole role) {
  switch (role) {
    case BackendRole::Prefill:
      return "prefill";
    case BackendRole::Decode:
      return "decode";
    default:
      return "replica";
  }
}

InFlight::InFlight(BackendPool* pool, size_t index) : pool_(pool), index_(index) {}

InFlight::InFlight(InFlight&& other) noexcept : pool_(other.pool_), index_(other.index_) {
  other.pool_ = nullptr;
}

InFlight::~InFlight() {
  if (pool_) --pool_->backends_[index_]->in_flight;
}

const BackendAddress& InFlight::address() const { return pool_->backends_[index_]->address; }

BackendPool::BackendPool(BackendRole role, const std::vector<std::string>& urls,
                         std::unique_ptr<RoutingPolicy> policy)
    : role_(role), policy_(std::move(policy)) {
  for (const std::string& url : urls) {
    auto b = std::make_unique<Backend>();
    b->address = parse_backend_url(url);
    for (const auto& other : backends_)
      if (other->address.url == b->address.url)
        throw Error("backend " + b->address.url + " is given twice for the " + role_name(role) +
                    " pool");
    backends_.push_back(std::move(b));
  }
}

std::optional<InFlight> BackendPool::acquire(std::string_view prompt) {
  std::lock_guard lock(mutex_);
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < backends_.size(); ++i)
    if (backends_[i]->healthy) candidates.push_back({i, backends_[i]->in_flight.load()});
  if (candidates.empty()) return std::nullopt;
  const size_t chosen = candidates.at(policy_->pick(candidates, prompt)).backend;
  ++backends_[chosen]->in_flight;
  return InFlight(this, chosen);
}

bool BackendPool::set_healthy(size_t index, bool healthy) {
  std::lock_guard lock(mutex_);
  Backend& b = *backends_.at(index);
  if (b.healthy == healthy) return false;
  b.healthy = healthy;
  if (!healthy) policy_->forget(index);
  return true;
}

bool BackendPool::any_healthy() const {
  for (const auto& b : backends_)
    if (b->healthy) return true;
  return false;
}

}  // namespace tern::router
