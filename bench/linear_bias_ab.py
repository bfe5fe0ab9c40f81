"""The char-level GPT's training step (the bench's gpt-train-1t: 4 layers, width 128, context 64, batch 12, AdamW)
with linear's bias added in the product's last store (F.linear's fast path, Note [Bias in the product's last
store] in csrc/dyngrad/kernels/matmul.cpp) against the same step with F.linear replaced by x @ w.mT + b (the
product, then the add as a second pass over its output): medians of --repeat rounds in process CPU time (one
thread; the order alternates), ms per step and the ratio apart/fused (> 1: the bias in the product pays).

    PYTHONPATH=python python bench/linear_bias_ab.py [--repeat 11]
"""
import argparse
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401

import dyngrad as dg
import dyngrad.nn.functional as F
from dyngrad.bench import workloads as W
from gemm_shapes import load, machine_line


def apart(x, w, b=None):
    return x @ w.mT + b if b is not None else x @ w.mT


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=11)
    args = p.parse_args(argv)
    print(f"machine: {machine_line()}; dyngrad's kernel: {dg._C._gemm_kernel()}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    dg.set_num_threads(1)
    size = dict(next(w for w in W.WORKLOADS if w.name == "gpt-train-1t").sizes["default"])
    case = W.gpt_train(dg, size)
    fused = F.linear
    res = {"fused": [], "apart": []}
    try:
        for r in range(args.repeat):
            order = (("fused", fused), ("apart", apart))
            for key, fn in order if r % 2 == 0 else order[::-1]:
                F.linear = fn
                case.run()
                t0 = time.process_time()
                case.run()
                res[key].append((time.process_time() - t0) / size["steps"])
    finally:
        F.linear = fused
    med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
    print(f"gpt-train-1t ms/step: bias in the product {med['fused']:.2f}, add apart {med['apart']:.2f}, "
          f"apart/fused {med['apart'] / med['fused']:.3f}")
    print(f"load after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
