// Shared by the server tests: `tern serve` in process on a free loopback port (the real
// OpenAIServer class over a small model), and plain HTTP / SSE helpers on cpp-httplib's client.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_test_util.h"
#include "run_process.h"
#include "shared_tokenizer.h"
#include "tern/engine/llm.h"
#include "tern/server/openai_server.h"

namespace tern::testing {

using nlohmann::json;

class TestServer {
 public:
  TestServer(LoadedModel model, const EngineConfig& config, server::ServerOptions options = {},
             std::optional<LoadedModel> draft = {})
      : llm_(std::move(model), config, std::move(draft)) {
    options.host = "127.0.0.1";
    options.port = 0;
    if (options.served_model_name.empty()) options.served_model_name = "test-model";
    server_ = std::make_unique<server::OpenAIServer>(llm_, options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~TestServer() {
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  server::OpenAIServer& server() { return *server_; }
  // Read-only while the server runs: its engine thread owns the engine.
  const LLM& llm() const { return llm_; }

 private:
  LLM llm_;
  std::unique_ptr<server::OpenAIServer> server_;
  int port_ = 0;
  std::thread thread_;
};

// `tern serve --port PORT ARGS…` as a child process of the built binary: started, and its port read
// from its log line ("listening on http://127.0.0.1:PORT"); port() is -1 when it never said.
class ServeProcess {
 public:
  // `port` 0: any free port.
  explicit ServeProcess(const std::vector<std::string>& serve_args, int port = 0) {
    log_fd_ = ::mkstemp(log_path_);
    std::vector<std::string> args = {TERN_BINARY, "serve", "--port", std::to_string(port)};
    args.insert(args.end(), serve_args.begin(), serve_args.end());
    pid_ = tern::testing::spawn_process(args, -1, log_fd_);
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 6000 && port_ < 0; ++i) {
      const std::string text = log();
      std::smatch m;
      if (std::regex_search(text, m, listening))
        port_ = std::stoi(m[1]);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(log_fd_);
    ::unlink(log_path_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // What it has written to stdout and stderr so far.
  std::string log() const {
    std::ifstream in(log_path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Sends `signal` and waits for the process; its wait status.
  int kill_and_wait(int signal) {
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  char log_path_[32] = "/tmp/tern_serve_test_XXXXXX";
  int log_fd_ = -1;
  pid_t pid_ = -1;
  int port_ = -1;
  bool reaped_ = false;
};

struct HttpResult {
  int status = -1;  // -1: no response
  std::string body;
  httplib::Headers headers;
  json body_json() const { return json::parse(body); }
};

inline HttpResult http_request(int port, const std::string& method, const std::string& path,
                               const std::string& body = {}, const httplib::Headers& headers = {}) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.headers = headers;
  req.body = body;
  if (!body.empty() && !req.has_header("Content-Type"))
    req.set_header("Content-Type", "application/json");
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  HttpResult out;
  if (client.send(req, res, error)) {
    out.status = res.status;
    out.body = res.body;
    out.headers = res.headers;
  }
  return out;
}

inline HttpResult post(int port, const std::string& path, const json& body,
                       const httplib::Headers& headers = {}) {
  return http_request(port, "POST", path, body.dump(), headers);
}
inline HttpResult get(int port, const std::string& path, const httplib::Headers& headers = {}) {
  return http_request(port, "GET", path, {}, headers);
}

struct StreamResult {
  int status = -1;
  std::vector<json> events;  // the JSON of every `data:` event but [DONE]
  bool done = false;         // `data: [DONE]` came
  std::string error_body;    // the body of a non-200 answer
};

// POSTs a streaming request and parses its SSE events. `stop_after` > 0: hangs up after that
// many events (a client that goes away mid-stream).
inline StreamResult stream(int port, const std::string& path, const json& body, int stop_after = 0,
                           const httplib::Headers& headers = {}) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(300, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  StreamResult out;
  std::string buffer;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]")
        out.done = true;
      else
        out.events.push_back(json::parse(payload));
      if (stop_after > 0 && static_cast<int>(out.events.size()) >= stop_after) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  if (!client.send(req, res, error) && !(stop_after > 0 && error == httplib::Error::Canceled))
    out.error_body = "no response: " + httplib::to_string(error);
  out.status = res.status;
  if (res.status != 200) out.error_body += buffer + res.body;
  return out;
}

// A streamed chat completion's first choice put together as one message: its reasoning and
// content joined, its tool calls (OpenAI's message form: id, function.name, function.arguments
// joined from their pieces; a call's first delta must come at the next index) and the finish
// reason (null until one came).
struct StreamedChat {
  std::string reasoning, content;
  json tool_calls = json::array();
  json finish_reason;
};
inline StreamedChat streamed_chat(const StreamResult& st) {
  StreamedChat out;
  for (const json& e : st.events) {
    if (e["choices"].empty()) continue;  // the usage chunk
    const json& choice = e["choices"][0];
    if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
    const json& delta = choice["delta"];
    if (delta.contains("reasoning_content"))
      out.reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content") && !delta["content"].is_null())
      out.content += delta["content"].get<std::string>();
    if (!delta.contains("tool_calls")) continue;
    for (const json& c : delta["tool_calls"]) {
      const size_t i = c["index"];
      if (c.contains("id")) {
        EXPECT_EQ(i, out.tool_calls.size());
        out.tool_calls.push_back(
            {{"id", c["id"]}, {"function", {{"name", c["function"]["name"]}, {"arguments", ""}}}});
      }
      json& arguments = out.tool_calls.at(i)["function"]["arguments"];
      arguments = arguments.get<std::string>() + c["function"]["arguments"].get<std::string>();
    }
  }
  return out;
}

// The value of one sample of the /metrics text: `series` is the name with its labels as
// written, e.g. `tern:num_requests_running{model_name="test-model"}`. NaN when absent.
inline double metric(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = text.find('\n', pos);
    const std::string line =
        text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size()));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return std::nan("");
}

inline std::string gauge(const char* name) {
  return std::string(name) + "{model_name=\"test-model\"}";
}

// The text of a streamed completion or chat completion, choice by choice.
inline std::vector<std::string> streamed_texts(const StreamResult& s, size_t choices) {
  std::vector<std::string> texts(choices);
  for (const json& e : s.events) {
    for (const json& c : e.at("choices")) {
      const size_t i = c.at("index").get<size_t>();
      if (c.contains("text"))
        texts.at(i) += c["text"].get<std::string>();
      else if (c.at("delta").contains("content"))
        texts.at(i) += c["delta"]["content"].get<std::string>();
    }
  }
  return texts;
}

// The engine's request gauges and KV usage back at zero: every request has left it.
inline void wait_until_idle(int port) {
  for (int i = 0; i < 3000; ++i) {
    const std::string m = get(port, "/metrics").body;
    if (metric(m, gauge("tern:num_requests_running")) == 0 &&
        metric(m, gauge("tern:num_requests_waiting")) == 0 &&
        metric(m, gauge("tern:kv_cache_usage_perc")) == 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "the engine did not become idle: " << get(port, "/metrics").body.substr(0, 600);
}

// A one-layer dummy Qwen3 with the whole Qwen vocabulary (chat templates use its special
// tokens) and the real Qwen tokenizer, whose tokenizer_config.json holds the chat template.
inline LoadedModel tiny_chat_qwen3() {
  LoadedModel m;
  m.device = &find_device("cpu");
  m.config = shrunk_config("model-configs/qwen3-0.6b", {{"num_hidden_layers", 1},
                                                        {"hidden_size", 64},
                                                        {"intermediate_size", 128},
                                                        {"num_attention_heads", 2},
                                                        {"num_key_value_heads", 1},
                                                        {"head_dim", 32}});
  m.weights = make_dummy_weights(m.config, DType::F16, 5);
  m.tokenizer = testing::shared_tokenizer("qwen-tokenizer");
  m.description = "tiny chat qwen3 (dummy F16)";
  return m;
}

inline EngineConfig server_engine(int64_t max_model_len = 256) {
  EngineConfig c;
  c.max_model_len = max_model_len;
  c.kv_cache_memory = uint64_t{32} << 20;
  c.scheduler.max_num_batched_tokens = 256;
  return c;
}

// A Qwen3 shape whose greedy continuation of a prompt ending in chain[0] is chain[1], chain[2],
// …: one layer whose attention and MLP add nothing (o_proj and down_proj zero), so the last
// hidden state is the embedding of the current token; chain[i]'s embedding is the unit vector
// e_i and the lm_head row of chain[i + 1] is 10·e_i, so its logit is the only non-zero one.
// The tokens of the chain must be distinct (the next token depends on the current one only).
inline LoadedModel scripted_qwen3(const std::vector<int32_t>& chain) {
  LoadedModel m;
  m.device = &find_device("cpu");
  m.config = shrunk_config("model-configs/qwen3-0.6b", {{"num_hidden_layers", 1},
                                                        {"hidden_size", 64},
                                                        {"intermediate_size", 128},
                                                        {"num_attention_heads", 2},
                                                        {"num_key_value_heads", 1},
                                                        {"head_dim", 32},
                                                        {"tie_word_embeddings", false}});
  m.weights = make_dummy_weights(m.config, DType::F32, 5);
  m.tokenizer = testing::shared_tokenizer("qwen-tokenizer");
  m.description = "scripted qwen3 (dummy F32)";
  // The weights are F32 and owned by ModelWeights: written in place before the engine packs
  // them.
  auto floats = [](const WeightMatrix& w) {
    EXPECT_EQ(w.dtype, DType::F32);
    return std::span<float>(reinterpret_cast<float*>(const_cast<std::byte*>(w.data)),
                            static_cast<size_t>(w.rows * w.cols));
  };
  const int64_t h = m.config.hidden_size;
  std::span<float> embedding = floats(m.weights.token_embedding), head = floats(m.weights.lm_head);
  std::fill(head.begin(), head.end(), 0.0f);
  for (std::span<float> zero : {floats(m.weights.layers[0].wo), floats(m.weights.layers[0].w_down)})
    std::fill(zero.begin(), zero.end(), 0.0f);
  EXPECT_LT(static_cast<int64_t>(chain.size()), h);
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    float* row = embedding.data() + static_cast<size_t>(chain[i] * h);
    std::fill(row, row + h, 0.0f);
    row[i] = 1.0f;
    head[static_cast<size_t>(chain[i + 1] * h) + i] = 10.0f;
  }
  return m;
}

// A scripted answer: content, then one Hermes call (its Qwen tokens are all distinct).
inline constexpr const char* kScriptedToolCallAnswer =
    "Checking.<tool_call>{\"name\": "
    "\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>";

// scripted_qwen3's chain that answers any prompt of the Qwen template (which ends with the
// generation prompt's "\n") with kScriptedToolCallAnswer, then <|im_end|>.
inline std::vector<int32_t> scripted_tool_call_chain(const Tokenizer& tok) {
  std::vector<int32_t> chain = {tok.encode("<|im_start|>assistant\n", false, true).back()};
  for (int32_t id : tok.encode(kScriptedToolCallAnswer, false, true)) chain.push_back(id);
  chain.push_back(*tok.eos_id());
  return chain;
}

}  // namespace tern::testing
