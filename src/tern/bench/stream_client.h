// Sends the benchmark's streaming requests on their arrival schedule, at most
// max_concurrency at a time, and times every chunk: libcurl's multi interface drives all
// transfers from one thread, so each timestamp is taken when its bytes are read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tern/bench/metrics.h"
#include "tern/bench/openai_stream.h"

namespace tern::bench {

struct PlannedRequest {
  std::string body;        // the JSON body
  int64_t prompt_len = 0;  // the dataset's count
  double arrival = 0;      // seconds from the start of the run
};

struct ClientOptions {
  std::string url;  // base URL + endpoint
  Endpoint endpoint = Endpoint::kCompletions;
  std::string api_key;  // sent as "Authorization: Bearer" when not empty
  std::optional<int64_t> max_concurrency;
  bool progress = true;  // a live progress bar on stderr
  double connect_timeout_s = 30;
};

struct RunResult {
  std::vector<RequestRecord> records;  // in the order of the planned requests
  double duration_s = 0;               // first arrival → last request done
};

// Runs every request once. Requests wait in arrival order when max_concurrency are in flight;
// queue_time records that wait. Failures (connection refused, HTTP errors, bad streams) are
// records with success = false and the error text, never exceptions.
RunResult run_requests(const std::vector<PlannedRequest>& requests, const ClientOptions& options);

}  // namespace tern::bench
