// Processes of the suite: commands for their JSON, servers until the benchmark ends.
#include "tern/bench/suite/suite_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "tern/core/error.h"
#include "tern/core/subprocess.h"

namespace tern::bench {
namespace {

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() &&
      arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                            "_-./=:,+@%") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The last lines of a process's stderr, for an error message.
std::string tail(const std::string& text, size_t lines = 8) {
  size_t pos = text.size();
  while (pos > 0 && lines > 0) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    --lines;
  }
  return text.substr(pos + 1);
}

ProcessResult run_or_throw(const std::vector<std::string>& argv) {
  ProcessResult r = run_process(argv);
  if (r.exit_code == -1) throw Error("cannot start " + argv.front());
  if (r.exit_code != 0)
    throw Error("`" + display_command(argv) + "` failed (exit code " + std::to_string(r.exit_code) +
                "):\n" + tail(r.err));
  return r;
}

}  // namespace

std::string display_command(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string arg = i == 0 ? std::filesystem::path(argv[0]).filename().string() : argv[i];
    if (i > 0) out += ' ';
    out += shell_quote(arg);
  }
  return out;
}

nlohmann::json run_for_json(const std::vector<std::string>& argv) {
  const ProcessResult r = run_or_throw(argv);
  nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) return doc;
  std::istringstream lines(r.out);
  std::string line, last;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  doc = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw Error("`" + display_command(argv) + "` printed no JSON; its stdout ends: " + tail(r.out));
  return doc;
}

void run_checked(const std::vector<std::string>& argv) { run_or_throw(argv); }

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error("cannot find a free TCP port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

ServerProcess::ServerProcess(const std::vector<std::string>& argv, int port,
                             const std::filesystem::path& log_file, double timeout_s)
    : port_(port) {
  const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw Error(log_file.string() + ": cannot open the server log");
  {
    const std::string header = "== " + display_command(argv) + "\n";
    [[maybe_unused]] const ssize_t n = ::write(log_fd, header.data(), header.size());
  }
  pid_ = spawn_process(argv, log_fd, log_fd);
  ::close(log_fd);
  if (pid_ < 0) throw Error("cannot start " + argv.front());
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(1);
  client.set_read_timeout(5);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  while (true) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw Error("`" + display_command(argv) + "` exited before it served; see " +
                  log_file.string());
    }
    const httplib::Result r = client.Get("/health");
    if (r && r->status == 200) return;
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw Error("`" + display_command(argv) + "` did not answer /health on port " +
                  std::to_string(port_) + "; see " + log_file.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

ServerProcess::~ServerProcess() { stop(); }

void ServerProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  wait_exit_code(pid_);
  pid_ = -1;
}

}  // namespace tern::bench
