"""float32 1024 x 1024 matmul, forward + backward (c = a @ b, then dA = g b^T and dB = a^T g), in GFLOPS and in
milliseconds per call, for the C++ engine, PyTorch (when installed), the reference engine, and numpy doing the same
three products. Writes bench_results/gemm.json. `--full` uses 2048 x 2048.

Then issue 26's GEMM targets, one thread, thread CPU time (a loaded machine's waits for a core are not counted),
the libraries alternating call by call, best of --target-repeat blocks: 1024^3 against numpy (target: dyngrad
at >= 97% of numpy's speed, numpy/dg >= 0.97) and 32 x 128 x 512 against PyTorch through the public calls
(`a @ b`, `a @ w.mT`, `F.linear(x, w, b)`; target torch/dg >= 1). `--targets-only` skips the first part.

    python bench/gemm.py [--quick | --full] [--engines cpp,torch] [--targets-only] [--target-repeat 40]

Targets before this session's changes (Intel Xeon family 6 model 167, 2 cores, KVM, load 3.3-3.6, two runs):
1024^3 numpy/dg 1.012-1.022; 32x128x512 torch/dg: x @ W 1.04-1.06, x @ W^T 0.94-0.99 (the transposed b's
packing), F.linear + bias 1.03-1.06.
After (Note [Few rows by a transposed b] in gemm_avx512.cpp, Note [One call on one thread] in matmul.cpp), main's
build and this one alternating, two rounds each (19:20, load 8.7-9): 1024^3 numpy/dg 0.965, 0.987 -> 0.993, 1.014;
x @ W^T 1.03, 1.08 -> 1.08, 1.12; F.linear 1.04, 1.14 -> 1.21, 1.24; x @ W (unchanged code) 0.95-1.10 in both:
at this load one run's ratio moves by +-7%, so "at least torch's speed" holds for x @ W only within that noise
(the kernel alone: 168-179 GFLOP/s; perf of the public call: the kernel 62%, the call path below 3%, the first
row block's packing of b 9% of the product).
"""
import os
import subprocess
import sys
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg
from dyngrad.bench import main

try:
    import torch
except ImportError:
    torch = None


def best_alternating(fns, repeat, inner):
    """Best thread-CPU seconds per call of each fn, the fns alternating block by block."""
    for fn in fns:
        fn()
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.thread_time()
            for _ in range(inner):
                fn()
            best[i] = min(best[i], (time.thread_time() - t0) / inner)
    return best


def targets(repeat):
    dg.set_num_threads(1)  # also numpy's OpenBLAS (Note [One BLAS] in csrc/dyngrad/kernels/matmul.cpp)
    if torch is not None:
        torch.set_num_threads(1)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in cpu.splitlines() if ":" in line)
    print(f"\nissue 26 GEMM targets: {fields.get('Model name', '?').strip()}, family "
          f"{fields.get('CPU family', '?').strip()} model {fields.get('Model', '?').strip()}, {os.cpu_count()} cores; "
          f"load {open('/proc/loadavg').read().split()[0]}; one thread, thread CPU time, best of {repeat}")
    rng = np.random.default_rng(0)
    f = (lambda *s: rng.standard_normal(s).astype(np.float32))
    a, b = f(1024, 1024), f(1024, 1024)
    da, db = dg.tensor(a), dg.tensor(b)
    t_np, t_dg = best_alternating([lambda: a @ b, lambda: da @ db], repeat, 1)
    print(f"  1024^3 a @ b            numpy {t_np * 1e3:8.3f} ms  dyngrad {t_dg * 1e3:8.3f} ms  numpy/dg "
          f"{t_np / t_dg:5.3f}  ({2 * 1024 ** 3 / t_dg / 1e9:.0f} GFLOP/s; target >= 0.97)")
    if torch is None:
        print("  (torch absent: the 32 x 128 x 512 rows need it)")
        return
    x, w, wn, bias = f(32, 128), f(512, 128), f(128, 512), f(512)
    dx, dw, dwn, dbias = (dg.tensor(v) for v in (x, w, wn, bias))
    tx, tw, twn, tbias = (torch.from_numpy(v.copy()) for v in (x, w, wn, bias))
    rows = [("32x128x512 x @ W", lambda: dx @ dwn, lambda: tx @ twn),
            ("32x128x512 x @ W^T", lambda: dx @ dw.mT, lambda: tx @ tw.mT),
            ("32x128x512 F.linear+b", lambda: dg.nn.functional.linear(dx, dw, dbias),
             lambda: torch.nn.functional.linear(tx, tw, tbias))]
    with torch.no_grad():
        for name, ours, theirs in rows:
            t_dg, t_t = best_alternating([ours, theirs], repeat, 50)
            print(f"  {name:23s} torch {t_t * 1e6:8.2f} us  dyngrad {t_dg * 1e6:8.2f} us  torch/dg {t_t / t_dg:5.3f}"
                  f"  ({2 * 32 * 128 * 512 / t_dg / 1e9:.0f} GFLOP/s; target >= 1)")


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        print("usage: python bench/gemm.py [--quick | --full] [--engines cpp,torch] [--targets-only] "
              "[--target-repeat 40]\n")
        print(__doc__)
        print("The other options are those of python -m dyngrad.bench (see its --help).")
        sys.exit(0)
    repeat = 40
    if "--target-repeat" in argv:
        i = argv.index("--target-repeat")
        repeat = int(argv[i + 1])
        del argv[i:i + 2]
    rc = 0
    if "--targets-only" in argv:
        argv.remove("--targets-only")
    else:
        rc = main(["--only", "gemm", "--json", "bench_results/gemm.json", *argv])
    targets(repeat)
    sys.exit(rc)
