// A plan for people (tables on stdout) and for programs (`--json`: every figure in bytes,
// bytes/s and tokens/s).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tern/plan/plan.h"

namespace tern::plan {

std::string format_plan(const Plan& plan);
nlohmann::ordered_json plan_json(const Plan& plan);

// 1234567 → "1,234,567".
std::string grouped(uint64_t n);
// Bytes in the unit people read them in: "4.29 GiB", "12.5 MiB", "640 KiB", "100 B".
std::string format_bytes(uint64_t bytes);

}  // namespace tern::plan
