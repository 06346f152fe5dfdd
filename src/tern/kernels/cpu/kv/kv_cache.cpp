// Paged KV cache storage and the write of a step's new K/V rows (vLLM's reshape_and_cache).
#include "tern/kernels/cpu/kv/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/cpu/kv/kv_quant.h"
#include "tern/kernels/cpu/ops/row_ops.h"
#include "tern/kernels/cpu/stealing_split.h"

namespace tern::cpu {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Converts one token's row (all kv heads) into the cache's element type; the 8-bit types
// quantize head by head, a scale each.
// x: [n_kv_heads * head_dim]; dst: as many elements; scales: [n_kv_heads] (8-bit types)
void store_row(KvDtype dtype, const float* x, void* dst, uint16_t* scales, int n_kv_heads,
               int head_dim) {
  const int64_t n = static_cast<int64_t>(n_kv_heads) * head_dim;
  switch (dtype) {
    case KvDtype::F16:
      f32_to_f16_row(x, static_cast<uint16_t*>(dst), n);
      break;
    case KvDtype::BF16:
      f32_to_bf16_row(x, static_cast<uint16_t*>(dst), n);
      break;
    case KvDtype::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      break;
    default:
      for (int h = 0; h < n_kv_heads; ++h) {
        quantize_kv_head(dtype, x + h * head_dim, head_dim,
                         static_cast<uint8_t*>(dst) + h * head_dim, scales + h);
      }
      break;
  }
}

// x: [n_kv_heads * head_dim]
void load_row(KvDtype dtype, const void* src, const uint16_t* scales, float* x, int n_kv_heads,
              int head_dim) {
  const int64_t n = static_cast<int64_t>(n_kv_heads) * head_dim;
  switch (dtype) {
    case KvDtype::F16:
      f16_to_f32_row(static_cast<const uint16_t*>(src), x, n);
      break;
    case KvDtype::BF16:
      bf16_to_f32_row(static_cast<const uint16_t*>(src), x, n);
      break;
    case KvDtype::F32:
      std::memcpy(x, src, static_cast<size_t>(n) * sizeof(float));
      break;
    default: {
      const KvDequantizeFn dequantize = kv_dequantize_fn(dtype);
      for (int h = 0; h < n_kv_heads; ++h) {
        dequantize(static_cast<const uint8_t*>(src) + h * head_dim, f16_to_f32(scales[h]),
                   x + h * head_dim, head_dim);
      }
      break;
    }
  }
}

}  // namespace

uint64_t kv_cache_padding_bytes(const KvCacheConfig& config) {
  const uint64_t arrays = kv_dtype_has_scales(config.dtype) ? 4 : 2;
  return arrays * static_cast<uint64_t>(config.num_layers) * kAlign;
}

int64_t kv_cache_blocks_for_budget(const KvCacheConfig& config, uint64_t budget_bytes) {
  const int64_t per_block = config.bytes_per_block();
  if (per_block <= 0) throw Error("kv cache: a block of this shape has no size");
  const uint64_t padding = kv_cache_padding_bytes(config);
  if (budget_bytes <= padding) return 0;
  return static_cast<int64_t>((budget_bytes - padding) / static_cast<uint64_t>(per_block));
}

void KvCache::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

KvCache::KvCache(const KvCacheConfig& config) : config_(config) {
  const KvCacheConfig& c = config_;
  element_bytes_ = kv_element_bytes(c.dtype);
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
  const long double bytes =
      static_cast<long double>(c.num_blocks) * c.block_size * c.bytes_per_token();
  if (bytes > static_cast<long double>(std::numeric_limits<int64_t>::max() / 2)) {
    throw Error("kv cache: " + std::to_string(c.num_blocks) + " blocks overflow the address space");
  }
  tensor_bytes_ = round_up(static_cast<size_t>(c.num_blocks) * c.block_size *
                               static_cast<size_t>(c.row_elems()) * element_bytes_,
                           kAlign);
  if (kv_dtype_has_scales(c.dtype)) {
    scales_bytes_ = round_up(static_cast<size_t>(c.num_blocks) * c.block_size *
                                 static_cast<size_t>(c.n_kv_heads) * kKvScaleBytes,
                             kAlign);
  }
  layer_bytes_ = 2 * tensor_bytes_ + 2 * scales_bytes_;
  total_bytes_ = layer_bytes_ * static_cast<size_t>(c.num_layers);
  // On 2 MiB boundaries, and asked for huge pages where the kernel gives them on request
  // (transparent_hugepage=madvise): zeroing faults each page in, and a 4 GiB cache in 4 KiB
  // pages is a million faults, seconds of start-up (several times fewer in huge pages).
  const size_t allocated = round_up(total_bytes_, kHugePage);
  base_.reset(static_cast<std::byte*>(std::aligned_alloc(kHugePage, allocated)));
  if (!base_) {
    throw Error("kv cache: cannot allocate " + std::to_string(total_bytes_) + " bytes (" +
                std::to_string(c.num_blocks) + " blocks)");
  }
  madvise(base_.get(), allocated, MADV_HUGEPAGE);  // advice: without it, 4 KiB pages
  // Zeroing touches every page now, so a cache too big for the machine fails at start-up
  // rather than in the middle of serving; chunks in parallel to go at memory speed.
  constexpr size_t kChunk = size_t{1} << 24;
  const int64_t chunks = static_cast<int64_t>((total_bytes_ + kChunk - 1) / kChunk);
  std::byte* base = base_.get();
  const size_t total = total_bytes_;
  parallel_for(
      chunks,
      [&](int64_t i) {
        const size_t begin = static_cast<size_t>(i) * kChunk;
        std::memset(base + begin, 0, std::min(kChunk, total - begin));
      },
      chunks > 1);
}

void KvCache::write(int layer, const float* k, const float* v,
                    std::span<const int64_t> slot_mapping) {
  const int64_t row = config_.row_elems();
  const size_t row_bytes = static_cast<size_t>(row) * element_bytes_;
  std::byte* k_dst = static_cast<std::byte*>(k_data(layer));
  std::byte* v_dst = static_cast<std::byte*>(v_data(layer));
  uint16_t* k_scale = k_scales(layer);
  uint16_t* v_scale = v_scales(layer);
  const KvCacheConfig& c = config_;
  const int64_t num_tokens = static_cast<int64_t>(slot_mapping.size());
  parallel_for(
      num_tokens,
      [&](int64_t t) {
        const int64_t slot = slot_mapping[t];
        if (slot < 0) return;
        const int64_t scale_at = slot * c.n_kv_heads;
        store_row(c.dtype, k + t * row, k_dst + static_cast<size_t>(slot) * row_bytes,
                  k_scale ? k_scale + scale_at : nullptr, c.n_kv_heads, c.head_dim);
        store_row(c.dtype, v + t * row, v_dst + static_cast<size_t>(slot) * row_bytes,
                  v_scale ? v_scale + scale_at : nullptr, c.n_kv_heads, c.head_dim);
      },
      num_tokens >= 64);
}

void KvCache::read_slot(int layer, int64_t slot, float* k, float* v) const {
  const KvCacheConfig& c = config_;
  const size_t row_bytes = static_cast<size_t>(c.row_elems()) * element_bytes_;
  const int64_t scale_at = slot * c.n_kv_heads;
  const uint16_t* k_scale = k_scales(layer);
  const uint16_t* v_scale = v_scales(layer);
  load_row(c.dtype, static_cast<const std::byte*>(k_data(layer)) + slot * row_bytes,
           k_scale ? k_scale + scale_at : nullptr, k, c.n_kv_heads, c.head_dim);
  load_row(c.dtype, static_cast<const std::byte*>(v_data(layer)) + slot * row_bytes,
           v_scale ? v_scale + scale_at : nullptr, v, c.n_kv_heads, c.head_dim);
}

void KvCache::copy_block(int64_t src, int64_t dst) {
  for (int layer = 0; layer < config_.num_layers; ++layer)
    for (int i = 0; i < arrays_per_layer(); ++i) {
      const std::span<std::byte> from = block_range(layer, i, src);
      std::memcpy(block_range(layer, i, dst).data(), from.data(), from.size());
    }
}

std::span<std::byte> KvCache::block_range(int layer, int i, int64_t block) const {
  // K and V codes: [num_blocks, block_size, n_kv_heads, head_dim]; scales without head_dim.
  const size_t bytes =
      i < 2 ? static_cast<size_t>(config_.block_size * config_.row_elems()) * element_bytes_
            : static_cast<size_t>(config_.block_size) * config_.n_kv_heads * kKvScaleBytes;
  return {region(layer, i) + static_cast<size_t>(block) * bytes, bytes};
}

std::vector<std::span<std::byte>> KvCache::block_ranges(int64_t block) {
  std::vector<std::span<std::byte>> ranges;
  ranges.reserve(static_cast<size_t>(config_.num_layers * arrays_per_layer()));
  for (int layer = 0; layer < config_.num_layers; ++layer)
    for (int i = 0; i < arrays_per_layer(); ++i) ranges.push_back(block_range(layer, i, block));
  return ranges;
}

std::vector<std::span<const std::byte>> KvCache::block_ranges(int64_t block) const {
  std::vector<std::span<const std::byte>> ranges;
  ranges.reserve(static_cast<size_t>(config_.num_layers * arrays_per_layer()));
  for (int layer = 0; layer < config_.num_layers; ++layer)
    for (int i = 0; i < arrays_per_layer(); ++i) ranges.push_back(block_range(layer, i, block));
  return ranges;
}

}  // namespace tern::cpu
