// thread_pool.h: the workers that split large kernels across the cores.
//
// Why our own and not OpenMP: OpenMP's workers spin-wait between parallel regions, which is fast on an idle
// machine but stalls badly when the cores are shared (another process, or torch's and OpenBLAS's pools in the
// same process): a 100k-element op took 36 ms instead of 0.1. These workers spin for at most 2 ms after a task
// (yielding the core after the first 50 us), then sleep on a condition variable (Note [Spin, then sleep] in
// thread_pool.cpp); only kernels big enough (parallel_grain(), kernels.h) use them.
#pragma once
#include <cstdint>
#include <functional>

namespace dyngrad {

// Runs task(i) for i in [0, ntasks) on up to num_threads() threads, the caller running task 0. If the pool is busy
// (another Python thread is using it, or this is a worker), everything runs on the calling thread instead. A task's
// exception reaches the caller (the first one, after the other tasks have finished).
void run_parallel(int ntasks, const std::function<void(int)>& task);
int num_threads();
// The cores this process may run on (its CPU affinity at first call), whatever num_threads() is set to: for work
// splits that must not depend on the thread count (Note [Deterministic matmul]).
int machine_cores();
// 1 turns parallel kernels off; RuntimeError for n < 1 (as torch); more than 1024 are capped. When the system refuses
// to start some of the threads (a process or memory limit), the pool runs with those it got and num_threads() says
// how many that is (a failed start used to abort the process).
void set_num_threads(int n);

}  // namespace dyngrad
