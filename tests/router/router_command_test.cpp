// The `tern router` command line: a configuration it cannot serve is one line on stderr and
// exit code 1, before anything listens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_process.h"

namespace tern::testing {
namespace {

void expect_refused(const std::vector<std::string>& args, const std::string& message) {
  const ProcessResult r = run_process(TERN_BINARY, args);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
}

TEST(RouterCommand, RefusesConfigurationsItCannotServe) {
  expect_refused({"router"}, "give the backends");
  expect_refused({"router", "--prefill", "http://127.0.0.1:1"},
                 "at least one --prefill and one --decode");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2"},
                 "not both");
  expect_refused({"router", "--backend", "127.0.0.1:1"}, "backend URL '127.0.0.1:1'");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--policy", "random"},
                 "unknown routing policy 'random'");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "http://127.0.0.1:1/"},
                 "given twice");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--health-check-interval", "0"},
                 "--health-check-interval");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--disagg-min-prompt-tokens", "256"},
                 "--disagg-min-prompt-tokens applies to prefill/decode mode");
  // prefix_aware's settings with another policy would never be read. (The bad interval makes
  // a router that misses the check exit instead of serving.)
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--cache-threshold", "0.5",
                  "--health-check-interval", "0"},
                 "--cache-threshold applies to --policy prefix_aware (the policy is "
                 "round_robin)");
  expect_refused({"router", "--backend", "http://127.0.0.1:1", "--policy", "least_outstanding",
                  "--prefix-chunk-chars", "32", "--health-check-interval", "0"},
                 "--prefix-chunk-chars applies to --policy prefix_aware");
}

}  // namespace
}  // namespace tern::testing
