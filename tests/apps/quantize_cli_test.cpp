// `tern quantize` and `tern imatrix` through the binary: every file type's output loads and
// gives logits within that type's tolerance of F32; the GGUF keeps its input's metadata and
// names its file type; an importance matrix made by `tern imatrix` changes what is written, and
// one with second moments (`--hessian`) gives GPTQ's files, closer to F32;
// quantized inputs, unknown types and importance matrices of another model are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fixtures.h"
#include "models/model_test_util.h"
#include "models/tiny_model_configs.h"
#include "run_process.h"
#include "tern/engine/sequence_runner.h"
#include "tern/formats/gguf.h"
#include "tern/models/decoder.h"
#include "tern/models/gguf_export.h"
#include "tern/models/model_loader.h"
#include "tern/quant/importance_matrix.h"

namespace tern {
namespace {

using testing::fixture;
using testing::run_tern;
using testing::TempDir;

const std::vector<int32_t> kTokens = {1, 5, 9, 200, 33, 7, 480, 2, 77, 301, 12, 64};

std::vector<float> prefill_logits(const std::string& gguf,
                                  std::span<const int32_t> tokens = kTokens) {
  LoadOptions load;
  load.model = gguf;
  const LoadedModel m = load_model(load);
  Decoder decoder(m.config, m.weights, find_device("cpu"));
  SequenceRunner runner(decoder, static_cast<int64_t>(tokens.size()));
  const std::span<const float> l = runner.feed(tokens, /*all_logits=*/true);
  return {l.begin(), l.end()};
}

// A small qwen3 in F32 (rows of 256 and 512: whole K super-blocks) with a chat template and a
// key that must travel to the quantized files.
std::string write_f32_model(const TempDir& dir, bool tied = true) {
  const ModelConfig c = testing::tiny_qwen3_config(2, tied);
  const ModelWeights w = make_dummy_weights(c, DType::F32, 7);
  const std::string path = dir.file("f32.gguf");
  save_gguf(path, w, c, nullptr, "tiny-qwen3",
            {{"tokenizer.chat_template", GgufValue::string("{{ messages }}")},
             {"general.author", GgufValue::string("tern tests")}});
  return path;
}

struct TypeCase {
  const char* type;
  const char* file_type_name;  // as llama.cpp names general.file_type
  uint32_t file_type;
  double max_error;  // relative RMS logit error against F32: 1.5× the measured, in comments
};

TEST(QuantizeCli, EveryTypeLoadsAndStaysCloseToF32) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TempDir dir("quantize-types");
  const std::string f32 = write_f32_model(dir);
  const std::vector<float> ref = prefill_logits(f32);
  // Bounds 1.5× the measured errors: f16 0.00061, bf16 0.0060, q8_0 0.0136, q6_k 0.036,
  // q5_k_m 0.058, q5_k_s 0.062, q5_1 0.056, q5_0 0.057, q4_k_m 0.108, q4_k_s 0.099, q4_1 0.116,
  // q4_0 0.127, q3_k_l 0.140, q3_k_m 0.151, q3_k_s 0.253, q2_k 0.312, iq4_xs 0.138, iq4_nl 0.132
  // (uniform random weights
  // are harder to quantize than trained ones).
  const TypeCase cases[] = {
      {"f16", "F16", 1, 9e-4},         {"bf16", "BF16", 32, 9e-3},
      {"q8_0", "Q8_0", 7, 0.02},       {"q6_k", "Q6_K", 18, 0.054},
      {"q5_k_m", "Q5_K_M", 17, 0.087}, {"q5_k_s", "Q5_K_S", 16, 0.093},
      {"q5_1", "Q5_1", 9, 0.084},      {"q5_0", "Q5_0", 8, 0.086},
      {"q4_k_m", "Q4_K_M", 15, 0.162}, {"q4_k_s", "Q4_K_S", 14, 0.149},
      {"q4_1", "Q4_1", 3, 0.174},      {"q4_0", "Q4_0", 2, 0.19},
      {"q3_k_l", "Q3_K_L", 13, 0.21},  {"q3_k_m", "Q3_K_M", 12, 0.227},
      {"q3_k_s", "Q3_K_S", 11, 0.38},  {"q2_k", "Q2_K", 10, 0.47},
      {"iq4_xs", "IQ4_XS", 30, 0.206}, {"iq4_nl", "IQ4_NL", 25, 0.198},
  };
  for (const TypeCase& t : cases) {
    const std::string out = dir.file(std::string(t.type) + ".gguf");
    const auto r = run_tern({"quantize", f32, out, t.type});
    ASSERT_EQ(r.exit_code, 0) << t.type << ": " << r.err;
    EXPECT_NE(r.err.find("bits per weight"), std::string::npos) << r.err;
    const GgufFile g = GgufFile::open(out);
    EXPECT_EQ(g.get_int("general.file_type"), t.file_type) << t.type;
    EXPECT_EQ(g.get_int("general.quantization_version"), 2);
    EXPECT_EQ(g.get_string("tokenizer.chat_template"), "{{ messages }}") << t.type;
    EXPECT_EQ(g.get_string("general.author"), "tern tests") << t.type;
    const double err = testing::relative_rms_error(prefill_logits(out), ref);
    EXPECT_LT(err, t.max_error) << t.type;
    EXPECT_GT(err, 0.0) << t.type << ": suspiciously exact";
    std::printf("%-7s relative RMS logit error %.5f\n", t.type, err);
  }
}

TEST(QuantizeCli, MixturesAndOverridesChooseTensorTypes) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TempDir dir("quantize-mixture");
  const std::string f32 = write_f32_model(dir, /*tied=*/false);
  auto type_of = [](const std::string& path, const std::string& tensor) {
    return GgufFile::open(path).find_tensor(tensor)->dtype;
  };
  ASSERT_EQ(run_tern({"quantize", f32, dir.file("m.gguf"), "q4_k_m"}).exit_code, 0);
  // llama-quantize's Q4_K_M: attn_v and ffn_down of the layers use_more_bits picks (of 2
  // layers, the last) in Q6_K, the rest Q4_K, the untied output Q6_K.
  EXPECT_EQ(type_of(dir.file("m.gguf"), "blk.1.ffn_down.weight"), DType::Q6_K);
  EXPECT_EQ(type_of(dir.file("m.gguf"), "blk.0.ffn_down.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(dir.file("m.gguf"), "blk.0.attn_q.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(dir.file("m.gguf"), "output.weight"), DType::Q6_K);
  EXPECT_EQ(type_of(dir.file("m.gguf"), "token_embd.weight"), DType::Q4_K);
  ASSERT_EQ(run_tern({"quantize", f32, dir.file("p.gguf"), "q4_k_m", "--pure",
                      "--output-tensor-type", "q8_0", "--token-embedding-type", "f16"})
                .exit_code,
            0);
  EXPECT_EQ(type_of(dir.file("p.gguf"), "blk.1.ffn_down.weight"), DType::Q4_K);
  EXPECT_EQ(type_of(dir.file("p.gguf"), "output.weight"), DType::Q8_0);
  EXPECT_EQ(type_of(dir.file("p.gguf"), "token_embd.weight"), DType::F16);
  EXPECT_EQ(GgufFile::open(dir.file("p.gguf")).get_int("general.file_type"), 15);
  // MXFP4_MOE on a model without experts: every matrix Q8_0, as llama-quantize's; --pure, every
  // matrix MXFP4; mxfp4 as a per-tensor type.
  ASSERT_EQ(run_tern({"quantize", f32, dir.file("x.gguf"), "mxfp4_moe"}).exit_code, 0);
  EXPECT_EQ(type_of(dir.file("x.gguf"), "blk.0.ffn_down.weight"), DType::Q8_0);
  EXPECT_EQ(type_of(dir.file("x.gguf"), "output.weight"), DType::Q8_0);
  EXPECT_EQ(GgufFile::open(dir.file("x.gguf")).get_int("general.file_type"), 38);
  const auto r = run_tern({"quantize", f32, dir.file("xp.gguf"), "mxfp4_moe", "--pure",
                           "--output-tensor-type", "mxfp4", "--token-embedding-type", "mxfp4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* t :
       {"blk.1.ffn_down.weight", "blk.0.attn_q.weight", "output.weight", "token_embd.weight"})
    EXPECT_EQ(type_of(dir.file("xp.gguf"), t), DType::MXFP4) << t;
  // 1.5× the measured 0.241 (Q4_0 --pure 0.164, IQ4_NL 0.184 alike): e2m1's levels thin out
  // towards a block's largest element, where uniform random weights are densest.
  const double err =
      testing::relative_rms_error(prefill_logits(dir.file("xp.gguf")), prefill_logits(f32));
  EXPECT_LT(err, 0.36);
  EXPECT_GT(err, 0.0);
}

TEST(QuantizeCli, RefusesWhatItShould) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TempDir dir("quantize-refusals");
  const std::string f32 = write_f32_model(dir);
  auto r = run_tern({"quantize", f32, dir.file("x.gguf"), "q3_k_xl"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("unknown quantization type 'q3_k_xl'"), std::string::npos) << r.err;
  // Q2_K_S without an importance matrix, as llama-quantize: refused before the model is read.
  r = run_tern({"quantize", f32, dir.file("x.gguf"), "q2_k_s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("Q2_K_S fits its 2-bit matrices to an importance matrix"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("quantizing"), std::string::npos) << r.err;
  // The lattice file types llama-quantize refuses without an importance matrix: refused the
  // same way, before the model is read. IQ3_S and IQ3_M need none.
  for (const char* type :
       {"iq3_xxs", "iq3_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq1_s", "iq1_m"}) {
    r = run_tern({"quantize", f32, dir.file("x.gguf"), type});
    EXPECT_EQ(r.exit_code, 1) << type;
    EXPECT_NE(r.err.find("fits its lattice matrices to an importance matrix"), std::string::npos)
        << type << ": " << r.err;
    EXPECT_EQ(r.err.find("quantizing"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));

  // An output nowhere to be written fails before the input is read, not after quantizing it.
  r = run_tern({"quantize", f32, "/nonexistent/dir/x.gguf", "q4_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("OUT /nonexistent/dir/x.gguf: the folder /nonexistent/dir does not exist"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("quantiz"), std::string::npos) << r.err;
  r = run_tern({"quantize", f32, dir.path().string(), "q4_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a folder, not a file"), std::string::npos) << r.err;

  ASSERT_EQ(run_tern({"quantize", f32, dir.file("q8.gguf"), "q8_0"}).exit_code, 0);
  r = run_tern({"quantize", dir.file("q8.gguf"), dir.file("q4.gguf"), "q4_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already quantized (Q8_0)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-requantize"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("q4.gguf")));
  r = run_tern(
      {"quantize", dir.file("q8.gguf"), dir.file("q4.gguf"), "q4_0", "--allow-requantize"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: requantizing Q8_0"), std::string::npos) << r.err;

  r = run_tern({"quantize", f32, f32, "q8_0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the input"), std::string::npos) << r.err;

  // An importance matrix of stories260K does not fit the qwen3 model: names and sizes differ.
  ImportanceMatrix other;
  std::vector<float> x(64, 1.0f);
  other.accumulate("blk.0.attn_q.weight", x.data(), 1, 64);
  other.write(dir.file("other.imatrix.gguf"));
  r = run_tern(
      {"quantize", f32, dir.file("y.gguf"), "q4_0", "--imatrix", dir.file("other.imatrix.gguf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'blk.0.attn_q.weight' has 64 columns, the model's matrix 256"),
            std::string::npos)
      << r.err;
  ImportanceMatrix unknown;
  unknown.accumulate("blk.9.attn_q.weight", std::vector<float>(256, 1.0f).data(), 1, 256);
  unknown.write(dir.file("unknown.imatrix.gguf"));
  r = run_tern(
      {"quantize", f32, dir.file("y.gguf"), "q4_0", "--imatrix", dir.file("unknown.imatrix.gguf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("'blk.9.attn_q.weight' is not a matrix of this model"), std::string::npos)
      << r.err;
  // A model file is not an importance matrix.
  r = run_tern({"quantize", f32, dir.file("y.gguf"), "q4_0", "--imatrix",
                fixture("stories260K/stories260K.gguf")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not an importance matrix"), std::string::npos) << r.err;
}

// A small qwen3 as a Hugging Face folder (BF16 matrices) in dir/hf, with stories260K's 512-piece
// SentencePiece model, which fits its 512-token vocabulary.
std::string write_hf_model(const TempDir& dir) {
  std::ifstream in(fixture("model-configs/qwen3-0.6b/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json small = testing::tiny_qwen3_overrides(2);
  for (auto it = small.begin(); it != small.end(); ++it) j[it.key()] = it.value();
  const ModelConfig c = ModelConfig::from_hf_json(j.dump(), "small qwen3");
  const std::string folder = (dir.path() / "hf").string();
  // write_hf_folder writes into a TempDir's own folder: give it one of its own.
  TempDir hf("quantize-hf-folder");
  testing::write_hf_folder(hf, j, c, make_dummy_weights(c, DType::F32, 3), DType::BF16);
  std::filesystem::copy_file(fixture("tok512/tok512.model"), hf.file("tokenizer.model"));
  std::filesystem::copy(hf.path(), folder, std::filesystem::copy_options::recursive);
  return folder;
}

TEST(QuantizeCli, HuggingFaceFolderWithItsTokenizer) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  TempDir dir("quantize-hf");
  const std::string folder = write_hf_model(dir);
  const auto r = run_tern({"quantize", folder, dir.file("q8.gguf"), "q8_0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile g = GgufFile::open(dir.file("q8.gguf"));
  EXPECT_EQ(g.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"),
            "llama");  // the folder's tokenizer, written by tern
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.weight")->dtype, DType::Q8_0);
  EXPECT_LT(
      testing::relative_rms_error(prefill_logits(dir.file("q8.gguf")), prefill_logits(folder)),
      0.02);
}

// stories260K's own text, as the model writes it: calibration for its importance matrix.
const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big red ball under a tree. She wanted to play with it, but it was too "
    "high. "
    "Lily asked her mom for help. Her mom smiled and said, \"Let's get it together.\" They found a "
    "long stick and pushed the ball down. Lily was very happy. She said thank you to her mom and "
    "played with the ball all day. The sun was warm and the birds sang in the trees. ";

void write_calibration_text(const TempDir& dir) {
  std::ofstream text(dir.file("calib.txt"));
  for (int i = 0; i < 6; ++i) text << kStory;
}

TEST(QuantizeCli, ImatrixFromTernChangesTheQuantizedFile) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TempDir dir("quantize-imatrix");
  write_calibration_text(dir);
  const std::string model = fixture("stories260K/stories260K.gguf");
  auto r = run_tern({"imatrix", "-m", model, "-f", dir.file("calib.txt"), "-o", dir.file("im.gguf"),
                     "--ctx", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ImportanceMatrix m = ImportanceMatrix::read(dir.file("im.gguf"));
  EXPECT_EQ(m.entries.size(),
            35u);  // 7 matrices × 5 layers; no output.weight without --process-output
  EXPECT_EQ(m.chunk_size, 64);
  EXPECT_GE(m.chunk_count, 6);
  EXPECT_EQ(m.datasets, std::vector<std::string>{dir.file("calib.txt")});
  EXPECT_EQ(m.entries.at("blk.2.ffn_down.weight").count, m.chunk_count * 64);

  ASSERT_EQ(run_tern({"quantize", model, dir.file("plain.gguf"), "q4_0"}).exit_code, 0);
  r = run_tern(
      {"quantize", model, dir.file("weighted.gguf"), "q4_0", "--imatrix", dir.file("im.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile plain = GgufFile::open(dir.file("plain.gguf"));
  const GgufFile weighted = GgufFile::open(dir.file("weighted.gguf"));
  EXPECT_EQ(weighted.get_string("quantize.imatrix.file"), dir.file("im.gguf"));
  EXPECT_EQ(weighted.get_int("quantize.imatrix.entries_count"), 35);
  const TensorInfo* a = plain.find_tensor("blk.1.attn_q.weight");
  const TensorInfo* b = weighted.find_tensor("blk.1.attn_q.weight");
  ASSERT_EQ(a->nbytes, b->nbytes);
  EXPECT_NE(std::memcmp(a->data, b->data, a->nbytes), 0) << "the importance matrix changed nothing";
  // Without an entry, output.weight is quantized as without an importance matrix.
  const TensorInfo* oa = plain.find_tensor("output.weight");
  const TensorInfo* ob = weighted.find_tensor("output.weight");
  EXPECT_EQ(std::memcmp(oa->data, ob->data, oa->nbytes), 0);
}

// A mixture of experts: `tern imatrix` writes an entry per stacked expert tensor with a row and a
// count per expert (llama-imatrix's layout), and `tern quantize` to IQ2_XXS (which needs one)
// takes it.
TEST(QuantizeCli, ImatrixOfAMixtureOfExpertsQuantizesToLatticeTypes) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TempDir dir("quantize-moe-imatrix");
  write_calibration_text(dir);
  LoadOptions load;
  load.model = fixture("stories260K/stories260K.gguf");
  const LoadedModel stories = load_model(load);  // its tokenizer, of the same 512 ids
  const ModelConfig c = testing::config_from_json(testing::tiny_moe_json());
  const std::string model = dir.file("moe.gguf");
  save_gguf(model, make_dummy_weights(c, DType::F32, 7), c, &*stories.tokenizer, "tiny-moe");
  auto r = run_tern({"imatrix", "-m", model, "-f", dir.file("calib.txt"), "-o", dir.file("im.gguf"),
                     "--ctx", "64"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ImportanceMatrix m = ImportanceMatrix::read(dir.file("im.gguf"));
  const GgufFile file = GgufFile::open(dir.file("im.gguf"));
  for (const char* what : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    const std::string name = "blk.1." + std::string(what) + ".weight";
    const ImportanceEntry& e = m.entries.at(name);
    ASSERT_EQ(e.experts(), 6) << name;
    int64_t routed = 0;
    for (const int64_t n : e.expert_counts) routed += n;
    EXPECT_EQ(routed, m.chunk_count * 64 * 2) << name;
    EXPECT_EQ(file.find_tensor(name + ".in_sum2")->shape, (std::vector<int64_t>{6, 256}));
    EXPECT_EQ(file.find_tensor(name + ".counts")->shape, (std::vector<int64_t>{6, 1}));
  }
  EXPECT_EQ(m.entries.at("blk.0.ffn_gate_inp.weight").count, m.chunk_count * 64);

  r = run_tern({"quantize", model, dir.file("iq2.gguf"), "iq2_xxs"});
  EXPECT_NE(r.exit_code, 0) << "IQ2_XXS without an importance matrix";
  r = run_tern(
      {"quantize", model, dir.file("iq2.gguf"), "iq2_xxs", "--imatrix", dir.file("im.gguf")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const GgufFile q = GgufFile::open(dir.file("iq2.gguf"));
  EXPECT_EQ(q.find_tensor("blk.0.ffn_down_exps.weight")->dtype, DType::IQ2_XXS);
  EXPECT_EQ(q.get_int("quantize.imatrix.entries_count"), static_cast<int64_t>(m.entries.size()));
}

TEST(QuantizeCli, ImatrixWithHessianQuantizesByGptq) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  TempDir dir("quantize-gptq");
  write_calibration_text(dir);
  const std::string model = fixture("stories260K/stories260K.gguf");
  for (const bool hessian : {false, true}) {
    std::vector<std::string> args = {"imatrix",
                                     "-m",
                                     model,
                                     "-f",
                                     dir.file("calib.txt"),
                                     "--ctx",
                                     "64",
                                     "-o",
                                     dir.file(hessian ? "hessian.gguf" : "im.gguf")};
    if (hessian) args.push_back("--hessian");
    const auto r = run_tern(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  const ImportanceMatrix plain = ImportanceMatrix::read(dir.file("im.gguf"));
  const ImportanceMatrix with_h = ImportanceMatrix::read(dir.file("hessian.gguf"));
  for (const char* name : {"blk.0.attn_q.weight", "blk.4.ffn_down.weight"}) {
    EXPECT_EQ(with_h.importance(name), plain.importance(name)) << name;
    const size_t cols = plain.importance(name).size();
    EXPECT_EQ(with_h.second_moments(name).size(), cols * cols) << name;
  }
  for (const char* file : {"im.gguf", "hessian.gguf"}) {
    const auto r = run_tern({"quantize", model, dir.file(std::string("q4_0.") + file), "q4_0",
                             "--imatrix", dir.file(file)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // On the calibration text, GPTQ's logits are closer to F32's than the importance-weighted
  // ones (measured: relative RMS error 0.064 against 0.105).
  LoadOptions load;
  load.model = model;
  const std::vector<int32_t> story = load_model(load).tokenizer->encode(kStory);
  const std::span<const int32_t> tokens(story.data(), 64);
  const std::vector<float> ref = prefill_logits(model, tokens);
  const double weighted =
      testing::relative_rms_error(prefill_logits(dir.file("q4_0.im.gguf"), tokens), ref);
  const double gptq =
      testing::relative_rms_error(prefill_logits(dir.file("q4_0.hessian.gguf"), tokens), ref);
  EXPECT_LT(gptq, 0.8 * weighted);
}

// --output-format gptq, awq and mlx: a folder vLLM or mlx-lm would read, that tern loads and
// runs with the input's tokenizer, near the input's logits.
TEST(QuantizeCli, WritesGptqAwqAndMlxCheckpoints) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TERN_REQUIRE_FIXTURE("tok512/tok512.model");
  TempDir dir("quantize-ckpt");
  const std::string folder = write_hf_model(dir);
  write_calibration_text(dir);
  auto r = run_tern({"imatrix", "-m", folder, "-f", dir.file("calib.txt"), "--ctx", "64", "-o",
                     dir.file("hessian.gguf"), "--hessian"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct Case {
    std::vector<std::string> flags;
    const char* method;
    DType dtype;
    double max_error;  // relative RMS logit error against the input (dummy weights)
  };
  const std::vector<Case> cases = {
      {{"--output-format", "gptq", "--desc-act", "--imatrix", dir.file("hessian.gguf")},
       "gptq",
       DType::INT4_G128,
       0.25},
      {{"--output-format", "gptq", "--bits", "8", "--group-size", "32", "--sym"},
       "gptq",
       DType::INT8_G32,
       0.03},
      {{"--output-format", "awq", "--group-size", "64", "--imatrix", dir.file("hessian.gguf")},
       "awq",
       DType::INT4_G64,
       0.25},
      {{"--output-format", "mlx"}, "mlx", DType::INT4_G64, 0.25},
  };
  const std::vector<float> reference = prefill_logits(folder);
  for (const Case& k : cases) {
    const std::string out = dir.file(std::string("out-") + k.method);
    std::vector<std::string> args = {"quantize", folder, out};
    args.insert(args.end(), k.flags.begin(), k.flags.end());
    r = run_tern(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(std::string("folder: ") + out + "/"), std::string::npos) << r.err;
    EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.model")) << out;
    LoadOptions load;
    load.model = out;
    const LoadedModel m = load_model(load);
    EXPECT_EQ(m.description.find(std::string("safetensors, ") + k.method) != std::string::npos,
              true)
        << m.description;
    EXPECT_EQ(m.weights.layers[0].w_up.dtype, k.dtype) << k.method;
    EXPECT_LT(testing::relative_rms_error(prefill_logits(out), reference), k.max_error) << k.method;
    const auto gen = run_tern({"generate", "-m", out, "-p", "Once upon a time", "-n", "4"});
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
  }
}

TEST(QuantizeCli, RefusesCheckpointSettingsItCannotWrite) {
  TERN_REQUIRE_FIXTURE("model-configs/qwen3-0.6b/config.json");
  TempDir dir("quantize-ckpt-refused");
  const std::string f32 = write_f32_model(dir);
  const std::string out = dir.file("out");
  const std::vector<std::pair<std::vector<std::string>, const char*>> cases = {
      {{"q4_0", "--output-format", "gptq"}, "takes no TYPE"},
      {{"--output-format", "gguf"}, "TYPE is required"},
      {{"--output-format", "exl2"}, "one of gguf, gptq, awq, mlx"},
      {{"--output-format", "gptq", "--bits", "3"}, "4- and 8-bit"},
      {{"--output-format", "awq", "--bits", "8"}, "AWQ's GEMM checkpoints are 4-bit"},
      {{"--output-format", "mlx", "--group-size", "100"}, "32, 64, 128"},
      {{"--output-format", "mlx", "--sym"}, "--sym is GPTQ's"},
      {{"--output-format", "awq", "--desc-act"}, "no g_idx"},
      {{"--output-format", "awq"}, "needs the inputs' statistics"},
      {{"--output-format", "gptq", "--desc-act"}, "second moments"},
      {{"--output-format", "gptq", "--pure"}, "--pure is for GGUF output"},
      {{"q4_0", "--bits", "4"}, "are for --output-format"},
  };
  for (const auto& [flags, phrase] : cases) {
    std::vector<std::string> args = {"quantize", f32, out};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_tern(args);
    EXPECT_NE(r.exit_code, 0) << phrase;
    EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << phrase;
  }
  // Before the minutes of quantization, not after: a module GPTQ cannot hold.
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  const auto r = run_tern(
      {"quantize", fixture("stories260K/stories260K.gguf"), out, "--output-format", "gptq"});
  EXPECT_NE(r.err.find("self_attn.q_proj has 64 inputs, which --group-size 128 does not divide"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tern
