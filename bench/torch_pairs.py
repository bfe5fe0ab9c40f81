"""Does a dyngrad training step slow the PyTorch step that runs right after it in the same process? (issue 26)

Threads that keep spinning after our kernels (our pool's workers, Note [Spin, then sleep] in
csrc/dyngrad/kernels/thread_pool.cpp, or numpy's OpenBLAS workers) would take the cores from PyTorch's OpenMP
threads, and a step that touches much memory evicts PyTorch's working set from the caches. For each workload of the
bench (`python -m dyngrad.bench --list`) and each thread count, one process builds the dyngrad case and two
independent torch cases (own parameters, data and memory) and then runs rounds in a fixed interleaved order, timing
only the first torch case's step:
  solo    torch step right after the same torch step (the reference)
  twin    torch step right after the *other* torch model's step (same sizes, own memory): what any step of the
          same size costs the next one, a control that involves no dyngrad
  numpy   torch step right after numpy adds 1 in place over as many bytes as the dyngrad step touches (its
          "touched" column below): the pure cache-eviction control
  pair    torch step right after a dyngrad step (what a program mixing the two libraries sees)
  gap     (--gap) torch step after a dyngrad step and a 5 ms sleep (past our pool's 2 ms spin: what is left is
          the cache and the machine, not our threads)
Each torch step is timed twice: wall time ("wall" rows) and the process's CPU time ("cpu" rows, time.process_time:
at 1 thread that is the one thread's own time, blind to the other helpers' processes that take the cores on a loaded
machine; at 2 threads it includes OpenMP's spin-waits). The kinds alternate round by round, so that a change in the machine's load hits all alike. Printed: the median of
solo in ms per step and each kind's median / solo's median (1.00: no slow-down; the issue's target is pair/solo
<= 1.10; pair/twin is what dyngrad costs beyond any same-size step), "touched": the MiB of memory pages one step
references (torch / dyngrad; /proc/self/clear_refs then smaps_rollup's Referenced, so 4 KiB granules, 2 MiB ones
for dyngrad's huge-page buffers, and the interpreter's own ~1.4 MiB included), "cache": the bytes dyngrad's buffer
cache holds after a step (dyngrad._C._cached_buffer_bytes, Note [Bounded buffer cache] in csrc/dyngrad/pool.cpp),
and "ours": the CPU time dyngrad's own threads (those its first step started) used during all the timed torch steps
together, from /proc (0 ms: none of our threads ran while torch did), and "preempted": in how many of the timed
(step, torch step) samples the main thread was preempted (getrusage's involuntary context switches): another
process then ran on the core and its memory traffic cooled the caches for every kind alike, which pulls all the
ratios towards 1. A "cpuq" row (CPU-time ratios of the samples that were not preempted) follows when every kind has
at least 3 of them. Hardware cache counters (perf stat -e
cache-misses) are not available in this KVM guest, hence the page-reference counts. Timings depend on the CPU and
its load: the header prints both.

    python bench/torch_pairs.py [--only gpt-train,word-lstm-train,...] [--threads 1,2] [--rounds 15] [--gap]

Measured (2026-12-03, Intel Xeon family 6 model 167, 2 cores, KVM, load 8-10 from other jobs: every sample was
preempted, so these are the CPU-time rows; `--only cnn-train,lstm-train,transformer-train,wide-mlp-train,gpt-train
--threads 1 --rounds 9`, two runs each of main's buffer cache (FIFO) and of Note [Hot buffers first] (LIFO),
alternated process by process). Ratios to solo, run 1/run 2:
                     twin       numpy      pair       pair/twin  | touched MiB torch/dyngrad, cache MiB
  FIFO cnn         0.96/1.05  1.09/1.06  1.04/1.07  1.08/1.02   |  19.5/29.0, 23.6
       lstm        1.00/1.02  1.00/1.06  1.00/1.03  1.00/1.01   |  27.4/28.5, 21.2
       transformer 1.00/0.99  0.98/1.02  1.01/1.01  1.01/1.02   |  50.9/30.0, 23.8
       wide MLP    1.01/0.99  1.00/1.00  1.01/1.01  1.00/1.01   |  51.7/34.2, 24.6
       gpt         0.97/0.98  0.98/1.01  1.02/1.01  1.05/1.02   |  89.5/69.4, 50.9
  LIFO cnn         1.00/1.03  1.01/1.05  0.97/1.04  0.97/1.02   |  20.2/28.8, 23.6
       lstm        1.00/1.03  1.05/1.04  1.05/1.04  1.06/1.01   |  26.4/24.8, 19.2
       transformer 0.97/1.02  0.99/1.01  1.00/1.05  1.04/1.03   |  46.9/32.1, 23.8
       wide MLP    0.97/1.00  0.99/1.00  1.01/1.01  1.03/1.01   |  41.5/30.3, 24.6
       gpt         0.97/1.02  0.99/1.01  0.99/1.01  1.02/0.99   |  77.2/61.2, 52.9
Every pair ratio is within 1.07 of solo and within 1.08 of the twin control (a torch step of the same size), and
numpy touching the dyngrad step's bytes slows the next torch step as much as the dyngrad step does: at this load the
other processes cool the caches between any two steps, which compresses every ratio; the session's quiet-ish run
(1.13/1.15 cnn, 1.15/1.17 lstm, 1.11/1.13 transformer, 1.06/1.09 wide MLP, 1.01/1.04 gpt at 1/2 threads) had no
twin control. dyngrad's steps reference fewer pages than torch's except in the CNN (whose 1.2 MiB activations get
2 MiB huge pages, counted whole), and in a fresh process each alone, 3 steps grow the peak RSS (VmHWM) by
torch/dyngrad 29/20 MiB (cnn), 33/15 (lstm), 41/10 (transformer), 34/17 (wide MLP), 68/38 (gpt). A last run of
LIFO (`--threads 1 --rounds 15 --gap`, load 6-9, 75/75 samples preempted), CPU-time ratios twin/numpy/pair/gap:
cnn 1.01/1.06/1.06/1.05, lstm 1.02/1.08/1.08/1.08, transformer 1.00/1.03/1.03/1.01, wide MLP 1.00/1.03/1.02/0.99,
gpt 1.00/1.01/1.00/1.01: pair equals the numpy control in every row, i.e. the slow-down is what touching that many
bytes costs (cache eviction), not our threads (gap = pair, ours 0 ms). The twin control is milder than numpy
although it touches as many pages or more (lstm 28.8 MiB against numpy's 24.3): the two torch models share glibc's
heap, so the buffers the twin frees are the next torch step's allocations, still in the caches; an independent
library (numpy, or dyngrad with its own buffer cache) cannot hand torch warm memory that way. The 2-thread
rows could not be measured at this load (torch's 2-thread solo step took 9-25x its 1-thread time, OpenMP threads
waiting for a preempted partner).
"""
import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _path  # noqa: F401,E402

DEFAULT = "gpt-train,word-lstm-train,lstmcell-lbfgs,cnn-train,lstm-train,transformer-train,wide-mlp-train"


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(workload, threads, rounds, size_name="default", gap=False):
    """{kind: [seconds per unit of the torch step]} for each kind, plus the footprints ("touched_*" in bytes)."""
    import numpy as np
    import torch
    import dyngrad as dg
    from dyngrad.bench import workloads as W

    spec = {w.name: w for w in W.WORKLOADS}[f"{workload}-{threads}t"]
    size = spec.sizes[size_name]
    torch.set_num_threads(threads)
    dg.set_num_threads(threads)
    tc, tw, dc = spec.build(torch, size), spec.build(torch, size), spec.build(dg, size)
    tc.run()
    tw.run()
    others = set(_thread_cpu())
    dc.run()   # the threads this first dyngrad step starts are dyngrad's (its pool's workers)
    ours = set(_thread_cpu()) - others
    tc.run()
    out = {"touched_torch": _touched(tc.run), "touched_dyngrad": _touched(dc.run),
           "cached_dyngrad": dg._C._cached_buffer_bytes() if hasattr(dg._C, "_cached_buffer_bytes") else 0}
    flush = np.zeros(max(out["touched_dyngrad"] // 4, 1), np.float32)
    before = {"solo": tc.run, "twin": tw.run, "numpy": lambda: np.add(flush, 1.0, out=flush), "pair": dc.run}
    if gap:
        before["gap"] = lambda: (dc.run(), time.sleep(0.005))
    out.update({kind: [] for kind in before})
    out.update({kind + "_cpu": [] for kind in before})
    out.update({kind + "_quiet": [] for kind in before})
    out["ours_cpu_s"] = 0.0
    out["preempted"] = 0
    for _ in range(rounds):
        for kind, first in before.items():
            gc.collect()
            sw0 = _switches()
            first()
            cpu0 = _thread_cpu()
            p0 = time.process_time()
            out[kind].append(_timed(tc.run) / tc.units)
            out[kind + "_cpu"].append((time.process_time() - p0) / tc.units)
            preempted = _switches() > sw0
            out["preempted"] += preempted
            if not preempted:
                out[kind + "_quiet"].append(out[kind + "_cpu"][-1])
            cpu1 = _thread_cpu()
            out["ours_cpu_s"] += sum(cpu1.get(t, 0) - cpu0.get(t, 0) for t in ours)
    return out


def _switches():
    """How often the calling thread has been preempted (involuntary context switches; 0 where unknown)."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
    except (AttributeError, OSError):
        return 0


def _referenced():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Referenced:"))


def _touched(fn, repeats=3):
    """The bytes of memory pages fn() references (median of `repeats` calls; 0 where /proc cannot tell)."""
    got = []
    for _ in range(repeats):
        try:
            gc.collect()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("1")
            fn()
            got.append(_referenced())
        except (OSError, StopIteration):
            return 0
    return int(statistics.median(got))


def _thread_cpu():
    """{thread id: CPU seconds} of this process's threads (Linux; {} elsewhere)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    tick = os.sysconf("SC_CLK_TCK")
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            pass
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=DEFAULT, help="bench workload groups, comma-separated")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--rounds", type=int, default=15, help="rounds of (solo, twin, numpy, pair[, gap])")
    p.add_argument("--gap", action="store_true", help="also time the torch step after a dyngrad step and 5 ms")
    p.add_argument("--json", help="write the raw times to this file")
    args = p.parse_args(argv)
    from dyngrad.bench.engines import machine_line
    kinds = ["twin", "numpy", "pair"] + (["gap"] if args.gap else [])
    print(f"torch_pairs: {machine_line()}; torch step ms (median of solo); ratio = kind's median / solo's median; "
          f"touched: MiB of pages one step references, torch/dyngrad; cache: dyngrad's buffer cache, MiB")
    print(f"{'workload':20s} thr {'':4s} | {'solo':>6s} | " + " ".join(f"{k:>5s}" for k in kinds) +
          f" | {'pair/twin':>9s} | {'touched':>11s} | {'cache':>5s} | ours | preempted")
    results = {}
    MiB = float(1 << 20)
    for name in [w.strip() for w in args.only.split(",") if w.strip()]:
        for threads in [int(t) for t in args.threads.split(",")]:
            r = measure(name, threads, args.rounds, gap=args.gap)
            results[f"{name}-{threads}t"] = r
            med = {k: statistics.median(r[k]) for k in r if isinstance(r[k], list) and r[k]}
            print(f"{name:20s} {threads:3d} {'wall':4s} | {med['solo'] * 1e3:6.2f} | " +
                  " ".join(f"{med[k] / med['solo']:5.2f}" for k in kinds) + f" | {med['pair'] / med['twin']:9.2f} |")
            print(f"{'':20s} {'':3s} {'cpu':4s} | {med['solo_cpu'] * 1e3:6.2f} | " +
                  " ".join(f"{med[k + '_cpu'] / med['solo_cpu']:5.2f}" for k in kinds) +
                  f" | {med['pair_cpu'] / med['twin_cpu']:9.2f} | {r['touched_torch'] / MiB:5.1f}/{r['touched_dyngrad'] / MiB:5.1f}"
                  f" | {r['cached_dyngrad'] / MiB:5.1f} | {r['ours_cpu_s'] * 1e3:.0f} ms"
                  f" | {r['preempted']}/{len(r['solo']) * len(kinds + ['solo'])}", flush=True)
            if all(len(r[k + "_quiet"]) >= 3 for k in ["solo"] + kinds):
                print(f"{'':20s} {'':3s} {'cpuq':4s} | {med['solo_quiet'] * 1e3:6.2f} | " +
                      " ".join(f"{med[k + '_quiet'] / med['solo_quiet']:5.2f}" for k in kinds) +
                      f" | {med['pair_quiet'] / med['twin_quiet']:9.2f} |", flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
