// Runs the built `tern` binary with arguments and captures its exit code, stdout and stderr,
// for tests of the command line (tern/core/subprocess.h does the running).
#pragma once

#include <string>
#include <vector>

#include "tern/core/subprocess.h"

namespace tern::testing {

using tern::ProcessResult;
using tern::spawn_process;
using tern::wait_exit_code;

inline ProcessResult run_process(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  return tern::run_process(argv);
}

// The tern binary this test suite was built with.
inline ProcessResult run_tern(const std::vector<std::string>& args) {
  return run_process(TERN_BINARY, args);
}

}  // namespace tern::testing
