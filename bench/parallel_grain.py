"""From what size does splitting an elementwise kernel over 2 threads pay? (issue 12: "thresholds measured, not
guessed"; kParallelGrain in csrc/dyngrad/kernels/kernels.h)

For each op and size, the same call is timed with the kernel forced onto one thread (grain above the size) and
forced onto all threads (grain 1), interleaved call by call so that load from elsewhere hits both alike; the table
gives the medians and their ratio (> 1: the split is faster). The crossover is the smallest size from which the
split wins for every op. float32, contiguous operands; the workers are warm, as inside a training step (Note
[Spin, then sleep] in thread_pool.cpp).

    python bench/parallel_grain.py [--threads 2] [--calls 200]

Timings depend on the machine and its load (printed with them); the tests never time anything.
"""
import argparse
import os
import statistics
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg
from dyngrad import _C

SIZES = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "exp": lambda a, b: a.exp(),
    "tanh": lambda a, b: a.tanh(),
    "gelu": lambda a, b: dg.nn.functional.gelu(a),
    "sum(rows)": lambda a, b: a.reshape(-1, 128).sum(1),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    dg.set_num_threads(args.threads)
    before = _C._parallel_grain()
    print(f"parallel_grain: nproc {os.cpu_count()}, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
          f"{args.threads} threads, grain now {before}; us per call, ratio = 1 thread / {args.threads} threads")
    print(f"{'op':10s} " + " ".join(f"{n:>9d}" for n in SIZES))
    rng = np.random.default_rng(0)
    wins = {}
    try:
        for name, op in OPS.items():
            cells = []
            for n in SIZES:
                a = dg.tensor(rng.standard_normal(n).astype(np.float32))
                b = dg.tensor(rng.standard_normal(n).astype(np.float32))
                serial, split = [], []
                for _ in range(args.calls):
                    for grain, out in ((4 * n, serial), (1, split)):   # (costly ops split from grain / 4)
                        _C._set_parallel_grain(grain)
                        start = time.perf_counter()
                        op(a, b)
                        out.append(time.perf_counter() - start)
                ratio = statistics.median(serial) / statistics.median(split)
                cells.append(f"{statistics.median(split) * 1e6:5.1f}/{ratio:4.2f}")
                wins.setdefault(name, []).append(ratio > 1.0)
            print(f"{name:10s} " + " ".join(f"{c:>9s}" for c in cells))
    finally:
        _C._set_parallel_grain(before)
    print("cells: time split over the threads (us) / ratio")
    for name, w in wins.items():
        first = next((n for i, n in enumerate(SIZES) if all(w[i:])), None)
        print(f"  {name:10s} the split wins from {first} elements" if first else
              f"  {name:10s} the split does not win at any size measured")


if __name__ == "__main__":
    main()
