// The suite's processes: a command run to its end for its JSON, and a server kept up while a
// benchmark runs against it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tern::bench {

// A command line as a person would type it: the program's base name, arguments quoted for a
// POSIX shell where they need it.
std::string display_command(const std::vector<std::string>& argv);

// Runs `argv` and returns its output as JSON: the whole stdout, or else its last non-empty line
// (commands that print a report before one JSON line). Throws tern::Error naming the command
// when it fails or prints no JSON.
nlohmann::json run_for_json(const std::vector<std::string>& argv);

// Runs `argv` for its effect; throws like run_for_json when it fails.
void run_checked(const std::vector<std::string>& argv);

// A TCP port nobody listens on now (the kernel's choice).
int free_port();

// A server process (tern serve, tern router, llama-server) from start until destruction, its
// stdout and stderr appended to `log_file`. The constructor returns once GET /health answers
// 200; it throws tern::Error when the process exits first or `timeout_s` passes.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& argv, int port,
                const std::filesystem::path& log_file, double timeout_s = 900);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  void stop();

  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace tern::bench
