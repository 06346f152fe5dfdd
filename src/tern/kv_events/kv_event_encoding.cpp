// KvEventBatch to msgpack with msgpack-c's packer (into a growing buffer).
#include "tern/kv_events/kv_event_encoding.h"

#include <msgpack.h>

#include <cstring>

#include "tern/core/error.h"

namespace tern::kv_events {
namespace {

class Packer {
 public:
  Packer() {
    msgpack_sbuffer_init(&buffer_);
    msgpack_packer_init(&packer_, &buffer_, msgpack_sbuffer_write);
  }
  ~Packer() { msgpack_sbuffer_destroy(&buffer_); }
  Packer(const Packer&) = delete;
  Packer& operator=(const Packer&) = delete;

  void array(size_t n) { check(msgpack_pack_array(&packer_, n)); }
  void str(const char* s) {
    const size_t n = std::strlen(s);
    check(msgpack_pack_str(&packer_, n));
    check(msgpack_pack_str_body(&packer_, s, n));
  }
  void nil() { check(msgpack_pack_nil(&packer_)); }
  void u64(uint64_t v) { check(msgpack_pack_uint64(&packer_, v)); }
  void i64(int64_t v) { check(msgpack_pack_int64(&packer_, v)); }
  void f64(double v) { check(msgpack_pack_double(&packer_, v)); }
  void hashes(const std::vector<uint64_t>& hashes) {
    array(hashes.size());
    for (uint64_t h : hashes) u64(h);
  }
  std::string bytes() const { return std::string(buffer_.data, buffer_.size); }

 private:
  static void check(int rc) {
    if (rc != 0) throw Error("kv events: msgpack could not grow its buffer");
  }
  msgpack_sbuffer buffer_;
  msgpack_packer packer_;
};

void pack(Packer& p, const BlockStored& e) {
  p.array(8);
  p.str("BlockStored");
  p.hashes(e.block_hashes);
  if (e.parent_block_hash)
    p.u64(*e.parent_block_hash);
  else
    p.nil();
  p.array(e.token_ids.size());
  for (int32_t t : e.token_ids) p.i64(t);
  p.i64(e.block_size);
  p.nil();  // lora_id
  p.str(kMedium);
  p.nil();  // lora_name
}

void pack(Packer& p, const BlockRemoved& e) {
  p.array(3);
  p.str("BlockRemoved");
  p.hashes(e.block_hashes);
  p.str(kMedium);
}

void pack(Packer& p, const AllBlocksCleared&) {
  p.array(1);
  p.str("AllBlocksCleared");
}

}  // namespace

std::string encode_kv_event_batch(const KvEventBatch& batch) {
  Packer p;
  p.array(3);
  p.f64(batch.ts);
  p.array(batch.events.size());
  for (const KvCacheEvent& e : batch.events) std::visit([&](const auto& v) { pack(p, v); }, e);
  p.i64(batch.data_parallel_rank);
  return p.bytes();
}

}  // namespace tern::kv_events
