"""Where the LeNet-style CNN training step of the bench (cnn-train) spends its time, dyngrad against PyTorch in one
process (issue 26): each convolution's forward (no grad), forward + backward (dW, and dX for the second layer),
max_pool2d forward + backward of both maps, and the whole step (fwd + bwd + SGD, batch 64 of 1x28x28). The two
libraries' calls alternate, best of --repeat rounds after a warm-up; wall time; ratios are torch / dyngrad
(> 1: dyngrad faster), at 1 and 2 threads. The step is the bench's own cnn-train case (its weights, data and SGD).

    python bench/conv_parts.py [--repeat 30] [--only NAME]
"""
import argparse
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench import workloads
from dyngrad.bench.engines import machine_line


def cases(lib, rng):
    F = lib.nn.functional

    def t(shape, grad=False, scale=1.0):
        v = lib.tensor((scale * rng.normal(size=shape)).astype(np.float32))
        if grad:
            v.requires_grad_(True)
        return v

    x1 = t((64, 1, 28, 28))
    w1, b1 = t((6, 1, 5, 5), True, 0.2), t((6,), True, 0.2)
    x2, x2g = t((64, 6, 14, 14)), t((64, 6, 14, 14), True)
    w2, b2 = t((16, 6, 5, 5), True, 0.08), t((16,), True, 0.08)
    p1, p2 = t((64, 6, 28, 28), True), t((64, 16, 10, 10), True)

    def nograd(fn):
        def run():
            with lib.no_grad():
                fn()
        return run

    return {
        "conv1 fwd (64,1,28,28) 6x5x5 p2": nograd(lambda: F.conv2d(x1, w1, b1, padding=2)),
        "conv1 fwd+bwd (dW, db)": lambda: F.conv2d(x1, w1, b1, padding=2).sum().backward(),
        "conv2 fwd (64,6,14,14) 16x5x5": nograd(lambda: F.conv2d(x2, w2, b2)),
        "conv2 fwd+bwd (dW, db)": lambda: F.conv2d(x2, w2, b2).sum().backward(),
        "conv2 fwd+bwd (dX, dW, db)": lambda: F.conv2d(x2g, w2, b2).sum().backward(),
        "maxpool 2 (64,6,28,28) fwd": nograd(lambda: F.max_pool2d(p1, 2)),
        "maxpool 2 (64,6,28,28) fwd+bwd": lambda: F.max_pool2d(p1, 2).sum().backward(),
        "maxpool 2 (64,16,10,10) fwd+bwd": lambda: F.max_pool2d(p2, 2).sum().backward(),
        "relu (64,6,28,28) fwd+bwd": lambda: F.relu(p1).sum().backward(),
        "step (fwd + bwd + SGD)": workloads.cnn_train(lib, {"batch": 64, "steps": 1, "lr": 0.05}).run,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    print(machine_line())
    for threads in (1, 2):
        dg.set_num_threads(threads)
        if torch:
            torch.set_num_threads(threads)
        ours = cases(dg, np.random.default_rng(0))
        theirs = cases(torch, np.random.default_rng(0)) if torch else {}
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: best ms          dyngrad    torch  torch/dg")
        for name, fn in ours.items():
            if args.only not in name:
                continue
            other = theirs.get(name)
            fn()
            if other:
                other()
            mine, yours = [], []
            for _ in range(args.repeat):  # alternating, so that both see the same load
                t0 = time.perf_counter()
                fn()
                mine.append(time.perf_counter() - t0)
                if other:
                    t0 = time.perf_counter()
                    other()
                    yours.append(time.perf_counter() - t0)
            w = 1e3 * min(mine)
            line = f"  {name:34s} {w:7.3f}"
            if other:
                tw = 1e3 * min(yours)
                line += f"  {tw:7.3f}  {tw / w:5.2f}x"
            print(line, flush=True)
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
