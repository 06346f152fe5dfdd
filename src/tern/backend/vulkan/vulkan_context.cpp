#include "tern/backend/vulkan/vulkan_context.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tern/backend/vulkan/vulkan_shaders.h"
#include "tern/core/error.h"

namespace tern::vulkan {
namespace {

// Staged inputs are aligned for the widest load a kernel makes (uvec4).
constexpr uint64_t kStageAlign = 16;
constexpr uint64_t kFirstHostBytes = uint64_t{4} << 20;

}  // namespace

// --- Buffer ---

Buffer::Buffer(Context& context, uint64_t bytes, Memory memory) : context_(&context) {
  bytes = std::max<uint64_t>(bytes, 16);
  VkBufferCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create.size = bytes;
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkDevice dev = context.device();
  check(vkCreateBuffer(dev, &create, nullptr, &buffer_), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buffer_, &req);
  bool host_visible = false;
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.pNext = &flags;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = context.memory_type(req.memoryTypeBits, memory, &host_visible);
  const VkResult r = vkAllocateMemory(dev, &alloc, nullptr, &memory_);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, buffer_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    throw Error("vulkan: " + context.info().name + " could not allocate " + std::to_string(bytes) +
                " bytes of " + (memory == Memory::Device ? "device" : "host") + " memory" +
                (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                     ? " (out of memory)"
                     : ""));
  }
  check(vkBindBufferMemory(dev, buffer_, memory_, 0), "vkBindBufferMemory");
  if (host_visible) {
    void* p = nullptr;
    check(vkMapMemory(dev, memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    mapped_ = static_cast<std::byte*>(p);
  }
  VkBufferDeviceAddressInfo where{};
  where.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
  where.buffer = buffer_;
  address_ = vkGetBufferDeviceAddress(dev, &where);
  bytes_ = bytes;
  device_memory_ = memory == Memory::Device;
  if (device_memory_) context.device_bytes_ += req.size;
  allocation_bytes_ = req.size;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this == &o) return *this;
  release();
  context_ = o.context_;
  buffer_ = o.buffer_;
  memory_ = o.memory_;
  address_ = o.address_;
  bytes_ = o.bytes_;
  mapped_ = o.mapped_;
  device_memory_ = o.device_memory_;
  allocation_bytes_ = o.allocation_bytes_;
  o.buffer_ = VK_NULL_HANDLE;
  o.memory_ = VK_NULL_HANDLE;
  o.mapped_ = nullptr;
  o.bytes_ = 0;
  o.address_ = 0;
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() {
  if (buffer_ == VK_NULL_HANDLE) return;
  VkDevice dev = context_->device();
  if (mapped_ != nullptr) vkUnmapMemory(dev, memory_);
  vkDestroyBuffer(dev, buffer_, nullptr);
  vkFreeMemory(dev, memory_, nullptr);
  if (device_memory_) context_->device_bytes_ -= allocation_bytes_;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

// --- Context ---

Context::Context(uint32_t index) : index_(index) {
  const std::vector<PhysicalDeviceInfo>& all = physical_devices();
  if (index >= all.size())
    throw Error("--device vulkan:" + std::to_string(index) + ": there are " +
                std::to_string(all.size()) + " Vulkan devices" +
                (all.empty() ? " (install a driver; Debian: mesa-vulkan-drivers)" : ""));
  info_ = all[index];
  const std::string missing = info_.missing();
  if (!missing.empty())
    throw Error("--device vulkan:" + std::to_string(index) + " (" + info_.name +
                ") lacks what tern's kernels need: " + missing);
  vkGetPhysicalDeviceMemoryProperties(info_.handle, &memory_props_);

  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(info_.handle, &n, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n && !found; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      queue_family_ = i;
      found = true;
    }
  if (!found) throw Error("vulkan: " + info_.name + " has no compute queue");

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f12.bufferDeviceAddress = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &f12;
  features.features.shaderInt64 = VK_TRUE;
  VkDeviceCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  create.pNext = &features;
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  check(vkCreateDevice(info_.handle, &create, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family_;
  check(vkCreateCommandPool(device_, &pool, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cb{};
  cb.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cb.commandPool = pool_;
  cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cb.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(device_, &cb, &commands_), "vkAllocateCommandBuffers");
  check(vkAllocateCommandBuffers(device_, &cb, &transfers_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence");
  check(vkCreateFence(device_, &fence, nullptr, &transfers_done_), "vkCreateFence");
  host_ = Buffer(*this, kFirstHostBytes, Memory::Host);
}

Context::~Context() {
  if (device_ == VK_NULL_HANDLE) return;
  vkDeviceWaitIdle(device_);
  host_ = Buffer();
  retired_.clear();
  for (auto& [name, p] : pipelines_) {
    vkDestroyPipeline(device_, p.pipeline, nullptr);
    vkDestroyPipelineLayout(device_, p.layout, nullptr);
  }
  vkDestroyFence(device_, fence_, nullptr);
  vkDestroyFence(device_, transfers_done_, nullptr);
  vkDestroyCommandPool(device_, pool_, nullptr);
  vkDestroyDevice(device_, nullptr);
}

uint32_t Context::memory_type(uint32_t allowed, Memory memory, bool* host_visible) const {
  // Device memory: device-local first (mappable if the device offers it, else not); host
  // memory: host-visible and coherent, so a step's inputs need no flushes.
  auto pick = [&](VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) -> int {
    int fallback = -1;
    for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
      if (!(allowed & (1u << i))) continue;
      const VkMemoryPropertyFlags f = memory_props_.memoryTypes[i].propertyFlags;
      if ((f & want) != want) continue;
      if ((f & prefer) == prefer) return static_cast<int>(i);
      if (fallback < 0) fallback = static_cast<int>(i);
    }
    return fallback;
  };
  int type = -1;
  if (memory == Memory::Device) {
    type = pick(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (type < 0) type = pick(0, 0);
  } else {
    type = pick(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  }
  if (type < 0) throw Error("vulkan: " + info_.name + " has no memory type for a buffer");
  const VkMemoryPropertyFlags f = memory_props_.memoryTypes[type].propertyFlags;
  *host_visible =
      (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  return static_cast<uint32_t>(type);
}

uint64_t Context::device_heap_bytes() const {
  // The heap of the memory type device buffers get (Memory::Device's choice for a plain buffer).
  VkBuffer probe = VK_NULL_HANDLE;
  VkBufferCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create.size = 16;
  create.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  check(vkCreateBuffer(device_, &create, nullptr, &probe), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, probe, &req);
  vkDestroyBuffer(device_, probe, nullptr);
  bool host_visible = false;
  const uint32_t type = memory_type(req.memoryTypeBits, Memory::Device, &host_visible);
  return memory_props_.memoryHeaps[memory_props_.memoryTypes[type].heapIndex].size;
}

double Context::measure_copy_bandwidth() {
  const uint64_t bytes = std::min<uint64_t>(uint64_t{256} << 20, device_heap_bytes() / 8);
  Buffer from(*this, bytes, Memory::Device), to(*this, bytes, Memory::Device);
  zero(from);
  finish();
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    copy({from.handle(), 0, from.address()}, {to.handle(), 0, to.address()}, bytes);
    finish();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
  }
  return best;
}

const Pipeline& Context::pipeline(std::string_view name, uint32_t push_bytes) {
  std::lock_guard lock(mutex_);
  if (auto it = pipelines_.find(name); it != pipelines_.end()) return it->second;
  const std::span<const uint32_t> code = shader_spirv(name);
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = code.size_bytes();
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");
  Pipeline p;
  p.push_bytes = push_bytes;
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &range;
  check(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout), "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  create.stage.module = module;
  create.stage.pName = "main";
  create.layout = p.layout;
  const VkResult r =
      vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &create, nullptr, &p.pipeline);
  vkDestroyShaderModule(device_, module, nullptr);
  check(r, "vkCreateComputePipelines");
  return pipelines_.emplace(std::string(name), p).first->second;
}

void Context::upload(const Buffer& dst, uint64_t offset, const void* data, uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  if (dst.mapped() != nullptr) {
    finish();  // nothing recorded may still read what this overwrites
    std::memcpy(dst.mapped() + offset, data, bytes);
    return;
  }
  const uint64_t chunk = uint64_t{64} << 20;
  Buffer staging(*this, std::min(bytes, chunk), Memory::Host);
  for (uint64_t done = 0; done < bytes; done += chunk) {
    const uint64_t n = std::min(chunk, bytes - done);
    std::memcpy(staging.mapped(), static_cast<const std::byte*>(data) + done, n);
    copy({staging.handle(), 0, staging.address()}, {dst.handle(), offset + done, 0}, n);
    finish();
  }
}

void Context::begin_if_idle() {
  if (recording_) return;
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  recording_ = true;
}

void Context::barrier() {
  // Every command reads what the one before it wrote: one full memory barrier between them.
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                    VK_ACCESS_HOST_READ_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(commands_, stages, stages | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr,
                       0, nullptr);
}

void Context::dispatch(const Pipeline& p, const void* push, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  std::lock_guard lock(mutex_);
  begin_if_idle();
  vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdPushConstants(commands_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, push);
  vkCmdDispatch(commands_, gx, gy, gz);
  barrier();
}

void Context::zero(const Buffer& b) {
  std::lock_guard lock(mutex_);
  begin_if_idle();
  vkCmdFillBuffer(commands_, b.handle(), 0, VK_WHOLE_SIZE, 0);
  barrier();
}

void Context::copy(BufferSlice from, BufferSlice to, uint64_t bytes) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  begin_if_idle();
  VkBufferCopy region{from.offset, to.offset, bytes};
  vkCmdCopyBuffer(commands_, from.buffer, to.buffer, 1, &region);
  barrier();
}

BufferSlice Context::take_host(uint64_t bytes, std::byte** host) {
  const uint64_t start = (host_used_ + kStageAlign - 1) / kStageAlign * kStageAlign;
  if (start + bytes > host_.bytes()) {
    // Recorded commands still read the old buffer: it lives until finish().
    retired_.push_back(std::move(host_));
    host_ = Buffer(*this, std::max(2 * retired_.back().bytes(), bytes + kStageAlign), Memory::Host);
    host_used_ = 0;
    return take_host(bytes, host);
  }
  host_used_ = start + bytes;
  *host = host_.mapped() + start;
  return {host_.handle(), start, host_.address() + start};
}

BufferSlice Context::stage(const void* data, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  std::byte* host = nullptr;
  BufferSlice s = take_host(bytes, &host);
  if (bytes > 0) std::memcpy(host, data, bytes);
  return s;
}

BufferSlice Context::host_memory(uint64_t bytes, std::byte** host) {
  std::lock_guard lock(mutex_);
  return take_host(bytes, host);
}

void Context::finish() {
  std::lock_guard lock(mutex_);
  if (recording_) {
    recording_ = false;
    submit_and_wait(commands_, fence_);
  }
  retired_.clear();
  host_used_ = 0;
  ++finishes_;
}

void Context::copy_now(std::span<const Transfer> transfers) {
  if (transfers.empty()) return;
  std::lock_guard lock(mutex_);  // the queue and the pool are the stream's too
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(transfers_, &begin), "vkBeginCommandBuffer");
  // The copies read what earlier submissions' kernels and copies wrote; later submissions'
  // kernels and copies, and the host, read what they write.
  const VkPipelineStageFlags stream =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier before{};
  before.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(transfers_, stream, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0,
                       nullptr, 0, nullptr);
  for (const Transfer& t : transfers) {
    if (t.bytes == 0) continue;
    VkBufferCopy region{t.from.offset, t.to.offset, t.bytes};
    vkCmdCopyBuffer(transfers_, t.from.buffer, t.to.buffer, 1, &region);
  }
  VkMemoryBarrier after{};
  after.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                        VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(transfers_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       stream | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, nullptr, 0, nullptr);
  submit_and_wait(transfers_, transfers_done_);
}

void Context::submit_and_wait(VkCommandBuffer commands, VkFence fence) {
  check(vkEndCommandBuffer(commands), "vkEndCommandBuffer");
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &commands;
  check(vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit");
  check(vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  check(vkResetFences(device_, 1, &fence), "vkResetFences");
  check(vkResetCommandBuffer(commands, 0), "vkResetCommandBuffer");
}

Context& context(uint32_t index) {
  // Opened once per device and never closed (the driver tears itself down at exit); the map is
  // never destroyed either, so what it holds stays reachable to the end.
  static std::mutex mutex;
  static auto* opened = new std::map<uint32_t, Context*>();
  std::lock_guard lock(mutex);
  auto it = opened->find(index);
  if (it == opened->end()) it = opened->emplace(index, new Context(index)).first;
  return *it->second;
}

}  // namespace tern::vulkan
