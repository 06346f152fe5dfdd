// The CPU priority of a server's compute: the engine thread and its OpenMP team, not the HTTP
// or KV-transfer threads. A prefill instance that shares cores with a decode instance on one
// machine runs its compute at a higher nice value, so the decode steps take the cores whenever
// they have work, while its KV transfers, served by a thread of the normal priority, are not
// starved behind them.
#pragma once

namespace tern::server {

// Valid nice values for the compute: 0 (the process's own) to 19 (the lowest). Raising a
// thread's nice value needs no privilege; lowering it below the process's would.
inline constexpr int kMaxComputeNice = 19;

// Throws tern::Error naming --compute-nice unless 0 <= nice <= kMaxComputeNice.
void check_compute_nice(int nice);

// Sets the calling thread's nice value, and that of every thread of the OpenMP team it runs
// its parallel regions on (the team's threads are created by it and would inherit it, but a
// pool made earlier would not). Linux nice values are per thread. Throws tern::Error when the
// kernel refuses.
void set_compute_nice(int nice);

// The calling thread's nice value (for tests and logs).
int thread_nice();

}  // namespace tern::server
