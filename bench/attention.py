"""Fused scaled-dot-product attention (issue 26, Note [Fused attention]): F.scaled_dot_product_attention on the
fused primitive against the composite formula (q k^T, mask, softmax, @ v: the path a float mask that requires grad
takes) and torch's CPU kernel, forward and forward+backward, float32, as ratios measured in one run.

    python bench/attention.py [--threads 1] [--repeat 30]

Shapes: a character-level GPT's (batch 12, heads 4, seq 64, head dim 32), causal and not, and a longer sequence
(batch 2, heads 4, seq 512, head dim 64, causal). Each figure is the best of `repeat` timed calls after warm-up
(the machine is shared: the best call is the one least disturbed). At each shape torch runs after dyngrad: torch's
OpenMP threads spin for a while after its calls, which on a loaded 2-core machine slows whatever runs next.
"""
import argparse
import os

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import best_seconds, machine_line

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


def _time(m, fn, qkv, repeat, backward):
    def step():
        t = [x.detach().requires_grad_(backward) for x in qkv]
        out = fn(*t)
        if backward:
            out.sum().backward()
    return best_seconds(step, repeat, warmup=3)


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
    print(machine_line())
    print(f"threads {args.threads}, load {os.getloadavg()[0]:.1f}; ms per call (best of {args.repeat}), float32")
    print(f"{'shape':30s} {'pass':8s} {'fused':>8s} {'composite':>10s} {'torch':>8s} {'comp/fused':>11s} "
          f"{'torch/fused':>12s}")
    rng = np.random.default_rng(0)
    for name, (b, h, n, e), causal, drop in SHAPES:
        drop = args.dropout if drop is None else drop
        name = name.replace("--dropout", str(drop))
        arrays = [rng.standard_normal((b, h, n, e)).astype(np.float32) for _ in range(3)]
        qkv = [dg.tensor(a) for a in arrays]
        for backward in (False, True):
            fused = _time(dg, lambda q, k, v: dg.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal, dropout_p=drop), qkv, args.repeat, backward)
            comp = _time(dg, lambda q, k, v: _composite(dg, q, k, v, causal, drop), qkv, args.repeat, backward)
            tt = None
            if torch is not None:
                tq = [torch.tensor(a) for a in arrays]
                tt = _time(torch, lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, dropout_p=drop), tq, args.repeat, backward)
            print(f"{name:30s} {'fwd+bwd' if backward else 'forward':8s} {fused * 1e3:8.3f} {comp * 1e3:10.3f} "
                  f"{(tt or float('nan')) * 1e3:8.3f} {comp / fused:11.2f} {(tt or float('nan')) / fused:12.2f}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
