// KV cache element types: names (vLLM's spellings) and sizes.
#include "tern/blocks/kv_dtype.h"

#include <gtest/gtest.h>

#include "tern/core/error.h"

namespace tern {
namespace {

TEST(KvDtype, NamesAndSizes) {
  EXPECT_EQ(parse_kv_cache_dtype("auto"), KvDtype::F16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), KvDtype::Fp8E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("FP8_E5M2"), KvDtype::Fp8E5M2);
  EXPECT_EQ(parse_kv_cache_dtype("bfloat16"), KvDtype::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("int8"), KvDtype::Int8);
  EXPECT_THROW(parse_kv_cache_dtype("q8_0"), Error);
  EXPECT_THROW(parse_kv_cache_dtype(""), Error);
  EXPECT_EQ(kv_bytes_per_token_head(KvDtype::F16, 128), 256);
  EXPECT_EQ(kv_bytes_per_token_head(KvDtype::Int8, 128), 130);
  EXPECT_EQ(kv_bytes_per_token_head(KvDtype::Fp8E4M3, 64), 66);
  EXPECT_EQ(kv_bytes_per_token_head(KvDtype::F32, 64), 256);
}

}  // namespace
}  // namespace tern
