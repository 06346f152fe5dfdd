// Paged KV cache storage and the write of a step's new K/V rows (vLLM's reshape_and_cache).
#include "tern/kernels/cpu/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "tern/core/error.h"
#include "tern/kernels/cpu/ops.h"

namespace tern::cpu {
namespace {

constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Converts one f32 row into the cache's element type.
void store_row(DType dtype, const float* x, void* dst, int64_t n) {
  switch (dtype) {
    case DType::F16:
      f32_to_f16_row(x, static_cast<uint16_t*>(dst), n);
      break;
    case DType::BF16:
      f32_to_bf16_row(x, static_cast<uint16_t*>(dst), n);
      break;
    default:  // F32; the constructor admits nothing else
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      break;
  }
}

void load_row(DType dtype, const void* src, float* x, int64_t n) {
  switch (dtype) {
    case DType::F16:
      f16_to_f32_row(static_cast<const uint16_t*>(src), x, n);
      break;
    case DType::BF16:
      bf16_to_f32_row(static_cast<const uint16_t*>(src), x, n);
      break;
    default:
      std::memcpy(x, src, static_cast<size_t>(n) * sizeof(float));
      break;
  }
}

}  // namespace

size_t kv_cache_element_bytes(DType dtype) {
  switch (dtype) {
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::F32:
      return 4;
    default:
      throw Error("kv cache: dtype " + std::string(dtype_name(dtype)) +
                  " is not supported (F16, BF16 or F32)");
  }
}

int64_t KvCacheConfig::bytes_per_token() const {
  return 2 * static_cast<int64_t>(num_layers) * row_elems() *
         static_cast<int64_t>(kv_cache_element_bytes(dtype));
}

int64_t KvCacheConfig::bytes_per_block() const { return bytes_per_token() * block_size; }

int64_t kv_cache_blocks_for_budget(const KvCacheConfig& config, uint64_t budget_bytes) {
  const int64_t per_block = config.bytes_per_block();
  if (per_block <= 0) throw Error("kv cache: a block of this shape has no size");
  // Each layer's K and V is padded to 64 bytes; leave room for that padding.
  const uint64_t padding = 2 * static_cast<uint64_t>(config.num_layers) * kAlign;
  if (budget_bytes <= padding) return 0;
  return static_cast<int64_t>((budget_bytes - padding) / static_cast<uint64_t>(per_block));
}

void KvCache::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

KvCache::KvCache(const KvCacheConfig& config) : config_(config) {
  const KvCacheConfig& c = config_;
  element_bytes_ = kv_cache_element_bytes(c.dtype);
  if (c.num_layers <= 0 || c.num_blocks <= 0 || c.block_size <= 0 || c.n_kv_heads <= 0 ||
      c.head_dim <= 0) {
    throw Error("kv cache: layers (" + std::to_string(c.num_layers) + "), blocks (" +
                std::to_string(c.num_blocks) + "), block_size (" + std::to_string(c.block_size) +
                "), kv heads (" + std::to_string(c.n_kv_heads) + ") and head_dim (" +
                std::to_string(c.head_dim) + ") must all be positive");
  }
  if (c.head_dim > kMaxHeadDim) {
    throw Error("kv cache: head_dim " + std::to_string(c.head_dim) + " is over the " +
                std::to_string(kMaxHeadDim) + " the attention kernel supports");
  }
  const long double bytes = static_cast<long double>(c.num_blocks) * c.block_size *
                            c.row_elems() * element_bytes_ * 2 * c.num_layers;
  if (bytes > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2)) {
    throw Error("kv cache: " + std::to_string(c.num_blocks) + " blocks overflow the address space");
  }
  tensor_bytes_ = round_up(static_cast<size_t>(c.num_blocks) * c.block_size *
                               static_cast<size_t>(c.row_elems()) * element_bytes_,
                           kAlign);
  total_bytes_ = tensor_bytes_ * 2 * static_cast<size_t>(c.num_layers);
  base_.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, total_bytes_)));
  if (!base_) {
    throw Error("kv cache: cannot allocate " + std::to_string(total_bytes_) + " bytes (" +
                std::to_string(c.num_blocks) + " blocks)");
  }
  // Zeroing touches every page now, so a cache too big for the machine fails at start-up
  // rather than in the middle of serving; chunks in parallel to go at memory speed.
  constexpr size_t kChunk = size_t{1} << 24;
  const int64_t chunks = static_cast<int64_t>((total_bytes_ + kChunk - 1) / kChunk);
  std::byte* base = base_.get();
  const size_t total = total_bytes_;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t i = 0; i < chunks; ++i) {
    const size_t begin = static_cast<size_t>(i) * kChunk;
    std::memset(base + begin, 0, std::min(kChunk, total - begin));
  }
}

void KvCache::write(int layer, const float* k, const float* v,
                    std::span<const int64_t> slot_mapping) {
  const int64_t row = config_.row_elems();
  const size_t row_bytes = static_cast<size_t>(row) * element_bytes_;
  std::byte* k_dst = static_cast<std::byte*>(k_data(layer));
  std::byte* v_dst = static_cast<std::byte*>(v_data(layer));
  const DType dtype = config_.dtype;
  const int64_t num_tokens = static_cast<int64_t>(slot_mapping.size());
#pragma omp parallel for schedule(static) if (num_tokens >= 64)
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    store_row(dtype, k + t * row, k_dst + static_cast<size_t>(slot) * row_bytes, row);
    store_row(dtype, v + t * row, v_dst + static_cast<size_t>(slot) * row_bytes, row);
  }
}

void KvCache::check_slot_mapping(std::span<const int64_t> slot_mapping) const {
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot == -1 || (slot >= 0 && slot < num_slots())) continue;
    throw Error("kv cache: slot_mapping[" + std::to_string(t) + "] = " + std::to_string(slot) +
                " is neither -1 nor a slot of the " + std::to_string(num_slots()) +
                " in the cache");
  }
}

void KvCache::read_slot(int layer, int64_t slot, float* k, float* v) const {
  const int64_t row = config_.row_elems();
  const size_t row_bytes = static_cast<size_t>(row) * element_bytes_;
  load_row(config_.dtype, static_cast<const std::byte*>(k_data(layer)) + slot * row_bytes, k, row);
  load_row(config_.dtype, static_cast<const std::byte*>(v_data(layer)) + slot * row_bytes, v, row);
}

void KvCache::copy_block(int64_t src, int64_t dst) {
  const size_t block_bytes =
      static_cast<size_t>(config_.block_size * config_.row_elems()) * element_bytes_;
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    auto* k = static_cast<std::byte*>(k_data(layer));
    auto* v = static_cast<std::byte*>(v_data(layer));
    std::memcpy(k + dst * block_bytes, k + src * block_bytes, block_bytes);
    std::memcpy(v + dst * block_bytes, v + src * block_bytes, block_bytes);
  }
}

}  // namespace tern::cpu
