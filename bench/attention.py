"""Fused scaled-dot-product attention (issue 26, Note [Fused attention] in ops_nn.cpp, Note [Attention tiles for
small head dims] in kernels/attention.cpp): F.scaled_dot_product_attention on the fused primitive -- its tiled path
for head dims 16-64 and (DYNGRAD_ATTENTION=generic) its gemm_into path -- against the composite formula (q k^T,
mask, softmax, @ v: the path a float mask that requires grad takes) and torch's CPU kernel, forward and
forward+backward, float32, as ratios measured in one run.

    python bench/attention.py [--threads 1] [--repeat 30]

Shapes: a character-level GPT's (batch 12, heads 4, seq 64, head dim 32), causal and not, and a longer sequence
(batch 2, heads 4, seq 512, head dim 64, causal). The tiled path, the generic path and torch alternate call by call
(the composite is timed after them); each figure is the best of `repeat` calls after warm-up, in thread CPU time
at one thread (a loaded machine's waits for a core are not counted) and wall time at more (the pool's threads do
the work).

Measured 2026-12-03 20:00 UTC, Intel Xeon family 6 model 167, 2 cores, KVM, load 0.6 (ms; tiled, generic, torch):
1 thread  GPT causal forward 0.253 0.377 0.419, fwd+bwd 0.780 1.145 1.611; not causal 0.340 0.465 0.407, 1.004
          1.302 1.513; causal dropout 0.1 0.377 0.651 2.075, 0.970 1.914 3.599; (2, 4, 512, 64) causal 2.80 3.15
          4.49, 8.15 9.80 16.6.
2 threads GPT causal forward 0.254 0.365 0.254, fwd+bwd 0.764 0.968 1.070; (2, 4, 512, 64) causal 1.53 1.68
          2.52, 4.95 5.33 9.45 (wall time; the GPT-sized call does not get faster with the second thread on either
          path here, though _C.attention alone does, 0.210 -> 0.107 ms: likely torch's OpenMP threads, which
          spin after its calls, holding the second core when ours start).
"""
import argparse
import os
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line

SHAPES = [("gpt (12, 4, 64, 32) causal", (12, 4, 64, 32), True, 0.0),
          ("gpt (12, 4, 64, 32)", (12, 4, 64, 32), False, 0.0),
          ("gpt causal, dropout --dropout", (12, 4, 64, 32), True, None),
          ("long (2, 4, 512, 64) causal", (2, 4, 512, 64), True, 0.0)]


def _composite(m, q, k, v, causal, p):
    """The composite path of the API (a float mask that requires grad forces it)."""
    n = q.shape[-2]
    mask = m.zeros(n, n, requires_grad=True)
    if causal:
        mask = mask + m.triu(m.full((n, n), float("-inf")), 1)
    return m.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)


def _step(fn, qkv, backward):
    def step():
        t = [x.detach().requires_grad_(backward) for x in qkv]
        out = fn(*t)
        if backward:
            out.sum().backward()
    return step


def _alternate(steps, repeat, clock):
    """Best seconds of each step, the steps alternating call by call after three warm-up rounds. A step is (fn,
    environment value of DYNGRAD_ATTENTION or None)."""
    def run(fn, mode):
        if mode is None:
            fn()
        else:
            os.environ["DYNGRAD_ATTENTION"] = mode
            try:
                fn()
            finally:
                del os.environ["DYNGRAD_ATTENTION"]
    for _ in range(3):
        for fn, mode in steps:
            run(fn, mode)
    best = [float("inf")] * len(steps)
    for _ in range(repeat):
        for slot, (fn, mode) in enumerate(steps):
            t0 = clock()
            run(fn, mode)
            best[slot] = min(best[slot], clock() - t0)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--dropout", type=float, default=0.1, help="dropout_p of the dropout row (default 0.1)")
    args = p.parse_args(argv)
    dg.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    print(machine_line())
    print(f"threads {args.threads}, load {os.getloadavg()[0]:.1f}; ms per call (best of {args.repeat}, "
          f"{'thread CPU' if args.threads == 1 else 'wall'} time), float32")
    print(f"{'shape':30s} {'pass':8s} {'tiled':>7s} {'generic':>8s} {'compos.':>8s} {'torch':>7s} {'gen/tiled':>10s} "
          f"{'comp/tiled':>10s} {'torch/tiled':>11s}")
    rng = np.random.default_rng(0)
    sdpa = dg.nn.functional.scaled_dot_product_attention
    for name, (b, h, n, e), causal, drop in SHAPES:
        drop = args.dropout if drop is None else drop
        name = name.replace("--dropout", str(drop))
        arrays = [rng.standard_normal((b, h, n, e)).astype(np.float32) for _ in range(3)]
        qkv = [dg.tensor(a) for a in arrays]
        for backward in (False, True):
            fused = _step(lambda q, k, v: sdpa(q, k, v, is_causal=causal, dropout_p=drop), qkv, backward)
            steps = [(fused, "tiles"), (fused, "generic")]
            if torch is not None:
                tq = [torch.tensor(a) for a in arrays]
                steps.append((_step(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, dropout_p=drop), tq, backward), None))
            times = _alternate(steps, args.repeat, clock)
            tiled, generic = times[0], times[1]
            tt = times[2] if torch is not None else float("nan")
            comp = _alternate([(_step(lambda q, k, v: _composite(dg, q, k, v, causal, drop), qkv, backward), None)],
                              args.repeat, clock)[0]
            print(f"{name:30s} {'fwd+bwd' if backward else 'forward':8s} {tiled * 1e3:7.3f} {generic * 1e3:8.3f} "
                  f"{comp * 1e3:8.3f} {tt * 1e3:7.3f} {generic / tiled:10.2f} {comp / tiled:10.2f} "
                  f"{tt / tiled:11.2f}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
