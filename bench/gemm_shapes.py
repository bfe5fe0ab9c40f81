"""float32 matrix products at the shapes training programs make, dyngrad against numpy and PyTorch in one process:
ms per call (median of --repeat rounds of best-of-inner timings) and the ratios numpy/dyngrad and torch/dyngrad
(> 1: dyngrad faster), at 1 and 2 threads, with the machine line and the load (`uptime`) before and after.

Shapes (m x k x n is a (m, k) @ (k, n) product):
  1024^3              c = a @ b
  lstm x@W^T          (32, 128) @ (512, 128)^T: an LSTM step's gate product, as linear computes it
  lstm dX = g@W       (32, 512) @ (512, 128):   its input gradient
  lstm dW = g^T@x     (512, 32)^T... : (32, 512)^T @ (32, 128), the weight gradient
  lstm 32x128x512 NN  (32, 128) @ (128, 512)
  linear+bias         F.linear(x (32, 128), W (512, 128), b): addmm
  attn 64x32x64 (48)  (48, 64, 32) @ (48, 32, 64): attention's per-head scores, 12 x 4 heads
  attn A@B^T (48)     (48, 64, 32) @ (48, 64, 32)^T: q @ k^T
  gpt ...             the char-level GPT step's products (768 rows: batch 12 x context 64, width 128): linear's
                      x @ W^T for c_attn (384 out), c_fc (512), mlp_proj (512 -> 128), their dX = g @ W and
                      dW = g^T @ x (the transposed left operand)
  tfm ...             the transformer block's (1024 rows, x @ W with W stored (in, out)) and its dW = x^T @ g

    PYTHONPATH=python python bench/gemm_shapes.py [--repeat 5] [--threads 1,2] [--only NAME,...] [--cpu-time]
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg

try:
    import torch
except ImportError:
    torch = None


def machine_line():
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        model = (f"{fields.get('Model name', '').strip()}, family {fields.get('CPU family', '?').strip()} model "
                 f"{fields.get('Model', '?').strip()}, {os.cpu_count()} cores, "
                 f"{fields.get('Hypervisor vendor', 'bare metal').strip()}")
    except (OSError, ValueError):
        model = platform.processor()
    return model


def load():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


CLOCK = time.perf_counter


def timeit(fn, inner):
    fn()
    best = float("inf")
    for _ in range(3):
        t0 = CLOCK()
        for _ in range(inner):
            fn()
        best = min(best, (CLOCK() - t0) / inner)
    return best


def cases():
    rng = np.random.default_rng(0)
    f = (lambda *s: rng.standard_normal(s).astype(np.float32))
    a1, b1 = f(1024, 1024), f(1024, 1024)
    x, w, g, bias = f(32, 128), f(512, 128), f(32, 512), f(512)
    wn = f(128, 512)
    q, k = f(48, 64, 32), f(48, 32, 64)
    kt = f(48, 64, 32)
    out = []

    def add(name, inputs, np_fn, dg_fn, torch_fn, flops):
        out.append((name, inputs, np_fn, dg_fn, torch_fn, flops))

    add("1024^3", (a1, b1), lambda a, b: a @ b, lambda a, b: a @ b, lambda a, b: a @ b, 2 * 1024 ** 3)
    add("lstm x@W^T 32x128x512", (x, w), lambda a, b: a @ b.T, lambda a, b: a @ b.mT, lambda a, b: a @ b.mT,
        2 * 32 * 128 * 512)
    add("lstm dX=g@W 32x512x128", (g, w), lambda a, b: a @ b, lambda a, b: a @ b, lambda a, b: a @ b,
        2 * 32 * 128 * 512)
    add("lstm dW=g^T@x 512x32x128", (g, x), lambda a, b: a.T @ b, lambda a, b: a.mT @ b, lambda a, b: a.mT @ b,
        2 * 32 * 128 * 512)
    add("lstm NN 32x128x512", (x, wn), lambda a, b: a @ b, lambda a, b: a @ b, lambda a, b: a @ b,
        2 * 32 * 128 * 512)
    add("linear+bias 32x128x512", (x, w, bias), lambda a, b, c: a @ b.T + c,
        lambda a, b, c: dg.nn.functional.linear(a, b, c),
        (lambda a, b, c: torch.nn.functional.linear(a, b, c)), 2 * 32 * 128 * 512)
    add("attn 48x 64x32x64", (q, k), lambda a, b: a @ b, lambda a, b: a @ b, lambda a, b: a @ b, 48 * 2 * 64 * 32 * 64)
    add("attn A@B^T 48x 64x32x64", (q, kt), lambda a, b: a @ b.transpose(0, 2, 1), lambda a, b: a @ b.mT,
        lambda a, b: a @ b.mT, 48 * 2 * 64 * 32 * 64)
    for rows, tag in ((768, "gpt"), (1024, "tfm")):
        for k_, n_ in ((128, 384), (128, 512), (512, 128)):
            xa, wt, gy = f(rows, k_), f(n_, k_), f(rows, n_)
            fl = 2 * rows * k_ * n_
            if tag == "gpt":
                add(f"gpt x@W^T {rows}x{k_}x{n_}", (xa, wt), lambda a, b: a @ b.T, lambda a, b: a @ b.mT,
                    lambda a, b: a @ b.mT, fl)
                add(f"gpt dX=g@W {rows}x{n_}x{k_}", (gy, wt), lambda a, b: a @ b, lambda a, b: a @ b,
                    lambda a, b: a @ b, fl)
            else:
                add(f"tfm x@W {rows}x{k_}x{n_}", (xa, wt.T.copy()), lambda a, b: a @ b, lambda a, b: a @ b,
                    lambda a, b: a @ b, fl)
                add(f"tfm dX=g@W^T {rows}x{n_}x{k_}", (gy, wt.T.copy()), lambda a, b: a @ b.T,
                    lambda a, b: a @ b.mT, lambda a, b: a @ b.mT, fl)
            add(f"{tag} dW=g^T@x {n_}x{rows}x{k_}", (gy, xa), lambda a, b: a.T @ b, lambda a, b: a.mT @ b,
                lambda a, b: a.mT @ b, fl)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--only", default="")
    p.add_argument("--cpu-time", action="store_true",
                   help="time in thread CPU time (one thread only: a loaded machine's waits for a core not counted)")
    args = p.parse_args(argv)
    global CLOCK
    if args.cpu_time:
        if args.threads != "1":
            p.error("--cpu-time measures one thread: use it with --threads 1")
        CLOCK = time.thread_time
    print(f"machine: {machine_line()}; numpy {np.__version__}, dyngrad BLAS {dg._cpp_blas.info['source']}, "
          f"torch {torch.__version__ if torch else 'absent'}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    only = [s for s in args.only.split(",") if s]
    rows = [c for c in cases() if not only or any(o in c[0] for o in only)]
    for threads in [int(t) for t in args.threads.split(",")]:
        dg.set_num_threads(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        print(f"\n{threads} thread(s)        {'numpy ms':>9} {'dyngrad':>9} {'torch':>9} {'np/dg':>7} {'torch/dg':>8} "
              f"{'dg GFLOP/s':>10}")
        for name, inputs, np_fn, dg_fn, torch_fn, flops in rows:
            dgi = [dg.tensor(v) for v in inputs]
            ti = [torch.from_numpy(v.copy()) for v in inputs] if torch is not None else None
            ref = np_fn(*[v.astype(np.float64) for v in inputs])
            got = dg_fn(*dgi).numpy()
            err = float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))
            assert err < 1e-4, (name, err)
            inner = max(1, int(2e8 / flops))
            res = {"np": [], "dg": [], "torch": []}
            for _ in range(args.repeat):  # interleaved, so a burst of load hits all three
                res["np"].append(timeit(lambda: np_fn(*inputs), inner))
                res["dg"].append(timeit(lambda: dg_fn(*dgi), inner))
                if torch is not None:
                    with torch.no_grad():
                        res["torch"].append(timeit(lambda: torch_fn(*ti), inner))
            med = {k: statistics.median(v) if v else float("nan") for k, v in res.items()}
            print(f"  {name:26s} {med['np'] * 1e3:9.4f} {med['dg'] * 1e3:9.4f} {med['torch'] * 1e3:9.4f} "
                  f"{med['np'] / med['dg']:7.2f} {med['torch'] / med['dg']:8.2f} {flops / med['dg'] / 1e9:10.1f}")
    print(f"\nload after: {load()}")


if __name__ == "__main__":
    sys.exit(main())
