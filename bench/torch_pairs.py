"""Does a dyngrad training step slow the PyTorch step that runs right after it in the same process? (issue 26)

Threads that keep spinning after our kernels (our pool's workers, Note [Spin, then sleep] in
csrc/dyngrad/kernels/thread_pool.cpp, or numpy's OpenBLAS workers) would take the cores from PyTorch's OpenMP
threads. For each workload of the bench (`python -m dyngrad.bench --list`) and each thread count, one process
builds the dyngrad and the torch case and then runs rounds in a fixed interleaved order, timing only the torch step:
  solo    torch step right after a torch step (the reference)
  pair    torch step right after a dyngrad step (what a program mixing the two libraries sees)
  gap     torch step after a dyngrad step and a 5 ms sleep (past our pool's 2 ms spin: what is left is the cache
          and the machine, not our threads)
The three kinds alternate round by round, so that a change in the machine's load hits all three alike. Printed:
medians and 90th percentiles in ms per step and pair/solo, gap/solo ratios (1.00: no slow-down; the issue's target
is pair/solo <= 1.10), and "ours": the CPU time dyngrad's own threads (those its first step started) used during
all the timed torch steps together, from /proc (0 ms: none of our threads ran while torch did, whatever the
ratios say about the machine's load). Timings depend on the CPU and its load: the header prints both.

    python bench/torch_pairs.py [--only gpt-train,word-lstm-train,...] [--threads 1,2] [--rounds 15]
"""
import argparse
import gc
import json
import os
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


def measure(workload, threads, rounds, size_name="default"):
    """{kind: [seconds per unit of the torch step]} for kind in solo, pair, gap."""
    import torch
    import dyngrad as dg
    from dyngrad.bench import workloads as W

    spec = {w.name: w for w in W.WORKLOADS}[f"{workload}-{threads}t"]
    size = spec.sizes[size_name]
    torch.set_num_threads(threads)
    dg.set_num_threads(threads)
    tc, dc = spec.build(torch, size), spec.build(dg, size)
    tc.run()
    others = set(_thread_cpu())
    dc.run()   # the threads this first dyngrad step starts are dyngrad's (its pool's workers)
    ours = set(_thread_cpu()) - others
    tc.run()
    before = {"solo": tc.run, "pair": dc.run, "gap": lambda: (dc.run(), time.sleep(0.005))}
    out = {kind: [] for kind in before}
    out["ours_cpu_s"] = 0.0
    for _ in range(rounds):
        for kind, first in before.items():
            gc.collect()
            first()
            cpu0 = _thread_cpu()
            out[kind].append(_timed(tc.run) / tc.units)
            cpu1 = _thread_cpu()
            out["ours_cpu_s"] += sum(cpu1.get(t, 0) - cpu0.get(t, 0) for t in ours)
    return out


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


def _summary(ts):
    ts = sorted(ts)
    return statistics.median(ts) * 1e3, ts[int(0.9 * (len(ts) - 1))] * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=DEFAULT, help="bench workload groups, comma-separated")
    p.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    p.add_argument("--rounds", type=int, default=15, help="rounds of (solo, pair, gap)")
    p.add_argument("--json", help="write the raw times to this file")
    args = p.parse_args(argv)
    from dyngrad.bench.engines import machine_line
    print(f"torch_pairs: {machine_line()}; torch step ms (median, p90); ratio = median / solo's median")
    print(f"{'workload':20s} thr | {'solo':>13s} | {'pair':>13s} {'ratio':>5s} | {'gap':>13s} {'ratio':>5s} | ours")
    results = {}
    for name in [w.strip() for w in args.only.split(",") if w.strip()]:
        for threads in [int(t) for t in args.threads.split(",")]:
            r = measure(name, threads, args.rounds)
            results[f"{name}-{threads}t"] = r
            (sm, sp), (pm, pp), (gm, gp) = (_summary(r[k]) for k in ("solo", "pair", "gap"))
            print(f"{name:20s} {threads:3d} | {sm:6.1f} {sp:6.1f} | {pm:6.1f} {pp:6.1f} {pm / sm:5.2f} | "
                  f"{gm:6.1f} {gp:6.1f} {gm / sm:5.2f} | {r['ours_cpu_s'] * 1e3:.0f} ms", flush=True)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
