// Encoding and strict decoding of the KV transfer's control frames (see kv_wire.h). All integers
// are little-endian; a frame is exactly as long as its counts say.
#include "tern/disagg/kv_wire.h"

#include <cstring>

#include "tern/core/error.h"

namespace tern::disagg {
namespace {

enum class FrameKind : uint16_t { kRequest = 1, kReply = 2 };

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    for (size_t i = 0; i < sizeof(T); ++i)
      out_.push_back(static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i)));
  }
  void put_bytes(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const char* what) : bytes_(bytes), what_(what) {}
  template <typename T>
  T get() {
    need(sizeof(T), "an integer");
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += sizeof(T);
    return static_cast<T>(v);
  }
  std::string get_string(size_t n, const char* field) {
    need(n, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  // Throws unless `n` more bytes are there, before anything is sized from a count.
  void need(size_t n, const char* field) const {
    if (bytes_.size() - pos_ < n)
      fail(std::string("truncated at ") + field + " (" + std::to_string(n) +
           " bytes needed at offset " + std::to_string(pos_) + ", frame has " +
           std::to_string(bytes_.size()) + ")");
  }
  void finish() const {
    if (pos_ != bytes_.size())
      fail(std::to_string(bytes_.size() - pos_) + " trailing bytes after offset " +
           std::to_string(pos_));
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(std::string("kv transfer ") + what_ + " frame: " + why);
  }
  void header(FrameKind kind) {
    const auto magic = get<uint32_t>();
    if (magic != kWireMagic) fail("bad magic 0x" + hex(magic));
    const auto version = get<uint16_t>();
    if (version != kWireVersion)
      fail("version " + std::to_string(version) + ", this build speaks " +
           std::to_string(kWireVersion));
    const auto k = get<uint16_t>();
    if (k != static_cast<uint16_t>(kind)) fail("frame kind " + std::to_string(k));
  }

 private:
  static std::string hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  const char* what_;
};

void put_header(Writer& w, FrameKind kind) {
  w.put(kWireMagic);
  w.put(kWireVersion);
  w.put(static_cast<uint16_t>(kind));
}

void check_limit(size_t n, size_t limit, const char* field) {
  if (n > limit)
    throw Error(std::string("kv transfer frame: ") + field + " is " + std::to_string(n) +
                ", the limit is " + std::to_string(limit));
}

}  // namespace

std::vector<std::byte> encode_request(const RequestFrame& f) {
  check_limit(f.fingerprint.size(), kMaxFingerprintBytes, "fingerprint length");
  check_limit(f.lease_id.size(), kMaxLeaseIdBytes, "lease id length");
  check_limit(f.block_ids.size(), kMaxBlocksPerPull, "block count");
  Writer w;
  put_header(w, FrameKind::kRequest);
  w.put(f.pull_id);
  w.put(static_cast<uint16_t>(f.fingerprint.size()));
  w.put_bytes(f.fingerprint);
  w.put(static_cast<uint16_t>(f.lease_id.size()));
  w.put_bytes(f.lease_id);
  w.put(static_cast<uint32_t>(f.block_ids.size()));
  for (int32_t id : f.block_ids) w.put(id);
  return w.take();
}

RequestFrame decode_request(std::span<const std::byte> bytes) {
  Reader r(bytes, "request");
  if (bytes.size() > kMaxRequestBytes)
    r.fail(std::to_string(bytes.size()) + " bytes, the limit is " +
           std::to_string(kMaxRequestBytes));
  r.header(FrameKind::kRequest);
  RequestFrame f;
  f.pull_id = r.get<uint64_t>();
  const auto fp_len = r.get<uint16_t>();
  if (fp_len > kMaxFingerprintBytes) r.fail("fingerprint of " + std::to_string(fp_len) + " bytes");
  f.fingerprint = r.get_string(fp_len, "fingerprint");
  const auto lease_len = r.get<uint16_t>();
  if (lease_len > kMaxLeaseIdBytes) r.fail("lease id of " + std::to_string(lease_len) + " bytes");
  f.lease_id = r.get_string(lease_len, "lease id");
  const auto n = r.get<uint32_t>();
  if (n > kMaxBlocksPerPull) r.fail(std::to_string(n) + " block ids");
  r.need(4 * size_t{n}, "block ids");
  f.block_ids.resize(n);
  for (auto& id : f.block_ids) id = r.get<int32_t>();
  r.finish();
  return f;
}

std::vector<std::byte> encode_reply(const ReplyFrame& f) {
  Writer w;
  put_header(w, FrameKind::kReply);
  w.put(f.pull_id);
  w.put(static_cast<uint8_t>(f.status));
  if (f.status != ReplyStatus::kOk) {
    // An error text is cut rather than refused: the consumer must still learn why.
    const std::string m = f.message.substr(0, kMaxErrorBytes);
    w.put(static_cast<uint16_t>(m.size()));
    w.put_bytes(m);
    return w.take();
  }
  check_limit(f.layouts.size(), kMaxLayouts, "layout count");
  check_limit(f.block_layout.size(), kMaxBlocksPerPull, "block count");
  w.put(static_cast<uint16_t>(f.layouts.size()));
  for (const auto& layout : f.layouts) {
    check_limit(layout.size(), kMaxRangesPerBlock, "ranges per block");
    w.put(static_cast<uint32_t>(layout.size()));
    for (uint64_t size : layout) w.put(size);
  }
  w.put(static_cast<uint32_t>(f.block_layout.size()));
  for (uint16_t k : f.block_layout) {
    if (k >= f.layouts.size()) throw Error("kv transfer reply frame: layout index out of range");
    if (f.layouts.size() > 1) w.put(k);
  }
  return w.take();
}

ReplyFrame decode_reply(std::span<const std::byte> bytes) {
  Reader r(bytes, "reply");
  r.header(FrameKind::kReply);
  ReplyFrame f;
  f.pull_id = r.get<uint64_t>();
  const auto status = r.get<uint8_t>();
  if (status > static_cast<uint8_t>(ReplyStatus::kBadRequest))
    r.fail("status " + std::to_string(status));
  f.status = static_cast<ReplyStatus>(status);
  if (f.status != ReplyStatus::kOk) {
    const auto len = r.get<uint16_t>();
    if (len > kMaxErrorBytes) r.fail("error text of " + std::to_string(len) + " bytes");
    f.message = r.get_string(len, "error text");
    r.finish();
    return f;
  }
  const auto num_layouts = r.get<uint16_t>();
  if (num_layouts > kMaxLayouts) r.fail(std::to_string(num_layouts) + " layouts");
  f.layouts.resize(num_layouts);
  for (auto& layout : f.layouts) {
    const auto n = r.get<uint32_t>();
    if (n > kMaxRangesPerBlock) r.fail(std::to_string(n) + " ranges in a block");
    r.need(8 * size_t{n}, "range sizes");
    layout.resize(n);
    for (auto& size : layout) size = r.get<uint64_t>();
  }
  const auto num_blocks = r.get<uint32_t>();
  if (num_blocks > kMaxBlocksPerPull) r.fail(std::to_string(num_blocks) + " blocks");
  if (num_blocks > 0 && num_layouts == 0) r.fail("blocks without a layout");
  f.block_layout.assign(num_blocks, 0);
  if (num_layouts > 1) {
    r.need(2 * size_t{num_blocks}, "layout indices");
    for (auto& k : f.block_layout) {
      k = r.get<uint16_t>();
      if (k >= num_layouts)
        r.fail("layout index " + std::to_string(k) + " of " + std::to_string(num_layouts));
    }
  }
  r.finish();
  return f;
}

void encode_block_header(const BlockHeader& h, std::byte* out) {
  Writer w;
  w.put(kWireMagic);
  w.put(h.pull_id);
  w.put(h.block_index);
  const auto bytes = w.take();
  std::memcpy(out, bytes.data(), kBlockHeaderBytes);
}

BlockHeader decode_block_header(std::span<const std::byte> bytes) {
  Reader r(bytes, "block header");
  const auto magic = r.get<uint32_t>();
  if (magic != kWireMagic) r.fail("bad magic");
  BlockHeader h;
  h.pull_id = r.get<uint64_t>();
  h.block_index = r.get<uint32_t>();
  r.finish();
  return h;
}

}  // namespace tern::disagg
