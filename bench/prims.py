"""The ops issue 19 moved from numpy round trips into the engines' kernels, timed on one thread of the C++ engine:
each op at 16 elements divided by a C++ unary primitive's (exp) time at 16 elements (the call overhead; target
<= 2), and at 1M elements divided by numpy's time for the same result (target <= 1.5). float32, forward only.

    python bench/prims.py [--quick] [--json bench_results/prims.json]

numpy's "same result" is what the op returns: sort is numpy's stable argsort and the gathered values (np.sort
alone, values without indices, is printed beside it), topk(k=5) is argpartition, the sort of the 5 and the values.
The 16-element times are the fastest of rounds in which every op is timed in turn (a burst of the machine's load
then falls on all rows alike); the 1M times the fastest of a few runs. The header line names the CPU (lscpu's model
name) and the load average, which the figures depend on.
"""
import argparse
import json
import math
import os
import platform
import subprocess
import timeit

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line


def np_sort(x):
    idx = np.argsort(x, kind="stable")
    return np.take_along_axis(x, idx, -1), idx


def np_topk(x, k=5):
    part = np.argpartition(-x, k, axis=-1)[..., :k]
    idx = np.take_along_axis(part, np.argsort(-np.take_along_axis(x, part, -1), -1, kind="stable"), -1)
    return np.take_along_axis(x, idx, -1), idx


def np_cummax(x):
    values = np.maximum.accumulate(x)
    return values, np.maximum.accumulate(np.where(x == values, np.arange(x.size), 0))


def cpu_model():
    """lscpu's model name (the platform's processor string where lscpu is missing)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


# name, dyngrad call, numpy call, input range
UNARY_DOMAIN = (-3.0, 3.0)
OPS = [
    ("exp", lambda x: dg.exp(x), np.exp, UNARY_DOMAIN),
    ("sin", lambda x: dg.sin(x), np.sin, (-10.0, 10.0)),
    ("cos", lambda x: dg.cos(x), np.cos, (-10.0, 10.0)),
    ("log1p", lambda x: dg.log1p(x), np.log1p, (-0.9, 5.0)),
    ("expm1", lambda x: dg.expm1(x), np.expm1, UNARY_DOMAIN),
    ("log2", lambda x: dg.log2(x), np.log2, (0.1, 10.0)),
    ("log10", lambda x: dg.log10(x), np.log10, (0.1, 10.0)),
    ("tan", lambda x: dg.tan(x), np.tan, (-1.5, 1.5)),
    ("asin", lambda x: dg.asin(x), np.arcsin, (-0.99, 0.99)),
    ("acos", lambda x: dg.acos(x), np.arccos, (-0.99, 0.99)),
    ("atan", lambda x: dg.atan(x), np.arctan, UNARY_DOMAIN),
    ("sinh", lambda x: dg.sinh(x), np.sinh, UNARY_DOMAIN),
    ("sort", lambda x: dg.sort(x), np_sort, UNARY_DOMAIN),
    ("argsort", lambda x: dg.argsort(x), lambda x: np.argsort(x, kind="stable"), UNARY_DOMAIN),
    ("topk(k=5)", lambda x: dg.topk(x, 5), np_topk, UNARY_DOMAIN),
    ("atan2", lambda x: dg.atan2(x, x), lambda x: np.arctan2(x, x), UNARY_DOMAIN),
    ("cumsum", lambda x: dg.cumsum(x, 0), lambda x: np.cumsum(x, 0), UNARY_DOMAIN),
    ("remainder", lambda x: dg.remainder(x, 0.7), lambda x: np.remainder(x, np.float32(0.7)), UNARY_DOMAIN),
    ("fmod", lambda x: dg.fmod(x, 0.7), lambda x: np.fmod(x, np.float32(0.7)), UNARY_DOMAIN),
    ("cumprod", lambda x: dg.cumprod(x, 0), lambda x: np.cumprod(x, 0), (0.9, 1.1)),
    ("logcumsumexp", lambda x: dg.logcumsumexp(x, 0), lambda x: np.logaddexp.accumulate(x, 0), UNARY_DOMAIN),
    ("cummax", lambda x: dg.cummax(x, 0), np_cummax, UNARY_DOMAIN),
]


def best(fn, number, repeat):
    """The fastest of `repeat` runs of `number` calls, per call (the minimum is the least disturbed by load)."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    dg.set_num_threads(1)
    small_n, small_rounds = (500, 4) if args.quick else (2000, 15)
    big_n, big_reps = (2, 3) if args.quick else (5, 5)
    print(f"{cpu_model()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start")
    rng = np.random.default_rng(0)
    rows = []
    # 16 elements: the ops timed in turn, round after round, each keeping its fastest round, so that a burst of load
    # from the machine's other users falls on every op alike instead of on a few whole rows
    smalls = [dg.tensor(rng.uniform(lo, hi, 16).astype(np.float32)) for _, _, _, (lo, hi) in OPS]
    small_best = [math.inf] * len(OPS)
    for _ in range(small_rounds):
        for i, ((_, dg_fn, _, _), ts) in enumerate(zip(OPS, smalls)):
            small_best[i] = min(small_best[i], best(lambda: dg_fn(ts), small_n, 1))
    small_base = small_best[0]
    for (name, dg_fn, np_fn, (lo, hi)), t_small in zip(OPS, small_best):
        big = rng.uniform(lo, hi, 1 << 20).astype(np.float32)
        tb = dg.tensor(big)
        t_big = best(lambda: dg_fn(tb), big_n, big_reps)
        t_np = best(lambda: np_fn(big), big_n, big_reps)
        rows.append({"op": name, "us_16": t_small * 1e6, "ratio_16_vs_exp": t_small / small_base,
                     "ms_1M": t_big * 1e3, "numpy_ms_1M": t_np * 1e3, "ratio_1M_vs_numpy": t_big / t_np})
    uniform = rng.uniform(-3.0, 3.0, 1 << 20).astype(np.float32)
    np_sort_only = best(lambda: np.sort(uniform), big_n, big_reps)
    print(machine_line())
    print(f"{'op':<13}{'16: us':>9}{'/ exp':>8}{'1M: ms':>10}{'numpy ms':>10}{'/ numpy':>9}")
    for r in rows:
        print(f"{r['op']:<13}{r['us_16']:>9.2f}{r['ratio_16_vs_exp']:>8.2f}{r['ms_1M']:>10.2f}"
              f"{r['numpy_ms_1M']:>10.2f}{r['ratio_1M_vs_numpy']:>9.2f}")
    print(f"(np.sort of 1M uniform float32, values only: {np_sort_only * 1e3:.2f} ms; one dyngrad thread; "
          f"load {os.getloadavg()[0]:.2f})")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "np_sort_values_ms": np_sort_only * 1e3, "machine": machine_line(),
                       "load": os.getloadavg()}, f, indent=1)
    return 0 if all(math.isfinite(r["ms_1M"]) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
