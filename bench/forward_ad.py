"""Forward-mode AD cost (issue 21's targets): the jvp of a network against its forward pass (target <= 2x), and a
Hessian-vector product (forward over reverse) against a gradient (target <= 3x), as ratios measured in one run (the
four timings interleaved in rounds), for the C++ engine and, when installed, torch (torch.func.jvp /
torch.autograd.functional.hvp on the same work).

    python bench/forward_ad.py [--batch 64] [--width 256] [--repeat 30] [--threads N]

The network: 3 tanh layers of `width` units over a (batch, width) input, summed to a scalar for the gradient and
the hvp. Each figure is the best of `repeat` timed calls after warm-up (the machine is shared: the best call
is the one least disturbed by other work).
"""
import argparse

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import best_seconds, machine_line


def _rows(m, func_jvp, hvp, grad, weights, x, v, repeat):
    def net(x):
        h = x
        for w in weights:
            h = m.tanh(h @ w)
        return h

    loss = lambda z: net(z).sum()
    calls = [lambda: net(x), lambda: func_jvp(net, (x,), (v,)), lambda: grad(loss, x), lambda: hvp(loss, x, v)]
    # interleaved: `rounds` rounds of the four, each figure the best over all rounds (on the shared machine the
    # load changes within seconds; timing one call after the other in blocks put a load change between a
    # figure and its base: jvp/forward read 1.40 to 2.53 in one minute)
    rounds = 5
    best = [float("inf")] * 4
    for _ in range(rounds):
        for k, call in enumerate(calls):
            best[k] = min(best[k], best_seconds(call, max(1, repeat // rounds), warmup=1))
    return tuple(best)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--threads", type=int, default=None, help="threads for both engines (default: dyngrad's)")
    args = p.parse_args(argv)
    if args.threads is not None:
        dg.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32) for _ in range(3)]
    xs = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    vs = rng.standard_normal((args.batch, args.width)).astype(np.float32)

    def dg_grad(loss, x):
        x = x.detach().requires_grad_(True)
        return dg.autograd.grad(loss(x), x)

    print(machine_line())
    print(f"MLP 3 x tanh({args.width}), batch {args.batch}, float32; best of {args.repeat} calls; "
          f"{dg.get_num_threads()} thread(s)")
    print(f"{'engine':8} {'forward ms':>11} {'jvp ms':>8} {'jvp/fwd':>8} {'grad ms':>8} {'hvp ms':>8} {'hvp/grad':>9}")
    # dyngrad is measured before torch is imported: with torch's objects on the Python heap, the garbage
    # collector's passes during the hvp (which makes many Python objects) took 6% of its time, and hvp/grad read
    # 2.69-2.75 instead of 2.22-2.30 (1 thread, Xeon family 6 model 167, 2 cores, KVM, load 7.5)
    _row("dyngrad", dg, dg.func.jvp, dg.autograd.functional.hvp, dg_grad,
         [dg.tensor(w, dtype=dg.float32) for w in ws], dg.tensor(xs, dtype=dg.float32),
         dg.tensor(vs, dtype=dg.float32), args.repeat)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(dg.get_num_threads())

    def torch_grad(loss, x):
        x = x.detach().requires_grad_(True)
        return torch.autograd.grad(loss(x), x)
    _row("torch", torch, torch.func.jvp, torch.autograd.functional.hvp, torch_grad, [torch.tensor(w) for w in ws],
         torch.tensor(xs), torch.tensor(vs), args.repeat)


def _row(name, m, fjvp, hvp, grad, weights, x, v, repeat):
    f, j, g, h = _rows(m, fjvp, hvp, grad, weights, x, v, repeat)
    print(f"{name:8} {f * 1e3:11.3f} {j * 1e3:8.3f} {j / f:8.2f} {g * 1e3:8.3f} {h * 1e3:8.3f} {h / g:9.2f}")


if __name__ == "__main__":
    main()
