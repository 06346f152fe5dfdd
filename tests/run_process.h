// Runs a program (the built `tern` binary, usually) with arguments and captures its exit code,
// stdout and stderr, for tests of the command line.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

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

inline ProcessResult run_process(const std::string& program, const std::vector<std::string>& args) {
  // stdout and stderr go to temporary files, so a chatty child can never block on a full pipe.
  char out_path[] = "/tmp/tern_test_out_XXXXXX";
  char err_path[] = "/tmp/tern_test_err_XXXXXX";
  int out_fd = ::mkstemp(out_path);
  int err_fd = ::mkstemp(err_path);
  ProcessResult result;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
