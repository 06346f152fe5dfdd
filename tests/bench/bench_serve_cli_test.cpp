// `tern bench serve` end to end against a fake OpenAI streaming server in this process: a few
// token chunks with small sleeps, a usage chunk (or none), and some requests failed on purpose.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "closed_port.h"
#include "fixtures.h"
#include "run_process.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;

constexpr const char* kTokenizer = "qwen-tokenizer";
const std::vector<std::string> kPieces = {"Hello", " world", ", fake", " tokens"};

// Streams kPieces as completions or chat chunks. Every fourth request (by arrival) answers
// 500; with `usage` a final chunk reports completion_tokens = the pieces sent. Its /metrics
// has speculative-decoding counters that grow by 10 drafts of 4 tokens, 30 accepted (10, 9, 7
// and 4 at positions 0-3), per scrape.
class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(bool usage) : usage_(usage) {
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle(req, res, false);
    });
    server_.Post(
        "/v1/chat/completions",
        [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, true); });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      const int n = ++scrapes_;
      const std::string l = "{model_name=\"fake-model\"}";
      std::string text =
          "# HELP tern:spec_decode_num_drafts_total x\n# TYPE tern:spec_decode_num_drafts_total "
          "counter\n";
      text += "tern:spec_decode_num_drafts_total" + l + " " + std::to_string(10 * n) + "\n";
      text += "tern:spec_decode_num_draft_tokens_total" + l + " " + std::to_string(40 * n) + "\n";
      text +=
          "tern:spec_decode_num_accepted_tokens_total" + l + " " + std::to_string(30 * n) + "\n";
      const int per_position[] = {10, 9, 7, 4};
      for (int i = 0; i < 4; ++i)
        text +=
            "tern:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"fake-model\",position="
            "\"" +
            std::to_string(i) + "\"} " + std::to_string(per_position[i] * n) + "\n";
      res.set_content(text, "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // bind_to_any_port already listens: connections queue until the thread accepts them.
  }
  ~FakeOpenAiServer() {
    server_.stop();
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  int failed() const { return failed_.load(); }
  int peak_in_flight() const { return peak_.load(); }
  bool saw_bad_body() const { return bad_body_.load(); }
  bool saw_expect() const { return saw_expect_.load(); }
  int last_max_tokens() const { return max_tokens_.load(); }

 private:
  void enter() {
    const int now = ++in_flight_;
    int peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    enter();
    const int n = ++requests_;
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    const char* max_key = chat ? "max_completion_tokens" : "max_tokens";
    if (body.is_discarded() || body.value("model", "") != "fake-model" ||
        !body.value("stream", false) || !body.contains(max_key) ||
        (chat ? !body.contains("messages") : !body.contains("prompt")))
      bad_body_ = true;
    else
      max_tokens_ = body[max_key].get<int>();
    // A client that sends "Expect: 100-continue" waits for an answer some servers never give.
    if (req.has_header("Expect")) saw_expect_ = true;
    if (n % 4 == 0) {
      ++failed_;
      // Leave before the reply is written, so the client cannot see the end first.
      --in_flight_;
      res.status = 500;
      res.set_content(R"({"error":{"message":"fake overload","type":"server_error"}})",
                      "application/json");
      return;
    }
    res.set_chunked_content_provider(
        "text/event-stream", [this, chat](size_t, httplib::DataSink& sink) {
          for (const std::string& piece : kPieces) {
            nlohmann::json chunk;
            if (chat)
              chunk["choices"] = {{{"index", 0}, {"delta", {{"content", piece}}}}};
            else
              chunk["choices"] = {{{"index", 0}, {"text", piece}}};
            const std::string event = "data: " + chunk.dump() + "\n\n";
            sink.write(event.data(), event.size());
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
          }
          if (usage_) {
            const std::string event =
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":11,"
                "\"completion_tokens\":" +
                std::to_string(kPieces.size()) + "}}\n\n";
            sink.write(event.data(), event.size());
          }
          const std::string done = "data: [DONE]\n\n";
          --in_flight_;  // before the last bytes: the client cannot finish before this
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        });
  }

  bool usage_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> requests_{0}, failed_{0}, in_flight_{0}, peak_{0}, scrapes_{0}, max_tokens_{0};
  std::atomic<bool> bad_body_{false}, saw_expect_{false};
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}

// A row of the summary table: the label padded to 40, a space, the value.
std::string table_row(const std::string& label, const std::string& value) {
  return label + std::string(40 - label.size(), ' ') + " " + value;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(BenchServeCli, CompletionsWithUsageCountsSuccessesAndFailures) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  FakeOpenAiServer server(/*usage=*/true);
  const std::string result = temp_path("bench-result.json");
  const std::string plot = temp_path("bench-plot.svg");
  auto r = run_tern({"bench",
                     "serve",
                     "--base-url",
                     server.base_url(),
                     "--model",
                     "fake-model",
                     "--tokenizer",
                     fixture(kTokenizer),
                     "--dataset-name",
                     "random",
                     "--num-prompts",
                     "12",
                     "--random-input-len",
                     "400",
                     "--random-output-len",
                     "4",
                     "--max-concurrency",
                     "3",
                     "--goodput",
                     "ttft:600000",
                     "e2el:600000",
                     "--save-result",
                     "--result-filename",
                     result,
                     "--plot",
                     plot,
                     "--disable-tqdm"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(server.requests(), 12);
  EXPECT_EQ(server.failed(), 3);
  EXPECT_FALSE(server.saw_bad_body());
  // Bodies over 1 KiB: older libcurl would ask for 100-continue and stall on some servers.
  EXPECT_FALSE(server.saw_expect()) << "requests must not wait for 100-continue";
  EXPECT_LE(server.peak_in_flight(), 3) << "--max-concurrency 3";

  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Failed requests:                         3"), std::string::npos) << r.out;
  // Some failures: the run passes, and says whose figures these are.
  EXPECT_NE(r.err.find("tern bench serve: warning: 3 of 12 requests failed; the figures cover "
                       "the 9 that succeeded\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("P90 TTFT (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P99 E2EL (ms):"), std::string::npos) << r.out;
  // The server's spec-decode counters over the run: one scrape before, one after.
  EXPECT_NE(r.out.find(table_row("Acceptance rate (%):", "75.00")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(table_row("Acceptance length:", "4.00")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(table_row("  Position 1:", "90.00")), std::string::npos) << r.out;

  const auto j = nlohmann::json::parse(read_file(result));
  EXPECT_DOUBLE_EQ(j["spec_decode_acceptance_rate"].get<double>(), 75.0);
  EXPECT_EQ(j["spec_decode_per_position_acceptance_rates"],
            nlohmann::json::parse("[1.0, 0.9, 0.7, 0.4]"));
  EXPECT_EQ(j["backend"], "openai");
  EXPECT_EQ(j["model_id"], "fake-model");
  EXPECT_EQ(j["num_prompts"], 12);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["max_concurrency"], 3);
  EXPECT_EQ(j["completed"], 9);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_EQ(j["total_output_tokens"], 9 * 4);  // usage.completion_tokens
  EXPECT_EQ(j["total_input_tokens"], 9 * 11);  // usage.prompt_tokens replaces the dataset's
  EXPECT_GT(j["duration"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), j["request_throughput"].get<double>());
  for (const char* key : {"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
                          "p90_tpot_ms", "mean_itl_ms", "p99_e2el_ms", "output_throughput",
                          "total_token_throughput", "max_concurrent_requests", "date"})
    EXPECT_TRUE(j.contains(key)) << key;
  ASSERT_EQ(j["errors"].size(), 12u);
  ASSERT_EQ(j["generated_texts"].size(), 12u);
  ASSERT_EQ(j["itls"].size(), 12u);
  int failures = 0;
  for (size_t i = 0; i < 12; ++i) {
    const std::string error = j["errors"][i];
    if (!error.empty()) {
      ++failures;
      EXPECT_NE(error.find("HTTP 500"), std::string::npos) << error;
      EXPECT_NE(error.find("fake overload"), std::string::npos) << error;
      EXPECT_EQ(j["output_lens"][i], 0);
    } else {
      EXPECT_EQ(j["generated_texts"][i], "Hello world, fake tokens");
      EXPECT_EQ(j["output_lens"][i], 4);
      EXPECT_EQ(j["itls"][i].size(), 3u);  // four token chunks
    }
  }
  EXPECT_EQ(failures, 3);
  EXPECT_LE(j["max_concurrent_requests"].get<int>(), 3);

  const std::string svg = read_file(plot);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  for (const char* label :
       {"<svg", "TTFT CDF (n = 9)", "TPOT (ms)", "ITL CDF (n = 27)", "E2EL", "</svg>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  std::filesystem::remove(result);
  std::filesystem::remove(plot);
}

TEST(BenchServeCli, LongPromptsBesideTheStreamsAreReportedApart) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  FakeOpenAiServer server(/*usage=*/true);
  const std::string result = temp_path("bench-interference.json");
  const std::string timeline = temp_path("bench-timeline.svg");
  auto r = run_tern({"bench",
                     "serve",
                     "--base-url",
                     server.base_url(),
                     "--model",
                     "fake-model",
                     "--tokenizer",
                     fixture(kTokenizer),
                     "--num-prompts",
                     "9",
                     "--random-input-len",
                     "40",
                     "--random-output-len",
                     "4",
                     "--request-rate",
                     "200",
                     "--long-num-prompts",
                     "3",
                     "--long-input-len",
                     "300",
                     "--long-output-len",
                     "4",
                     "--long-request-rate",
                     "100",
                     "--result-filename",
                     result,
                     "--plot-itl-timeline",
                     timeline,
                     "--disable-tqdm"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(server.requests(), 12);  // 9 streams and 3 long prompts
  const auto j = nlohmann::json::parse(read_file(result));
  // The table and its lists are the 9 streams'; the long ones are counted apart.
  EXPECT_EQ(j["completed"].get<int>() + j["failed"].get<int>(), 9);
  EXPECT_EQ(j["itls"].size(), 9u);
  EXPECT_EQ(j["long_completed"].get<int>() + j["long_failed"].get<int>(), 3);
  EXPECT_EQ(j["long_start_times"].size(), 3u);
  EXPECT_GT(j["max_itl_ms"].get<double>(), 0);
  EXPECT_GE(j["max_itl_ms"].get<double>(), j["p99_itl_ms"].get<double>());
  EXPECT_NE(r.out.find("Max ITL (ms):"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Long requests completed:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Max long TTFT (ms):"), std::string::npos) << r.out;

  const std::string svg = read_file(timeline);
  size_t arrivals = 0;
  for (size_t at = 0; (at = svg.find("class=\"long-arrival\"", at)) != std::string::npos; ++at)
    ++arrivals;
  EXPECT_EQ(arrivals, 3u);
  size_t dots = 0;
  for (size_t at = 0; (at = svg.find("class=\"gap\"", at)) != std::string::npos; ++at) ++dots;
  EXPECT_EQ(dots, 3u * j["completed"].get<size_t>());  // four chunks: three gaps a stream
  std::filesystem::remove(result);
  std::filesystem::remove(timeline);
}

TEST(BenchServeCli, ChatWithoutUsageCountsTokensWithTheTokenizer) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  FakeOpenAiServer server(/*usage=*/false);
  const std::string result = temp_path("bench-chat.json");
  auto r = run_tern({"bench",
                     "serve",
                     "--base-url",
                     server.base_url() + "/",
                     "--endpoint",
                     "/v1/chat/completions",
                     "--model",
                     "fake-model",
                     "--tokenizer",
                     fixture(kTokenizer),
                     "--dataset-name",
                     "prefix-repetition",
                     "--num-prompts",
                     "4",
                     "--prefix-repetition-prefix-len",
                     "8",
                     "--prefix-repetition-suffix-len",
                     "4",
                     "--prefix-repetition-num-prefixes",
                     "2",
                     "--prefix-repetition-output-len",
                     "6",
                     "--request-rate",
                     "200",
                     "--result-filename",
                     result});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(read_file(result));
  EXPECT_EQ(j["backend"], "openai-chat");
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["request_rate"], 200.0);
  const Tokenizer tok = Tokenizer::load(fixture(kTokenizer));
  const auto expected = static_cast<int64_t>(tok.encode("Hello world, fake tokens", false).size());
  EXPECT_EQ(j["total_output_tokens"], 3 * expected);
  for (const auto& len : j["input_lens"]) EXPECT_EQ(len, 12);  // no usage: the dataset's count
  EXPECT_NE(r.err.find("4/4"), std::string::npos) << "progress bar: " << r.err;
  std::filesystem::remove(result);
}

TEST(BenchServeCli, UnreachableServerFailsEveryRequestWithItsReason) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  const int port = testing::closed_loopback_port();
  ASSERT_GT(port, 0);
  const std::string result = temp_path("bench-refused.json");
  auto r = run_tern({"bench", "serve", "--base-url", "http://127.0.0.1:" + std::to_string(port),
                     "--model", "m", "--tokenizer", fixture(kTokenizer), "--num-prompts", "2",
                     "--random-input-len", "8", "--random-output-len", "2", "--disable-tqdm",
                     "--result-filename", result});
  // Nothing was measured: the run fails, as a test would, after its report and its file.
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string last_line =
      "tern: all 2 requests failed (their errors are above the table); "
      "check --base-url, --endpoint and --model\n";
  ASSERT_GE(r.err.size(), last_line.size()) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - last_line.size()), last_line) << r.err;
  EXPECT_NE(r.out.find("Serving Benchmark Result"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(result));
  EXPECT_EQ(j["completed"], 0);
  EXPECT_EQ(j["failed"], 2);
  EXPECT_NE(j["errors"][0].get<std::string>().find("request failed"), std::string::npos);
  EXPECT_NE(r.out.find("Error 0:"), std::string::npos) << r.out;
  std::filesystem::remove(result);
}

TEST(BenchServeCli, OutputFilesAreCheckedBeforeTheRun) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  FakeOpenAiServer server(/*usage=*/true);
  const std::string missing = temp_path("no-such-folder");
  const std::vector<std::vector<std::string>> cases = {
      {"--plot", missing + "/latency.svg"},
      {"--plot-itl-timeline", missing + "/itl.svg"},
      {"--result-filename", missing + "/result.json"},
      {"--result-filename", std::filesystem::temp_directory_path().string()},  // a folder
  };
  for (const auto& extra : cases) {
    std::vector<std::string> args = {"bench",
                                     "serve",
                                     "--base-url",
                                     server.base_url(),
                                     "--model",
                                     "fake-model",
                                     "--tokenizer",
                                     fixture(kTokenizer),
                                     "--num-prompts",
                                     "2",
                                     "--random-input-len",
                                     "8",
                                     "--random-output-len",
                                     "2",
                                     "--disable-tqdm"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << extra[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("tern: " + extra[0] + " " + extra[1] + ": ", 0), 0u) << r.err;
    EXPECT_EQ(r.out, "") << "nothing may be printed before the error";
  }
  EXPECT_EQ(server.requests(), 0) << "no request may be sent before the outputs are checked";
}

TEST(BenchServeCli, VllmGeneralLengthsAndResultDir) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  FakeOpenAiServer server(/*usage=*/false);
  const std::string dir = temp_path("bench-results");
  std::filesystem::remove_all(dir);
  // vLLM's --input-len / --output-len; --result-dir alone saves the result, as
  // --result-filename does.
  auto r = run_tern({"bench", "serve", "--base-url", server.base_url(), "--model", "fake-model",
                     "--tokenizer", fixture(kTokenizer), "--num-prompts", "3", "--input-len", "40",
                     "--output-len", "3", "--max-concurrency", "1", "--disable-tqdm",
                     "--result-dir", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server.last_max_tokens(), 3);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].extension(), ".json");
  const auto j = nlohmann::json::parse(read_file(files[0].string()));
  for (const auto& len : j["input_lens"]) EXPECT_EQ(len, 40);  // no usage: the dataset's count
  std::filesystem::remove_all(dir);
  // A general length beside the dataset's own is a conflict, not an override.
  for (const std::vector<std::string>& both :
       {std::vector<std::string>{"--input-len", "40", "--random-input-len", "41"},
        std::vector<std::string>{"--output-len", "3", "--sharegpt-output-len", "4"},
        std::vector<std::string>{"--output-len", "3", "--prefix-repetition-output-len", "4"}}) {
    std::vector<std::string> args = {"bench",   "serve",      "--base-url",  server.base_url(),
                                     "--model", "fake-model", "--tokenizer", fixture(kTokenizer)};
    args.insert(args.end(), both.begin(), both.end());
    const auto conflict = run_tern(args);
    EXPECT_NE(conflict.exit_code, 0) << both[0] << " " << both[2];
    EXPECT_NE(conflict.err.find("excludes"), std::string::npos) << conflict.err;
  }
  EXPECT_EQ(server.requests(), 3);
}

TEST(BenchServeCli, BadFlagsAreOneLineErrors) {
  TERN_REQUIRE_FIXTURE(kTokenizer);
  const std::vector<std::vector<std::string>> cases = {
      {"--endpoint", "/v1/embeddings"},
      {"--goodput", "latency:5"},
      {"--dataset-name", "nope"},
      {"--dataset-name", "sharegpt"},
      {"--request-rate", "fast"},
      {"--percentile-metrics", "ttft,foo"},
      {"--metric-percentiles", "101"},
      {"--dataset-name", "prefix-repetition", "--input-len", "8"},
      {"--output-len", "0"},
      // A flag of another dataset, or of absent long prompts, would be silently ignored.
      {"--dataset-name", "prefix-repetition", "--random-input-len", "64"},
      {"--random-output-len", "64", "--dataset-name", "sharegpt", "--dataset-path", "x.json"},
      {"--sharegpt-output-len", "8"},
      {"--prefix-repetition-prefix-len", "8"},
      {"--long-input-len", "4000"},
  };
  for (const auto& extra : cases) {
    std::vector<std::string> args = {
        "bench", "serve", "--model", "m", "--tokenizer", fixture(kTokenizer), "--num-prompts", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1) << extra[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("tern: ", 0), 0u) << r.err;
  }
  auto r = run_tern({"bench", "serve", "--model", "m", "--tokenizer", fixture(kTokenizer),
                     "--sharegpt-output-len", "8"});
  EXPECT_EQ(r.err,
            "tern: --sharegpt-output-len applies to --dataset-name sharegpt (the dataset is "
            "random)\n");
  r = run_tern({"bench", "serve", "--model", "m", "--tokenizer", fixture(kTokenizer),
                "--long-request-rate", "2"});
  EXPECT_EQ(r.err, "tern: --long-request-rate goes with --long-num-prompts N\n");
}

}  // namespace
}  // namespace tern
