// `tern serve` command-line errors: one line on stderr and exit code 1, before serving anything.
#include <gtest/gtest.h>

#include <filesystem>

#include "fixtures.h"
#include "run_process.h"
#include "server/server_test_util.h"

namespace tern::testing {
namespace {

TEST(ServeCommand, BadInvocationsFailWithAMessage) {
  ProcessResult r = run_tern({"serve"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give a model"), std::string::npos) << r.err;

  r = run_tern({"serve", "/nonexistent/model.gguf", "--port", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;

  r = run_tern({"serve", "a.gguf", "--model", "b.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("give the model once"), std::string::npos) << r.err;

  r = run_tern({"serve", "a.gguf", "--compute-nice", "20"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--compute-nice must be 0 to 19, got 20"), std::string::npos) << r.err;
}

TEST(ServeCommand, MissingOrBrokenChatTemplateFails) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  ProcessResult r =
      run_tern({"serve", model, "--port", "0", "--chat-template", "/nonexistent.jinja"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.jinja: cannot open"), std::string::npos) << r.err;

  char path[] = "/tmp/tern_bad_template_XXXXXX";
  const int fd = ::mkstemp(path);
  const std::string broken = "{% for m in messages %}{{ m.content }";
  ASSERT_EQ(::write(fd, broken.data(), broken.size()), static_cast<ssize_t>(broken.size()));
  ::close(fd);
  r = run_tern(
      {"serve", model, "--port", "0", "--kv-cache-memory", "16MiB", "--chat-template", path});
  ::unlink(path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("chat template"), std::string::npos) << r.err;
}

TEST(ServeCommand, KvTransferFlagsAreChecked) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  ProcessResult r = run_tern({"serve", model, "--port", "0", "--role", "decoder"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--role must be prefill, decode or both"), std::string::npos) << r.err;
  r = run_tern({"serve", model, "--port", "0", "--role", "prefill", "--kv-transfer-config",
                R"({"kv_role":"kv_consumer"})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("contradicts"), std::string::npos) << r.err;
  r = run_tern({"serve", model, "--port", "0", "--kv-transfer-config",
                R"({"kv_role":"kv_both","kv_buffer_size":1000000000})"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'kv_buffer_size' is not supported"), std::string::npos) << r.err;
  r = run_tern({"serve", model, "--port", "0", "--kv-cache-memory", "16MiB", "--role", "prefill",
                "--kv-lease-seconds", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--kv-lease-seconds must be > 0"), std::string::npos) << r.err;
  // A lease is held by an instance that prefills for others: elsewhere it would be ignored.
  // (The missing tokenizer makes a server that misses the check exit instead of serving.)
  for (const std::vector<std::string>& role :
       {std::vector<std::string>{}, std::vector<std::string>{"--role", "decode"}}) {
    std::vector<std::string> args = {"serve", model, "--port", "0", "--kv-lease-seconds", "10"};
    args.insert(args.end(), role.begin(), role.end());
    args.insert(args.end(), {"--tokenizer", "/nonexistent/tokenizer.gguf"});
    r = run_tern(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("--kv-lease-seconds applies to an instance that prefills for others"),
              std::string::npos)
        << r.err;
  }
}

// A second server on a port in use must not start (with SO_REUSEPORT it did, and the kernel
// split the first server's connections between the two).
TEST(ServeCommand, APortInUseIsAStartUpError) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  ServeProcess first({model, "--kv-cache-memory", "16MiB"});
  ASSERT_GT(first.port(), 0);
  const std::string port = std::to_string(first.port());
  const ProcessResult r = run_tern({"serve", model, "--port", port, "--kv-cache-memory", "16MiB",
                                    "--served-model-name", "impostor"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("port " + port + " is in use"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("listening on"), std::string::npos) << r.err;
  // The port is bound before the model loads: it fails before anything is read.
  EXPECT_EQ(r.err.find("loading"), std::string::npos) << r.err;
}

// A port outside 0-65535 is refused (it was taken modulo 65536 and the log named the wrong
// one), before the model loads.
TEST(ServeCommand, APortOutOfRangeIsRefused) {
  const ProcessResult r = run_tern({"serve", "/nonexistent/model.gguf", "--port", "99999"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot listen on port 99999: a port is 0-65535"), std::string::npos)
      << r.err;
}

// --threads holds on the engine's own thread too: with --threads 1, answering a request starts
// no OpenMP worker (the engine thread used to take the process's default, every core, so two
// instances side by side spun on each other's cores).
TEST(ServeCommand, ThreadsHoldOnTheEngineThread) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  ServeProcess server(
      {fixture("stories260K/stories260K.gguf"), "--kv-cache-memory", "16MiB", "--threads", "1"});
  ASSERT_GT(server.port(), 0);
  auto threads = [&] {
    int n = 0;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(server.pid()) + "/task")) {
      (void)e;
      ++n;
    }
    return n;
  };
  ASSERT_EQ(get(server.port(), "/health").status, 200);
  const int before = threads();
  const HttpResult r =
      post(server.port(), "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 16}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(threads(), before);
}

// A start-up says what takes its time as it begins: the KV cache's size before it is
// allocated and zeroed.
TEST(ServeCommand, StartUpSaysWhatItAllocates) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  ServeProcess server({fixture("stories260K/stories260K.gguf"), "--kv-cache-memory", "16MiB"});
  ASSERT_GT(server.port(), 0);
  const std::string log = server.log();
  const size_t allocating = log.find("; allocating it");
  const size_t listening = log.find("listening on");
  EXPECT_NE(log.find("KV cache (f16): "), std::string::npos) << log;
  ASSERT_NE(allocating, std::string::npos) << log;
  EXPECT_LT(allocating, listening) << log;
}

// Speculative decoding's start-up steps are told too, as they begin and with what they took:
// the draft's load, and the timing of target and draft forwards that the adaptive draft
// length starts from (silent before, though a large draft takes seconds for each).
TEST(ServeCommand, StartUpSaysItLoadsAndTimesTheDraft) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const std::string model = fixture("stories260K/stories260K.gguf");
  ServeProcess server(
      {model, "--kv-cache-memory", "16MiB", "--speculative-config",
       R"({"method": "draft_model", "model": ")" + model + R"(", "num_speculative_tokens": 4})"});
  ASSERT_GT(server.port(), 0);
  const std::string log = server.log();
  const size_t draft = log.find("loading draft " + model);
  const size_t timing = log.find(
      "timing the target's and the draft's forwards of 1 to 5, 10, 20 and 40 tokens, to "
      "choose how many tokens to draft\n");
  const size_t listening = log.find("listening on");
  ASSERT_NE(draft, std::string::npos) << log;
  EXPECT_NE(log.find("loaded in", draft), std::string::npos) << log;
  ASSERT_NE(timing, std::string::npos) << log;
  const size_t timed = log.find("timed in", timing);
  ASSERT_NE(timed, std::string::npos) << log;
  EXPECT_LT(timed, listening) << log;
  EXPECT_NE(log.find("allocated in"), std::string::npos) << log;
}

}  // namespace
}  // namespace tern::testing
