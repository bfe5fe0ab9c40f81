"""Do dyngrad's kernels release the GIL? Two measurements, with dyngrad's own kernel threads pinned to 1 so that
any overlap comes from Python threads alone:

1. GIL probe: a Python thread counts loop iterations while the main thread runs a long kernel. A kernel that holds
   the GIL starves the counter; one that releases it lets the counter run at the speed it has when idle.
2. Throughput: the same batch of independent forward + backward jobs run serially and by N Python threads. With
   the GIL released inside kernels, N threads on N cores approach an N-times speed-up; a pure-Python workload of
   similar length is shown alongside as the GIL-bound baseline (about 1x).

    python bench/threads_gil.py [--threads 2] [--repeats 5]

Numbers are medians of --repeats runs; they depend on the machine and its load (print `nproc` and the load with
them). The tests never time anything: tests/test_threads.py checks correctness only.
"""
import argparse
import os
import statistics
import threading
import time

os.environ.setdefault("DYNGRAD_NUM_THREADS", "1")   # kernels single-threaded: overlap must come from Python threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _path  # noqa: F401,E402
import dyngrad as dg  # noqa: E402


def probe(kernel, seconds=0.5):
    """Iterations/s of a Python counting thread while `kernel` runs repeatedly in this thread for `seconds`."""
    count, stop = [0], threading.Event()

    def counter():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=counter)
    t.start()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        kernel()
    elapsed = time.perf_counter() - start
    stop.set()
    t.join()
    return count[0] / elapsed


def idle(seconds=0.05):
    time.sleep(seconds)


def pure_python(n=200_000):
    s = 0.0
    for i in range(n):
        s += i * 0.5
    return s


def kernel_jobs():
    """Each job makes its own leaves (detach() aliases: no copy), so graphs share no node: dyngrad refuses two
    backward passes through one AccumulateGrad at once (tests/test_threads.py)."""
    a, b = dg.randn(384, 384), dg.randn(384, 384)
    big = dg.randn(600_000)

    def matmul_job():
        x, w = a.detach().requires_grad_(), b.detach().requires_grad_()
        ((x @ w).tanh() @ w).sum().backward()

    def elementwise_job():
        x = big.detach().requires_grad_()
        ((x * 1.5).sigmoid() * x.exp().clamp(max=4.0)).sum().backward()

    return {"matmul 384^3 fwd+bwd": matmul_job, "elementwise 600k fwd+bwd": elementwise_job}


def throughput(job, threads, jobs_per_thread):
    """Seconds for threads * jobs_per_thread runs of `job`: serially, then spread over `threads` threads."""
    start = time.perf_counter()
    for _ in range(threads * jobs_per_thread):
        job()
    serial = time.perf_counter() - start

    barrier = threading.Barrier(threads + 1)

    def worker():
        barrier.wait()
        for _ in range(jobs_per_thread):
            job()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    start = time.perf_counter()
    barrier.wait()
    for t in pool:
        t.join()
    return serial, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 2))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=6, help="jobs per thread in the throughput test")
    opts = parser.parse_args()
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, threads {opts.threads}, "
          f"dyngrad kernel threads {os.environ['DYNGRAD_NUM_THREADS']}")

    jobs = kernel_jobs()
    for job in jobs.values():
        job()  # warm-up: pools, BLAS

    print("\n1. GIL probe: a Python counter's iterations/s while the main thread runs ...")
    rows = [("sleep (GIL free)", idle), ("pure-Python loop (GIL held)", pure_python)] + list(jobs.items())
    base = None
    for name, fn in rows:
        rate = statistics.median(probe(fn) for _ in range(opts.repeats))
        base = base or rate
        print(f"   {name:<28} {rate / 1e6:7.2f} M/s  ({rate / base:5.0%} of idle)")

    print(f"\n2. {opts.threads} threads x {opts.jobs} jobs vs the same jobs serially (median of {opts.repeats})")
    for name, fn in [("pure-Python loop", pure_python)] + list(jobs.items()):
        runs = [throughput(fn, opts.threads, opts.jobs) for _ in range(opts.repeats)]
        serial = statistics.median(r[0] for r in runs)
        threaded = statistics.median(r[1] for r in runs)
        print(f"   {name:<28} serial {serial * 1e3:8.1f} ms   threaded {threaded * 1e3:8.1f} ms   "
              f"speed-up {serial / threaded:4.2f}x")


if __name__ == "__main__":
    main()
