// The device a model runs on, as `--device` names it: it lays a model's weights out for its
// kernels once at load, makes each Decoder's Backend, and answers the sizes that the engine's
// KV budget and `tern plan` need before (or without) loading a model. A second backend is a
// folder under backend/ with a Device of its own, listed in device.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/backend/backend.h"
#include "tern/formats/model_config.h"
#include "tern/weights/model_weights.h"

namespace tern {

// What a decoder's forward holds besides the weights and the KV cache, on one device.
struct WorkingBytes {
  uint64_t activations = 0;  // the forward's f32 rows (the decoder's and the backend's own)
  uint64_t workspace = 0;    // the matmuls' scratch (their quantized inputs, on the CPU)
  uint64_t total() const { return activations + workspace; }
};

// Memory of a device's own (a GPU's), for --gpu-memory-utilization.
struct DeviceMemory {
  uint64_t total = 0;   // the heap tern allocates its buffers in
  uint64_t in_use = 0;  // what tern holds there now: weights, activations, caches
};

class Device {
 public:
  virtual ~Device() = default;

  // What --device takes: "cpu".
  virtual std::string_view name() const = 0;

  // Lays `weights` out for this device's kernels (the CPU: packed copies where the best ISA
  // reads its own layout). Once per model, before its first backend; again is a no-op.
  virtual void prepare_weights(ModelWeights& weights) const = 0;
  // A backend for one decoder of `config` and `weights` (both must outlive it, and the weights
  // be prepared). Throws tern::Error for a matrix type without kernels here or invalid RoPE
  // settings, so a model fails at construction rather than mid-forward.
  virtual std::unique_ptr<Backend> make_backend(const ModelConfig& config,
                                                const ModelWeights& weights) const = 0;

  // Bytes a KV cache of `shape` takes beyond num_blocks × bytes_per_block() (alignment), at
  // most; `shape.num_blocks` is ignored.
  virtual uint64_t kv_cache_overhead_bytes(const KvCacheConfig& shape) const = 0;
  // Bytes prepare_weights adds for a matrix of `shape` that keeps its stored rows as well (a
  // tied embedding's table, read row by row besides lm_head); 0 when it adds nothing or the
  // type has no kernels here.
  virtual uint64_t prepared_copy_bytes(const MatrixShape& shape) const = 0;
  // The device's own memory; nullopt where a model computes in host memory (the CPU).
  virtual std::optional<DeviceMemory> own_memory() const = 0;
  // Bytes per second the device's own memory moves, measured now by a copy on the device (the
  // bytes read and the bytes written both counted); nullopt where the memory is the host's
  // (`tern plan` measures that itself).
  virtual std::optional<double> measure_bandwidth() const = 0;
  // What Backend::working_bytes holds after reserve(num_tokens, num_logit_rows) for a decoder
  // of `config` whose matrices are `layers` ([layer][q k v o gate up down]) and `lm_head`.
  virtual WorkingBytes working_bytes(const ModelConfig& config,
                                     std::span<const std::vector<MatrixShape>> layers,
                                     const MatrixShape& lm_head, int64_t num_tokens,
                                     int64_t num_logit_rows) const = 0;
};

// The device `name` names ("cpu", "vulkan", "vulkan:N"; "" is the default, the CPU); throws
// tern::Error listing the devices this build has, or saying why the named one cannot run.
const Device& find_device(std::string_view name);
// The names find_device takes, for help texts: "cpu, vulkan[:N]" in a build with Vulkan.
std::string device_names();
// What `tern devices` prints: each device of this build and machine, a paragraph each.
std::string describe_devices();

}  // namespace tern
