// Runs the suite's matrix: prepares the weight files (tern quantize, tern imatrix), then each
// section's commands one after another (tern's own commands, run as processes of this binary,
// and llama.cpp's where asked), and collects their JSON into rows.
#pragma once

#include <filesystem>
#include <ostream>

#include "tern/bench/suite/suite_config.h"
#include "tern/bench/suite/suite_results.h"

namespace tern::bench {

// `work_dir` receives models/ (the weight files made, reused by a later run), logs/ (the
// servers' output) and the serving benchmarks' result JSON; `log` a line per command. A command
// that fails stops the suite with a tern::Error naming it and the end of its stderr.
SuiteResults run_suite(const SuiteConfig& config, const std::filesystem::path& work_dir,
                       std::ostream& log);

}  // namespace tern::bench
