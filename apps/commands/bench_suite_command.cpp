// `tern bench suite`: the experiment table of what each technique buys (weight types,
// speculative decoding, KV-cache dtypes, chunked prefill and P + D under a mixed load, serving
// by concurrency, real model shapes), run as one matrix and written as results.json,
// results.md and SVG plots. --render redraws the page and plots from a results.json.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "commands/commands.h"
#include "commands/output_paths.h"
#include "tern/bench/suite/suite_config.h"
#include "tern/bench/suite/suite_plots.h"
#include "tern/bench/suite/suite_results.h"
#include "tern/bench/suite/suite_runner.h"
#include "tern/core/error.h"
#include "tern/core/version.h"

namespace tern::cli {
namespace {

namespace fs = std::filesystem;

struct SuiteOptions {
  std::string config_path;
  std::string out_dir = "suite-results";
  std::string work_dir;  // default: OUT/work
  std::string model, draft, llama_cpp, ik_llama_cpp;
  int threads = -1;
  std::string device;
  std::string commit;
  std::string page;    // also write the page here, its plots linked relative to it
  std::string render;  // a results.json to draw again instead of running
};

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path.string() + ": cannot write");
}

void write_outputs(const bench::SuiteResults& results, const SuiteOptions& opt) {
  const fs::path out(opt.out_dir);
  fs::create_directories(out);
  write_file(out / "results.json", bench::results_json(results).dump(2) + "\n");
  std::vector<std::string> plots;
  for (const auto& [name, svg] : bench::suite_plots(results)) {
    write_file(out / name, svg);
    plots.push_back(name);
  }
  write_file(out / "results.md", bench::results_markdown(results, plots));
  std::cout << "wrote " << (out / "results.json").string() << ", results.md and " << plots.size()
            << " plots\n";
  if (!opt.page.empty()) {
    const fs::path page(opt.page);
    const fs::path page_dir = page.parent_path().empty() ? fs::path(".") : page.parent_path();
    std::vector<std::string> linked;
    for (const std::string& p : plots)
      linked.push_back(fs::relative(fs::absolute(out / p), fs::absolute(page_dir)).string());
    write_file(page, bench::results_markdown(results, linked));
    std::cout << "wrote " << page.string() << "\n";
  }
}

void run(const SuiteOptions& opt) {
  if (!opt.render.empty()) {
    std::ifstream in(opt.render);
    if (!in) throw Error(opt.render + ": cannot read");
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) throw Error(opt.render + ": not JSON");
    write_outputs(bench::results_from_json(doc), opt);
    return;
  }
  bench::SuiteConfig config = bench::default_suite_config(bench::fixtures_dir());
  if (!opt.config_path.empty()) {
    std::ifstream in(opt.config_path);
    if (!in) throw Error(opt.config_path + ": cannot read the config");
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) throw Error(opt.config_path + ": not JSON");
    try {
      config = bench::parse_suite_config(doc, fs::path(opt.config_path).parent_path());
    } catch (const Error& e) {
      throw Error(opt.config_path + ": " + e.what());
    }
  }
  if (!opt.model.empty()) config.model = opt.model;
  if (!opt.draft.empty()) config.draft = opt.draft;
  if (!opt.llama_cpp.empty()) config.llama_cpp = opt.llama_cpp;
  if (!opt.ik_llama_cpp.empty()) config.ik_llama_cpp = opt.ik_llama_cpp;
  if (opt.threads >= 0) config.threads = opt.threads;
  if (!opt.device.empty()) config.device = opt.device;
  for (const fs::path* dir : {&config.llama_cpp, &config.ik_llama_cpp})
    if (!dir->empty() && !fs::exists(*dir / "llama-bench"))
      throw Error(dir->string() + ": no llama-bench there (give the build's bin folder)");
  check_output_folder(opt.out_dir, "--out");
  const fs::path work =
      opt.work_dir.empty() ? fs::path(opt.out_dir) / "work" : fs::path(opt.work_dir);
  bench::SuiteResults results = bench::run_suite(config, work, std::cerr);
  results.commit =
      opt.commit.empty() ? std::string(kTernVersion) + " (commit not given)" : opt.commit;
  write_outputs(results, opt);
  if (!results.errors.empty())
    throw Error(std::to_string(results.errors.size()) +
                " section(s) of the suite failed (results.md lists them); the first: " +
                results.errors.front());
}

}  // namespace

void add_bench_suite_command(CLI::App& bench) {
  auto opt = std::make_shared<SuiteOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "suite",
      "The experiment table: weight types, speculative decoding, KV-cache dtypes, chunked "
      "prefill and P + D, serving by concurrency, model shapes; results.json, results.md, SVG "
      "plots");
  cmd->add_option("--config", opt->config_path,
                  "JSON config (every key optional; default: the matrix of docs/RESULTS.md)");
  cmd->add_option("--out", opt->out_dir, "Folder for results.json, results.md and the plots")
      ->capture_default_str();
  cmd->add_option("--work", opt->work_dir,
                  "Folder for the weight files made (reused when present), the servers' logs and "
                  "the serving benchmarks' JSON (default: OUT/work)");
  cmd->add_option("--model,-m", opt->model,
                  "F16/F32 GGUF every weight type is made from (overrides the config)");
  cmd->add_option("--draft", opt->draft,
                  "Draft GGUF for speculative decoding (overrides the config)");
  cmd->add_option(
      "--llama-cpp", opt->llama_cpp,
      "llama.cpp's build/bin: llama-bench, llama-speculative and llama-server's figures "
      "beside tern's (never built or downloaded)");
  cmd->add_option("--ik-llama-cpp", opt->ik_llama_cpp,
                  "ik_llama.cpp's build/bin: its llama-bench figures (-rtr 1)");
  cmd->add_option("--threads,-t", opt->threads, "Threads of every engine (0: all cores)");
  cmd->add_option("--device", opt->device,
                  "Where tern runs the models (vulkan, vulkan:N; default: the CPU); llama.cpp's "
                  "rows then offload every layer (-ngl 99: give a build with that backend)");
  cmd->add_option("--commit", opt->commit,
                  "The tern commit measured, for the page (make results "
                  "passes git's)");
  cmd->add_option(
      "--page", opt->page,
      "Also write the page here (e.g. docs/RESULTS.md), its plots linked relative to it");
  cmd->add_option("--render", opt->render,
                  "Draw results.md and the plots again from this results.json, running nothing");
  cmd->callback([opt] { run(*opt); });
}

}  // namespace tern::cli
