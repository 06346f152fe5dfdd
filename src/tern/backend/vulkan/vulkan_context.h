// One opened Vulkan device: its logical device and compute queue, buffers addressed by device
// address (kernels take raw addresses in push constants, so a tensor is never bound through a
// descriptor and never limited by maxStorageBufferRange), the compute pipelines of the
// embedded shaders, and the command stream every backend and KV cache on the device records
// into, in call order: one command buffer per engine step, submitted when the step reads its
// logits back.
#pragma once

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/backend/vulkan/vulkan_instance.h"

namespace tern::vulkan {

class Context;

// Where a buffer lives: device memory for weights, activations and the KV cache (also mapped
// to the host where the device allows it, as on lavapipe or with resizable BAR), or host
// memory the device reads and writes (a step's inputs, the logits read back).
enum class Memory { Device, Host };

// A buffer with its own memory; moves, frees itself.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Context& context, uint64_t bytes, Memory memory);
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  VkBuffer handle() const { return buffer_; }
  VkDeviceAddress address() const { return address_; }
  uint64_t bytes() const { return bytes_; }
  // The host's view of the memory, nullptr where the device's memory is not mappable.
  std::byte* mapped() const { return mapped_; }
  bool empty() const { return buffer_ == VK_NULL_HANDLE; }

 private:
  void release();
  Context* context_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceAddress address_ = 0;
  uint64_t bytes_ = 0;
  std::byte* mapped_ = nullptr;
  bool device_memory_ = false;  // counted in the context's device_bytes_in_use
  uint64_t allocation_bytes_ = 0;
};

struct Pipeline {
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t push_bytes = 0;
};

// A part of a buffer: what the stream copies between.
struct BufferSlice {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  VkDeviceAddress address = 0;
};

class Context {
 public:
  // Opens physical device `index` of physical_devices(); throws tern::Error naming what it
  // lacks.
  explicit Context(uint32_t index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const PhysicalDeviceInfo& info() const { return info_; }
  uint32_t index() const { return index_; }
  VkDevice device() const { return device_; }

  // The size of the heap Memory::Device buffers come from, and the bytes of such buffers alive.
  uint64_t device_heap_bytes() const;
  uint64_t device_bytes_in_use() const { return device_bytes_; }

  // Bytes moved per second (read plus written) by copies between two device buffers of 256 MiB
  // (less on a small heap), the fastest of a few passes.
  double measure_copy_bandwidth();

  // The pipeline of embedded shader `name` (vulkan_shaders.h), made on first use.
  const Pipeline& pipeline(std::string_view name, uint32_t push_bytes);

  // Copies `bytes` from host memory into `dst` at `offset`: directly where the buffer is
  // mapped, else through a host buffer and a copy command (which waits for the copy, so
  // uploading is for load time).
  void upload(const Buffer& dst, uint64_t offset, const void* data, uint64_t bytes);

  // --- The command stream (every call records after the ones before it) ---
  // Records a dispatch of `groups` workgroups with the push constants `push`.
  void dispatch(const Pipeline& p, const void* push, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  // Records zeroing the whole of `b`.
  void zero(const Buffer& b);
  // Records a copy between two buffers.
  void copy(BufferSlice from, BufferSlice to, uint64_t bytes);
  // Copies `bytes` of host data into this step's input memory and returns where it lies; the
  // data must be there for the commands recorded next (the copy is the host's, now). Valid
  // until finish().
  BufferSlice stage(const void* data, uint64_t bytes);
  // `bytes` of host memory the step's commands may read (the host fills it now, through
  // *host) or write (the host reads it after finish(), before anything is staged again).
  BufferSlice host_memory(uint64_t bytes, std::byte** host);
  // Submits what is recorded and waits for it; the staged inputs are free again after.
  void finish();
  // Keeps other threads' calls out until the lock goes: for a sequence of calls that must not be
  // split (a read back: its host memory, the command writing it, finish, the copy out). Each
  // call alone is atomic already.
  std::unique_lock<std::recursive_mutex> hold() { return std::unique_lock(mutex_); }
  // Copies now, outside the stream, for threads other than the engine's (KV blocks moving
  // between instances): a command buffer of their own, submitted and waited for at once, after
  // every command already submitted; what the engine is recording stays where it is, and
  // commands submitted later read what the copies wrote.
  struct Transfer {
    BufferSlice from, to;
    uint64_t bytes = 0;
  };
  void copy_now(std::span<const Transfer> transfers);
  // How many times finish() has run: what was staged before a finish is gone after it.
  uint64_t finishes() const { return finishes_; }

 private:
  friend class Buffer;
  uint32_t memory_type(uint32_t allowed, Memory memory, bool* host_visible) const;
  void begin_if_idle();
  // Ends `commands`, submits it with `fence` and waits; both are ready for reuse after.
  void submit_and_wait(VkCommandBuffer commands, VkFence fence);
  void barrier();
  BufferSlice take_host(uint64_t bytes, std::byte** host);

  uint32_t index_;
  PhysicalDeviceInfo info_;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  VkDevice device_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkCommandBuffer transfers_ = VK_NULL_HANDLE;  // copy_now's
  VkFence transfers_done_ = VK_NULL_HANDLE;
  bool recording_ = false;
  std::atomic<uint64_t> device_bytes_{0};
  uint64_t finishes_ = 0;
  std::map<std::string, Pipeline, std::less<>> pipelines_;

  // Host memory for a step's inputs and read backs: a bump allocator over one buffer, grown
  // (the old one kept until finish) when a step needs more.
  Buffer host_;
  uint64_t host_used_ = 0;
  std::vector<Buffer> retired_;
  std::recursive_mutex mutex_;
};

// The context of device `index`, opened on first use and kept for the process.
Context& context(uint32_t index);

}  // namespace tern::vulkan
