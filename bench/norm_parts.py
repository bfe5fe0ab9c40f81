"""The non-product kernels of the transformer-train and gpt-train steps (issue 26), dyngrad against PyTorch in one
process: layer_norm, softmax along a short last dim, GELU, the scalar multiply, residual and bias adds, the mse loss,
embedding and cross_entropy, each at the steps' shapes, forward alone and forward + backward, and the two whole
steps. The two libraries alternate call by call (best of --repeat, wall time), so a loaded machine slows both alike;
ratios are torch / dyngrad (> 1: dyngrad faster).

    python bench/norm_parts.py [--repeat 200] [--threads 1,2] [--only NAME[,NAME]] [--steps] [--no-ops] [--grain]

At 1 thread the clock is the calling thread's CPU time (every kernel of both libraries runs on it; a loaded machine
shifts wall time), at 2 threads wall time. --grain times dyngrad alone at 2 threads, each kernel split over the
threads against whole.

Measured 2026-12-03, Intel Xeon family 6 model 167, 2 cores, KVM, best of 150, before (main at 2c2c2bb) and after
(the layer_norm / softmax / cross_entropy AVX-512 rows of reduce.cpp) in alternating processes minutes apart, load
1.3-2.3; ratios torch / dyngrad, 1 thread:
                                    forward          forward + backward
                                  before  after      before  after
    layer_norm (16,64,128)         0.96x  1.93x       0.79x  1.37x     (dyngrad 0.076 -> 0.039 ms fwd)
    layer_norm (12,64,128)         0.96x  2.01x       0.86x  1.47x     (0.055 -> 0.027 fwd, 0.269 -> 0.159 f+b)
    softmax (16,4,64,64)           0.70x  1.34x       0.86x  1.10x     (0.270 -> 0.140 fwd)
    cross_entropy (768,65)         0.67x  1.09x       1.08x  1.44x     (0.062 -> 0.037 fwd)
    gelu (16,64,512)               0.95x  1.08x       1.03x  1.03x     (unchanged kernels: noise)
    residual / bias adds, mse      1.1-1.25x fwd, 0.9-2.1x f+b (unchanged)
    embedding wte+wpe              0.84-0.89x fwd, 1.47x f+b (unchanged; not this file's kernels)
Whole steps, 1 thread, thread CPU time (load 4.3-5.2, two rounds): transformer-train dyngrad 13.76 / 13.46 ms before,
13.31 / 12.92 after (torch/dyngrad 1.14 / 1.11 before, 1.14 / 1.13 after); gpt-train 48.3 / 44.5 before, 44.3 /
43.3 after (1.05 / 1.15 before, 1.10 / 1.08 after): the non-product kernels are a few per cent of the steps, which
products, attention and the engine dominate (perf).
2 threads: alternating call by call with torch, dyngrad's split kernels gain nothing (softmax 0.22 ms against 0.14
at 1 thread) and torch's step after dyngrad's is sometimes slowed 10-25x (390 ms against 15): both libraries' idle
threads spin. Alone (--grain, load 1.2) only the bias adds' split paid (2.0x fwd); GELU, softmax, layer_norm and
scalar mul ran at their whole time: perf of a 2-thread GELU loop shows the caller doing 58% of the samples and the
pool's worker 13% (numpy's OpenBLAS server thread spinning meanwhile): the split tasks rarely reach the worker in
time, so the grain of these ops was left as it is.
"""
import argparse
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line
from dyngrad.bench import workloads
from gpt_parts import step_cases as gpt_step_cases


def best_pair(ours, theirs, repeat, clock=time.perf_counter):
    """Best ms of each by `clock` (wall, or the calling thread's CPU time: at 1 thread every kernel of both libraries
    runs on the calling thread, and its CPU time does not count the time a loaded machine gives to others), the two
    alternating call by call after a warm-up."""
    for fn in (ours, theirs):
        if fn is not None:
            fn()
            fn()
    times = ([], [])
    for _ in range(repeat):
        for slot, fn in enumerate((ours, theirs)):
            if fn is None:
                continue
            t0 = clock()
            fn()
            times[slot].append(clock() - t0)
    return tuple(1e3 * min(t) if t else None for t in times)


def _leaf(lib, rng, shape, grad=True):
    return lib.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=grad)


def _const(lib, rng, shape):
    return lib.tensor(rng.normal(size=shape).astype(np.float32))


def cases(lib, rng):
    """name -> (forward fn, forward + backward fn) at the two steps' shapes."""
    F = lib.nn.functional
    out = {}

    def fb(forward, grad):
        def run():
            forward().backward(grad)
        return run

    def nograd(forward):
        def run():
            with lib.no_grad():
                forward()
        return run

    def add(name, forward, grad_shape):
        grad = None if grad_shape is None else _const(lib, rng, grad_shape)
        out[name] = (nograd(forward), fb(forward, grad) if grad is not None else (lambda: forward().backward()))

    for rows_name, (b, t) in (("tr", (16, 64)), ("gpt", (12, 64))):
        x = _leaf(lib, rng, (b, t, 128))
        w, bias = _leaf(lib, rng, (128,)), _leaf(lib, rng, (128,))
        add(f"layer_norm {rows_name} ({b},{t},128)", lambda x=x, w=w, bias=bias: F.layer_norm(x, (128,), w, bias),
            (b, t, 128))
        h = _leaf(lib, rng, (b, t, 512))
        add(f"gelu {rows_name} ({b},{t},512)", lambda h=h: F.gelu(h), (b, t, 512))
        add(f"residual add {rows_name} ({b},{t},128)", lambda x=x: x + x, (b, t, 128))
    s = _leaf(lib, rng, (16, 4, 64, 64))
    add("softmax (16,4,64,64)", lambda: F.softmax(s, dim=-1), (16, 4, 64, 64))
    add("scalar mul (16,4,64,64)", lambda: s * 0.17677669529663687, (16, 4, 64, 64))
    for n in (384, 128, 512):
        y, bb = _leaf(lib, rng, (16, 64, n)), _leaf(lib, rng, (n,))
        add(f"bias add (16,64,{n})", lambda y=y, bb=bb: y + bb, (16, 64, n))
    xm, tm = _leaf(lib, rng, (16, 64, 128)), _const(lib, rng, (16, 64, 128))
    add("mse ((x-t)**2).mean() (16,64,128)", lambda: ((xm - tm) ** 2).mean(), None)
    idx = lib.tensor(rng.integers(0, 65, (12, 64)), dtype=lib.int64)
    wte, wpe = lib.nn.Embedding(65, 128), lib.nn.Embedding(64, 128)
    add("embedding wte+wpe (12,64)", lambda: wte(idx) + wpe(lib.arange(64)), (12, 64, 128))
    logits = _leaf(lib, rng, (768, 65))
    targets = lib.tensor(rng.integers(0, 65, (768,)), dtype=lib.int64)
    add("cross_entropy (768,65)", lambda: F.cross_entropy(logits, targets), None)
    return out


def split_or_whole(repeat, only):
    """At 2 threads, dyngrad alone: each case with the kernels split over the threads (the default grain) and whole
    (the grain set past every size), alternating call by call; whole / split > 1: the split pays."""
    default = dg._C._parallel_grain() if hasattr(dg._C, "_parallel_grain") else 32768
    ours = cases(dg, np.random.default_rng(0))
    print(f"  {'op (dyngrad alone, 2 threads)':36s} {'split':>8s} {'whole':>8s}  whole/split (fwd)   {'split':>8s}"
          f" {'whole':>8s}  whole/split (f+b)")
    try:
        for name, fns in ours.items():
            if only and not any(s in name for s in only):
                continue
            line = f"  {name:36s}"
            for fn in fns:
                for _ in range(3):
                    fn()
                best = {}
                for _ in range(repeat):
                    for grain in (default, 1 << 40):
                        dg._C._set_parallel_grain(grain)
                        t0 = time.perf_counter()
                        fn()
                        best[grain] = min(best.get(grain, 1e9), time.perf_counter() - t0)
                dg._C._set_parallel_grain(default)
                a, b = 1e3 * best[default], 1e3 * best[1 << 40]
                line += f" {a:8.4f} {b:8.4f}  {b / a:5.2f}x            "
            print(line)
    finally:
        dg._C._set_parallel_grain(default)


def transformer_step(lib):
    return workloads.transformer_train(lib, {"batch": 16, "seq": 64, "steps": 1, "lr": 0.05}).run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--only", default="", help="substrings of the case names to run (default: all)")
    parser.add_argument("--steps", action="store_true", help="also time the two whole steps")
    parser.add_argument("--no-ops", action="store_true", help="skip the per-op cases")
    parser.add_argument("--grain", action="store_true",
                        help="only: at 2 threads, dyngrad's kernels split over the threads against whole")
    parser.add_argument("--clock", choices=("auto", "wall", "cpu"), default="auto",
                        help="auto: the thread's CPU time at 1 thread, wall time at more")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    print(machine_line())
    only = [s for s in args.only.split(",") if s]
    if args.grain:
        dg.set_num_threads(2)
        split_or_whole(args.repeat, only)
        print("\n" + machine_line())
        return
    for threads in (int(t) for t in args.threads.split(",")):
        dg.set_num_threads(threads)
        if torch:
            torch.set_num_threads(threads)
        cpu = args.clock == "cpu" or (args.clock == "auto" and threads == 1)
        clock = time.thread_time if cpu else time.perf_counter
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: best ms of {args.repeat} ({'thread CPU' if cpu else 'wall'}"
              f" time), alternating")
        if args.steps:
            for name, build in (("transformer-train step", transformer_step),
                                ("gpt-train step", lambda lib: gpt_step_cases(lib)[0])):
                w, tw = best_pair(build(dg), build(torch) if torch else None, max(20, args.repeat // 5), clock)
                print(f"  {name:36s} {w:8.3f} " + (f"{tw:8.3f}  {tw / w:5.2f}x" if tw else ""))
        if args.no_ops:
            continue
        ours = cases(dg, np.random.default_rng(0))
        theirs = cases(torch, np.random.default_rng(0)) if torch else {}
        print(f"  {'op':36s} {'fwd dg':>8s} {'fwd pt':>8s}  {'pt/dg':>5s}   {'f+b dg':>8s} {'f+b pt':>8s}  {'pt/dg':>5s}")
        for name, (fwd, both) in ours.items():
            if only and not any(s in name for s in only):
                continue
            t_fwd, t_both = theirs.get(name, (None, None))
            w, tw = best_pair(fwd, t_fwd, args.repeat, clock)
            wb, twb = best_pair(both, t_both, args.repeat, clock)
            line = f"  {name:36s} {w:8.4f} "
            if tw is not None:
                line += f"{tw:8.4f}  {tw / w:5.2f}x   {wb:8.4f} {twb:8.4f}  {twb / wb:5.2f}x"
            else:
                line += f"{'':8s}  {'':5s}   {wb:8.4f}"
            print(line)
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
