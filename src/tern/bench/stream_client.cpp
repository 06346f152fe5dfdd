// The benchmark's HTTP client: one libcurl multi handle, one event loop, one easy handle per
// request in flight.
#include "tern/bench/stream_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>

#include "tern/core/clock.h"
#include "tern/core/error.h"

namespace tern::bench {
namespace {

using Clock = std::chrono::steady_clock;

// curl_global_init is not thread-safe; one call per process, before any handle.
void init_curl_once() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!ok) throw Error("libcurl failed to initialise");
}

// "  37/100 [===========>          ]  37% 12.3s" on one line of stderr, redrawn in place.
class ProgressBar {
 public:
  ProgressBar(size_t total, bool enabled) : total_(total), enabled_(enabled) {}
  void update(size_t done, double elapsed_s, bool force = false) {
    if (!enabled_ || (!force && elapsed_s - last_draw_ < 0.1)) return;
    last_draw_ = elapsed_s;
    constexpr int kWidth = 30;
    const double frac = total_ == 0 ? 1.0 : static_cast<double>(done) / static_cast<double>(total_);
    const int filled = static_cast<int>(frac * kWidth);
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
    bar[kWidth] = '\0';
    const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
    std::fprintf(stderr, "\r%6zu/%zu [%s] %3d%% %.1fs, %.2f req/s", done, total_, bar,
                 static_cast<int>(frac * 100), elapsed_s, rate);
    std::fflush(stderr);
  }
  void finish(size_t done, double elapsed_s) {
    update(done, elapsed_s, true);
    if (enabled_) std::fputc('\n', stderr);
  }

 private:
  size_t total_;
  bool enabled_;
  double last_draw_ = -1;
};

struct Transfer {
  size_t index = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::unique_ptr<ResponseStream> stream;
  std::string error_body;  // the body of a non-200 reply (capped)
  long status = 0;
  char errbuf[CURL_ERROR_SIZE] = {};
  Clock::time_point epoch;

  ~Transfer() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (headers != nullptr) curl_slist_free_all(headers);
  }
};

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  const double now = seconds_since(t->epoch);
  if (t->status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  if (t->status == 200) {
    t->stream->on_bytes(std::string_view(data, n), now);
  } else if (t->error_body.size() < 4096) {
    t->error_body.append(data, std::min(n, 4096 - t->error_body.size()));
  }
  return n;
}

std::unique_ptr<Transfer> start_transfer(CURLM* multi, const PlannedRequest& request, size_t index,
                                         const ClientOptions& options, Clock::time_point epoch,
                                         double now) {
  auto t = std::make_unique<Transfer>();
  t->index = index;
  t->epoch = epoch;
  t->easy = curl_easy_init();
  if (t->easy == nullptr) throw Error("libcurl could not create a request handle");
  t->headers = curl_slist_append(t->headers, "Content-Type: application/json");
  t->headers = curl_slist_append(t->headers, "Accept: text/event-stream");
  // libcurl sends "Expect: 100-continue" for large bodies (over 1 KiB before 7.86, 1 MiB since)
  // and then waits up to a second for a server that does not answer it: that wait would land
  // in the TTFT.
  t->headers = curl_slist_append(t->headers, "Expect:");
  if (!options.api_key.empty())
    t->headers =
        curl_slist_append(t->headers, ("Authorization: Bearer " + options.api_key).c_str());
  curl_easy_setopt(t->easy, CURLOPT_URL, options.url.c_str());
  curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(t->easy, CURLOPT_POST, 1L);
  // The body outlives the transfer (it lives in `requests`), so curl need not copy it.
  curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, request.body.c_str());
  curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                   static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(t->easy, CURLOPT_TCP_NODELAY, 1L);
  // vLLM's client gives a request 6 hours; a server that never answers must not hang forever.
  curl_easy_setopt(t->easy, CURLOPT_TIMEOUT, 6L * 60 * 60);
  curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout_s * 1000));
  t->stream = std::make_unique<ResponseStream>(options.endpoint, now, request.prompt_len);
  if (curl_multi_add_handle(multi, t->easy) != CURLM_OK)
    throw Error("libcurl could not start a request");
  return t;
}

void finish_transfer(Transfer& t, CURLcode result, double now) {
  if (result != CURLE_OK) {
    t.stream->fail(std::string("request failed: ") +
                   (t.errbuf[0] != '\0' ? t.errbuf : curl_easy_strerror(result)));
    return;
  }
  if (t.status == 0) curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.status);
  if (t.status != 200) {
    t.stream->fail("HTTP " + std::to_string(t.status) +
                   (t.error_body.empty() ? std::string() : ": " + t.error_body));
    return;
  }
  t.stream->on_end(now);
}

}  // namespace

RunResult run_requests(const std::vector<PlannedRequest>& requests, const ClientOptions& options) {
  init_curl_once();
  if (options.max_concurrency && *options.max_concurrency <= 0)
    throw Error("--max-concurrency must be greater than 0");
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(),
                                                              curl_multi_cleanup);
  if (!multi) throw Error("libcurl could not create its multi handle");

  RunResult result;
  result.records.resize(requests.size());
  std::vector<std::unique_ptr<Transfer>> in_flight;
  std::deque<size_t> waiting;  // arrived, held back by max_concurrency
  size_t next_arrival = 0, done = 0;
  ProgressBar progress(requests.size(), options.progress);
  const Clock::time_point epoch = Clock::now();
  const size_t limit =
      options.max_concurrency ? static_cast<size_t>(*options.max_concurrency) : requests.size();

  while (done < requests.size()) {
    double now = seconds_since(epoch);
    while (next_arrival < requests.size() && requests[next_arrival].arrival <= now)
      waiting.push_back(next_arrival++);
    while (!waiting.empty() && in_flight.size() < limit) {
      const size_t i = waiting.front();
      waiting.pop_front();
      now = seconds_since(epoch);
      in_flight.push_back(start_transfer(multi.get(), requests[i], i, options, epoch, now));
      result.records[i].queue_time = now - requests[i].arrival;
    }

    int running = 0;
    curl_multi_perform(multi.get(), &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      auto it = std::find_if(in_flight.begin(), in_flight.end(),
                             [&](const auto& t) { return t->easy == msg->easy_handle; });
      if (it == in_flight.end()) continue;
      Transfer& t = **it;
      finish_transfer(t, msg->data.result, seconds_since(epoch));
      curl_multi_remove_handle(multi.get(), t.easy);
      const double queue_time = result.records[t.index].queue_time;
      result.records[t.index] = t.stream->take_record();
      result.records[t.index].queue_time = queue_time;
      in_flight.erase(it);
      ++done;
    }
    now = seconds_since(epoch);
    progress.update(done, now);
    if (done == requests.size()) break;

    // Sleep until a socket is ready, the next arrival is due, or 50 ms pass (progress redraw).
    double wait_s = 0.05;
    if (next_arrival < requests.size())
      wait_s = std::min(wait_s, std::max(0.0, requests[next_arrival].arrival - now));
    curl_multi_poll(multi.get(), nullptr, 0, static_cast<int>(wait_s * 1000), nullptr);
  }
  result.duration_s = seconds_since(epoch);
  progress.finish(done, result.duration_s);
  return result;
}

}  // namespace tern::bench
