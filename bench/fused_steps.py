"""Static replay with and without its fused groups of steps (Note [Fused steps] in csrc/bindings/replay_fuse.cpp),
against eager dyngrad, on the four kernel-bound training steps of `python -m dyngrad.bench` (CNN, LSTM, transformer
block, wide MLP) at the bench's default sizes, interleaved block by block in one run.

    python bench/fused_steps.py [--blocks 7] [--only wide-mlp-train,...] [--threads 1]

Time per step: the process's CPU time (time.process_time), best of the blocks. The results of every contender are
compared bitwise after the run.
"""
import argparse
import time

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad import _C
from dyngrad.bench import workloads as W
from dyngrad.bench.engines import machine_line


def build(group, size):
    """The three contenders, each after its recording call and its first replay (which builds the C++ program:
    the unfused one with fusion off)."""
    cases = {"eager": W.compiled_kernel_case(group)(dyngrad, size, "eager"),
             "static unfused": W.compiled_kernel_case(group)(dyngrad, size, "static"),
             "static fused": W.compiled_kernel_case(group)(dyngrad, size, "static")}
    for k, case in cases.items():
        was = _C._set_replay_fusion(k != "static unfused")
        try:
            case.run()
            case.run()
        finally:
            _C._set_replay_fusion(was)
    return cases


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--only", default=",".join(W.KERNEL_GROUPS))
    p.add_argument("--threads", default="1")
    args = p.parse_args()
    specs = {name: sizes for name, _, _, sizes in W._kernel_specs()}
    print(machine_line())
    for threads in [int(t) for t in args.threads.split(",")]:
        dyngrad.set_num_threads(threads)
        for group in args.only.split(","):
            cases = build(group, specs[group]["default"])
            cpu = {k: [] for k in cases}
            for _ in range(args.blocks):
                for k, case in cases.items():
                    c0 = time.process_time()
                    case.run()
                    cpu[k].append((time.process_time() - c0) / case.units)
            results = {k: c.result() for k, c in cases.items()}
            same = all(np.array_equal(results["eager"], r) for r in results.values())
            print(f"{group} at {threads} thread{'s' if threads > 1 else ''}; all bitwise equal: {same}; "
                  f"{machine_line()}")
            base, unfused = min(cpu["eager"]), min(cpu["static unfused"])
            for k in cases:
                c = min(cpu[k])
                print(f"  {k:<15} {c * 1e3:8.2f} ms/step  eager/this {base / c:5.2f}x  unfused/this {unfused / c:5.2f}x")


if __name__ == "__main__":
    main()
