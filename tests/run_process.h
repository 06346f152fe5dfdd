// Runs a program (the built `tern` binary, usually) with arguments and captures its exit code,
// stdout and stderr, for tests of the command line.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace tern::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Starts `argv[0]` with `argv`; its stdout goes to `out_fd` and its stderr to `err_fd` (-1 keeps
// this process's), its environment is this one's with `env` (name, value) set. Returns the pid,
// or -1 when it could not start.
//
// posix_spawn, not fork + exec: a forked child of this multi-threaded test process runs the
// atfork handlers (libomp's allocates) while another thread may hold the allocator's lock, and
// under AddressSanitizer that hung a child forever. posix_spawn runs no handlers and touches no
// allocator between the clone and the exec.
inline pid_t spawn_process(const std::vector<std::string>& argv, int out_fd, int err_fd,
                           const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& [name, value] : env)
      replaced |= std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=';
    if (!replaced) env_strings.emplace_back(*e);
  }
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  if (out_fd >= 0) ::posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  if (err_fd >= 0) ::posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Waits for `pid`; its exit code, or 128 + the signal that ended it.
inline int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline ProcessResult run_process(const std::string& program, const std::vector<std::string>& args) {
  // stdout and stderr go to temporary files, so a chatty child can never block on a full pipe.
  char out_path[] = "/tmp/tern_test_out_XXXXXX";
  char err_path[] = "/tmp/tern_test_err_XXXXXX";
  int out_fd = ::mkstemp(out_path);
  int err_fd = ::mkstemp(err_path);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult result;
  const pid_t pid = spawn_process(argv, out_fd, err_fd);
  if (pid > 0) result.exit_code = wait_exit_code(pid);
  ::lseek(out_fd, 0, SEEK_SET);
  ::lseek(err_fd, 0, SEEK_SET);
  result.out = read_all(out_fd);
  result.err = read_all(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  ::unlink(out_path);
  ::unlink(err_path);
  return result;
}

// The tern binary this test suite was built with.
inline ProcessResult run_tern(const std::vector<std::string>& args) {
  return run_process(TERN_BINARY, args);
}

}  // namespace tern::testing
