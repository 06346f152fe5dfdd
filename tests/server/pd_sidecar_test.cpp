// Prefill/decode through llm-d's routing sidecar (pkg/sidecar/proxy/connector_nixlv2.go, its
// standard READ mode), played by the test as the sidecar sends it: the client's request goes
// to the prefill pod with kv_transfer_params {do_remote_decode: true, do_remote_prefill:
// false, remote_*: null}, every token cap (max_tokens, max_completion_tokens) 1, min_tokens
// removed, stream false, stream_options removed; then the client's request, unchanged but for
// the kv_transfer_params the prefill answered (copied verbatim), to the decode pod; both legs
// with the same new x-request-id. The decode pod's answer is the client's, token for token
// what one instance gives.
#include <gtest/gtest.h>

#include "server/server_test_util.h"

namespace tern::testing {
namespace {

EngineConfig pod(disagg::KvRole role) {
  EngineConfig c = server_engine(512);
  c.kv_transfer.role = role;
  c.kv_transfer.port = 0;
  return c;
}

// The sidecar's prefill leg of `request`, as connector_nixlv2.go and CapSingleToken build it.
json sidecar_prefill_leg(json request) {
  request["kv_transfer_params"] = {{"do_remote_decode", true},    {"do_remote_prefill", false},
                                   {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                   {"remote_host", nullptr},      {"remote_port", nullptr}};
  request["max_tokens"] = 1;
  request["max_completion_tokens"] = 1;
  request.erase("min_tokens");
  request["stream"] = false;
  request.erase("stream_options");
  return request;
}

// The first choice's text of a completion or chat completion answer.
std::string text_of(const HttpResult& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return {};
  const json body = r.body_json();
  const json& choice = body.at("choices").at(0);
  return choice.contains("text") ? choice["text"].get<std::string>()
                                 : choice.at("message").at("content").get<std::string>();
}

std::string one_instance(int port, const std::string& path, const json& request) {
  return text_of(post(port, path, request));
}

// The client's text through the sidecar (prefill pod, then decode pod), streamed or not as the
// client asked.
std::string through_sidecar(int prefill_port, int decode_port, const std::string& path,
                            const json& request) {
  const httplib::Headers id = {{"x-request-id", "6f1c2a3e-9a4b-11ef-8000-0242ac120002"}};
  const HttpResult prefilled = post(prefill_port, path, sidecar_prefill_leg(request), id);
  EXPECT_EQ(prefilled.status, 200) << prefilled.body;
  if (prefilled.status != 200) return {};
  const json answer = prefilled.body_json();
  EXPECT_TRUE(answer.contains("kv_transfer_params")) << prefilled.body;
  json decode = request;
  decode["kv_transfer_params"] = answer.value("kv_transfer_params", json());
  if (request.value("stream", false)) {
    const StreamResult r = stream(decode_port, path, decode, 0, id);
    EXPECT_EQ(r.status, 200) << r.error_body;
    EXPECT_TRUE(r.done);
    return streamed_texts(r, 1)[0];
  }
  return text_of(post(decode_port, path, decode, id));
}

TEST(PdSidecar, CompletionsThroughTheSidecarGiveWhatOneInstanceGives) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TestServer p(stories260k(), pod(disagg::KvRole::kProducer));
  TestServer d(stories260k(), pod(disagg::KvRole::kConsumer));
  TestServer one(stories260k(), server_engine(512));
  const std::string prompts[] = {"Once upon a time", "The little dog ran to the park and saw",
                                 std::string(200, 'a')};
  for (const std::string& prompt : prompts)
    for (bool streamed : {false, true}) {
      json request = {{"model", "test-model"}, {"prompt", prompt}, {"max_tokens", 24},
                      {"min_tokens", 4},       {"temperature", 0}, {"stream", streamed}};
      if (streamed) request["stream_options"] = {{"include_usage", true}};
      json alone = request;
      alone["stream"] = false;
      alone.erase("stream_options");
      const std::string want = one_instance(one.port(), "/v1/completions", alone);
      EXPECT_FALSE(want.empty());
      EXPECT_EQ(through_sidecar(p.port(), d.port(), "/v1/completions", request), want)
          << prompt << (streamed ? " streamed" : "");
    }
  wait_until_idle(p.port());  // every lease pulled, its blocks freed
  EXPECT_EQ(metric(get(p.port(), "/metrics").body, gauge("tern:kv_transfer_leases_held")), 0);
  // The decode pod pulled the prompts' KV rather than prefilling them itself.
  EXPECT_GT(metric(get(d.port(), "/metrics").body, gauge("tern:kv_transfer_received_blocks_total")),
            0);
}

TEST(PdSidecar, ChatThroughTheSidecarGivesWhatOneInstanceGives) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b");
  TestServer p(tiny_chat_qwen3(), pod(disagg::KvRole::kProducer));
  TestServer d(tiny_chat_qwen3(), pod(disagg::KvRole::kConsumer));
  TestServer one(tiny_chat_qwen3(), server_engine(512));
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "Tell me about caches."}}});
  for (bool streamed : {false, true}) {
    const json request = {{"model", "test-model"},       {"messages", messages},
                          {"max_completion_tokens", 16}, {"temperature", 0},
                          {"ignore_eos", true},          {"stream", streamed}};
    json alone = request;
    alone["stream"] = false;
    const std::string want = one_instance(one.port(), "/v1/chat/completions", alone);
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(through_sidecar(p.port(), d.port(), "/v1/chat/completions", request), want)
        << (streamed ? "streamed" : "");
  }
}

}  // namespace
}  // namespace tern::testing
