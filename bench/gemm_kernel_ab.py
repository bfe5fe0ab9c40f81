"""Whole training steps with dyngrad's own float32 product kernel against the BLAS path (Note [Own small-product
kernel], csrc/dyngrad/kernels/gemm_avx512.cpp), switched in one process (_C._set_gemm_kernel) and timed in
alternation with PyTorch's step, so that the machine's load hits all three alike: medians of --repeat rounds, ms per
step and the ratios blas/own and torch/own (> 1: the own kernel's step is faster). Prints the machine line and load.

    PYTHONPATH=python python bench/gemm_kernel_ab.py [--repeat 7] [--only lstm-train-1t,transformer-train-1t]
"""
import argparse
import statistics
import sys
import time

import _path  # noqa: F401

import dyngrad as dg
from dyngrad import _C
from dyngrad.bench import workloads as W
from gemm_shapes import load, machine_line

try:
    import torch
except ImportError:
    torch = None

DEFAULT = "lstm-train-1t,lstm-train-2t,transformer-train-1t,transformer-train-2t,wide-mlp-train-1t"


def time_step(run, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t0) / calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--calls", type=int, default=3, help="steps per timing")
    p.add_argument("--only", default=DEFAULT)
    args = p.parse_args(argv)
    before = _C._gemm_kernel()
    try:
        _C._set_gemm_kernel("avx512")
    except RuntimeError:
        print("this CPU has no AVX-512F: only the BLAS path exists here")
        return 0
    print(f"machine: {machine_line()}; load {load()}")
    print(f"{'workload':22s} {'own ms':>8} {'blas ms':>8} {'torch ms':>9} {'blas/own':>8} {'torch/own':>9}")
    by_name = {w.name: w for w in W.WORKLOADS}
    for name in args.only.split(","):
        w = by_name[name]
        size = w.sizes["default"]
        threads = w.threads or dg.get_num_threads()
        dg.set_num_threads(threads)
        if torch is not None:
            torch.set_num_threads(threads)
        case = w.build(dg, size)
        tcase = w.build(torch, size) if torch is not None else None
        res = {"own": [], "blas": [], "torch": []}
        for kernel in ("avx512", "blas"):  # warm up both
            _C._set_gemm_kernel(kernel)
            case.run()
        if tcase:
            tcase.run()
        for r in range(args.repeat):
            # alternate which kernel runs first, and let PyTorch's OpenMP threads stop spinning after its steps
            # (they spin for a while after a parallel region and took the cores from whatever ran next)
            order = (("avx512", "own"), ("blas", "blas"))
            for kernel, key in order if r % 2 == 0 else order[::-1]:
                _C._set_gemm_kernel(kernel)
                res[key].append(time_step(case.run, args.calls))
            if tcase:
                res["torch"].append(time_step(tcase.run, args.calls))
                time.sleep(0.3)
        med = {k: statistics.median(v) * 1e3 if v else float("nan") for k, v in res.items()}
        print(f"{name:22s} {med['own']:8.2f} {med['blas']:8.2f} {med['torch']:9.2f} {med['blas'] / med['own']:8.2f} "
              f"{med['torch'] / med['own']:9.2f}", flush=True)
    _C._set_gemm_kernel(before)
    print(f"load after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
