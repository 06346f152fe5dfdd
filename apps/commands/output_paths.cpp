// See output_paths.h.
#include "commands/output_paths.h"

#include <unistd.h>

#include <filesystem>

#include "tern/core/error.h"

namespace tern::cli {
namespace fs = std::filesystem;
namespace {

// The folder a new entry `path` would go into ("." for a bare name).
fs::path parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void check_folder_takes_entries(const fs::path& folder, const std::string& path,
                                const std::string& what) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw Error(what + " " + path + ": the folder " + folder.string() + " does not exist");
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error(what + " " + path + ": the folder " + folder.string() + " is not writable");
}

}  // namespace

void check_output_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(what + " " + path + ": is a folder, not a file");
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    throw Error(what + " " + path + ": exists and is not writable");
  check_folder_takes_entries(parent_of(path), path, what);
}

void check_output_folder(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (::access(path.c_str(), W_OK) != 0)
      throw Error(what + " " + path + ": the folder is not writable");
    return;
  }
  if (fs::exists(path, ec)) throw Error(what + " " + path + ": is a file, not a folder");
  // A folder whose parents are missing too is created with them (create_directories); the
  // nearest one that exists must take entries.
  fs::path existing = fs::path(path).parent_path();
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  check_folder_takes_entries(existing.empty() ? fs::path(".") : existing, path, what);
}

}  // namespace tern::cli
