"""Per-call cost of the public functions' Python wrapper (the one of _api/dispatch.py: vmap's batching, meta
tensors), on small tensors, for cold rows that have no C++ fast path, so that the call goes through the wrapper.

    PYTHONPATH=python python bench/dispatch_wrapper.py [--repeat 7]

Prints the microseconds per call of each row (best of the repeats), and the machine line; compare runs of one
machine only, by the ratios within one run (rows against `dyngrad.neg`, a C++ fast path without the wrapper).
"""
import argparse
import timeit

import _path  # noqa: F401  (python/ on sys.path)
import dyngrad as dg
from dyngrad.bench.engines import machine_line

ROWS = {
    "neg (fast path, no wrapper)": lambda x, m: dg.neg(x),
    "positive": lambda x, m: dg.positive(x),
    "Tensor.positive": lambda x, m: x.positive(),
    "deg2rad": lambda x, m: dg.deg2rad(x),
    "Tensor.deg2rad_ (in-place)": lambda x, m: x.deg2rad_(),
    "masked.sum": lambda x, m: dg.masked.sum(x, mask=m),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    x = dg.zeros(16)
    m = dg.ones(16, dtype=dg.bool)
    print(machine_line())
    base = None
    for name, fn in ROWS.items():
        best = min(timeit.repeat(lambda: fn(x, m), number=args.number, repeat=args.repeat)) / args.number * 1e6
        base = base or best
        print(f"{name:32s} {best:7.3f} us/call  {best / base:5.2f}x neg")


if __name__ == "__main__":
    main()
