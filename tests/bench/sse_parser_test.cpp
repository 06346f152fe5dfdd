// SSE parsing and the reading of streamed OpenAI replies, with the bytes split at every
// position (network reads end anywhere).
#include "tern/bench/sse_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/bench/openai_stream.h"
#include "tern/core/error.h"

namespace tern::bench {
namespace {

const std::string kStream =
    ": keep-alive ping\n\n"
    "data: {\"choices\":[{\"text\":\"Hel\"}]}\n\n"
    "event: message\r\ndata: {\"choices\":[{\"text\":\"lo \\u00e9\"}]}\r\n\r\n"
    "data: first line\ndata:second line\n\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\r\r"
    "data: [DONE]\n\n";

const std::vector<std::string> kEvents = {
    "{\"choices\":[{\"text\":\"Hel\"}]}",
    "{\"choices\":[{\"text\":\"lo \\u00e9\"}]}",
    "first line\nsecond line",
    "{\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}",
    "[DONE]",
};

std::vector<std::string> parse_in_pieces(const std::vector<std::string>& pieces) {
  SseParser parser;
  std::vector<std::string> events;
  for (const std::string& p : pieces)
    for (std::string& e : parser.feed(p)) events.push_back(std::move(e));
  for (std::string& e : parser.finish()) events.push_back(std::move(e));
  return events;
}

TEST(BenchSse, WholeStream) { EXPECT_EQ(parse_in_pieces({kStream}), kEvents); }

TEST(BenchSse, SplitAtEveryByte) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut)
    EXPECT_EQ(parse_in_pieces({kStream.substr(0, cut), kStream.substr(cut)}), kEvents)
        << "cut " << cut;
  std::vector<std::string> bytes;
  for (char c : kStream) bytes.emplace_back(1, c);
  EXPECT_EQ(parse_in_pieces(bytes), kEvents);
}

TEST(BenchSse, LastEventWithoutBlankLineComesOutAtTheEnd) {
  SseParser parser;
  EXPECT_TRUE(parser.feed("data: {\"a\":1}").empty());
  EXPECT_EQ(parser.finish(), std::vector<std::string>{"{\"a\":1}"});
  EXPECT_TRUE(parser.finish().empty());
}

// The bytes of a completions stream arrive one per "millisecond": TTFT, ITLs, latency and the
// usage counts must not depend on where the reads split.
TEST(BenchResponseStream, CompletionsTimingAndUsage) {
  // kStream without its non-JSON event (which fails a request; tested below).
  std::string stream = kStream;
  const std::string plain = "data: first line\ndata:second line\n\n";
  stream.erase(stream.find(plain), plain.size());
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    ResponseStream s(Endpoint::kCompletions, 10.0, 100);
    s.on_bytes(stream.substr(0, cut), 10.5);
    s.on_bytes(stream.substr(cut), 11.0);
    s.on_end(11.5);
    const RequestRecord& r = s.record();
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.generated_text, "Hello \xC3\xA9");
    EXPECT_EQ(r.output_tokens, 2);
    EXPECT_EQ(r.prompt_len, 9);                    // the server's count replaces the dataset's
    ASSERT_EQ(r.itl.size(), 1u) << "cut " << cut;  // two token chunks
    // Each token chunk's time is the time its event completed: 10.5 or 11.0.
    EXPECT_NEAR(r.ttft + r.itl[0], r.latency, 1e-12);
    EXPECT_TRUE(r.ttft == 0.5 || r.ttft == 1.0);
    EXPECT_EQ(r.start_time, 10.0);
  }
}

TEST(BenchResponseStream, ChatDeltasAndRoleChunk) {
  ResponseStream s(Endpoint::kChatCompletions, 0.0, 4);
  s.on_bytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n", 0.25);
  s.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", 0.5);
  s.on_bytes("data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n", 1.0);
  s.on_bytes("data: [DONE]\n\n", 2.0);
  s.on_end(2.0);
  const RequestRecord& r = s.record();
  ASSERT_TRUE(r.success);
  EXPECT_EQ(r.generated_text, "Hi there");
  EXPECT_DOUBLE_EQ(r.ttft, 0.25);  // any chunk with a choice, as vLLM counts it
  EXPECT_EQ(r.itl, (std::vector<double>{0.25, 0.5}));
  EXPECT_DOUBLE_EQ(r.latency, 1.0);  // the last token chunk, not [DONE]
  EXPECT_EQ(r.output_tokens, 0);     // no usage: the benchmark tokenizes the text
  EXPECT_EQ(r.prompt_len, 4);
}

TEST(BenchResponseStream, FailuresCarryTheirReason) {
  {
    ResponseStream s(Endpoint::kCompletions, 0, 1);
    s.on_bytes("data: [DONE]\n\n", 1);
    s.on_end(1);
    EXPECT_FALSE(s.record().success);
    EXPECT_NE(s.record().error.find("Never received a valid chunk"), std::string::npos);
  }
  {
    ResponseStream s(Endpoint::kCompletions, 0, 1);
    s.on_bytes(
        "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"KV cache "
        "full\"}}\n\n",
        1);
    s.on_end(1);
    EXPECT_FALSE(s.record().success);
    EXPECT_NE(s.record().error.find("KV cache full"), std::string::npos);
  }
  {
    ResponseStream s(Endpoint::kCompletions, 0, 1);
    s.on_bytes("data: {not json\n\n", 1);
    s.on_end(1);
    EXPECT_FALSE(s.record().success);
    EXPECT_NE(s.record().error.find("not a JSON object"), std::string::npos);
  }
}

TEST(BenchRequestBody, CompletionsAndChat) {
  RequestBodyOptions o;
  o.model = "m";
  o.ignore_eos = true;
  auto c = nlohmann::json::parse(request_body(Endpoint::kCompletions, o, "hi", 7));
  EXPECT_EQ(c["prompt"], "hi");
  EXPECT_EQ(c["max_tokens"], 7);
  EXPECT_EQ(c["stream"], true);
  EXPECT_EQ(c["stream_options"]["include_usage"], true);
  EXPECT_EQ(c["ignore_eos"], true);
  EXPECT_FALSE(c.contains("temperature"));
  o.ignore_eos = false;
  o.temperature = 0.0;
  auto chat = nlohmann::json::parse(request_body(Endpoint::kChatCompletions, o, "hi", 7));
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["messages"][0]["content"], "hi");
  EXPECT_EQ(chat["max_completion_tokens"], 7);
  EXPECT_FALSE(chat.contains("ignore_eos"));
  EXPECT_EQ(chat["temperature"], 0.0);
  EXPECT_EQ(endpoint_of("/v1/chat/completions"), Endpoint::kChatCompletions);
  EXPECT_EQ(endpoint_of("/v1/completions"), Endpoint::kCompletions);
  EXPECT_THROW(endpoint_of("/v1/embeddings"), Error);
}

}  // namespace
}  // namespace tern::bench
