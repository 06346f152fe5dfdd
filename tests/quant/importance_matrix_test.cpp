// Importance matrices: llama.cpp's GGUF imatrix files round-trip; compute_importance_matrix's
// sums for layer 0's q/k/v equal the squares of the normed embeddings computed here from the
// weights; malformed files and matrices of other models are refused.
#include "tern/quant/importance_matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "engine/engine_test_util.h"
#include "fixtures.h"
#include "tern/core/error.h"
#include "tern/eval/imatrix_collector.h"
#include "tern/formats/gguf.h"
#include "tern/models/decoder.h"
#include "tern/models/imatrix_fits.h"

namespace tern {
namespace {

ImportanceMatrix parse_bytes(std::vector<std::byte> bytes) {
  return ImportanceMatrix::parse(
      std::make_shared<const MappedFile>("test.imatrix", std::move(bytes)));
}

TEST(ImportanceMatrix, RoundTripsThroughLlamaCppsFormat) {
  ImportanceMatrix m;
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, 1.0f};  // two tokens of 3
  m.accumulate("blk.0.attn_q.weight", x.data(), 2, 3);
  m.accumulate("blk.0.attn_q.weight", x.data(), 1, 3);
  m.accumulate("blk.0.ffn_down.weight", x.data(), 1, 6);
  m.datasets = {"calib.txt"};
  m.chunk_count = 3;
  m.chunk_size = 512;
  const ImportanceMatrix back = parse_bytes(m.to_bytes());
  EXPECT_EQ(back.datasets, m.datasets);
  EXPECT_EQ(back.chunk_count, 3);
  EXPECT_EQ(back.chunk_size, 512);
  ASSERT_EQ(back.entries.size(), 2u);
  const ImportanceEntry& q = back.entries.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.count, 3);
  EXPECT_EQ(q.sum_squares, (std::vector<double>{1 + 9 + 1, 4 + 0 + 4, 0.25 + 1 + 0.25}));
  EXPECT_EQ(back.importance("blk.0.attn_q.weight"),
            (std::vector<float>{11.0f / 3, 8.0f / 3, 1.5f / 3}));
  EXPECT_TRUE(back.importance("blk.1.attn_q.weight").empty());
  // The layout llama.cpp reads: <name>.in_sum2 [1, cols] and <name>.counts [1, 1], F32.
  const GgufFile g = GgufFile::parse(std::make_shared<const MappedFile>("t", m.to_bytes()));
  EXPECT_EQ(g.get_string("general.type"), "imatrix");
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight.in_sum2")->shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight.counts")->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_THROW(m.accumulate("blk.0.attn_q.weight", x.data(), 1, 6), Error);  // 6 columns, not 3
}

TEST(ImportanceMatrix, RefusesMalformedFiles) {
  auto expect_refused = [](const GgufWriter& g, const std::string& what) {
    try {
      parse_bytes(g.to_bytes());
      ADD_FAILURE() << "accepted; wanted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const float one = 1.0f, two[2] = {1.0f, 1.0f};
  GgufWriter model;
  model.set("general.architecture", GgufValue::string("llama"));
  expect_refused(model, "not an importance matrix");
  GgufWriter no_counts;
  no_counts.set("general.type", GgufValue::string("imatrix"));
  no_counts.add_tensor("a.weight.in_sum2", DType::F32, {1, 1}, std::as_bytes(std::span(&one, 1)));
  expect_refused(no_counts, "'a.weight' has no .counts");
  GgufWriter experts;
  experts.set("general.type", GgufValue::string("imatrix"));
  experts.add_tensor("a.weight.in_sum2", DType::F32, {1, 2}, std::as_bytes(std::span(two)));
  experts.add_tensor("a.weight.counts", DType::F32, {2, 1}, std::as_bytes(std::span(two)));
  expect_refused(experts, "1 rows of sums ([1, 2]) and 2 counts");
  GgufWriter negative;
  const float minus = -1.0f;
  negative.set("general.type", GgufValue::string("imatrix"));
  negative.add_tensor("a.weight.in_sum2", DType::F32, {1, 1}, std::as_bytes(std::span(&minus, 1)));
  negative.add_tensor("a.weight.counts", DType::F32, {1, 1}, std::as_bytes(std::span(&one, 1)));
  expect_refused(negative, "negative or non-finite");
  GgufWriter huge;  // a count past int64 (found by imatrix_fuzz: the cast was undefined)
  const float huge_count = 1.28e22f;
  huge.set("general.type", GgufValue::string("imatrix"));
  huge.add_tensor("a.weight.in_sum2", DType::F32, {1, 1}, std::as_bytes(std::span(&one, 1)));
  huge.add_tensor("a.weight.counts", DType::F32, {1, 1}, std::as_bytes(std::span(&huge_count, 1)));
  expect_refused(huge, "invalid count");
  GgufWriter stray;
  stray.set("general.type", GgufValue::string("imatrix"));
  stray.add_tensor("a.weight", DType::F32, {1, 1}, std::as_bytes(std::span(&one, 1)));
  expect_refused(stray, "none of");
  GgufWriter outer;  // sums of x xᵀ that are not [cols, cols]
  outer.set("general.type", GgufValue::string("imatrix"));
  outer.add_tensor("a.weight.in_sum2", DType::F32, {1, 2}, std::as_bytes(std::span(two)));
  outer.add_tensor("a.weight.counts", DType::F32, {1, 1}, std::as_bytes(std::span(&one, 1)));
  outer.add_tensor("a.weight.in_sum_outer", DType::F32, {1, 2}, std::as_bytes(std::span(two)));
  expect_refused(outer, "2 sums of x xᵀ for 2 columns");
}

TEST(ImportanceMatrix, KeepsSecondMomentsForGptq) {
  ImportanceMatrix m;
  m.keep_outer = true;
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 3.0f, 0.0f,
                                1.0f, -1.0f, 4.0f, 2.0f};  // 3 tokens of 3
  m.accumulate("blk.0.attn_q.weight", x.data(), 2, 3);
  m.accumulate("blk.0.attn_q.weight", x.data() + 6, 1, 3);
  // E[x xᵀ] over the three tokens, its diagonal the importances.
  std::vector<float> expected(9, 0.0f);
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        expected[static_cast<size_t>(i * 3 + j)] +=
            x[static_cast<size_t>(t * 3 + i)] * x[static_cast<size_t>(t * 3 + j)] / 3.0f;
  auto expect_moments = [&](const ImportanceMatrix& im) {
    const std::vector<float> got = im.second_moments("blk.0.attn_q.weight");
    ASSERT_EQ(got.size(), 9u);
    for (size_t i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(got[i], expected[i]) << i;
    const std::vector<float> imp = im.importance("blk.0.attn_q.weight");
    for (size_t j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(imp[j], got[j * 4]);
  };
  expect_moments(m);
  const std::vector<std::byte> bytes = m.to_bytes();
  expect_moments(parse_bytes(bytes));
  // Stored as <name>.in_sum_outer [cols, cols] beside llama.cpp's two tensors (its loader skips
  // the names it does not know), and only when kept.
  const GgufFile g = GgufFile::parse(std::make_shared<const MappedFile>("t", bytes));
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight.in_sum_outer")->shape, (std::vector<int64_t>{3, 3}));
  ImportanceMatrix plain;
  plain.accumulate("blk.0.attn_q.weight", x.data(), 3, 3);
  EXPECT_TRUE(plain.second_moments("blk.0.attn_q.weight").empty());
  EXPECT_EQ(GgufFile::parse(std::make_shared<const MappedFile>("t", plain.to_bytes()))
                .find_tensor("blk.0.attn_q.weight.in_sum_outer"),
            nullptr);
}

TEST(ImportanceMatrix, SumsTheSquaresOfEachMatrixInput) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const LoadedModel m = testing::stories260k();
  Decoder decoder(m.config, m.weights, find_device("cpu"));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 96; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 11) % 512));
  ImatrixOptions options;
  options.ctx = 32;
  options.bos = 1;
  options.process_output = true;
  const ImportanceMatrix im = compute_importance_matrix(decoder, tokens, options);
  EXPECT_EQ(im.chunk_count, 3);
  EXPECT_EQ(im.entries.size(), 36u);  // 35 + output.weight
  for (const char* what :
       {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    EXPECT_EQ(im.entries.at(gguf_tensor_name(3, std::string(what) + ".weight")).count, 96) << what;
  EXPECT_EQ(im.entries.at("output.weight").count, 96);
  // Layer 0's q/k/v input is rms_norm(embedding) · attn_norm, from the weights directly; the
  // first token of every window is BOS.
  const int64_t h = m.config.hidden_size;
  std::vector<double> expected(static_cast<size_t>(h), 0.0);
  std::vector<float> e(static_cast<size_t>(h));
  for (size_t i = 0; i < tokens.size(); ++i) {
    m.weights.embed(i % 32 == 0 ? 1 : tokens[i], e.data());
    double ss = 0;
    for (float v : e) ss += static_cast<double>(v) * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(h) + m.config.rms_norm_eps);
    for (int64_t j = 0; j < h; ++j) {
      const double y =
          e[static_cast<size_t>(j)] * inv * m.weights.layers[0].attn_norm[static_cast<size_t>(j)];
      expected[static_cast<size_t>(j)] += y * y;
    }
  }
  for (const char* what : {"attn_q.weight", "attn_k.weight", "attn_v.weight"}) {
    const ImportanceEntry& got = im.entries.at(gguf_tensor_name(0, what));
    ASSERT_EQ(got.sum_squares.size(), static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j)
      EXPECT_NEAR(got.sum_squares[static_cast<size_t>(j)], expected[static_cast<size_t>(j)],
                  1e-4 * expected[static_cast<size_t>(j)] + 1e-6)
          << what << " column " << j;
  }
  check_imatrix_fits(im, m.weights, "stories260K");
  EXPECT_THROW(compute_importance_matrix(decoder, std::span(tokens).first(31), options), Error);
}

}  // namespace
}  // namespace tern
