// thread_pool.cpp: a fixed set of workers that spin briefly, then sleep, woken by a generation counter under one
// mutex.
#include "thread_pool.h"

#include "../check.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace dyngrad {

namespace {

// More threads than this are never useful here (and each costs a stack); set_num_threads caps at it.
constexpr int kMaxThreads = 1024;

int default_threads() {
  for (const char* var : {"DYNGRAD_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* s = std::getenv(var)) {
      int n = std::atoi(s);
      if (n > 0) return std::min(n, kMaxThreads);
    }
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// Note [Spin, then sleep]: a worker that has just finished polls for new work for up to kSpin before it sleeps on
// the condition variable, and the caller polls for the workers' last task the same way before it sleeps. A
// training step launches a parallel kernel every few tens of microseconds to a few milliseconds; a worker that
// slept in between had to be woken each time, and on a virtual machine waking a halted vCPU is slow: with
// sleep-only workers a LeNet step took 16.7 ms on 2 threads after a 50 ms pause (8.6 back to back), with a 100 us
// spin 16.3, with 2 ms 10.6 (2 cores, 2026-12-01). The spin is bounded, and after its first kPauseSpin it yields
// the core (sched_yield) to any other runnable thread, so that the pool does not do what OpenMP's unbounded
// spinning did to us when cores were shared (a 100k-element op took 36 ms instead of 0.1).
constexpr auto kSpin = std::chrono::microseconds(2000);
constexpr auto kPauseSpin = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls ready() for up to kSpin; true once it holds. The first kPauseSpin with the CPU's pause instruction (the
// fastest response), then with sched_yield, so that any other runnable thread on this core goes first.
template <typename F>
bool spin_until(F&& ready) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (ready()) return true;
    if (i % 64 == 0) {
      const auto spent = std::chrono::steady_clock::now() - start;
      if (spent > kSpin) return ready();
      if (spent > kPauseSpin) sched_yield();
    }
    cpu_relax();
  }
}

struct Pool {
  std::mutex run_mutex;  // one run_parallel at a time; others run serially
  std::mutex mutex;      // guards everything below but the atomics, which are also written under it
  std::condition_variable wake, done;
  std::vector<std::thread> workers;
  const std::function<void(int)>* task = nullptr;
  int ntasks = 0;
  int next = 0;  // next task index to hand out
  std::atomic<int> unfinished{0};
  std::atomic<uint64_t> generation{0};
  int sleepers = 0;             // workers waiting on `wake`
  bool caller_sleeping = false;  // the caller waiting on `done`
  bool stopping = false;

  // Starts up to `nworkers` workers; when the system refuses a thread (a process or memory limit) it keeps the ones
  // it has: tasks are handed to whoever is free, the caller included, so fewer workers only means less parallelism.
  explicit Pool(int nworkers) {
    for (int i = 0; i < nworkers; ++i) {
      try {
        workers.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        break;
      }
    }
  }

  // Only a pool replaced by set_num_threads dies (when its last user lets go): its workers are idle, stop them.
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
      generation.fetch_add(1);
    }
    wake.notify_all();
    for (auto& w : workers) w.join();
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      spin_until([&] { return generation.load(std::memory_order_acquire) != seen; });  // Note [Spin, then sleep]
      std::unique_lock<std::mutex> lock(mutex);
      if (generation.load() == seen) {
        ++sleepers;
        wake.wait(lock, [&] { return generation.load() != seen; });
        --sleepers;
      }
      seen = generation.load();
      if (stopping) return;
      while (next < ntasks) {
        int i = next++;
        lock.unlock();
        (*task)(i);
        lock.lock();
        if (unfinished.fetch_sub(1) == 1 && caller_sleeping) done.notify_one();
      }
    }
  }

  void run(int n, const std::function<void(int)>& f) {
    bool notify;
    {
      std::lock_guard<std::mutex> lock(mutex);
      task = &f;
      ntasks = n;
      next = 1;  // the caller takes task 0
      unfinished.store(n - 1);
      generation.fetch_add(1);
      notify = sleepers > 0;
    }
    if (notify) wake.notify_all();
    f(0);
    std::unique_lock<std::mutex> lock(mutex);
    while (next < ntasks) {  // help with tasks no worker has picked up yet
      int i = next++;
      lock.unlock();
      f(i);
      lock.lock();
      unfinished.fetch_sub(1);
    }
    if (unfinished.load() != 0) {
      lock.unlock();
      spin_until([&] { return unfinished.load(std::memory_order_acquire) == 0; });  // Note [Spin, then sleep]
      lock.lock();
      caller_sleeping = true;
      done.wait(lock, [&] { return unfinished.load() == 0; });
      caller_sleeping = false;
    }
    task = nullptr;
  }
};

std::atomic<int> g_threads{0};  // 0 = not decided yet; read without the lock by num_threads()
// Never destroyed (nor is the pool it holds at exit): workers may outlive static destruction.
std::shared_ptr<Pool>* g_pool = new std::shared_ptr<Pool>();
std::mutex g_pool_init;
thread_local bool tl_in_parallel = false;

// Note [Forks while kernels run]: os.fork() copies one thread, the caller, and every lock as it was; a lock another
// thread held stays held in the child for ever. So each piece of state shared by threads resets in the child:
// the pool (its workers are not there: the old one must not be joined; it leaks, a new one is made on first use,
// and the pool's init mutex is made afresh), and the BLAS thread state, whose mutex the fork takes first and whose
// count of running matmuls the child forgets (matmul.cpp). tests/test_crash_regressions.py forks while kernels
// run on other threads.
void forget_pool_after_fork() {
  g_pool = new std::shared_ptr<Pool>();
  new (&g_pool_init) std::mutex();
}

std::shared_ptr<Pool> pool() {
  std::lock_guard<std::mutex> lock(g_pool_init);
  if (!*g_pool) {
    static bool registered = false;
    if (!registered) {
      pthread_atfork(nullptr, nullptr, forget_pool_after_fork);
      registered = true;
    }
    if (g_threads == 0) g_threads = default_threads();
    *g_pool = std::make_shared<Pool>(g_threads - 1);
    g_threads = (int)(*g_pool)->workers.size() + 1;  // fewer if the system refused some threads
  }
  return *g_pool;
}

}  // namespace

int machine_cores() {
  static const int cores = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1, (int)std::thread::hardware_concurrency());
  }();
  return cores;
}

int num_threads() {
  if (int n = g_threads.load()) return n;
  std::lock_guard<std::mutex> lock(g_pool_init);
  if (g_threads == 0) g_threads = default_threads();
  return g_threads;
}

void set_num_threads(int n) {
  DG_CHECK(n >= 1, RuntimeError, "set_num_threads: expected a positive number of threads, got ", n, ".");
  std::shared_ptr<Pool> old;
  {
    std::lock_guard<std::mutex> lock(g_pool_init);
    g_threads = std::min(n, kMaxThreads);
    old = std::move(*g_pool);  // rebuilt with the new size on next use
  }
  // `old` dies here, or with the last run_parallel still using it: its workers are stopped and joined
}

void run_parallel(int ntasks, const std::function<void(int)>& task) {
  if (ntasks <= 1 || num_threads() <= 1 || tl_in_parallel) {
    for (int i = 0; i < ntasks; ++i) task(i);
    return;
  }
  std::shared_ptr<Pool> p = pool();
  std::unique_lock<std::mutex> busy(p->run_mutex, std::try_to_lock);
  if (!busy.owns_lock()) {
    for (int i = 0; i < ntasks; ++i) task(i);
    return;
  }
  // a task that throws must not end a worker thread (std::terminate): the first exception is kept and rethrown
  // here, on the caller, once every task has finished
  std::exception_ptr error;
  std::mutex error_mutex;
  const std::function<void(int)> guarded = [&](int i) {
    try {
      task(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  tl_in_parallel = true;
  p->run(ntasks, guarded);
  tl_in_parallel = false;
  if (error) std::rethrow_exception(error);
}

}  // namespace dyngrad
