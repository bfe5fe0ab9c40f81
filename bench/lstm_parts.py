"""Where an nn.LSTM training step's time goes, dyngrad against PyTorch in one process (issue 26): the layer's
forward without grad, forward + backward, and the 50 step products 32x128 @ 128x512 of its recurrence as plain
matmuls (dyngrad's layer does them with its weight packed once per layer call, Notes [Recurrent products without
repacking] and [Recurrent products on the own kernel] in csrc/dyngrad/kernels/rnn.cpp; torch calls MKL). Also max_pool2d 2x2 of LeNet's first map. Best of --repeat timed
calls after a warm-up, wall and CPU time, at 1 and 2 threads; ratios are torch / dyngrad (> 1: dyngrad faster).

    python bench/lstm_parts.py [--repeat 30]
"""
import argparse
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line


def best(fn, repeat):
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return 1e3 * min(wall), 1e3 * min(cpu)


def cases(lib, rng):
    x = rng.normal(size=(32, 50, 64)).astype(np.float32)
    lstm = lib.nn.LSTM(64, 128, batch_first=True)
    xx = lib.tensor(x)

    def forward():
        with lib.no_grad():
            lstm(xx)

    def step():
        out, _ = lstm(xx)
        out[:, -1].sum().backward()

    a = lib.tensor(rng.normal(size=(32, 128)).astype(np.float32))
    b = lib.tensor(rng.normal(size=(128, 512)).astype(np.float32))
    img = lib.tensor(rng.normal(size=(64, 6, 28, 28)).astype(np.float32))
    return {"lstm forward (no grad)": forward, "lstm forward + backward": step,
            "50 x (32x128 @ 128x512)": lambda: [a @ b for _ in range(50)],
            "max_pool2d 2x2 (64,6,28,28)": lambda: lib.nn.functional.max_pool2d(img, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
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
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: ms (wall / cpu)      dyngrad            torch      torch/dg")
        for name, fn in ours.items():
            w, c = best(fn, args.repeat)
            line = f"  {name:30s} {w:7.3f} / {c:7.3f}"
            if name in theirs:
                tw, tc = best(theirs[name], args.repeat)
                line += f"  {tw:7.3f} / {tc:7.3f}  {tw / w:5.2f}x"
            print(line)
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
