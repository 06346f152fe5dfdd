// `tern perplexity` through the built binary on stories260K: --json results equal the
// library's, a base file written by one run is what a --kl-divergence run compares with, and
// bad inputs end in one line on stderr and exit code 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine_test_util.h"
#include "eval/eval_test_util.h"
#include "models/model_test_util.h"
#include "run_process.h"
#include "tern/eval/kld_base_file.h"
#include "tern/eval/perplexity.h"

namespace tern {
namespace {

using testing::run_tern;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(PerplexityCommand, JsonResultsAndKlDivergence) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::TempDir dir("ppl-cli");
  const std::string model = testing::fixture("stories260K/stories260K.gguf");
  const std::string text = testing::story_text(120);
  write_file(dir.file("text.txt"), text);

  const auto ppl = run_tern({"perplexity", "-m", model, "-f", dir.file("text.txt"), "--ctx", "64",
                             "--kl-divergence-base", dir.file("base.kld"), "--json", "-t", "2"});
  ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
  const nlohmann::json r = nlohmann::json::parse(ppl.out);
  // The library on the same windows.
  LoadedModel m = testing::stories260k();
  Decoder decoder(m.config, m.weights, find_device("cpu"));
  const EvalWindows windows = tokenize_eval_windows(*m.tokenizer, text, 64);
  const PerplexityResult want = perplexity(decoder, windows, 2048);
  EXPECT_DOUBLE_EQ(r["ppl"].get<double>(), want.ppl);
  EXPECT_DOUBLE_EQ(r["ppl_uncertainty"].get<double>(), want.uncertainty);
  EXPECT_EQ(r["count"], want.count);
  EXPECT_EQ(r["num_windows"], windows.num_windows());
  EXPECT_EQ(r["running_ppl"].size(), static_cast<size_t>(windows.num_windows()));
  EXPECT_NE(ppl.err.find("[1]"), std::string::npos) << ppl.err;
  char final_line[128];
  std::snprintf(final_line, sizeof final_line, "Final estimate: PPL = %.4f +/- %.5f", want.ppl,
                want.uncertainty);
  EXPECT_NE(ppl.err.find(final_line), std::string::npos) << ppl.err;

  // The model against itself, then its Q4_0 requantization, against the file just written.
  const auto self = run_tern({"perplexity", "-m", model, "--kl-divergence", "--kl-divergence-base",
                              dir.file("base.kld"), "--json", "-b", "100"});
  ASSERT_EQ(self.exit_code, 0) << self.err;
  const nlohmann::json s = nlohmann::json::parse(self.out);
  EXPECT_EQ(s["kld"]["value"], 0.0);
  EXPECT_EQ(s["kld_maximum"], 0.0);
  EXPECT_EQ(s["same_top"]["value"], 1.0);
  EXPECT_EQ(s["count"], want.count);

  const auto q4 = run_tern({"perplexity", "-m", model, "--weight-type", "q4_0", "--kl-divergence",
                            "--kl-divergence-base", dir.file("base.kld")});
  ASSERT_EQ(q4.exit_code, 0) << q4.err;
  for (const char* label :
       {"Mean PPL(Q)                   :", "Mean PPL(base)                :",
        "Cor(ln(PPL(Q)), ln(PPL(base))):", "Mean ln(PPL(Q)/PPL(base))     :",
        "Mean PPL(Q)/PPL(base)         :", "Mean PPL(Q)-PPL(base)         :", "Mean    KLD:",
        "Maximum KLD:", "99.9%   KLD:", "95.0%   KLD:", "Median  KLD:", " 0.1%   KLD:",
        "Minimum KLD:", "Mean    Δp:", "75.0%   Δp:", "25.0%   Δp:", "Minimum Δp:", "RMS Δp    :",
        "Same top p:"})
    EXPECT_NE(q4.out.find(label), std::string::npos) << label << "\n" << q4.out;
  const auto q4_json =
      run_tern({"perplexity", "-m", model, "--weight-type", "q4_0", "--kl-divergence",
                "--kl-divergence-base", dir.file("base.kld"), "--json"});
  ASSERT_EQ(q4_json.exit_code, 0) << q4_json.err;
  const nlohmann::json q = nlohmann::json::parse(q4_json.out);
  EXPECT_GT(q["kld"]["value"].get<double>(), 1e-3);
  EXPECT_LT(q["same_top"]["value"].get<double>(), 1.0);
  EXPECT_NEAR(q["ppl_base"]["value"].get<double>(), want.ppl, 1e-9 * want.ppl);
  EXPECT_GT(q["kld_percentiles"]["99.0%"].get<double>(), q["kld_median"].get<double>());
}

TEST(PerplexityCommand, RefusalsAreOneLineAndExitOne) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::TempDir dir("ppl-cli-bad");
  const std::string model = testing::fixture("stories260K/stories260K.gguf");
  write_file(dir.file("short.txt"), "Once upon a time, there was a cat.");
  const auto short_text =
      run_tern({"perplexity", "-m", model, "-f", dir.file("short.txt"), "--ctx", "64"});
  EXPECT_EQ(short_text.exit_code, 1);
  EXPECT_NE(short_text.err.find("tern: " + dir.file("short.txt") + ": the text gives only"),
            std::string::npos)
      << short_text.err;

  write_file(dir.file("cut.kld"), std::string("TERNKLD\0\1\0\0\0", 12));
  const auto cut = run_tern(
      {"perplexity", "-m", model, "--kl-divergence", "--kl-divergence-base", dir.file("cut.kld")});
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("tern: " + dir.file("cut.kld") + ": 12 bytes is too short"),
            std::string::npos)
      << cut.err;

  const auto no_base = run_tern({"perplexity", "-m", model, "--kl-divergence"});
  EXPECT_EQ(no_base.exit_code, 1);
  EXPECT_NE(no_base.err.find("--kl-divergence needs --kl-divergence-base"), std::string::npos)
      << no_base.err;
}

// A refusal is the whole output: one line on stderr, nothing before it (no model line, no
// plan, no table header), exit code 1.
void expect_only_refusal(const testing::ProcessResult& r, const std::string& line) {
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tern: " + line + "\n");
  EXPECT_EQ(r.out, "");
}

TEST(PerplexityCommand, RefusalsComeBeforeAnyOutput) {
  TERN_REQUIRE_FIXTURE("stories260K/stories260K.gguf");
  testing::TempDir dir("ppl-cli-first");
  const std::string model = testing::fixture("stories260K/stories260K.gguf");
  // A base file of a vocabulary of 8 (stories260K has 512): one window of 8 tokens, its 3
  // scored rows uniform.
  EvalWindows windows;
  windows.ctx = 8;
  windows.bos = 1;
  windows.tokens = {1, 2, 3, 4, 5, 6, 7, 0};
  {
    KldBaseWriter writer(dir.file("vocab8.kld"), windows, 8);
    writer.write_window(std::vector<float>(3 * 8, std::log(1.0f / 8)));
    writer.finish();
  }
  expect_only_refusal(run_tern({"perplexity", "-m", model, "--kl-divergence",
                                "--kl-divergence-base", dir.file("vocab8.kld")}),
                      dir.file("vocab8.kld") +
                          ": made with a vocabulary of 8 tokens, the model under test (" + model +
                          ") has 512");
  expect_only_refusal(run_tern({"perplexity", "-m", model, "--kl-divergence",
                                "--kl-divergence-base", dir.file("vocab8.kld"), "--json"}),
                      dir.file("vocab8.kld") +
                          ": made with a vocabulary of 8 tokens, the model under test (" + model +
                          ") has 512");

  expect_only_refusal(run_tern({"perplexity", "-m", model}),
                      "give the text with -f FILE (or --kl-divergence with a base file)");
  const auto missing = run_tern({"perplexity", "-m", model, "-f", dir.file("missing.txt")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("tern: " + dir.file("missing.txt"), 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  write_file(dir.file("text.txt"), testing::story_text(120));
  const auto unwritable = run_tern({"perplexity", "-m", model, "-f", dir.file("text.txt"), "--ctx",
                                    "64", "--kl-divergence-base", dir.file("no-dir/base.kld")});
  expect_only_refusal(unwritable,
                      dir.file("no-dir/base.kld") + ": cannot create the KL-divergence base file");
}

}  // namespace
}  // namespace tern
