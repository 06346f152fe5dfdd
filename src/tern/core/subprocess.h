// Running another program: tern's benchmark suite runs tern's own commands (and llama.cpp's)
// one after another, and the tests run the tern binary, both through these.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace tern {

struct ProcessResult {
  int exit_code = -1;  // 128 + the signal that ended it; -1: it could not start
  std::string out;
  std::string err;
};

// Starts `argv[0]` (a path, or a name looked up on PATH) with `argv`; its stdout goes to
// `out_fd` and its stderr to `err_fd` (-1 keeps this process's), its environment is this one's
// with `env` (name, value) set. Returns the pid, or -1 when it could not start.
pid_t spawn_process(const std::vector<std::string>& argv, int out_fd, int err_fd,
                    const std::vector<std::pair<std::string, std::string>>& env = {});

// Waits for `pid`; its exit code, or 128 + the signal that ended it.
int wait_exit_code(pid_t pid);

// Runs `argv` to its end and captures both streams.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env = {});

// The path of the running executable (/proc/self/exe resolved).
std::string self_executable();

}  // namespace tern
