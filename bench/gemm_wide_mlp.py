"""The wide MLP's training step (784-1024-1024-10, batch 512, ReLU, cross entropy, SGD; the bench's wide-mlp-train)
on one thread, dyngrad against PyTorch, and the eight matrix products it makes, each timed alone for dyngrad,
numpy (the same OpenBLAS) and PyTorch (MKL): ms and GFLOP/s per product, their sum against the step, and what is
left for the rest of the step (ReLU, cross entropy, bias sums, SGD). Times are thread CPU time (the machine is
shared: time spent waiting for a core is not counted), best of --repeat interleaved rounds; the step is the median
of process CPU time over --repeat rounds. Prints the machine line and `uptime` before and after.

Products, as the engines compute them (x @ W^T for F.linear, the weight gradient in W's own layout, Note
[Gradient in the operand's layout] in derivatives.cpp):
  fwd1  x (512, 784) @ W1 (1024, 784)^T         dW1  g1^T (1024, 512) @ x (512, 784)
  fwd2  h1 (512, 1024) @ W2 (1024, 1024)^T      dW2  g2^T @ h1  (1024 x 1024 x 512)
  fwd3  h2 (512, 1024) @ W3 (10, 1024)^T        dW3  g3^T @ h2  (10 x 1024 x 512)
  dX2   g2 (512, 1024) @ W2 (1024, 1024)        dX3  g3 (512, 10) @ W3 (10, 1024)

    PYTHONPATH=python python bench/gemm_wide_mlp.py [--repeat 7] [--steps 5]
"""
import argparse
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg
from dyngrad.bench import workloads as W
from gemm_shapes import load, machine_line

try:
    import torch
except ImportError:
    torch = None


def cpu_best(fn, inner, rounds):
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(inner):
            fn()
        best = min(best, (time.thread_time() - t0) / inner)
    return best


def products():
    rng = np.random.default_rng(0)
    f = (lambda *s: rng.standard_normal(s).astype(np.float32))
    x, h1, h2 = f(512, 784), f(512, 1024), f(512, 1024)
    w1, w2, w3 = f(1024, 784), f(1024, 1024), f(10, 1024)
    g1, g2, g3 = f(512, 1024), f(512, 1024), f(512, 10)
    nt = (lambda a, b: a @ b.T, lambda a, b: a @ b.mT)        # a @ b^T
    nn = (lambda a, b: a @ b, lambda a, b: a @ b)              # a @ b
    tn = (lambda a, b: a.T @ b, lambda a, b: a.mT @ b)        # a^T @ b
    rows = [("fwd1 512x1024x784", nt, (x, w1)), ("fwd2 512x1024x1024", nt, (h1, w2)),
            ("fwd3 512x10x1024", nt, (h2, w3)), ("dX2 512x1024x1024", nn, (g2, w2)),
            ("dX3 512x1024x10", nn, (g3, w3)), ("dW1 1024x784x512", tn, (g1, x)),
            ("dW2 1024x1024x512", tn, (g2, h1)), ("dW3 10x1024x512", tn, (g3, h2))]
    out = []
    for name, (np_fn, fn), (a, b) in rows:
        m, n = np_fn(a, b).shape
        k = a.shape[1] if np_fn is not tn[0] else a.shape[0]
        out.append((name, np_fn, fn, a, b, 2 * m * n * k))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--steps", type=int, default=5, help="steps per timing of the whole step")
    args = p.parse_args(argv)
    print(f"machine: {machine_line()}; numpy {np.__version__}, torch {torch.__version__ if torch else 'absent'}; "
          f"dyngrad's kernel: {dg._C._gemm_kernel()}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    dg.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    print(f"\n1 thread, thread CPU time     {'dg ms':>7} {'np ms':>7} {'torch ms':>8} {'dg GF/s':>8} {'np GF/s':>8} "
          f"{'torch GF/s':>10} {'torch/dg':>8}")
    sums = {"dg": 0.0, "np": 0.0, "torch": 0.0}
    flops_total = 0
    for name, np_fn, fn, a, b, flops in products():
        da, db = dg.tensor(a), dg.tensor(b)
        ta, tb = (torch.from_numpy(a.copy()), torch.from_numpy(b.copy())) if torch is not None else (None, None)
        ref = np_fn(a.astype(np.float64), b.astype(np.float64))
        err = float(np.abs(fn(da, db).numpy() - ref).max() / max(1.0, np.abs(ref).max()))
        assert err < 1e-4, (name, err)
        inner = max(1, int(3e8 / flops))
        best = {"dg": float("inf"), "np": float("inf"), "torch": float("inf")}
        for _ in range(args.repeat):
            best["dg"] = min(best["dg"], cpu_best(lambda: fn(da, db), inner, 1))
            best["np"] = min(best["np"], cpu_best(lambda: np_fn(a, b), inner, 1))
            if torch is not None:
                with torch.no_grad():
                    best["torch"] = min(best["torch"], cpu_best(lambda: fn(ta, tb), inner, 1))
        for key in sums:
            sums[key] += best[key]
        flops_total += flops
        gf = {key: flops / v / 1e9 for key, v in best.items()}
        print(f"  {name:27s} {best['dg'] * 1e3:7.3f} {best['np'] * 1e3:7.3f} {best['torch'] * 1e3:8.3f} "
              f"{gf['dg']:8.1f} {gf['np']:8.1f} {gf['torch']:10.1f} {best['torch'] / best['dg']:8.2f}", flush=True)
    gf = {key: flops_total / v / 1e9 for key, v in sums.items()}
    print(f"  {'all eight':27s} {sums['dg'] * 1e3:7.3f} {sums['np'] * 1e3:7.3f} {sums['torch'] * 1e3:8.3f} "
          f"{gf['dg']:8.1f} {gf['np']:8.1f} {gf['torch']:10.1f} {sums['torch'] / sums['dg']:8.2f}")

    size = W._kernel_specs()[3][3]["default"]
    size = dict(size, steps=args.steps)
    case = W.wide_mlp_train(dg, size)
    tcase = W.wide_mlp_train(torch, size) if torch is not None else None
    case.run()
    if tcase:
        tcase.run()
    res = {"dg": [], "torch": []}
    for _ in range(args.repeat):
        t0 = time.process_time()
        case.run()
        res["dg"].append((time.process_time() - t0) / args.steps)
        if tcase:
            t0 = time.process_time()
            tcase.run()
            res["torch"].append((time.process_time() - t0) / args.steps)
    med = {k: statistics.median(v) if v else float("nan") for k, v in res.items()}
    print(f"\nwhole step, process CPU time, median of {args.repeat} x {args.steps} steps:")
    print(f"  dyngrad {med['dg'] * 1e3:.2f} ms (products {sums['dg'] * 1e3:.2f}, rest {(med['dg'] - sums['dg']) * 1e3:.2f})"
          f"; torch {med['torch'] * 1e3:.2f} ms (products {sums['torch'] * 1e3:.2f}, rest "
          f"{(med['torch'] - sums['torch']) * 1e3:.2f}); torch/dyngrad {med['torch'] / med['dg']:.2f}")
    # what 1.25x PyTorch asks of the products, with the rest of dyngrad's step as it is
    need = med["torch"] / 1.25 - (med["dg"] - sums["dg"])
    print(f"  1.25x PyTorch would need dyngrad's step at {med['torch'] / 1.25 * 1e3:.2f} ms: its products in "
          f"{need * 1e3:.2f} ms = {flops_total / need / 1e9 if need > 0 else float('inf'):.0f} GFLOP/s with the rest "
          f"as it is (MKL's here: {gf['torch']:.0f})")
    print(f"load after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
