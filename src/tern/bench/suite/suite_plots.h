// The suite's figures, drawn from its results: decode speed per weight type against the
// bandwidth ceiling; speculation's speedup against α beside the theory's curve; the streams'
// inter-token gaps over time under the mixed load; what a GiB of KV cache holds per dtype.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tern/bench/suite/suite_results.h"

namespace tern::bench {

// Speculative decoding's expected speedup (Leviathan et al. 2023) when each drafted token is
// accepted with probability `alpha`, `k` tokens are drafted per step, and a draft step costs
// `draft_cost` of a target step: (1 − α^(k+1)) / ((1 − α)(k·c + 1)).
double speculative_speedup(double alpha, int k, double draft_cost);

// (file name, SVG) of each figure the results have rows for.
std::vector<std::pair<std::string, std::string>> suite_plots(const SuiteResults& results);

}  // namespace tern::bench
