// The subcommands of the tern binary; each adds itself to the CLI11 app.
#pragma once

namespace CLI {
class App;
}

namespace tern::cli {

void add_inspect_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_bench_model_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_imatrix_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_router_command(CLI::App& app);
void add_kernels_command(CLI::App& app);
void add_devices_command(CLI::App& app);
// Subcommands of `tern bench`.
void add_bench_throughput_command(CLI::App& bench);
void add_bench_serve_command(CLI::App& bench);
void add_bench_suite_command(CLI::App& bench);

}  // namespace tern::cli
