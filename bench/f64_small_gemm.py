"""float64 matrix products: dyngrad's own small-product kernel (Note [Own float64 small-product kernel],
csrc/dyngrad/kernels/gemm_f64_small.cpp) against its BLAS path (the same process, switched with
_C._set_gemm_kernel), numpy (the same OpenBLAS) and PyTorch (MKL), taking turns so that the machine's load hits all
alike. The shapes are the LSTMCell + LBFGS program's (batch 97, hidden 51: gates, input and weight gradients, some
with an operand given transposed as linear and its backward give them) and a few square and skinny ones. Medians
of --repeat rounds of best-of-inner timings, us per product; ratios x/own > 1 mean the own kernel is faster.

    PYTHONPATH=python python bench/f64_small_gemm.py [--repeat 7]
"""
import argparse
import statistics
import time

import numpy as np

import _path  # noqa: F401

import dyngrad as dg
from dyngrad import _C
from gemm_shapes import load, machine_line

try:
    import torch
except ImportError:
    torch = None

# (name, n, k, m, a transposed, b transposed): c (n x m) = a (n x k) @ b (k x m)
SHAPES = [
    ("gates h W^T", 97, 51, 204, False, True),
    ("dh dg W", 97, 204, 51, False, False),
    ("dW dg^T h", 204, 97, 51, True, False),
    ("cell1 dW_ih", 204, 97, 1, True, False),
    ("32x128x512", 32, 128, 512, False, False),
    ("64^3", 64, 64, 64, False, False),
    ("128^3", 128, 128, 128, False, False),
    ("256^3", 256, 256, 256, False, False),
    ("16x64x16", 16, 64, 16, False, False),
]


def operands(rng, n, k, m, ta, tb):
    a = rng.standard_normal((k, n) if ta else (n, k))
    b = rng.standard_normal((m, k) if tb else (k, m))
    return a, b


def best(fn, inner):
    fn()
    t = []
    for _ in range(inner):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--inner", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    dg.set_num_threads(args.threads)
    if torch is not None:
        torch.set_num_threads(args.threads)
    before = _C._gemm_kernel() if hasattr(_C, "_gemm_kernel") else "avx512"
    rng = np.random.default_rng(0)
    print(machine_line(), f"load {load()}, {args.threads} thread(s)")
    print(f"{'product':14s} {'n x k x m':>13s} {'own us':>8s} {'blas/own':>9s} {'numpy/own':>10s} {'torch/own':>10s}")
    for name, n, k, m, ta, tb in SHAPES:
        a, b = operands(rng, n, k, m, ta, tb)
        da, db = dg.tensor(a), dg.tensor(b)
        xa, xb = (da.t() if ta else da), (db.t() if tb else db)
        na, nb = (a.T if ta else a), (b.T if tb else b)
        runs = {"own": [], "blas": [], "numpy": [], "torch": []}
        if torch is not None:
            tA, tB = torch.from_numpy(a), torch.from_numpy(b)
            tA, tB = (tA.t() if ta else tA), (tB.t() if tb else tB)
        _C._set_gemm_kernel("avx512")
        ref = (na @ nb)
        got = (xa @ xb).numpy()
        assert np.allclose(got, ref, rtol=1e-12, atol=1e-12), name
        for _ in range(args.repeat):
            for kernel in ("avx512", "blas"):
                _C._set_gemm_kernel(kernel)
                runs["own" if kernel == "avx512" else "blas"].append(best(lambda: xa @ xb, args.inner))
            runs["numpy"].append(best(lambda: na @ nb, args.inner))
            if torch is not None:
                runs["torch"].append(best(lambda: tA @ tB, args.inner))
        med = {key: statistics.median(v) if v else float("nan") for key, v in runs.items()}
        own = med["own"]
        print(f"{name:14s} {f'{n}x{k}x{m}':>13s} {own * 1e6:8.1f} {med['blas'] / own:9.2f} {med['numpy'] / own:10.2f} "
              f"{med['torch'] / own:10.2f}")
    _C._set_gemm_kernel(before)
    print(f"load {load()}")


if __name__ == "__main__":
    main()
