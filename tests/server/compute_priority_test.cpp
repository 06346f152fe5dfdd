// --compute-nice: the engine thread and its OpenMP team run at the nice value given, the
// server's other threads (HTTP, the caller) keep theirs.
#include "tern/server/compute_priority.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.h"
#include "server/server_test_util.h"
#include "tern/core/error.h"

namespace tern::testing {
namespace {

// The nice value of every thread of this process, from /proc/self/task/TID/stat (field 19).
std::vector<int> nice_of_threads() {
  std::vector<int> out;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t name_end = stat.rfind(')');  // the thread's name may hold spaces
    if (name_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(name_end + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) out.push_back(std::stoi(field));
  }
  ::closedir(dir);
  return out;
}

TEST(ComputePriority, NiceOutsideZeroToNineteenIsRefused) {
  EXPECT_NO_THROW(server::check_compute_nice(0));
  EXPECT_NO_THROW(server::check_compute_nice(19));
  try {
    server::check_compute_nice(20);
    FAIL() << "20 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--compute-nice must be 0 to 19, got 20"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(server::check_compute_nice(-1), Error);
}

TEST(ComputePriority, SetsTheThreadAndItsOpenMpTeamOnly) {
  const int base = server::thread_nice();
  if (base > 16) GTEST_SKIP() << "this process already runs at nice " << base;
  const int nice = base + 3;
  std::vector<int> team;
  int in_thread = -100;
  std::thread worker([&] {
    server::set_compute_nice(nice);
    in_thread = server::thread_nice();
    const int threads = std::max(2, omp_get_max_threads());
    team.assign(static_cast<size_t>(threads), -100);
#pragma omp parallel num_threads(threads)
    team[static_cast<size_t>(omp_get_thread_num())] = server::thread_nice();
  });
  worker.join();
  EXPECT_EQ(in_thread, nice);
  for (int n : team) EXPECT_EQ(n, nice);
  EXPECT_EQ(server::thread_nice(), base);  // the caller's own is untouched
}

TEST(ComputePriority, ServerRunsItsEngineAtTheComputeNice) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  const int base = server::thread_nice();
  if (base > 16) GTEST_SKIP() << "this process already runs at nice " << base;
  server::ServerOptions options;
  options.compute_nice = base + 3;
  TestServer server(tiny_chat_qwen3(), server_engine(), options);
  const HttpResult r =
      post(server.port(), "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 4}});
  ASSERT_EQ(r.status, 200) << r.body;  // the engine thread's team exists now
  int niced = 0, others = 0;
  for (int n : nice_of_threads()) {
    if (n == base + 3) ++niced;
    if (n == base) ++others;
  }
  EXPECT_GE(niced, 1);   // the engine thread (and its team's workers)
  EXPECT_GE(others, 2);  // this thread, the server's, its HTTP threads
  EXPECT_EQ(server::thread_nice(), base);
}

TEST(ComputePriority, AServerRefusesANiceOutsideTheRange) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer");
  server::ServerOptions options;
  options.compute_nice = 20;  // refused on the engine thread, thrown by the constructor
  try {
    TestServer server(tiny_chat_qwen3(), server_engine(), options);
    FAIL() << "a compute nice of 20 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--compute-nice must be 0 to 19"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern::testing
