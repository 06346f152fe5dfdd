// tern's version: `tern --version` and the server's /version route.
#pragma once

namespace tern {

inline constexpr const char* kTernVersion = "0.1.0";

}  // namespace tern
