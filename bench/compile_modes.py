"""Dynamic against static graphs (issue 20): one workload per line, eager dyngrad against dyngrad.compile's verified
replay (the default mode) and static replay (mode="reduce-overhead"), PyTorch eager and torch.compile beside them, in one run (ratios are what to read on
a loaded machine). Compile time (the first, recording call) is reported separately.

    python bench/compile_modes.py [--quick] [--no-torch-compile]

Times are CPU time of the calling thread (time.thread_time), best of 5 blocks; torch's own worker threads are not
counted, so its multithreaded kernels look cheaper than they are (the workloads here are small).

Workloads: 200 one-element ops forward + backward (y = tanh(y * a + b), 67 rounds); an MLP training step at batch
32 (64-128-10, SGD); a transformer block (d 128, seq 64, batch 16) forward + backward.
"""
import argparse
import time
import warnings

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad.bench.engines import machine_line


def timed(fn, seconds, at_least=5):
    """CPU time of this thread per call (time.thread_time), the best of 5 blocks of calls: on a machine shared with
    other jobs the wall clock mostly measures waiting for a core."""
    fn()
    t0 = time.perf_counter()
    fn()
    per_call = max(time.perf_counter() - t0, 1e-6)
    calls = max(1, min(10_000, int(seconds / 5 / per_call)))
    return best_of_blocks(fn, calls, max(5, at_least))


def best_of_blocks(fn, calls, blocks=5):
    """The least CPU time of this thread per call over `blocks` blocks of `calls` calls (the benches' one timer)."""
    best = float("inf")
    for _ in range(blocks):
        c0 = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - c0) / calls)
    return best


def chain(dg, rounds=67, backward=True):
    """`rounds` rounds of (y * a + b).tanh() on one element (3 ops a round, then sum and, with backward, its
    backward): the program of the 200-op rows (here and in bench/static_replay.py)."""
    a = dg.tensor(np.array([0.5], np.float32), requires_grad=backward)
    b = dg.tensor(np.array([0.1], np.float32), requires_grad=backward)

    def step(x):
        y = x
        for _ in range(rounds):
            y = (y * a + b).tanh()
        if backward:
            y.sum().backward()
        return y
    x = dg.tensor(np.array([0.3], np.float32))
    return step, (x,)


def mlp(dg):
    rng = np.random.default_rng(0)
    model = dg.nn.Sequential(dg.nn.Linear(64, 128), dg.nn.ReLU(), dg.nn.Linear(128, 10))
    opt = dg.optim.SGD(model.parameters(), lr=0.01)
    x = dg.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = dg.tensor(rng.integers(0, 10, 32))
    loss_fn = dg.nn.functional.cross_entropy

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, (x, y)


def transformer(dg):
    rng = np.random.default_rng(0)
    layer = dg.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
    x = dg.tensor(rng.standard_normal((16, 64, 128)).astype(np.float32))

    def step(x):
        layer.zero_grad()
        out = layer(x)
        out.sum().backward()
        return out
    return step, (x,)


WORKLOADS = {"200 one-element ops fwd+bwd": chain, "MLP step b32 64-128-10": mlp,
             "transformer block fwd+bwd": transformer}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-torch-compile", action="store_true")
    args = p.parse_args()
    seconds = 0.3 if args.quick else 1.5
    try:
        import torch
    except ImportError:
        torch = None
    print(machine_line())
    print(f"{'workload':<30} {'eager':>10} {'verified':>10} {'x eager':>8} {'static':>10} {'x eager':>8} "
          f"{'record':>10} {'torch':>10} {'torch.compile':>14}")
    for name, build in WORKLOADS.items():
        step, inputs = build(dyngrad)
        eager = timed(lambda: step(*inputs), seconds)
        verifying = dyngrad.compile(step, mode="verified")
        verified = timed(lambda: verifying(*inputs), seconds)
        assert verifying.compile_stats.variants <= 2, verifying.compile_stats.guard_misses
        compiled = dyngrad.compile(step, mode="reduce-overhead")
        t0 = time.thread_time()
        compiled(*inputs)
        record = time.thread_time() - t0
        static = timed(lambda: compiled(*inputs), seconds)
        stats = compiled.compile_stats
        assert stats.variants <= 2, stats.guard_misses
        row = (f"{name:<30} {eager * 1e6:>8.0f}us {verified * 1e6:>8.0f}us {eager / verified:>7.2f}x "
               f"{static * 1e6:>8.0f}us {eager / static:>7.2f}x {record * 1e6:>8.0f}us")
        if torch is not None:
            tstep, tinputs = build(torch)
            row += f" {timed(lambda: tstep(*tinputs), seconds) * 1e6:>8.0f}us"
            if not args.no_torch_compile:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        tc = torch.compile(tstep)
                        tc(*tinputs)
                        row += f" {timed(lambda: tc(*tinputs), seconds) * 1e6:>12.0f}us"
                except Exception as e:  # torch.compile needs a C compiler and may fail on this machine
                    row += f" {'failed: ' + type(e).__name__:>14}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
