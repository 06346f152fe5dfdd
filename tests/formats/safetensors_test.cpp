#include "tern/formats/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tern/core/error.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::span<const std::byte> as_span(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

std::vector<std::byte> with_header(std::string_view header, std::vector<std::byte> data = {}) {
  std::vector<std::byte> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<std::byte> zeros(size_t n) { return std::vector<std::byte>(n, std::byte{0}); }

SafetensorsFile parse_bytes(const std::string& name, std::vector<std::byte> bytes) {
  return SafetensorsFile::parse(std::make_shared<const MappedFile>(name, std::move(bytes)));
}

// Expects parsing to throw tern::Error mentioning the file name and `phrase`.
void expect_safetensors_rejected(const std::string& name, std::vector<std::byte> bytes,
                                 const std::string& phrase) {
  try {
    parse_bytes(name, std::move(bytes));
    ADD_FAILURE() << name << ": accepted, expected an error containing \"" << phrase << "\"";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind(name + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(phrase), std::string::npos) << "message: " << msg << "\nwanted: " << phrase;
  }
}

void expect_error_contains(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nwanted: " << p;
  }
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::path(::testing::TempDir()) /
            ("tern_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::vector<std::byte> pattern(size_t n, uint8_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((seed + i * 37) & 0xff);
  return v;
}

bool same_bytes(const TensorInfo& t, const std::vector<std::byte>& want) {
  return t.nbytes == want.size() &&
         (want.empty() || std::memcmp(t.data, want.data(), want.size()) == 0);
}

// A small valid file: a F32 [2, 3] and a F16 [4], for the corruption tests.
std::vector<std::byte> small_valid_file() {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.add_tensor("a", DType::F32, {2, 3}, pattern(24, 1));
  w.add_tensor("b", DType::F16, {4}, pattern(8, 2));
  return w.to_bytes();
}

TEST(Safetensors, RoundTripAllDTypes) {
  struct Case {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {"f32", DType::F32, {2, 3}},      {"f16", DType::F16, {5}},
      {"bf16", DType::BF16, {3, 1, 2}}, {"f64", DType::F64, {2}},
      {"i8", DType::I8, {7}},           {"i16", DType::I16, {3}},
      {"i32", DType::I32, {2, 2}},      {"i64", DType::I64, {1}},
      {"u8", DType::U8, {3}},           {"empty", DType::F32, {0, 4}},
      {"scalar", DType::F32, {}},       {"utf8 name é ✓", DType::BF16, {2}},
  };
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("note", "ünïcode");
  std::vector<std::vector<std::byte>> datas;
  for (size_t i = 0; i < cases.size(); ++i) {
    uint64_t n = 1;
    for (int64_t d : cases[i].shape) n *= static_cast<uint64_t>(d);
    datas.push_back(pattern(*dtype_bytes(cases[i].dtype, n), static_cast<uint8_t>(i)));
    w.add_tensor(cases[i].name, cases[i].dtype, cases[i].shape, datas.back());
  }
  EXPECT_EQ(w.num_tensors(), cases.size());

  TempDir dir;
  const std::string path = dir / "round.safetensors";
  w.write(path);
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.data_offset() % 8, 0u) << "header not padded to 8 bytes";
  EXPECT_EQ(f.file_size(), fs::file_size(path));
  ASSERT_EQ(f.tensors().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];  // header order = insertion order
    EXPECT_EQ(t.name, cases[i].name);
    EXPECT_EQ(t.dtype, cases[i].dtype) << t.name;
    EXPECT_EQ(t.shape, cases[i].shape) << t.name;
    EXPECT_TRUE(same_bytes(t, datas[i])) << t.name;
    EXPECT_EQ(f.find_tensor(cases[i].name), &t);
  }
  EXPECT_EQ(f.find_tensor("scalar")->nelements(), 1u);
  EXPECT_EQ(f.find_tensor("scalar")->nbytes, 4u);
  EXPECT_EQ(f.find_tensor("empty")->nbytes, 0u);
  EXPECT_EQ(f.find_tensor("missing"), nullptr);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "ünïcode");

  // to_bytes() is the file, and parsing it in memory gives the same tensors.
  auto bytes = w.to_bytes();
  std::ifstream in(path, std::ios::binary);
  std::vector<char> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), on_disk.size());
  EXPECT_EQ(std::memcmp(bytes.data(), on_disk.data(), bytes.size()), 0);
  auto g = parse_bytes("mem.safetensors", bytes);
  EXPECT_EQ(g.tensors().size(), cases.size());
  EXPECT_EQ(g.tensors()[0].offset, 0u);
}

TEST(Safetensors, EmptyFileAndPaddedHeader) {
  SafetensorsWriter w;
  auto f = parse_bytes("empty.safetensors", w.to_bytes());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());

  // Hand-written header with trailing spaces, offsets out of header order and a zero-size
  // tensor sharing an offset with a real one.
  auto g = parse_bytes("hand.safetensors",
                       with_header(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},)"
                                   R"("y":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                                   R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}}      )",
                                   pattern(6, 9)));
  ASSERT_EQ(g.tensors().size(), 3u);
  EXPECT_EQ(g.find_tensor("x")->offset, 4u);
  EXPECT_EQ(g.find_tensor("x")->data, g.find_tensor("y")->data + 4);
  EXPECT_EQ(g.find_tensor("z")->nbytes, 0u);
}

TEST(Safetensors, WriterRejectsBadTensors) {
  SafetensorsWriter w;
  w.add_tensor("a", DType::F32, {2}, zeros(8));
  expect_error_contains([&] { w.add_tensor("a", DType::F32, {2}, zeros(8)); },
                        {"'a'", "duplicate"});
  expect_error_contains([&] { w.add_tensor("b", DType::F32, {3}, zeros(8)); },
                        {"'b'", "8 bytes", "needs 12"});
  expect_error_contains([&] { w.add_tensor("q", DType::Q4_0, {32}, zeros(18)); },
                        {"'q'", "no dtype for Q4_0"});
  expect_error_contains([&] { w.add_tensor("__metadata__", DType::U8, {1}, zeros(1)); },
                        {"reserved"});
  expect_error_contains([&] { w.add_tensor("n", DType::U8, {-1}, zeros(0)); },
                        {"'n'", "negative dimension"});
  expect_error_contains([&] { w.add_tensor("\xff", DType::U8, {1}, zeros(1)); }, {"UTF-8"});
  expect_error_contains([&] { w.write("/nonexistent-dir/x.safetensors"); },
                        {"/nonexistent-dir/x.safetensors", "cannot create"});
}

TEST(Safetensors, TruncatedAtEveryLength) {
  const auto full = small_valid_file();
  ASSERT_NO_THROW(parse_bytes("full.safetensors", full));
  for (size_t cut = 0; cut < full.size(); ++cut) {
    std::vector<std::byte> part(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expect_safetensors_rejected("cut.safetensors", part, "truncated");
  }
}

TEST(Safetensors, RejectsMalformedHeaders) {
  const std::string ok_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    std::string file;
    std::vector<std::byte> bytes;
    std::string phrase;
  };
  auto u64 = [](uint64_t n, size_t extra) {
    std::vector<std::byte> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
    auto tail = zeros(extra);
    tail[0] = std::byte{'{'};
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  };
  std::vector<Case> cases = {
      {"short.safetensors", zeros(5), "too short"},
      {"huge-header.safetensors", u64(uint64_t{1} << 62, 16), "absurd"},
      {"huge-header2.safetensors", u64(100'000'001, 16), "absurd"},
      {"long-header.safetensors", u64(1000, 64), "runs past the end of the file"},
      {"empty-header.safetensors", with_header(""), "does not start with '{'"},
      {"not-object.safetensors", with_header("[1, 2]"), "does not start with '{'"},
      {"bad-json.safetensors", with_header(R"({"a": {"dtype": "F32",)"), "invalid JSON"},
      {"trailing-junk.safetensors", with_header("{} x"), "invalid JSON"},
      {"bad-utf8.safetensors",
       with_header("{\"\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"),
       "not valid UTF-8"},
      {"overlong-utf8.safetensors",
       with_header("{\"\xc0\xaf\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}"),
       "not valid UTF-8"},
      {"unknown-dtype.safetensors",
       with_header(R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", zeros(2)),
       "unsupported dtype 'F8_E4M3'"},
      {"dtype-type.safetensors",
       with_header(R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,2]}})", zeros(2)),
       "dtype is not a string"},
      {"entry-type.safetensors", with_header(R"({"w":[1,2]})"), "not an object"},
      {"no-shape.safetensors", with_header(R"({"w":{"dtype":"U8","data_offsets":[0,0]}})"),
       "has no shape"},
      {"no-offsets.safetensors", with_header(R"({"w":{"dtype":"U8","shape":[0]}})"),
       "has no data_offsets"},
      {"extra-key.safetensors",
       with_header(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":1}})"),
       "unexpected key 'x'"},
      {"negative-dim.safetensors",
       with_header(R"({"w":{"dtype":"F32","shape":[-2, 4],"data_offsets":[0,0]}})"),
       "negative dimension -2"},
      {"float-dim.safetensors",
       with_header(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,10]}})", zeros(10)),
       "not a non-negative integer"},
      {"overflow.safetensors",
       with_header(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
       "overflows"},
      {"overflow-bytes.safetensors",
       with_header(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})"),
       "overflows"},
      {"size-mismatch.safetensors",
       with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", zeros(8)),
       "size mismatch"},
      {"begin-after-end.safetensors",
       with_header(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", zeros(8)),
       "begin 8 > end 4"},
      {"negative-offset.safetensors",
       with_header(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[-2,0]}})", zeros(8)),
       "not two non-negative integers"},
      {"three-offsets.safetensors",
       with_header(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,1,2]}})", zeros(8)),
       "not an array of two integers"},
      {"past-end.safetensors", with_header("{" + ok_a + "}", zeros(6)),
       "past the end of the data buffer"},
      {"overlap.safetensors",
       with_header("{" + ok_a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   zeros(12)),
       "overlaps tensor 'a'"},
      {"hole.safetensors",
       with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros(8)),
       "belong to no tensor"},
      {"trailing-bytes.safetensors", with_header("{" + ok_a + "}", zeros(12)),
       "4 bytes after the last tensor"},
      {"duplicate.safetensors", with_header("{" + ok_a + "," + ok_a + "}", zeros(8)),
       "duplicate tensor name 'a'"},
      {"duplicate-field.safetensors",
       with_header(R"({"a":{"dtype":"F32","dtype":"U8","shape":[0],"data_offsets":[0,0]}})"),
       "duplicate key 'dtype'"},
      {"deep.safetensors", with_header(R"({"a":{"dtype":"F32","shape":[[[1]]]}})"), "nests deeper"},
      {"control-name.safetensors",
       with_header(R"({"a\u001b[2J":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", zeros(8)),
       "tensor 'a\\x1b[2J': size mismatch"},
      {"metadata-type.safetensors", with_header(R"({"__metadata__":{"k":1}})"),
       "__metadata__ value of 'k' is not a string"},
      {"metadata-array.safetensors", with_header(R"({"__metadata__":["k"]})"),
       "__metadata__ is not an object"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.file);
    expect_safetensors_rejected(c.file, std::move(c.bytes), c.phrase);
  }
  // The error of a mapped file names its path.
  TempDir dir;
  const std::string path = dir / "on-disk.safetensors";
  std::ofstream(path, std::ios::binary) << "abc";
  expect_error_contains([&] { SafetensorsFile::open(path); }, {path + ": ", "too short"});
  expect_error_contains([&] { SafetensorsFile::open(dir / "absent.safetensors"); },
                        {"absent.safetensors", "cannot open"});
}

TEST(Safetensors, RandomCorruptionNeverCrashes) {
  // Flip bytes of a valid file: every outcome is either a parse or a tern::Error, and every
  // parsed tensor lies inside the file.
  const auto full = small_valid_file();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 2000; ++iter) {
    auto bytes = full;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng());
    try {
      auto f = parse_bytes("fuzz.safetensors", bytes);
      for (const auto& t : f.tensors()) {
        ASSERT_LE(f.data_offset() + t.offset + t.nbytes, f.file_size());
      }
    } catch (const Error&) {
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sharded checkpoints

SafetensorsWriter five_tensors(std::vector<std::vector<std::byte>>& datas) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  const std::vector<std::pair<std::string, size_t>> spec = {{"model.embed_tokens.weight", 64},
                                                            {"model.layers.0.q.weight", 40},
                                                            {"model.layers.0.norm.weight", 8},
                                                            {"model.layers.1.q.weight", 40},
                                                            {"lm_head.weight", 64}};
  for (size_t i = 0; i < spec.size(); ++i) {
    datas.push_back(pattern(spec[i].second, static_cast<uint8_t>(10 * i)));
    w.add_tensor(spec[i].first, DType::F32, {static_cast<int64_t>(spec[i].second / 4)},
                 datas.back());
  }
  return w;
}

TEST(SafetensorsSharded, WriteAndReadThroughIndex) {
  std::vector<std::vector<std::byte>> datas;
  auto w = five_tensors(datas);
  TempDir dir;
  auto files = w.write_sharded(dir.path().string(), 100);
  // Shard data: 64 | 40 + 8 + 40 | 64 (each within 100 bytes).
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(fs::path(f).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                       "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  auto index = nlohmann::json::parse(read_text_file(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 216);
  EXPECT_EQ(index["weight_map"]["model.layers.0.norm.weight"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"]["model.layers.1.q.weight"], "model-00002-of-00003.safetensors");

  for (const std::string& open_path : {dir.path().string(), dir / "model.safetensors.index.json"}) {
    auto m = SafetensorsModel::open(open_path);
    EXPECT_TRUE(m.sharded());
    EXPECT_EQ(m.path(), dir / "model.safetensors.index.json");
    EXPECT_EQ(m.shards().size(), 3u);
    ASSERT_EQ(m.tensors().size(), 5u);
    EXPECT_EQ(m.metadata().at("format"), "pt");
    const char* order[] = {"model.embed_tokens.weight", "model.layers.0.q.weight",
                           "model.layers.0.norm.weight", "model.layers.1.q.weight",
                           "lm_head.weight"};
    const int shard[] = {0, 1, 1, 1, 2};
    for (int i = 0; i < 5; ++i) {
      const TensorInfo* t = m.find_tensor(order[i]);
      ASSERT_NE(t, nullptr) << order[i];
      EXPECT_TRUE(same_bytes(*t, datas[i])) << order[i];
      EXPECT_EQ(m.shard_of(order[i]), shard[i]) << order[i];
    }
    EXPECT_EQ(m.find_tensor("model.layers.2.q.weight"), nullptr);
    EXPECT_EQ(m.shard_of("nope"), -1);
  }
}

TEST(SafetensorsSharded, SingleFileFolderAndFile) {
  std::vector<std::vector<std::byte>> datas;
  auto w = five_tensors(datas);
  TempDir dir;
  auto files = w.write_sharded(dir.path().string(), 1 << 20);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], dir / "model.safetensors");
  for (const std::string& p : {dir.path().string(), dir / "model.safetensors"}) {
    auto m = SafetensorsModel::open(p);
    EXPECT_FALSE(m.sharded());
    EXPECT_EQ(m.path(), dir / "model.safetensors");
    EXPECT_EQ(m.tensors().size(), 5u);
    EXPECT_TRUE(same_bytes(*m.find_tensor("lm_head.weight"), datas[4]));
  }
  TempDir empty;
  expect_error_contains([&] { SafetensorsModel::open(empty.path().string()); },
                        {empty.path().string(), "neither model.safetensors.index.json nor"});
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(SafetensorsSharded, RejectsInconsistentIndexes) {
  std::vector<std::vector<std::byte>> datas;
  auto w = five_tensors(datas);
  TempDir dir;
  w.write_sharded(dir.path().string(), 100);
  const std::string index_path = dir / "model.safetensors.index.json";
  const auto good = nlohmann::json::parse(read_text_file(index_path));
  auto with_index = [&](const nlohmann::json& index) {
    write_text(index_path, index.dump(2));
    return [&] { SafetensorsModel::open(dir.path().string()); };
  };

  {  // The index names a shard file that is not there.
    auto idx = good;
    idx["weight_map"]["lm_head.weight"] = "model-00009-of-00009.safetensors";
    expect_error_contains(with_index(idx),
                          {"model.safetensors.index.json: ",
                           "shard 'model-00009-of-00009.safetensors'", "is missing"});
  }
  {  // A tensor listed in the index is absent from every shard.
    auto idx = good;
    idx["weight_map"]["model.layers.7.q.weight"] = "model-00001-of-00003.safetensors";
    expect_error_contains(with_index(idx),
                          {"model.safetensors.index.json: ", "'model.layers.7.q.weight'",
                           "missing from its shard 'model-00001-of-00003.safetensors'"});
  }
  {  // Listed in one shard, stored in another.
    auto idx = good;
    idx["weight_map"]["model.layers.0.q.weight"] = "model-00001-of-00003.safetensors";
    expect_error_contains(with_index(idx), {"'model.layers.0.q.weight'", "missing from it",
                                            "found in 'model-00002-of-00003.safetensors'"});
  }
  {  // A tensor stored in two shards.
    SafetensorsWriter extra;
    extra.add_tensor("model.layers.0.q.weight", DType::F32, {10}, datas[1]);
    extra.write(dir / "model-00005-of-00003.safetensors");
    auto idx = good;
    idx["weight_map"]["extra"] = "model-00005-of-00003.safetensors";
    expect_error_contains(with_index(idx),
                          {"'model.layers.0.q.weight' is in two shards",
                           "model-00002-of-00003.safetensors", "model-00005-of-00003.safetensors"});
    fs::remove(dir / "model-00005-of-00003.safetensors");
  }
  {  // Shard names may not leave the folder.
    auto idx = good;
    idx["weight_map"]["lm_head.weight"] = "../elsewhere.safetensors";
    expect_error_contains(with_index(idx), {"'../elsewhere.safetensors' outside"});
  }
  expect_error_contains(with_index(nlohmann::json{{"metadata", {}}}), {"no 'weight_map' object"});
  write_text(index_path, "{\"weight_map\": ");
  expect_error_contains([&] { SafetensorsModel::open(dir.path().string()); },
                        {"model.safetensors.index.json: ", "invalid JSON"});
  {  // A corrupt shard is reported under its own name.
    write_text(index_path, good.dump());
    write_text(dir / "model-00003-of-00003.safetensors", "short");
    expect_error_contains([&] { SafetensorsModel::open(dir.path().string()); },
                          {"model-00003-of-00003.safetensors: ", "too short"});
  }
}

}  // namespace
}  // namespace tern
