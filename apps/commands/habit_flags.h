// Flags that hands used to vLLM or llama.cpp type out of habit. Each gets what its author meant
// where tern does the same thing (under tern's name, or as the default it already is), or one
// line saying what tern calls it or why it has no meaning here; never CLI11's bare "not
// expected". --help lists them in a group of their own.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tern::cli {

struct EngineOptions;

// The command line with the habits CLI11 cannot name spelled out: vLLM's -tp and -pp,
// llama.cpp's -ngl (CLI11's one-dash names are one letter).
std::vector<std::string> spell_out_habit_flags(int argc, char** argv);

// On the commands that run the engine (serve, generate, bench throughput): vLLM's
// --enable-prefix-caching (tern's default; refused beside --no-enable-prefix-caching),
// --gpu-memory-utilization, --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp,
// --trust-remote-code; llama.cpp's -c/--ctx-size (--max-model-len), -ngl/--n-gpu-layers
// (--gpu-layers).
void add_engine_habit_flags(CLI::App* cmd, EngineOptions& engine);

// On tern serve: vLLM's --disable-log-requests (tern serve logs no request).
void add_serve_habit_flags(CLI::App* cmd);

}  // namespace tern::cli
