"""What recording a program costs (issue 20's target: at most 3x one eager call of it). For each workload of
bench/compile_modes.py: one warm eager call (best of blocks, thread CPU time), and the recording call of a freshly
compiled static program (best of several fresh programs, so the recorder's one-time set-up in the process is not
counted), and their ratio, in one run.

    python bench/record_cost.py [--repeats N] [--profile WORKLOAD]

--profile prints the cProfile of one workload's recordings (where the recording's time goes).
"""
import argparse
import cProfile
import pstats
import time

import _path  # noqa: F401

import dyngrad
from compile_modes import WORKLOADS, timed
from dyngrad.bench.engines import machine_line


def record_once(step, inputs):
    compiled = dyngrad.compile(step, mode="reduce-overhead")
    t0 = time.thread_time()
    compiled(*inputs)
    spent = time.thread_time() - t0
    assert compiled.compile_stats.recordings == 1
    return spent


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--profile", choices=list(WORKLOADS))
    args = p.parse_args()
    print(machine_line())
    if args.profile:
        step, inputs = WORKLOADS[args.profile](dyngrad)
        record_once(step, inputs)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.repeats):
            record_once(step, inputs)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    print(f"{'workload':<52} {'eager':>10} {'record':>10} {'record / eager':>15}")
    for name, build in WORKLOADS.items():
        step, inputs = build(dyngrad)
        eager = timed(lambda: step(*inputs), 0.5)
        record = min(record_once(step, inputs) for _ in range(args.repeats))
        print(f"{name:<52} {eager * 1e6:>8.0f}us {record * 1e6:>8.0f}us {record / eager:>14.2f}x", flush=True)


if __name__ == "__main__":
    main()
