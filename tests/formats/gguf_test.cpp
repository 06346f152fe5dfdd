// GGUF reader against the fixture files (values from their SOURCE.md), writer → reader round
// trips of every value type and tensor type, typed getters and display.
#include "tern/formats/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>

#include "fixtures.h"
#include "tern/core/error.h"

namespace tern {
namespace {

std::shared_ptr<const MappedFile> in_memory(const std::string& name, std::vector<std::byte> bytes) {
  return std::make_shared<const MappedFile>(name, std::move(bytes));
}

std::span<const std::byte> bytes_of(const TensorInfo& t) { return {t.data, t.nbytes}; }

bool same_bytes(const TensorInfo& a, const TensorInfo& b) {
  return a.nbytes == b.nbytes && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

void expect_tensor(const GgufFile& f, const std::string& name, DType dtype,
                   std::vector<int64_t> shape) {
  const TensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->dtype, dtype) << name;
  EXPECT_EQ(t->shape, shape) << name;
  EXPECT_EQ(t->nbytes, *dtype_bytes(dtype, t->nelements())) << name;
  EXPECT_EQ(t->offset % f.alignment(), 0u) << name;
  EXPECT_EQ(t->data, f.mapped_file()->data() + f.data_offset() + t->offset) << name;
}

// Every value can be displayed; the getters agree with the stored types.
void touch_all(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata()) {
    EXPECT_FALSE(value.to_display().empty()) << key;
    EXPECT_EQ(f.find(key), &value);
  }
}

TEST(GgufFixtures, Stories260K) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  GgufFile f = GgufFile::open(testing::fixture("stories260K/stories260K.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(f.file_size(), 1185376u);
  touch_all(f);

  EXPECT_EQ(f.metadata().front().first, "tokenizer.ggml.tokens");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.find("tokenizer.ggml.seperator_token_id")->type, GgufType::UINT32);
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 0xFFFFFFFF);
  EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id"), 0xFFFFFFFF);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f.find("general.alignment"), nullptr);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), std::nullopt);
  EXPECT_EQ(f.get_int("general.file_type"), std::nullopt);

  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 512u);
  auto types = f.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types);
  ASSERT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[2], 3);
  EXPECT_EQ((*types)[3], 6);
  EXPECT_EQ((*types)[258], 6);
  EXPECT_EQ((*types)[259], 1);

  // SOURCE.md gives ggml's ne ([ne0, ne1]); tern's shapes are outermost first.
  expect_tensor(f, "token_embd.weight", DType::F32, {512, 64});
  expect_tensor(f, "output_norm.weight", DType::F32, {64});
  expect_tensor(f, "output.weight", DType::F32, {512, 64});
  for (int i = 0; i < 5; ++i) {
    std::string p = "blk." + std::to_string(i) + ".";
    expect_tensor(f, p + "attn_q.weight", DType::F32, {64, 64});
    expect_tensor(f, p + "attn_k.weight", DType::F32, {32, 64});
    expect_tensor(f, p + "attn_v.weight", DType::F32, {32, 64});
    expect_tensor(f, p + "attn_output.weight", DType::F32, {64, 64});
    expect_tensor(f, p + "attn_norm.weight", DType::F32, {64});
    expect_tensor(f, p + "ffn_gate.weight", DType::F32, {172, 64});
    expect_tensor(f, p + "ffn_down.weight", DType::F32, {64, 172});
    expect_tensor(f, p + "ffn_up.weight", DType::F32, {172, 64});
    expect_tensor(f, p + "ffn_norm.weight", DType::F32, {64});
  }
  EXPECT_EQ(f.tensors().front().name, "token_embd.weight");
  EXPECT_EQ(f.tensors().front().offset, 0u);
  EXPECT_EQ(f.find_tensor("blk.4.ffn_norm.weight")->offset, 1170944u);
  EXPECT_EQ(f.find_tensor("no.such.tensor"), nullptr);
  EXPECT_TRUE(same_bytes(*f.find_tensor("output.weight"), *f.find_tensor("token_embd.weight")));
}

TEST(GgufFixtures, Llama2TinyRandom) {
  TERN_REQUIRE_FIXTURE("llama-2-tiny-random/llama-2-tiny-random.gguf");
  GgufFile f = GgufFile::open(testing::fixture("llama-2-tiny-random/llama-2-tiny-random.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 724416u);
  touch_all(f);

  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "LLaMA v2");
  EXPECT_EQ(f.get_int("llama.context_length"), 4096);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 8);
  EXPECT_EQ(f.get_int("llama.block_count"), 1);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 32);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 2);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 32000u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id"), 0);

  expect_tensor(f, "token_embd.weight", DType::F16, {32000, 8});
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output"})
    expect_tensor(f, std::string("blk.0.") + n + ".weight", DType::F16, {8, 8});
  expect_tensor(f, "blk.0.ffn_gate.weight", DType::F16, {32, 8});
  expect_tensor(f, "blk.0.ffn_up.weight", DType::F16, {32, 8});
  expect_tensor(f, "blk.0.ffn_down.weight", DType::F16, {8, 32});
  expect_tensor(f, "blk.0.attn_norm.weight", DType::F32, {8});
  expect_tensor(f, "blk.0.ffn_norm.weight", DType::F32, {8});
  expect_tensor(f, "output_norm.weight", DType::F32, {8});
  expect_tensor(f, "output.weight", DType::F16, {32000, 8});
  EXPECT_FALSE(same_bytes(*f.find_tensor("output.weight"), *f.find_tensor("token_embd.weight")));
}

TEST(GgufFixtures, VocabLlamaSpm) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  GgufFile f = GgufFile::open(testing::fixture("llama.cpp-vocab/ggml-vocab-llama-spm.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().size(), 22u);
  touch_all(f);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "llama-spm");
  EXPECT_EQ(f.get_int("llama.block_count"), 32);
  EXPECT_EQ(f.get_int("llama.context_length"), 4096);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 4096);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 11008);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 32);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 32);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 32000);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 128);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "default");
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 32000u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id"), 0);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(f.get_bool("tokenizer.ggml.add_eos_token"), false);
  // llama.cpp writes vocab-only files without padding after the metadata.
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_LT(f.data_offset() - f.file_size(), 32u);
}

TEST(GgufFixtures, VocabGpt2) {
  TERN_REQUIRE_FIXTURE("llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  GgufFile f = GgufFile::open(testing::fixture("llama.cpp-vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().size(), 16u);
  touch_all(f);
  EXPECT_EQ(f.get_string("general.architecture"), "gpt2");
  EXPECT_EQ(f.get_string("general.name"), "gpt-2");
  EXPECT_EQ(f.get_int("gpt2.block_count"), 12);
  EXPECT_EQ(f.get_int("gpt2.context_length"), 1024);
  EXPECT_EQ(f.get_int("gpt2.embedding_length"), 768);
  EXPECT_EQ(f.get_int("gpt2.feed_forward_length"), 3072);
  EXPECT_EQ(f.get_int("gpt2.attention.head_count"), 12);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("gpt2.attention.layer_norm_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_int("general.file_type"), 1);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")->size(), 50257u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")->size(), 50257u);
  auto merges = f.get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges);
  EXPECT_EQ(merges->size(), 50000u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 50256);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 50256);
}

// ---------------------------------------------------------------------------------------------
// Round trips

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  if (const GgufArray* x = a.as_array()) {
    const GgufArray* y = b.as_array();
    if (y == nullptr || x->elem_type != y->elem_type || x->items.size() != y->items.size())
      return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!same_value(x->items[i], y->items[i])) return false;
    return true;
  }
  return a.value == b.value;
}

GgufValue nested(int depth) {
  if (depth == 0) return GgufValue::i32_array({1, -2, 3});
  return GgufValue::array(GgufType::ARRAY, {nested(depth - 1), nested(depth - 1)});
}

std::vector<std::pair<std::string, GgufValue>> every_value() {
  using V = GgufValue;
  std::vector<std::pair<std::string, GgufValue>> kv = {
      {"scalar.u8", V::u8(200)},
      {"scalar.i8", V::i8(-100)},
      {"scalar.u16", V::u16(60000)},
      {"scalar.i16", V::i16(-30000)},
      {"scalar.u32", V::u32(4000000000u)},
      {"scalar.i32", V::i32(-2000000000)},
      {"scalar.u64", V::u64((uint64_t{1} << 63) + 5)},
      {"scalar.i64", V::i64(-(int64_t{1} << 62))},
      {"scalar.f32", V::f32(3.25f)},
      {"scalar.f32_tiny", V::f32(1e-5f)},
      {"scalar.f64", V::f64(-1e300)},
      {"scalar.true", V::boolean(true)},
      {"scalar.false", V::boolean(false)},
      {"scalar.string", V::string("h\xC3\xA9llo, \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\xA6\x99")},
      {"scalar.empty_string", V::string("")},
      {"scalar.raw_bytes", V::string(std::string("\xFF\xFE\x00 x", 5))},
      {"ключ.utf8", V::string("ключ")},
      {"array.u8", V::array(GgufType::UINT8, {V::u8(0), V::u8(255)})},
      {"array.i8", V::array(GgufType::INT8, {V::i8(-128), V::i8(127)})},
      {"array.u16", V::array(GgufType::UINT16, {V::u16(1), V::u16(65535)})},
      {"array.i16", V::array(GgufType::INT16, {V::i16(-32768), V::i16(32767)})},
      {"array.u32", V::array(GgufType::UINT32, {V::u32(0xFFFFFFFFu)})},
      {"array.i32", V::i32_array({-1, 0, 1, std::numeric_limits<int32_t>::min()})},
      {"array.u64", V::array(GgufType::UINT64, {V::u64(~uint64_t{0}), V::u64(7)})},
      {"array.i64", V::array(GgufType::INT64, {V::i64(std::numeric_limits<int64_t>::min())})},
      {"array.f32", V::f32_array({0.5f, -1.25f, 1e30f})},
      {"array.f64", V::array(GgufType::FLOAT64, {V::f64(0.1), V::f64(-0.0)})},
      {"array.bool", V::array(GgufType::BOOL, {V::boolean(true), V::boolean(false)})},
      {"array.string", V::string_array({"a", "", "\xE2\x96\x81the", "<0x0A>"})},
      {"array.empty", V::array(GgufType::INT32, {})},
      {"array.empty_strings", V::string_array({})},
      {"array.nested", nested(3)},
      {"array.nested_empty", V::array(GgufType::ARRAY, {V::array(GgufType::STRING, {})})},
  };
  return kv;
}

std::vector<std::byte> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

struct Expected {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

void check_round_trip(uint32_t alignment) {
  std::mt19937 rng(alignment);
  GgufWriter w;
  auto kv = every_value();
  w.set("general.architecture", GgufValue::string("llama"));
  if (alignment != 32) w.set("general.alignment", GgufValue::u32(alignment));
  for (const auto& [k, v] : kv) w.set(k, v);

  std::vector<Expected> expected;
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    const DTypeTraits& traits = dtype_traits(dtype);
    if (traits.ggml_type < 0) continue;
    int64_t row = traits.block_elems == 1 ? 5 : traits.block_elems;
    std::vector<std::vector<int64_t>> shapes = {{row}, {3, row}, {2, 3, row * 2}, {1, 2, 1, row}};
    for (size_t s = 0; s < shapes.size(); ++s) {
      Expected e{std::string(traits.name) + ".shape" + std::to_string(s), dtype, shapes[s], {}};
      uint64_t n = 1;
      for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
      e.data = random_bytes(*dtype_bytes(dtype, n), rng);
      w.add_tensor(e.name, e.dtype, e.shape, e.data);
      expected.push_back(std::move(e));
    }
  }

  std::vector<std::byte> bytes = w.to_bytes();
  EXPECT_EQ(bytes.size() % alignment, 0u);
  GgufFile f = GgufFile::parse(in_memory("roundtrip.gguf", bytes));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);

  // Metadata: insertion order, exact types and values.
  size_t extra = alignment != 32 ? 2 : 1;
  ASSERT_EQ(f.metadata().size(), kv.size() + extra);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  for (size_t i = 0; i < kv.size(); ++i) {
    const auto& [key, value] = f.metadata()[i + extra];
    EXPECT_EQ(key, kv[i].first);
    EXPECT_TRUE(same_value(value, kv[i].second))
        << key << ": " << value.to_display() << " vs " << kv[i].second.to_display();
  }

  ASSERT_EQ(f.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    const Expected& e = expected[i];
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.dtype, e.dtype) << e.name;
    EXPECT_EQ(t.shape, e.shape) << e.name;
    EXPECT_EQ(t.offset % alignment, 0u) << e.name;
    EXPECT_EQ(
        reinterpret_cast<uintptr_t>(t.data) - reinterpret_cast<uintptr_t>(f.mapped_file()->data()),
        f.data_offset() + t.offset);
    ASSERT_EQ(t.nbytes, e.data.size()) << e.name;
    EXPECT_EQ(std::memcmp(t.data, e.data.data(), t.nbytes), 0) << e.name;
    EXPECT_EQ(f.find_tensor(e.name), &t);
  }

  // Writing what was read gives the same bytes.
  GgufWriter again;
  for (const auto& [k, v] : f.metadata()) again.set(k, v);
  for (const auto& t : f.tensors()) again.add_tensor(t.name, t.dtype, t.shape, bytes_of(t));
  EXPECT_EQ(again.to_bytes(), bytes);
}

TEST(GgufRoundTrip, EveryTypeDefaultAlignment) { check_round_trip(32); }
TEST(GgufRoundTrip, EveryTypeAlignment64) { check_round_trip(64); }
TEST(GgufRoundTrip, EveryTypeAlignment1) { check_round_trip(1); }

TEST(GgufRoundTrip, Version2ReadsLikeVersion3) {
  GgufWriter w;
  w.set("general.name", GgufValue::string("v2"));
  std::vector<std::byte> data(8);
  w.add_tensor("t", DType::F16, {4}, data);
  auto bytes = w.to_bytes();
  bytes[4] = std::byte{2};  // the u32 version; v2 and v3 differ only in v3's big-endian variant
  GgufFile f = GgufFile::parse(in_memory("v2.gguf", bytes));
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("general.name"), "v2");
  EXPECT_EQ(f.find_tensor("t")->shape, std::vector<int64_t>{4});
}

TEST(GgufRoundTrip, EmptyFile) {
  GgufWriter w;
  auto bytes = w.to_bytes();
  EXPECT_EQ(bytes.size(), 32u);  // 24-byte header padded to 32
  GgufFile f = GgufFile::parse(in_memory("empty.gguf", bytes));
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.data_offset(), 32u);
}

TEST(GgufRoundTrip, WriteThroughFile) {
  auto dir =
      std::filesystem::temp_directory_path() / ("tern-gguf-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "model.gguf").string();
  GgufWriter w;
  w.set("general.name", GgufValue::string("first"));
  std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f};
  w.add_tensor("t", DType::F32, {2, 2}, std::as_bytes(std::span(values)));
  w.write(path);
  w.set("general.name", GgufValue::string("second"));  // replaces in place
  w.write(path);                                       // overwrites through a rename
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.metadata().size(), 1u);
  EXPECT_EQ(f.get_string("general.name"), "second");
  EXPECT_EQ(f.find_tensor("t")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::memcmp(f.find_tensor("t")->data, values.data(), 16), 0);
  EXPECT_EQ(std::filesystem::file_size(path), w.to_bytes().size());
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u);  // no temporary left behind
  EXPECT_THROW(w.write((dir / "missing" / "x.gguf").string()), Error);
  std::filesystem::remove_all(dir);
}

void expect_gguf_error(const std::function<void()>& fn, const std::string& phrase) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << phrase << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos)
        << "message: " << e.what() << "\nexpected phrase: " << phrase;
  }
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  std::vector<std::byte> four(4);
  w.add_tensor("a", DType::F32, {1}, four);
  expect_gguf_error([&] { w.add_tensor("a", DType::F32, {1}, four); }, "tensor 'a': added twice");
  expect_gguf_error([&] { w.add_tensor("b", DType::F32, {2}, four); },
                    "data is 4 bytes, but 2 F32");
  expect_gguf_error([&] { w.add_tensor("b", DType::U8, {4}, four); }, "U8 has no ggml type");
  expect_gguf_error([&] { w.add_tensor("b", DType::F32, {}, four); }, "0 dimensions");
  expect_gguf_error([&] { w.add_tensor("b", DType::F32, {1, 1, 1, 1, 1}, four); }, "5 dimensions");
  expect_gguf_error(
      [&] {
        w.add_tensor("b", DType::F32, {0, 1}, four);
      },
      "dimension 0 is not positive");
  expect_gguf_error(
      [&] {
        w.add_tensor("b", DType::Q8_0, {1, 16}, four);
      },
      "row length 16 is not a multiple of the Q8_0 block size 32");
  expect_gguf_error([&] { w.add_tensor("", DType::F32, {1}, four); }, "empty tensor name");
  expect_gguf_error([&] { w.add_tensor(std::string(64, 'n'), DType::F32, {1}, four); },
                    "name is 64 bytes; ggml allows at most 63");
  w.add_tensor(std::string(63, 'n'), DType::F32, {1}, four);
  expect_gguf_error([&] { w.add_tensor("b\xFF", DType::F32, {1}, four); }, "not valid UTF-8");
  expect_gguf_error([&] { w.set("general.alignment", GgufValue::u32(3)); }, "power of two");
  expect_gguf_error([&] { w.set("general.alignment", GgufValue::u32(0)); }, "power of two");
  expect_gguf_error([&] { w.set("general.alignment", GgufValue::u64(64)); }, "must be a uint32");
  expect_gguf_error(
      [&] {
        w.set("k", GgufValue{GgufType::UINT8, uint64_t{300}});
      },
      "key 'k': value 300 does not fit a uint8");
  expect_gguf_error([&] { w.set("k", GgufValue{GgufType::INT8, int64_t{-129}}); }, "does not fit");
  expect_gguf_error(
      [&] {
        w.set("k", GgufValue{GgufType::STRING, uint64_t{1}});
      },
      "a string value holds an unsigned integer");
  expect_gguf_error([&] { w.set("k", GgufValue::array(GgufType::INT32, {GgufValue::u32(1)})); },
                    "array item 0 is a uint32 in an array of int32");
  expect_gguf_error([&] { w.set("k", nested(8)); }, "nested more than 8 deep");
  expect_gguf_error([&] { w.set("", GgufValue::u8(1)); }, "empty metadata key");
  expect_gguf_error([&] { w.set("\xC0\x80", GgufValue::u8(1)); }, "not valid UTF-8");
  w.set("k", nested(7));  // 8 deep is the limit, and allowed
}

// ---------------------------------------------------------------------------------------------
// Getters and display

GgufFile getters_file() {
  GgufWriter w;
  w.set("u8", GgufValue::u8(7));
  w.set("i16", GgufValue::i16(-5));
  w.set("u64.big", GgufValue::u64(~uint64_t{0}));
  w.set("u32", GgufValue::u32(0xFFFFFFFFu));
  w.set("f32", GgufValue::f32(0.5f));
  w.set("f64", GgufValue::f64(2.5));
  w.set("bool", GgufValue::boolean(true));
  w.set("str", GgufValue::string("text"));
  w.set("strs", GgufValue::string_array({"x", "y"}));
  w.set("u8s", GgufValue::array(GgufType::UINT8, {GgufValue::u8(1), GgufValue::u8(2)}));
  w.set("f32s", GgufValue::f32_array({1.5f}));
  w.set("nested", nested(1));
  w.set("empty", GgufValue::array(GgufType::FLOAT32, {}));
  return GgufFile::parse(in_memory("getters.gguf", w.to_bytes()));
}

TEST(GgufGetters, AcceptCompatibleTypes) {
  GgufFile f = getters_file();
  EXPECT_EQ(f.get_int("u8"), 7);
  EXPECT_EQ(f.get_int("i16"), -5);
  EXPECT_EQ(f.get_int("u32"), 0xFFFFFFFFll);
  EXPECT_EQ(f.get_int("missing"), std::nullopt);
  EXPECT_EQ(f.get_float("f32"), 0.5);
  EXPECT_EQ(f.get_float("f64"), 2.5);
  EXPECT_EQ(f.get_float("u8"), 7.0);
  EXPECT_EQ(f.get_bool("bool"), true);
  EXPECT_EQ(f.get_string("str"), "text");
  EXPECT_EQ(f.get_string_array("strs"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(f.get_int_array("u8s"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f.get_float_array("u8s"), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(f.get_float_array("f32s"), (std::vector<float>{1.5f}));
  EXPECT_EQ(f.get_string_array("empty"), std::vector<std::string>{});
  EXPECT_EQ(f.get_int_array("empty"), std::vector<int64_t>{});
}

TEST(GgufGetters, RejectIncompatibleTypesNamingTheKey) {
  GgufFile f = getters_file();
  expect_gguf_error([&] { f.get_string("u8"); }, "getters.gguf: key 'u8' is uint8, not a string");
  expect_gguf_error([&] { f.get_int("str"); }, "key 'str' is string, not an integer");
  expect_gguf_error([&] { f.get_int("f32"); }, "key 'f32' is float32, not an integer");
  expect_gguf_error([&] { f.get_int("u64.big"); },
                    "key 'u64.big' is 18446744073709551615, too large");
  expect_gguf_error([&] { f.get_float("str"); }, "key 'str' is string, not a number");
  expect_gguf_error([&] { f.get_bool("u8"); }, "key 'u8' is uint8, not a bool");
  expect_gguf_error([&] { f.get_string_array("u8s"); },
                    "key 'u8s' is array of uint8, not an array of strings");
  expect_gguf_error([&] { f.get_string_array("str"); }, "key 'str' is string, not an array");
  expect_gguf_error([&] { f.get_int_array("f32s"); },
                    "key 'f32s' is array of float32, not an array of integers");
  expect_gguf_error([&] { f.get_float_array("strs"); },
                    "key 'strs' is array of string, not an array of numbers");
  expect_gguf_error([&] { f.get_int_array("nested"); }, "key 'nested' is array of array");
}

TEST(GgufValue, Display) {
  EXPECT_EQ(GgufValue::u32(0xFFFFFFFFu).to_display(), "4294967295");
  EXPECT_EQ(GgufValue::i8(-3).to_display(), "-3");
  EXPECT_EQ(GgufValue::f32(1e-5f).to_display(), "1e-05");
  EXPECT_EQ(GgufValue::f64(0.1).to_display(), "0.1");
  EXPECT_EQ(GgufValue::boolean(false).to_display(), "false");
  EXPECT_EQ(GgufValue::string("a\"b\\c\nd\x01\xFF\xE4\xB8\x96").to_display(),
            "\"a\\\"b\\\\c\\nd\\x01\\xff\xE4\xB8\x96\"");
  EXPECT_EQ(GgufValue::i32_array({1, 2, 3}).to_display(), "[1, 2, 3]");
  EXPECT_EQ(GgufValue::i32_array({1, 2, 3, 4, 5}).to_display(2), "[1, 2, ... 3 more]");
  EXPECT_EQ(GgufValue::i32_array({1, 2}).to_display(0), "[... 2 more]");
  EXPECT_EQ(GgufValue::string_array({"x"}).to_display(), "[\"x\"]");
  EXPECT_EQ(nested(1).to_display(), "[[1, -2, 3], [1, -2, 3]]");
  EXPECT_EQ(GgufValue::array(GgufType::UINT8, {}).to_display(), "[]");
}

TEST(GgufValue, Accessors) {
  EXPECT_EQ(GgufValue::u64(~uint64_t{0}).as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::u64(5).as_int(), 5);
  EXPECT_EQ(GgufValue::boolean(true).as_int(), 1);
  EXPECT_EQ(GgufValue::string("5").as_int(), std::nullopt);
  EXPECT_EQ(GgufValue::i16(-2).as_float(), -2.0);
  EXPECT_EQ(GgufValue::boolean(true).as_float(), std::nullopt);
  EXPECT_TRUE(GgufValue::u8(1).is_integer());
  EXPECT_FALSE(GgufValue::boolean(true).is_integer());
  EXPECT_TRUE(GgufValue::f64(1).is_float());
  EXPECT_EQ(GgufValue::u8(1).as_string(), nullptr);
  EXPECT_EQ(GgufValue::u8(1).as_array(), nullptr);
  EXPECT_EQ(gguf_type_name(GgufType::FLOAT64), "float64");
  EXPECT_EQ(gguf_type_name(static_cast<GgufType>(13)), "unknown");
}

}  // namespace
}  // namespace tern
