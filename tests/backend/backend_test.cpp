// The backend seam: a decoder forward goes through the Backend and nothing else (a counting
// backend wrapped around the CPU one sees each op once per layer per step, whatever the
// batch), and through it gives the default decoder's logits bit for bit.
#include "tern/backend/backend.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "tern/backend/cpu/cpu_backend.h"
#include "tern/core/error.h"
#include "tern/engine/sequence_runner.h"
#include "tern/models/decoder.h"

namespace tern {
namespace {

enum Op {
  kEmbed,
  kPositions,
  kRmsNorm,
  kRmsNormRows,
  kMatmul,
  kQkv,
  kGateUp,
  kMoeMlp,
  kRope,
  kWriteKv,
  kAttention,
  kAdd,
  kLogits,
  kReadRows,
  kNumOps
};

// Forwards every op to `inner` and counts it.
class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::array<int, kNumOps> counts{};

  const Device& device() const override { return inner_->device(); }
  Activation make_activation(int64_t width, ActivationRows rows) override {
    return inner_->make_activation(width, rows);
  }
  void reserve(int64_t t, int64_t r) override { inner_->reserve(t, r); }
  uint64_t working_bytes() const override { return inner_->working_bytes(); }
  std::unique_ptr<KvCache> make_kv_cache(const KvCacheConfig& config) override {
    return inner_->make_kv_cache(config);
  }
  void check_attention(const AttentionBatch& batch, const KvCache& cache,
                       int n_heads) const override {
    inner_->check_attention(batch, cache, n_heads);
  }
  void embed(std::span<const int32_t> ids, Activation x) override {
    ++counts[kEmbed];
    inner_->embed(ids, x);
  }
  void set_positions(std::span<const int32_t> positions) override {
    ++counts[kPositions];
    inner_->set_positions(positions);
  }
  void rms_norm(Activation x, const float* w, int64_t rows, int64_t dim, float eps,
                Activation out) override {
    ++counts[kRmsNorm];
    inner_->rms_norm(x, w, rows, dim, eps, out);
  }
  void rms_norm_rows(Activation x, std::span<const int32_t> rows, const float* w, int64_t dim,
                     float eps, Activation out) override {
    ++counts[kRmsNormRows];
    inner_->rms_norm_rows(x, rows, w, dim, eps, out);
  }
  void matmul(const WeightMatrix& w, std::span<const float> bias, Activation x, int64_t t,
              Activation y) override {
    ++counts[kMatmul];
    inner_->matmul(w, bias, x, t, y);
  }
  void qkv(const WeightMatrix& wq, const WeightMatrix& wk, const WeightMatrix& wv,
           const WeightMatrix& wqkv_packed, std::span<const float> bq, std::span<const float> bk,
           std::span<const float> bv, Activation x, int64_t t, Activation q, Activation k,
           Activation v) override {
    ++counts[kQkv];
    inner_->qkv(wq, wk, wv, wqkv_packed, bq, bk, bv, x, t, q, k, v);
  }
  void gate_up(const WeightMatrix& w_gate, const WeightMatrix& w_up,
               const WeightMatrix& w_gate_up_packed, std::span<const float> b_gate,
               std::span<const float> b_up, Activation x, int64_t t, Activation out) override {
    ++counts[kGateUp];
    inner_->gate_up(w_gate, w_up, w_gate_up_packed, b_gate, b_up, x, t, out);
  }
  void moe_mlp(const MixtureOfExperts& moe, Activation x, int64_t t, Activation out) override {
    ++counts[kMoeMlp];
    inner_->moe_mlp(moe, x, t, out);
  }
  void rope(int layer, Activation q, int n_heads, Activation k, int n_kv_heads,
            int64_t t) override {
    ++counts[kRope];
    inner_->rope(layer, q, n_heads, k, n_kv_heads, t);
  }
  void write_kv(KvCache& cache, int layer, Activation k, Activation v,
                std::span<const int64_t> slots) override {
    ++counts[kWriteKv];
    inner_->write_kv(cache, layer, k, v, slots);
  }
  void attention(Activation q, const KvCache& cache, int layer, const AttentionBatch& batch,
                 int n_heads, float scale, int32_t window, std::span<const float> sinks,
                 Activation out) override {
    ++counts[kAttention];
    inner_->attention(q, cache, layer, batch, n_heads, scale, window, sinks, out);
  }
  void add(Activation x, Activation y, int64_t n) override {
    ++counts[kAdd];
    inner_->add(x, y, n);
  }
  void logits(const WeightMatrix& lm_head, Activation x, int64_t rows, float* logits) override {
    ++counts[kLogits];
    inner_->logits(lm_head, x, rows, logits);
  }
  void read_rows(Activation a, int64_t rows, int64_t cols, float* host) override {
    ++counts[kReadRows];
    inner_->read_rows(a, rows, cols, host);
  }
  void capture_moe(MoeCapture* host) override { inner_->capture_moe(host); }

 private:
  std::unique_ptr<Backend> inner_;
};

// A prefill of 7 tokens, a 3-token step, then two decodes; every step's logits in a row.
std::vector<float> run(Decoder& decoder, std::array<int, kNumOps>* counts_per_step = nullptr,
                       CountingBackend* counting = nullptr) {
  SequenceRunner runner(decoder, 16);
  std::vector<float> all;
  const std::vector<std::vector<int32_t>> steps = {
      {1, 5, 9, 200, 31, 77, 4}, {11, 12, 13}, {7}, {300}};
  for (const std::vector<int32_t>& tokens : steps) {
    if (counting != nullptr) counting->counts = {};
    std::span<const float> logits = runner.feed(tokens, true);
    all.insert(all.end(), logits.begin(), logits.end());
    if (counting != nullptr) {
      for (int op = 0; op < kNumOps; ++op)
        EXPECT_EQ(counting->counts[op], (*counts_per_step)[op])
            << "op " << op << " in a step of " << tokens.size() << " tokens";
    }
  }
  return all;
}

TEST(Backend, DecoderCallsEachOpOncePerLayerPerStep) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(3);
  ASSERT_TRUE(c.qk_norm);
  const ModelWeights w = make_dummy_weights(c, DType::Q4_K, 5);
  const int layers = static_cast<int>(c.num_layers);

  auto owned = std::make_unique<CountingBackend>(make_cpu_backend(c, w));
  CountingBackend* counting = owned.get();
  Decoder seam(c, w, std::move(owned));
  std::array<int, kNumOps> per_step{};
  per_step[kEmbed] = 1;
  per_step[kPositions] = 1;
  per_step[kRmsNorm] = 4 * layers;  // attention and MLP input, q and k (qk_norm)
  per_step[kRmsNormRows] = 1;       // the final norm
  per_step[kMatmul] = 2 * layers;   // o, down
  per_step[kQkv] = layers;
  per_step[kGateUp] = layers;
  per_step[kRope] = layers;
  per_step[kWriteKv] = layers;
  per_step[kAttention] = layers;
  per_step[kAdd] = 2 * layers;
  per_step[kLogits] = 1;    // lm_head, the one read back
  per_step[kReadRows] = 0;  // no observer: nothing else crosses to the host
  const std::vector<float> through_counting = run(seam, &per_step, counting);

  Decoder plain(c, w, find_device("cpu"));
  EXPECT_TRUE(testing::bitwise_equal(through_counting, run(plain)));
  EXPECT_EQ(seam.buffer_bytes(), plain.buffer_bytes());
}

// A cache some other backend made: the CPU backend's ops could not read it.
class ForeignKvCache final : public KvCache {
 public:
  explicit ForeignKvCache(const KvCacheConfig& config) : KvCache(config) {}
  void copy_block(int64_t, int64_t) override {}
  std::unique_ptr<HostBlocks> host_blocks(std::span<const int32_t>, BlockAccess) override {
    return nullptr;
  }
  uint64_t memory_bytes() const override { return 0; }
};

TEST(Backend, AStepOnAnotherBackendsCacheIsRefusedByName) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  const ModelConfig c = testing::tiny_qwen3_config(2);
  const ModelWeights w = make_dummy_weights(c, DType::Q8_0, 3);
  Decoder decoder(c, w, find_device("cpu"));
  ForeignKvCache foreign(decoder.kv_cache_config(4));
  StepBatch batch(4);
  const std::vector<int32_t> tokens = {1, 2, 3}, blocks = {0};
  batch.add_sequence(tokens, 0, blocks, true);
  const std::unique_ptr<KvCache> own = decoder.make_kv_cache(4);
  EXPECT_NO_THROW(decoder.check_step(batch.context(), *own));
  try {
    decoder.check_step(batch.context(), foreign);
    FAIL() << "a foreign cache was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another backend"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern
