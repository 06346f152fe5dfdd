// What one element of the KV cache is (`--kv-cache-dtype`, vLLM's names) and what a token of
// it costs. The 8-bit types carry a scale per token and kv head next to their rows: int8 is
// symmetric (x ≈ q · s, |q| ≤ 127), fp8 holds x / s in E4M3 (max 448) or E5M2 (max 57344), s
// chosen so the head's largest |x| lands on the type's largest value. A per-head-and-token
// scale needs no calibration, keeps K's outlier channels of one token from flattening the
// others' and depends on nothing but the row itself (batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

enum class KvDtype : uint8_t { F16, BF16, F32, Fp8E4M3, Fp8E5M2, Int8 };

// Bytes of a scale: an IEEE half, per token and kv head, in the 8-bit caches.
inline constexpr size_t kKvScaleBytes = 2;

// "f16", "bf16", "f32", "fp8_e4m3", "fp8_e5m2", "int8".
std::string_view kv_dtype_name(KvDtype dtype);
// vLLM's spellings and tern's: auto (f16), f16/float16/half, bf16/bfloat16, f32/float32,
// fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2, int8. nullopt for anything else.
std::optional<KvDtype> kv_dtype_from_name(std::string_view name);
// kv_dtype_from_name or a tern::Error listing the accepted names.
KvDtype parse_kv_cache_dtype(const std::string& name);
// The names parse_kv_cache_dtype accepts, for help texts: "auto|f16|bf16|…".
std::string_view kv_cache_dtype_choices();

// Bytes per element of the rows (2, 2, 4, 1, 1, 1).
size_t kv_element_bytes(KvDtype dtype);
// Whether rows of this type have a scale per token and kv head.
bool kv_dtype_has_scales(KvDtype dtype);
// One token's K (or V) of one kv head: its elements plus its scale.
int64_t kv_bytes_per_token_head(KvDtype dtype, int head_dim);

}  // namespace tern
