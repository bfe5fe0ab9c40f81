"""The four kernel-bound training steps of `python -m dyngrad.bench` (CNN, LSTM, transformer block, wide MLP) under
dyngrad.compile, against eager dyngrad and PyTorch eager (issue 20's target: both replays >= 1.5x PyTorch eager at 1
and 2 threads), in one run, interleaved: each block times every contender once in turn, so that a change in the
machine's load hits them all alike.

    python bench/kernel_compile.py [--blocks 7] [--only cnn-train,...] [--threads 1,2] [--torch-compile]

Time per step is the CPU time of the process (time.process_time: every thread of dyngrad's and torch's pools) and the
wall clock, best of the blocks; on a machine shared with other jobs the wall clock mostly measures waiting for a
core, and at 2 threads torch's spinning workers are counted as they burn the CPU. Compile time (the recording call)
is excluded: every contender runs its warm-up calls first. The results are compared after the run (the same
numbers bitwise for the replays against eager dyngrad)."""
import argparse
import time

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad.bench import workloads as W
from dyngrad.bench.engines import machine_line


def contenders(group, size, with_torch, torch_compile):
    out = {m: (dyngrad, W.compiled_kernel_case(group)(dyngrad, size, m)) for m in ("eager", "verified", "static")}
    if with_torch is not None:
        out["torch eager"] = (with_torch, W.compiled_kernel_case(group)(with_torch, size, "eager"))
        if torch_compile:
            import os
            os.environ["DYNGRAD_BENCH_TORCH_COMPILE"] = "1"
            out["torch.compile"] = (with_torch, W.compiled_kernel_case(group)(with_torch, size, "static"))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--only", default=",".join(W.KERNEL_GROUPS))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--size", default="default", choices=("quick", "default", "full"))
    p.add_argument("--torch-compile", action="store_true")
    p.add_argument("--no-torch", action="store_true")
    args = p.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            pass
    specs = {name: sizes for name, _, _, sizes in W._kernel_specs()}
    print(machine_line())
    for threads in [int(t) for t in args.threads.split(",")]:
        dyngrad.set_num_threads(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        for group in args.only.split(","):
            size = specs[group][args.size]
            cases = contenders(group, size, torch, args.torch_compile)
            for _, case in cases.values():       # warm-up: the recording calls, then one replay each
                case.run()
                case.run()
            cpu = {k: [] for k in cases}
            wall = {k: [] for k in cases}
            for _ in range(args.blocks):
                for k, (_, case) in cases.items():
                    c0, w0 = time.process_time(), time.perf_counter()
                    case.run()
                    cpu[k].append((time.process_time() - c0) / case.units)
                    wall[k].append((time.perf_counter() - w0) / case.units)
            same = all(np.array_equal(a, b) for a, b in zip(cases["static"][1].result(), cases["eager"][1].result()))
            print(f"{group} at {threads} thread{'s' if threads > 1 else ''} ({size}); static == eager bitwise: "
                  f"{same}; {machine_line()}")
            base = min(cpu["eager"])
            tbase = min(cpu["torch eager"]) if "torch eager" in cpu else None
            for k in cases:
                c, w = min(cpu[k]), min(wall[k])
                line = f"  {k:<14} cpu {c * 1e3:8.2f} ms/step  wall {w * 1e3:8.2f} ms/step  eager/this {base / c:5.2f}x"
                if tbase:
                    line += f"  torch eager/this {tbase / c:5.2f}x"
                print(line)
            programs = [pr for pr in dyngrad.compiler.programs() if pr.mode == "static"]
            if programs:
                pr = programs[-1]
                print(f"  static: {pr.replays} replays, {pr.planned_backwards} planned backwards, plans "
                      f"{pr.backward_plans}")
            dyngrad.compiler.reset()


if __name__ == "__main__":
    main()
