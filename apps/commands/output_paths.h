// Output paths checked before the work whose end writes them: a missing or read-only folder is
// found in a moment, not after minutes of quantizing, generating or benchmarking.
#pragma once

#include <string>

namespace tern::cli {

// `path` can be created or replaced as a file: its folder exists and is writable, and it is not
// a folder itself. Throws tern::Error naming `what` (the flag or argument) and the path.
void check_output_file(const std::string& path, const std::string& what);
// `path` is a writable folder, or one that can be created in a writable folder.
void check_output_folder(const std::string& path, const std::string& what);

}  // namespace tern::cli
