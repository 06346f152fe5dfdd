// posix_spawn, not fork + exec: a forked child of a multi-threaded process runs the atfork
// handlers (libomp's allocates) while another thread may hold the allocator's lock, and under
// AddressSanitizer that hung a child forever. posix_spawn runs no handlers and touches no
// allocator between the clone and the exec.
#include "tern/core/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tern/core/error.h"

extern char** environ;

namespace tern {
namespace {

std::string read_all(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

}  // namespace

pid_t spawn_process(const std::vector<std::string>& argv, int out_fd, int err_fd,
                    const std::vector<std::pair<std::string, std::string>>& env) {
  if (argv.empty()) return -1;
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
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env) {
  // stdout and stderr go to temporary files, so a chatty child can never block on a full pipe.
  char out_path[] = "/tmp/tern_process_out_XXXXXX";
  char err_path[] = "/tmp/tern_process_err_XXXXXX";
  const int out_fd = ::mkstemp(out_path);
  const int err_fd = ::mkstemp(err_path);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) ::close(out_fd), ::unlink(out_path);
    if (err_fd >= 0) ::close(err_fd), ::unlink(err_path);
    throw Error("cannot create a temporary file in /tmp: " + std::string(std::strerror(errno)));
  }
  ProcessResult result;
  const pid_t pid = spawn_process(argv, out_fd, err_fd, env);
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

std::string self_executable() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this program's own path (/proc/self/exe): " + ec.message());
  return p.string();
}

}  // namespace tern
