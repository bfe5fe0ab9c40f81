"""The transformer-train step's batched attention products (bench/workloads.py's _transformer_block: d 128, 4 heads,
seq 64, batch 16, attention by hand), forward and backward, with the operands in the step's own layouts (q, k, v
are views into the (16, 64, 384) qkv output: rows 384 floats apart), dyngrad against PyTorch alternating call by
call, best of --repeat, thread CPU time at 1 thread (wall time at 2).

  S  = q @ k^T        64 x (64x32 @ 32x64), k^T read transposed in place
  O  = P @ v          64 x (64x64 @ 64x32)
  dP = g @ v^T        64 x (64x32 @ 32x64)
  dv = P^T @ g        64 x (64x64^T @ 64x32)
  dq = dS @ k         64 x (64x64 @ 64x32)
  dk = (dS^T @ q)     64 x (64x64^T @ 64x32)  (matmul's backward computes it as (dS^T q), Note [Gradient in the
                      operand's layout])
  also the step's linear products (1024 rows)

    PYTHONPATH=python python bench/gemm_batched.py [--repeat 30] [--threads 1,2] [--only dW,dX] [--step]

Measured (Intel Xeon family 6 model 167, 2 cores, KVM, 2026-12-03 18:47-18:59, load 4-9; one thread, thread CPU
us, best of 10-15; torch/dg, > 1 = dyngrad faster): the attention products are already faster than MKL's batched
calls: S 1.60-1.68, O 1.25-1.36, dP 1.43-1.45, dv 1.00-1.03, dq 1.30-1.42, dk 1.30-1.42 (sum 1.33). The linear
products are where the step loses: sum of the nine 0.91-0.92 (h @ W2 1024x512x128 and dX g @ W1^T on OpenBLAS
0.83-0.88; the weight gradients 0.88-0.96). Tried for those, not kept (same run, standalone GFLOP/s, 1 thread):
the own kernel for a's of up to 2^21 floats (1024 x 512): 154-170 against OpenBLAS's 146-158, within the noise
of repeated runs (2048-4096 rows 0.93-0.97x); row chunks of 128 rows with a packed per k block and every strip
of b packed first (GotoBLAS order): 147-156 on the rows-contiguous products, 135-139 on h^T @ g against
OpenBLAS's 143-144. At 2 threads under this load the pool's second thread seldom got a core (process CPU time =
wall time: the caller ran every task), so the 2-thread rows measure the load, not the split.

After this session's changes (main's build against this one, alternating runs, 19:21-19:24, load 7-9):
h @ W2 0.86 -> 0.93 and dX g @ W1^T 0.90 -> 0.98 (Note [a and b within L2] in matmul.cpp), the nine linear
products' sum 1.02 both; the whole step (--step, best of 6-8) torch/dg 1.14, 1.20, 1.24 before and 1.17, 1.17,
1.22 after: no change measurable at this load (the step's products are at MKL's speed in sum, the attention
products ahead; what is left of the 1.25x target is outside the products).
"""
import argparse
import subprocess
import sys
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg

try:
    import torch
except ImportError:
    torch = None


def pair(ours, theirs, repeat, clock):
    for fn in (ours, theirs, ours, theirs):
        fn()
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for slot, fn in enumerate((ours, theirs)):
            t0 = clock()
            for _ in range(5):
                fn()
            best[slot] = min(best[slot], (clock() - t0) / 5)
    return best


def cases(lib, rng):
    B, T, H, D = 16, 64, 4, 32
    t = (lambda *s: lib.tensor(rng.normal(size=s).astype(np.float32)))
    qkv = t(B, T, 3 * H * D)

    def heads(x):
        return x.reshape(B, T, H, D).transpose(1, 2)

    q, k, v = (heads(c) for c in qkv.chunk(3, dim=-1))
    P = t(B, H, T, T)
    g = t(B, H, T, D)
    dS = t(B, H, T, T)
    x, w_qkv, w_1, w_2 = t(B * T, 128), t(128, 384), t(128, 512), t(512, 128)
    g384, g512, g128 = t(B * T, 384), t(B * T, 512), t(B * T, 128)
    h = t(B * T, 512)
    return [
        ("S = q @ k^T", lambda: q @ k.transpose(-2, -1)),
        ("O = P @ v", lambda: P @ v),
        ("dP = g @ v^T", lambda: g @ v.transpose(-2, -1)),
        ("dv = P^T @ g", lambda: P.transpose(-2, -1) @ g),
        ("dq = dS @ k", lambda: dS @ k),
        ("dk = dS^T @ q", lambda: dS.transpose(-2, -1) @ q),
        ("x @ Wqkv 1024x128x384", lambda: x @ w_qkv),
        ("x @ W1 1024x128x512", lambda: x @ w_1),
        ("h @ W2 1024x512x128", lambda: h @ w_2),
        ("dX g @ Wqkv^T 1024x384x128", lambda: g384 @ w_qkv.transpose(0, 1)),
        ("dX g @ W1^T 1024x512x128", lambda: g512 @ w_1.transpose(0, 1)),
        ("dX g @ W2^T 1024x128x512", lambda: g128 @ w_2.transpose(0, 1)),
        ("dW x^T @ g 128x1024x384", lambda: x.transpose(0, 1) @ g384),
        ("dW x^T @ g 128x1024x512", lambda: x.transpose(0, 1) @ g512),
        ("dW h^T @ g 512x1024x128", lambda: h.transpose(0, 1) @ g128),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--only", default="", help="comma-separated substrings of the product names")
    p.add_argument("--step", action="store_true",
                   help="also the whole transformer-train step (fwd + bwd + SGD), one thread, thread CPU time")
    args = p.parse_args(argv)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = [l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith(("Model name", "Model:"))]
    print(f"machine: {', '.join(model)}; {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    ours = cases(dg, np.random.default_rng(0))
    theirs = cases(torch, np.random.default_rng(0))
    for threads in [int(s) for s in args.threads.split(",")]:
        dg.set_num_threads(threads)
        torch.set_num_threads(threads)
        clock = time.thread_time if threads == 1 else time.perf_counter
        print(f"\n{threads} thread(s), {'thread CPU' if threads == 1 else 'wall'} us per call, best of {args.repeat}")
        print(f"  {'product':28s} {'dyngrad':>9} {'torch':>9} {'torch/dg':>8}")
        tot = [0.0, 0.0]
        with torch.no_grad():
            for (name, fo), (_, ft) in zip(ours, theirs):
                if args.only and not any(o in name for o in args.only.split(",")):
                    continue
                d, tt = pair(fo, ft, args.repeat, clock)
                assert np.allclose(fo().numpy(), ft().numpy(), rtol=1e-4, atol=1e-4), name
                tot[0] += d
                tot[1] += tt
                print(f"  {name:28s} {d * 1e6:9.1f} {tt * 1e6:9.1f} {tt / d:8.2f}")
        if tot[0]:
            print(f"  {'sum':28s} {tot[0] * 1e6:9.1f} {tot[1] * 1e6:9.1f} {tot[1] / tot[0]:8.2f}")
    if args.step:
        from dyngrad.bench import workloads as W
        size = {"batch": 16, "seq": 64, "steps": 1, "lr": 0.05}
        dg.set_num_threads(1)
        torch.set_num_threads(1)
        ours, theirs = W.transformer_train(dg, size), W.transformer_train(torch, size)
        d, tt = pair(ours.run, theirs.run, max(5, args.repeat // 2), time.thread_time)
        print(f"\ntransformer-train step, 1 thread, thread CPU ms, best of {max(5, args.repeat // 2)}: dyngrad "
              f"{d * 1e3:.2f}, torch {tt * 1e3:.2f}, torch/dg {tt / d:.2f}")
    print(f"\nload after: {open('/proc/loadavg').read().split()[0]}")


if __name__ == "__main__":
    sys.exit(main())
