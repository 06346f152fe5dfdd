// kv_transfer_params and --kv-transfer-config as vLLM writes them: parsed into what tern acts
// on, the prefill side's answer read back by the decode side, and everything else refused by
// name.
#include "tern/disagg/kv_transfer_params.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"
#include "tern/disagg/kv_transfer_config.h"

namespace tern::disagg {
namespace {

using nlohmann::json;

std::string error_of(const json& v) {
  try {
    parse_kv_transfer_params(v);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvTransferParams, TheAnswerOfAPrefillIsWhatADecodeTakes) {
  EXPECT_TRUE(parse_kv_transfer_params(json{{"do_remote_decode", true}}).do_remote_decode);
  EXPECT_TRUE(parse_kv_transfer_params(json::object()).empty());
  RemoteBlocks where{"tern-1", "10.0.0.2", 14579, "abc123", {5, 1, 9}, 1.7e9};
  const KvTransferParams back = parse_kv_transfer_params(kv_transfer_params_json(where));
  ASSERT_TRUE(back.remote_prefill.has_value());
  EXPECT_FALSE(back.do_remote_decode);
  EXPECT_EQ(back.remote_prefill->engine_id, "tern-1");
  EXPECT_EQ(back.remote_prefill->host, "10.0.0.2");
  EXPECT_EQ(back.remote_prefill->port, 14579);
  EXPECT_EQ(back.remote_prefill->lease_id, "abc123");
  EXPECT_EQ(back.remote_prefill->block_ids, (std::vector<int32_t>{5, 1, 9}));
  // A one-token prompt: nothing held, nothing to pull.
  RemoteBlocks none{"tern-1", "10.0.0.2", 14579, "", {}, 0};
  EXPECT_TRUE(
      parse_kv_transfer_params(kv_transfer_params_json(none)).remote_prefill->block_ids.empty());
}

TEST(KvTransferParams, RefusesWhatItCannotActOn) {
  json answer = kv_transfer_params_json({"e", "h", 1, "lease", {1}, 0});
  EXPECT_NE(error_of(json{{"do_remote_decode", 1}}).find("true or false"), std::string::npos);
  EXPECT_NE(error_of(json{{"remote_tp_size", 1}}).find("'remote_tp_size' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(json{{"remote_host", "h"}}).find("belongs with do_remote_prefill"),
            std::string::npos);
  json both = answer;
  both["do_remote_decode"] = true;
  EXPECT_NE(error_of(both).find("exclude each other"), std::string::npos);
  for (const char* key :
       {"remote_engine_id", "remote_host", "remote_port", "remote_block_ids", "remote_lease_id"}) {
    json missing = answer;
    missing.erase(key);
    EXPECT_NE(error_of(missing).find(key), std::string::npos) << key;
  }
  json bad_port = answer;
  bad_port["remote_port"] = 70000;
  EXPECT_NE(error_of(bad_port).find("remote_port"), std::string::npos);
  json bad_block = answer;
  bad_block["remote_block_ids"] = json{1, -2};
  EXPECT_NE(error_of(bad_block).find("remote_block_ids"), std::string::npos);
  json no_lease = answer;
  no_lease["remote_lease_id"] = "";
  EXPECT_NE(error_of(no_lease).find("remote_lease_id"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("object"), std::string::npos);
}

TEST(KvTransferConfig, VllmsJsonAndTheShortRole) {
  const KvTransferConfig c = parse_kv_transfer_config(
      R"({"kv_connector":"UcxConnector","kv_role":"kv_producer","kv_ip":"0.0.0.0","kv_port":15000,
          "kv_buffer_device":"cpu","kv_rank":0,"kv_parallel_size":1,"engine_id":"p0",
          "kv_load_failure_policy":"recompute","kv_connector_extra_config":{}})");
  EXPECT_EQ(c.role, KvRole::kProducer);
  EXPECT_TRUE(c.produces());
  EXPECT_FALSE(c.consumes());
  EXPECT_EQ(c.ip, "0.0.0.0");
  EXPECT_EQ(c.port, 15000);
  EXPECT_EQ(c.engine_id, "p0");
  EXPECT_EQ(c.load_failure_policy, KvLoadFailurePolicy::kRecompute);
  const KvTransferConfig d = parse_kv_transfer_config(R"({"kv_role":"kv_both"})");
  EXPECT_EQ(d.ip, "127.0.0.1");  // loopback unless told otherwise
  EXPECT_EQ(d.port, 14579);
  EXPECT_TRUE(d.produces() && d.consumes());
  EXPECT_EQ(parse_kv_role("prefill"), KvRole::kProducer);
  EXPECT_EQ(parse_kv_role("decode"), KvRole::kConsumer);
  EXPECT_EQ(parse_kv_role("both"), KvRole::kBoth);
  EXPECT_STREQ(kv_role_name(KvRole::kConsumer), "kv_consumer");
}

TEST(KvTransferConfig, RefusesWhatTernDoesNotDo) {
  auto error_of_config = [](const char* text) {
    try {
      parse_kv_transfer_config(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of_config(R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})")
                .find("NixlConnector"),
            std::string::npos);
  EXPECT_NE(error_of_config(R"({"kv_role":"kv_both","kv_buffer_device":"cuda"})").find("cuda"),
            std::string::npos);
  EXPECT_NE(error_of_config(R"({"kv_role":"kv_both","kv_buffer_size":1e9})").find("kv_buffer_size"),
            std::string::npos);
  EXPECT_NE(error_of_config(R"({"kv_role":"prefill"})").find("kv_role"), std::string::npos);
  EXPECT_NE(error_of_config(R"({"kv_port":1})").find("kv_role is required"), std::string::npos);
  EXPECT_NE(error_of_config(R"({"kv_role":"kv_both","kv_port":70000})").find("kv_port"),
            std::string::npos);
  EXPECT_NE(
      error_of_config(R"({"kv_role":"kv_both","kv_parallel_size":2})").find("kv_parallel_size"),
      std::string::npos);
  EXPECT_NE(error_of_config("not json").find("not JSON"), std::string::npos);
  EXPECT_THROW(parse_kv_role("decoder"), Error);
}

}  // namespace
}  // namespace tern::disagg
