// The `openai` npm package, a real client, against `tern serve` (tests/server/openai_client.cjs):
// npm installs it once into the build tree (build/npm). Skips without node/npm or the network,
// unless TERN_REQUIRE_FIXTURES=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "run_process.h"
#include "server/server_test_util.h"
#include "shared_tokenizer.h"

namespace tern::testing {
namespace {

#define TERN_SKIP_OR_FAIL(message)                \
  do {                                            \
    if (fixtures_required()) FAIL() << (message); \
    GTEST_SKIP() << (message);                    \
  } while (0)

// The folder the openai package is installed in (once); empty when it cannot be.
std::filesystem::path npm_openai_dir(std::string& why) {
  if (std::system("command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1") != 0) {
    why = "node and npm are not installed";
    return {};
  }
  const std::filesystem::path npm_dir = std::filesystem::path(TERN_BINARY).parent_path() / "npm";
  std::filesystem::create_directories(npm_dir);
  // ctest runs these tests as parallel processes: the lock makes one of them install and the
  // others wait for it (two concurrent `npm install`s into one prefix break each other).
  const std::string install_once =
      "test -f \"$1/node_modules/openai/package.json\" || "
      "npm install --prefix \"$1\" openai --no-audit --no-fund --loglevel=error";
  const ProcessResult install =
      run_process("/usr/bin/flock", {(npm_dir / ".install-lock").string(), "/bin/sh", "-c",
                                     install_once, "sh", npm_dir.string()});
  if (install.exit_code != 0) {
    why = "npm install openai failed: " + install.err;
    return {};
  }
  return npm_dir;
}

// Each test runs one script of tests/server/ with node against a TestServer (api key
// "test-key", model "test-model"); SetUp finds the fixtures and the installed package.
class OpenAIClient : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_FIXTURE("qwen-tokenizer");
    TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
    std::string why;
    npm_dir_ = npm_openai_dir(why);
    if (npm_dir_.empty()) TERN_SKIP_OR_FAIL(why);
  }

  static server::ServerOptions options() {
    server::ServerOptions o;
    o.api_key = "test-key";
    return o;
  }

  // Expects `script` to exit 0 and print `ok_line`.
  void expect_script_passes(const TestServer& s, const std::string& script,
                            const std::string& ok_line) {
    const std::string base = "http://127.0.0.1:" + std::to_string(s.port()) + "/v1";
    const ProcessResult r = run_process(
        "/bin/sh", {"-c", "OPENAI_NPM_DIR='" + npm_dir_.string() + "' node '" + TERN_SOURCE_DIR +
                              "/tests/server/" + script + "' '" + base + "' test-model"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(ok_line), std::string::npos) << r.out << r.err;
  }

 private:
  std::filesystem::path npm_dir_;
};

TEST_F(OpenAIClient, NpmOpenAIPackageTalksToTernServe) {
  TestServer s(tiny_chat_qwen3(), server_engine(), options());
  expect_script_passes(s, "openai_client.cjs", "openai client: ok");
}

// chat.completions.create with tools, whole and streamed, against the scripted model that
// writes a Hermes tool call (server_test_util.h).
TEST_F(OpenAIClient, NpmOpenAIPackageGetsToolCalls) {
  server::ServerOptions o = options();
  o.tool_call_parser = "hermes";
  o.enable_auto_tool_choice = true;
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  TestServer s(scripted_qwen3(scripted_tool_call_chain(tok)), server_engine(1024), o);
  expect_script_passes(s, "openai_tools_client.cjs", "openai tools client: ok");
}

// The SDK's parse helper (message.parsed, parsed_arguments) on response_format json_schema and
// strict tools under tool_choice "required", and a named function, over random weights.
TEST_F(OpenAIClient, NpmOpenAIPackageParsesStructuredOutputs) {
  TestServer s(tiny_chat_qwen3(), server_engine(1024), options());
  expect_script_passes(s, "openai_structured_client.cjs", "openai structured client: ok");
}

}  // namespace
}  // namespace tern::testing
