"""Complex matmul, 512 x 512 complex64 (issue 22's target: within 1.2x of numpy's), dyngrad's C++ engine against
numpy (its OpenBLAS cgemm) and torch (when installed), in one process: the median of --repeat calls each, and the
ratios to numpy. dyngrad computes it as one real gemm on the (real, imag) pairs (Note [Complex matmul as one real
product] in csrc/dyngrad/kernels/matmul.cpp).

    python bench/complex_matmul.py [--n 512] [--repeat 30] [--dtype complex64]
"""
import argparse
import statistics
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line


def median_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--dtype", default="complex64", choices=["complex64", "complex128"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.n
    a = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(args.dtype)
    b = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(args.dtype)
    x, y = dg.from_numpy(a), dg.from_numpy(b)
    rows = [("numpy", median_ms(lambda: a @ b, args.repeat)), ("dyngrad", median_ms(lambda: x @ y, args.repeat))]
    err = np.abs((x @ y).numpy() - a @ b).max() / np.abs(a @ b).max()
    try:
        import torch
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        rows.append(("torch", median_ms(lambda: ta @ tb, args.repeat)))
    except ImportError:
        pass
    base = rows[0][1]
    print(machine_line())
    print(f"{n}x{n} {args.dtype} matmul, median of {args.repeat} (max relative difference to numpy {err:.1e})")
    for name, ms in rows:
        print(f"  {name:8s} {ms:8.3f} ms   {ms / base:5.2f}x numpy")


if __name__ == "__main__":
    main()
