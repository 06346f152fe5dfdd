// The routing policies, the prefix index, backend URLs and the two-step bodies, without HTTP.
#include "tern/router/routing_policy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/router/backend_pool.h"
#include "tern/router/disagg_request.h"
#include "tern/router/prompt_prefix_index.h"
#include "tern/server/api_error.h"

namespace tern::router {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::vector<Candidate> idle(size_t n) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < n; ++i) c.push_back({i, 0});
  return c;
}

TEST(RouterPolicy, RoundRobinRotatesAndSkipsMissingBackends) {
  auto p = make_policy("round_robin", 3);
  std::vector<size_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(idle(3)[p->pick(idle(3), "")].backend);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
  // Backend 1 is unhealthy: the rotation continues over 0 and 2 in order.
  const std::vector<Candidate> without_1 = {{0, 0}, {2, 0}};
  order.clear();
  for (int i = 0; i < 4; ++i) order.push_back(without_1[p->pick(without_1, "")].backend);
  EXPECT_EQ(order, (std::vector<size_t>{0, 2, 0, 2}));
}

TEST(RouterPolicy, LeastOutstandingTakesTheLeastLoadedAndRotatesTies) {
  auto p = make_policy("least_outstanding", 3);
  const std::vector<Candidate> loads = {{0, 4}, {1, 1}, {2, 3}};
  EXPECT_EQ(loads[p->pick(loads, "")].backend, 1u);
  EXPECT_EQ(loads[p->pick(loads, "")].backend, 1u);
  const std::vector<Candidate> ties = {{0, 2}, {1, 5}, {2, 2}};
  std::vector<size_t> order;
  for (int i = 0; i < 4; ++i) order.push_back(ties[p->pick(ties, "")].backend);
  EXPECT_EQ(order, (std::vector<size_t>{2, 0, 2, 0}));
}

TEST(RouterPolicy, PrefixAwareFollowsTheLongestKnownPrefix) {
  PrefixAwareOptions o;
  o.chunk_chars = 8;
  auto p = make_policy("prefix_aware", 3, o);
  const std::string doc(400, 'd');
  const size_t first = p->pick(idle(3), doc + " question one");
  // The same document again: the backend that holds it, though all are equally idle.
  for (const char* q : {" question two", " question three", " another"})
    EXPECT_EQ(p->pick(idle(3), doc + q), first) << q;
  // Different prompts go to the least loaded, ties by rotation: not all to one backend.
  std::vector<size_t> picks;
  for (char c : {'x', 'y', 'z'}) picks.push_back(p->pick(idle(3), std::string(400, c)));
  EXPECT_EQ(picks.size(), 3u);
  EXPECT_NE(picks[0], picks[1]);
  EXPECT_NE(picks[1], picks[2]);
  // Below the threshold (a prompt mostly new) the least loaded one wins.
  const std::vector<Candidate> loaded = {
      {0, first == 0 ? 9 : 0}, {1, first == 1 ? 9 : 0}, {2, first == 2 ? 9 : 0}};
  EXPECT_NE(p->pick(loaded, doc.substr(0, 16) + std::string(400, 'q')), first);
  // Once forgotten (the backend was unhealthy), the document no longer pulls to it.
  p->forget(first);
  EXPECT_NE(p->pick(loaded, doc + " after"), first);
}

TEST(RouterPolicy, PrefixAwareGivesWayToAnImbalancedLoad) {
  PrefixAwareOptions o;
  o.chunk_chars = 8;
  o.balance_abs_threshold = 4;
  o.balance_rel_threshold = 1.5;
  auto p = make_policy("prefix_aware", 2, o);
  const std::string doc(200, 'd');
  const size_t first = p->pick(idle(2), doc);
  std::vector<Candidate> c = idle(2);
  c[first].in_flight = 4;  // 4 - 0 is not more than 4: still the cached one
  EXPECT_EQ(c[p->pick(c, doc)].backend, first);
  c[first].in_flight = 5;  // 5 - 0 > 4 and 5 > 1.5 * 0: the least loaded
  EXPECT_NE(c[p->pick(c, doc)].backend, first);
}

TEST(RouterPolicy, UnknownNameIsAnError) {
  try {
    make_policy("random", 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("random"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("prefix_aware"), std::string::npos);
  }
}

TEST(RouterPrefixIndex, ChainsMatchPrefixesAndEvictLeastRecentlyUsed) {
  const std::vector<uint64_t> a = prefix_chain("aaaabbbbcccc", 4);
  const std::vector<uint64_t> b = prefix_chain("aaaabbbbdddd", 4);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(prefix_chain("aaaabbbbccc", 4).size(), 2u);  // whole chunks only
  EXPECT_EQ(a[1], b[1]);
  EXPECT_NE(a[2], b[2]);
  EXPECT_NE(prefix_chain("bbbbaaaa", 4)[1], prefix_chain("aaaabbbb", 4)[1]);  // order matters

  PromptPrefixIndex index(4);
  index.insert(a);
  EXPECT_EQ(index.matched_chunks(a), 3u);
  EXPECT_EQ(index.matched_chunks(b), 2u);
  EXPECT_EQ(index.matched_chunks(prefix_chain("zzzzaaaa", 4)), 0u);
  index.insert(b);  // one new entry: 4 held, the capacity
  EXPECT_EQ(index.size(), 4u);
  index.insert(prefix_chain("eeee", 4));  // evicts the oldest: a's last chunk
  EXPECT_EQ(index.size(), 4u);
  EXPECT_EQ(index.matched_chunks(a), 2u);
  EXPECT_EQ(index.matched_chunks(b), 3u);
  index.clear();
  EXPECT_EQ(index.matched_chunks(b), 0u);
}

TEST(RouterUrl, ParsesHostAndPortAndRefusesOthers) {
  const BackendAddress a = parse_backend_url("http://127.0.0.1:8100/");
  EXPECT_EQ(a.url, "http://127.0.0.1:8100");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 8100);
  EXPECT_EQ(parse_backend_url("http://node7").port, 80);
  EXPECT_EQ(parse_backend_url("http://[::1]:9000").host, "::1");
  for (const char* bad : {"127.0.0.1:8000", "https://x:1", "http://", "http://:80", "http://x:0",
                          "http://x:65536", "http://x:8a", "http://x:80/v1", "http://[::1"}) {
    try {
      parse_backend_url(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(RouterDisaggBody, PrefillAndDecodeBodies) {
  const ordered_json client = parse_client_body(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":50,)"
      R"("stream":true,"stream_options":{"include_usage":true},"temperature":0,"n":2,)"
      R"("min_tokens":4})");
  const json p = json::parse(prefill_body(client, Endpoint::ChatCompletions));
  EXPECT_EQ(p, json::parse(R"({"model":"m","messages":[{"role":"user","content":"hi"}],)"
                           R"("max_tokens":1,"max_completion_tokens":1,"stream":false,)"
                           R"("temperature":0,"kv_transfer_params":{"do_remote_decode":true}})"));
  const json c =
      json::parse(prefill_body(parse_client_body(R"({"prompt":"x"})"), Endpoint::Completions));
  EXPECT_EQ(c, json::parse(R"({"prompt":"x","max_tokens":1,"stream":false,)"
                           R"("kv_transfer_params":{"do_remote_decode":true}})"));

  const auto params =
      kv_transfer_params_of(R"({"id":"x","kv_transfer_params":{"b":[1,2],"a":null}})");
  ASSERT_TRUE(params.has_value());
  EXPECT_EQ(params->dump(), R"({"b":[1,2],"a":null})");  // as is, keys in their order
  EXPECT_FALSE(kv_transfer_params_of(R"({"id":"x"})").has_value());
  EXPECT_FALSE(kv_transfer_params_of(R"({"kv_transfer_params":null})").has_value());
  EXPECT_FALSE(kv_transfer_params_of("not json").has_value());

  const std::string d = decode_body(client, *params);
  EXPECT_EQ(d, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":50,)"
               R"("stream":true,"stream_options":{"include_usage":true},"temperature":0,"n":2,)"
               R"("min_tokens":4,"kv_transfer_params":{"b":[1,2],"a":null}})");
}

TEST(RouterDisaggBody, WhatCountsAPromptsTokens) {
  const auto completion = [](const char* body) { return parse_client_body(body); };
  EXPECT_EQ(prompt_ids_count(completion(R"({"prompt":[5,6,7]})"), Endpoint::Completions), 3u);
  EXPECT_FALSE(prompt_ids_count(completion(R"({"prompt":"abc"})"), Endpoint::Completions));
  EXPECT_FALSE(prompt_ids_count(completion(R"({"prompt":[[1,2],[3]]})"), Endpoint::Completions));
  EXPECT_FALSE(prompt_ids_count(completion(R"({"prompt":[]})"), Endpoint::Completions));

  // A completion's string prompt with what /tokenize acts on, nothing of the generation's.
  EXPECT_EQ(json::parse(*tokenize_body(completion(R"({"model":"m","prompt":"once","max_tokens":)"
                                                  R"(9,"add_special_tokens":false})"),
                                       Endpoint::Completions)),
            json::parse(R"({"prompt":"once","model":"m","add_special_tokens":false})"));
  EXPECT_FALSE(tokenize_body(completion(R"({"prompt":["a","b"]})"), Endpoint::Completions));
  EXPECT_FALSE(tokenize_body(completion(R"({"prompt":[1,2]})"), Endpoint::Completions));
  // A chat's messages, template arguments and tools (they shape the rendered prompt), nothing of
  // the generation's: /tokenize refuses fields it does not act on.
  const char* chat = R"({"messages":[{"role":"user","content":"hi"}],"tools":[],"max_tokens":3,)"
                     R"("chat_template_kwargs":{"enable_thinking":false},"stream":true})";
  EXPECT_EQ(json::parse(*tokenize_body(completion(chat), Endpoint::ChatCompletions)),
            json::parse(R"({"messages":[{"role":"user","content":"hi"}],"tools":[],)"
                        R"("chat_template_kwargs":{"enable_thinking":false}})"));
  EXPECT_FALSE(tokenize_body(completion(R"({"prompt":"x"})"), Endpoint::ChatCompletions));

  EXPECT_EQ(tokenize_count_of(R"({"count":12,"tokens":[]})"), 12u);
  EXPECT_FALSE(tokenize_count_of(R"({"count":-1})"));
  EXPECT_FALSE(tokenize_count_of(R"({"error":{}})"));
  EXPECT_FALSE(tokenize_count_of("not json"));
}

TEST(RouterDisaggBody, PromptKeysAndBadBodies) {
  EXPECT_EQ(prompt_key(parse_client_body(R"({"prompt":"once upon"})"), Endpoint::Completions),
            "once upon");
  EXPECT_EQ(prompt_key(parse_client_body(R"({"prompt":[1,2]})"), Endpoint::Completions), "[1,2]");
  const std::string two = prompt_key(
      parse_client_body(
          R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})"),
      Endpoint::ChatCompletions);
  const std::string three = prompt_key(
      parse_client_body(
          R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},)"
          R"({"role":"assistant","content":"a"}]})"),
      Endpoint::ChatCompletions);
  EXPECT_EQ(three.rfind(two, 0), 0u);  // a conversation's earlier turns are its key's prefix
  EXPECT_EQ(prompt_key(parse_client_body("{}"), Endpoint::ChatCompletions), "");
  for (const char* bad : {"", "[1]", "{", "\"x\""}) {
    try {
      parse_client_body(bad);
      ADD_FAILURE() << bad;
    } catch (const server::ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
}

}  // namespace
}  // namespace tern::router
