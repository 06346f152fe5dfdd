// A corpus of malformed GGUF files, each made from a valid writer output by cutting or patching
// bytes (or, where the writer refuses to produce the shape, by hand). Every one must throw
// tern::Error whose message starts with the file name and names the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/formats/gguf.h"

namespace tern {
namespace {

using Bytes = std::vector<std::byte>;

// ---- building and patching bytes -------------------------------------------------------------

void put_le(Bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}
void put_str(Bytes& out, std::string_view s) {
  put_le(out, s.size(), 8);
  for (char c : s) out.push_back(static_cast<std::byte>(c));
}
void patch_le(Bytes& b, size_t at, uint64_t v, size_t n) {
  ASSERT_LE(at + n, b.size());
  for (size_t i = 0; i < n; ++i) b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}
uint64_t read_le(const Bytes& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}

// Where the length-prefixed string `s` (a key or tensor name) starts in `b`: the position of its
// u64 length. Unique by construction of the base files.
size_t find_string(const Bytes& b, std::string_view s) {
  Bytes needle;
  put_str(needle, s);
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << "not in the base file: " << s;
  return static_cast<size_t>(it - b.begin());
}
// The byte after the key (its u32 value type), and after the type (the value).
size_t type_of(const Bytes& b, std::string_view key) {
  return find_string(b, key) + 8 + key.size();
}
size_t value_of(const Bytes& b, std::string_view key) { return type_of(b, key) + 4; }

// Fields of the tensor info of `name` (the writer writes 2-dimensional infos below).
struct InfoAt {
  size_t n_dims, ne0, ne1, type, offset;
};
InfoAt info_of(const Bytes& b, std::string_view name, size_t n_dims) {
  size_t at = find_string(b, name) + 8 + name.size();
  return {at, at + 4, at + 12, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

// A hand-made file: header, then whatever `body` writes, with the given counts.
Bytes raw(uint64_t tensor_count, uint64_t kv_count, const std::function<void(Bytes&)>& body) {
  Bytes b;
  for (char c : std::string("GGUF")) b.push_back(static_cast<std::byte>(c));
  put_le(b, 3, 4);
  put_le(b, tensor_count, 8);
  put_le(b, kv_count, 8);
  body(b);
  return b;
}

// The valid base: keys of each kind, three tensors (F32, Q8_0, F16), alignment 32.
Bytes base_file(std::optional<uint32_t> alignment = std::nullopt) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  if (alignment) w.set("general.alignment", GgufValue::u32(*alignment));
  w.set("test.key_one", GgufValue::u32(1));
  w.set("test.key_two", GgufValue::u32(2));
  w.set("test.flag", GgufValue::boolean(true));
  w.set("test.bytes", GgufValue::array(GgufType::UINT8, {GgufValue::u8(1), GgufValue::u8(2)}));
  w.set("test.words", GgufValue::string_array({"alpha", "beta"}));
  std::vector<std::byte> a(4 * 8 * 4, std::byte{1}), b(2 * 34, std::byte{2}),
      c(16 * 2, std::byte{3});
  w.add_tensor("weight_a", DType::F32, {4, 8}, a);
  w.add_tensor("weight_b", DType::Q8_0, {2, 32}, b);
  w.add_tensor("weight_c", DType::F16, {2, 8}, c);
  return w.to_bytes();
}

// ---- checking ---------------------------------------------------------------------------------

// Parses `bytes` as `name`; the parse must throw tern::Error, starting with the name and
// matching `phrase` (a regular expression).
void expect_rejected(const std::string& name, Bytes bytes, const std::string& phrase) {
  SCOPED_TRACE(name);
  auto file = std::make_shared<const MappedFile>(name, std::move(bytes));
  try {
    GgufFile f = GgufFile::parse(file);
    ADD_FAILURE() << name << ": parsed without an error; expected /" << phrase << "/";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(name + ": ", 0), 0u) << "message does not start with the name: " << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(phrase)))
        << "message: " << msg << "\nexpected: /" << phrase << "/";
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": threw a non-tern exception: " << e.what();
  }
}

TEST(GgufMalformed, BaseFilesAreValid) {
  for (auto alignment : {std::optional<uint32_t>{}, std::optional<uint32_t>{64}}) {
    Bytes b = base_file(alignment);
    GgufFile f = GgufFile::parse(std::make_shared<const MappedFile>("base.gguf", b));
    EXPECT_EQ(f.tensors().size(), 3u);
    EXPECT_EQ(f.find_tensor("weight_b")->dtype, DType::Q8_0);
  }
}

// Every cut through the header, metadata and tensor infos, and cuts through the data.
TEST(GgufMalformed, TruncatedAnywhere) {
  Bytes b = base_file();
  GgufFile f = GgufFile::parse(std::make_shared<const MappedFile>("base.gguf", b));
  const std::string phrase = "truncated|past the end of the file|cannot fit";
  for (size_t n = 0; n < f.data_offset(); ++n)
    expect_rejected("cut" + std::to_string(n) + ".gguf", Bytes(b.begin(), b.begin() + n), phrase);
  // Cuts into the data: the first byte, inside each tensor, and its last byte.
  std::vector<size_t> cuts = {f.data_offset(), f.data_offset() + 1};
  for (const TensorInfo& t : f.tensors()) {
    uint64_t start = f.data_offset() + t.offset;
    cuts.push_back(start + t.nbytes / 2);
    cuts.push_back(start + t.nbytes - 1);
  }
  for (size_t n : cuts)
    expect_rejected(
        "cut" + std::to_string(n) + ".gguf", Bytes(b.begin(), b.begin() + n),
        "data ends at byte [0-9]+, past the end of the file \\(" + std::to_string(n) + "\\)");
}

TEST(GgufMalformed, TruncationMessageNamesTheTensor) {
  Bytes b = base_file();
  GgufFile f = GgufFile::parse(std::make_shared<const MappedFile>("base.gguf", b));
  const TensorInfo* c = f.find_tensor("weight_c");
  size_t end = f.data_offset() + c->offset + c->nbytes;
  b.resize(end - 10);
  expect_rejected("model.gguf", b,
                  "^model.gguf: tensor 'weight_c': data ends at byte " + std::to_string(end) +
                      ", past the end of the file \\(" + std::to_string(end - 10) + "\\)$");
}

TEST(GgufMalformed, Header) {
  Bytes b = base_file();
  {
    Bytes x = b;
    x[3] = std::byte{'X'};
    expect_rejected("magic.gguf", x, "not a GGUF file: magic is \"GGUX\"");
  }
  expect_rejected("empty.gguf", {}, "truncated: magic at byte 0");
  {
    Bytes x = b;
    patch_le(x, 4, 1, 4);
    expect_rejected("v1.gguf", x, "GGUF version 1 is not supported");
  }
  {
    Bytes x = b;
    patch_le(x, 4, 99, 4);
    expect_rejected("v99.gguf", x, "unsupported GGUF version 99");
  }
  {
    Bytes x = b;
    patch_le(x, 4, 0x03000000, 4);
    expect_rejected("bigendian.gguf", x, "big-endian");
  }
  {
    Bytes x = b;
    patch_le(x, 8, uint64_t{1} << 62, 8);
    expect_rejected("tensor_count.gguf", x, "tensor_count 4611686018427387904 cannot fit");
  }
  {
    Bytes x = b;
    patch_le(x, 16, ~uint64_t{0}, 8);
    expect_rejected("kv_count.gguf", x, "kv_count 18446744073709551615 cannot fit");
  }
  {
    // Counts that each fit alone but not together, and counts that fit the header check but
    // not what the metadata leaves.
    Bytes x = b;
    uint64_t left = x.size() - 24;
    patch_le(x, 8, left / 32, 8);
    expect_rejected("both_counts.gguf", x, "cannot fit");
    Bytes y = b;
    patch_le(y, 8, read_le(y, 8, 8) + 10, 8);
    expect_rejected("more_tensors.gguf", y, "empty tensor name|truncated|cannot fit");
  }
}

TEST(GgufMalformed, Metadata) {
  Bytes b = base_file();
  {
    Bytes x = b;
    patch_le(x, find_string(x, "general.architecture"), 1000000, 8);
    expect_rejected("keylen.gguf", x,
                    "key at byte 24 has length 1000000, past the end of the file");
  }
  {
    Bytes x = b;
    patch_le(x, value_of(x, "general.architecture"), uint64_t{1} << 40, 8);
    expect_rejected("strlen.gguf", x,
                    "key 'general.architecture': string value at byte [0-9]+ has length "
                    "1099511627776, past the end of the file");
  }
  {
    Bytes x = b;
    patch_le(x, value_of(x, "test.bytes") + 4, uint64_t{1} << 60, 8);
    expect_rejected("arraycount.gguf", x,
                    "key 'test.bytes': array count 1152921504606846976 at byte [0-9]+ cannot fit");
  }
  {
    Bytes x = b;  // 2^60 strings: each needs 8 bytes, so 2^63 bytes
    patch_le(x, value_of(x, "test.words") + 4, uint64_t{1} << 60, 8);
    expect_rejected("arraycount_str.gguf", x, "array count 1152921504606846976 .*string items");
  }
  {
    Bytes x = b;
    patch_le(x, value_of(x, "test.words"), 77, 4);
    expect_rejected("elemtype.gguf", x, "key 'test.words': unknown array element type 77");
  }
  {
    Bytes x = b;
    patch_le(x, type_of(x, "test.key_one"), 13, 4);
    expect_rejected("valuetype.gguf", x, "key 'test.key_one': unknown value type 13");
  }
  {
    Bytes x = b;
    patch_le(x, value_of(x, "test.flag"), 2, 1);
    expect_rejected("bool.gguf", x, "key 'test.flag': bool value at byte [0-9]+ is 2, not 0 or 1");
  }
  {
    Bytes x = b;
    x[find_string(x, "test.key_one") + 8 + 5] = std::byte{0xFF};
    expect_rejected("badutf8key.gguf", x,
                    "key \"test\\.\\\\xffey_one\" at byte [0-9]+ is not valid UTF-8");
  }
  {
    Bytes x = b;  // an overlong encoding of '/'
    size_t at = find_string(x, "test.key_one") + 8 + 4;
    x[at] = std::byte{0xC0};
    x[at + 1] = std::byte{0xAF};
    expect_rejected("overlong.gguf", x, "is not valid UTF-8");
  }
  {
    Bytes x = b;
    size_t at = find_string(x, "test.key_two") + 8;
    std::memcpy(&x[at], "test.key_one", 12);
    expect_rejected("dupkey.gguf", x, "key 'test.key_one': duplicate key");
  }
  {
    Bytes x = raw(0, 1, [](Bytes& o) {
      put_str(o, "");
      put_le(o, 4, 4);
      put_le(o, 1, 4);
    });
    expect_rejected("emptykey.gguf", x, "empty key");
  }
  {
    // 1000 nested arrays, each holding the next.
    Bytes x = raw(0, 1, [](Bytes& o) {
      put_str(o, "deep");
      put_le(o, 9, 4);
      for (int i = 0; i < 1000; ++i) {
        put_le(o, 9, 4);
        put_le(o, 1, 8);
      }
    });
    expect_rejected("deep.gguf", x, "key 'deep': arrays nested more than 8 deep");
  }
  {
    // 9 deep is one too many; 8 deep parses.
    auto nest = [](int depth) {
      return raw(0, 1, [depth](Bytes& o) {
        put_str(o, "deep");
        put_le(o, 9, 4);
        for (int i = 0; i < depth - 1; ++i) {
          put_le(o, 9, 4);
          put_le(o, 1, 8);
        }
        put_le(o, 0, 4);
        put_le(o, 0, 8);
      });
    };
    expect_rejected("deep9.gguf", nest(9), "nested more than 8 deep");
    GgufFile f = GgufFile::parse(std::make_shared<const MappedFile>("deep8.gguf", nest(8)));
    EXPECT_EQ(f.find("deep")->to_display(), "[[[[[[[[]]]]]]]]");
  }
}

TEST(GgufMalformed, TooManyArrayItems) {
  // A one-item array, then one of 2^24 items that fits the file (so only the item limit can
  // stop it, before anything is allocated).
  Bytes x = raw(0, 2, [&](Bytes& o) {
    put_str(o, "first");
    put_le(o, 9, 4);
    put_le(o, 0, 4);
    put_le(o, 1, 8);
    put_le(o, 7, 1);
    put_str(o, "second");
    put_le(o, 9, 4);
    put_le(o, 0, 4);
    put_le(o, uint64_t{1} << 24, 8);
    o.resize(o.size() + (uint64_t{1} << 24));
  });
  expect_rejected("items.gguf", x,
                  "key 'second': array count 16777216 at byte [0-9]+ takes the metadata past "
                  "16777216 array items");
}

TEST(GgufMalformed, Alignment) {
  Bytes b = base_file(64);
  {
    Bytes x = b;
    patch_le(x, value_of(x, "general.alignment"), 0, 4);
    expect_rejected("align0.gguf", x, "key 'general.alignment': general.alignment is 0");
  }
  {
    Bytes x = b;
    patch_le(x, value_of(x, "general.alignment"), 3, 4);
    expect_rejected("align3.gguf", x, "general.alignment 3 is not a power of two");
  }
  {
    Bytes x = b;  // a valid alignment, but the offsets were laid out for 64
    patch_le(x, value_of(x, "general.alignment"), 256, 4);
    expect_rejected("align256.gguf", x,
                    "tensor 'weight_b': offset 128 .*is not a multiple of the alignment 256");
  }
  {
    Bytes x = raw(0, 1, [](Bytes& o) {
      put_str(o, "general.alignment");
      put_le(o, 8, 4);
      put_str(o, "64");
    });
    expect_rejected("alignstr.gguf", x, "general.alignment must be a uint32, not a string");
  }
  {
    Bytes x = raw(0, 1, [](Bytes& o) {
      put_str(o, "general.alignment");
      put_le(o, 10, 4);
      put_le(o, 64, 8);
    });
    expect_rejected("alignu64.gguf", x, "general.alignment must be a uint32, not a uint64");
  }
}

TEST(GgufMalformed, TensorInfos) {
  Bytes b = base_file();
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_a", 2).n_dims, 5, 4);
    expect_rejected("ndims5.gguf", x, "tensor 'weight_a': n_dims is 5; ggml tensors have 1 to 4");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_a", 2).n_dims, 0, 4);
    expect_rejected("ndims0.gguf", x, "n_dims is 0");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_a", 2).ne0, 0, 8);
    expect_rejected("ne0.gguf", x, "tensor 'weight_a': ne\\[0\\] is 0");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_a", 2).ne1, ~uint64_t{0}, 8);
    expect_rejected("neneg.gguf", x, "ne\\[1\\] is -1");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_a", 2).ne0, uint64_t{1} << 40, 8);
    patch_le(x, info_of(x, "weight_a", 2).ne1, uint64_t{1} << 40, 8);
    expect_rejected("overflow.gguf", x, "element count overflows");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_b", 2).type, 34, 4);
    expect_rejected("tq1.gguf", x, "tensor 'weight_b': ggml type TQ1_0 \\(34\\) is not supported");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_b", 2).type, 4, 4);  // Q4_2: removed from ggml long ago
    expect_rejected("q4_2.gguf", x, "Q4_2 \\(4\\) is not supported");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_b", 2).type, 200, 4);
    expect_rejected("type200.gguf", x, "unknown ggml type 200");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_b", 2).ne0, 16, 8);
    expect_rejected("block.gguf", x,
                    "row length 16 \\(ne\\[0\\]\\) is not a multiple of the Q8_0 block size 32");
  }
  {
    Bytes x = b;
    size_t at = info_of(x, "weight_b", 2).offset;
    patch_le(x, at, read_le(x, at, 8) + 1, 8);
    expect_rejected("misaligned.gguf", x,
                    "tensor 'weight_b': offset [0-9]+ .*is not a multiple of the alignment 32");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_c", 2).offset, 1 << 20, 8);
    expect_rejected("offset_past.gguf", x,
                    "tensor 'weight_c': data offset 1048576 is past the end of the file");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_c", 2).offset, uint64_t{1} << 63, 8);
    expect_rejected("offset_huge.gguf", x, "past the end of the file");
  }
  {
    Bytes x = b;  // the last tensor's data runs into the file's end
    size_t at = info_of(x, "weight_c", 2).offset;
    patch_le(x, at, read_le(x, at, 8) + 32, 8);
    expect_rejected("offset_end.gguf", x,
                    "tensor 'weight_c': data ends at byte [0-9]+, past the end");
  }
  {
    Bytes x = b;
    patch_le(x, info_of(x, "weight_b", 2).offset, 0, 8);
    expect_rejected("overlap.gguf", x, "tensors 'weight_(a|b)' .* and 'weight_(a|b)' .* overlap");
  }
  {
    Bytes x = b;  // weight_c starting inside weight_b
    size_t b_off = read_le(x, info_of(x, "weight_b", 2).offset, 8);
    patch_le(x, info_of(x, "weight_c", 2).offset, b_off + 32, 8);
    expect_rejected("overlap2.gguf", x, "'weight_b' .* and 'weight_c' .* overlap");
  }
  {
    Bytes x = b;
    x[find_string(x, "weight_c") + 8 + 2] = std::byte{0xE0};  // a lone lead byte
    expect_rejected("badutf8name.gguf", x,
                    "tensor name \"we\\\\xe0ght_c\" at byte [0-9]+ is not valid UTF-8");
  }
  {
    Bytes x = b;
    x[find_string(x, "weight_c") + 8 + 7] = std::byte{'a'};
    expect_rejected("dupname.gguf", x, "tensor 'weight_a': duplicate tensor name");
  }
  {
    Bytes x = b;
    patch_le(x, find_string(x, "weight_a"), 1 << 30, 8);
    expect_rejected(
        "namelen.gguf", x,
        "tensor info 0: tensor name at byte [0-9]+ has length 1073741824, past the end");
  }
}

}  // namespace
}  // namespace tern
