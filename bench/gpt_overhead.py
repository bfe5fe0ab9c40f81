"""The Python and engine part of the gpt-train step (issue 26), dyngrad against PyTorch in one process.

Two measures of what is not kernel time:
- the *tiny step*: the bench's gpt-train model (4 layers, 4 heads, AdamW: the same ~90 forward ops, ~300 backward
  nodes and Python calls) at width 8, context 4, batch 1, where the kernels cost next to nothing, so that each phase's
  time is its Python, bindings and engine: forward, zero_grad, backward, AdamW step;
- the *op calls*: the Python-level calls of the step one by one (a module call, Linear, LayerNorm, Embedding, view,
  transpose, split, contiguous, ...) on tiny tensors, microseconds a call, times its calls per step.
The whole step at the bench's size (width 128, context 64, batch 12) is timed too, by phases. Thread CPU time at 1
thread (wall time at more), best of --repeat, the two libraries alternating call by call, so a loaded machine slows
both alike; ratios are torch / dyngrad (> 1: dyngrad faster).

    python bench/gpt_overhead.py [--repeat 200] [--threads 1] [--no-real]

Run with PYTHONPATH=python (an installed dyngrad would be found first otherwise). Before and after Note [Fast paths of
the gpt step] (csrc/bindings/fast_paths.cpp), 2026-12-03, Intel Xeon family 6 model 167, 2 cores, KVM, 1 thread, load
8-9, the base tree's build (PYTHONPATH=<base>/python) and this one's alternated twice: tiny-step forward 1.085 / 1.102
ms before, 0.662 / 0.717 after (torch 0.99-1.19); backward 0.19 (torch 1.0-1.1), AdamW 0.15 (torch 1.5). A call of
view 4.2 -> 0.45 us (torch 0.9), transpose 3.0 -> 0.50 (1.0), F.layer_norm 10.3 -> 2.3 (5.3), nn.Embedding 11.5 ->
2.9 (5.3), split 6.0 -> 1.3 (5.0); the step's op calls, summed, 600-790 -> 291-294 us (torch 551-585).
The bench's rows (python -m dyngrad.bench --only gpt-train,transformer-train --engines cpp,torch), base tree and this
one alternated twice at load 1.2-1.5, torch/dyngrad: gpt-train 1t 1.14 / 1.07 before, 1.16 / 1.14 after; 2t 1.23 /
1.22 before, 1.28 / 1.25 after; transformer-train 1t 1.15 / 1.15 before, 1.16 / 1.18 after; 2t 1.11 / 1.13 before,
1.15 / 1.19 after (differences of a few percent: near the runs' noise). op-overhead and op-overhead-fwd unchanged
(0.75-0.81 and 0.46-0.48 us/op both trees).
"""
import argparse
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench import workloads
from dyngrad.bench.engines import machine_line

TINY = {"layers": 4, "heads": 4, "width": 8, "context": 4, "batch": 1}
REAL = {"layers": 4, "heads": 4, "width": 128, "context": 64, "batch": 12}


def _clock(threads):
    return time.thread_time_ns if threads == 1 else time.perf_counter_ns


def step_phases(lib, size):
    """The gpt-train step of bench/workloads.py as its four phases (each a function), in order."""
    rng = np.random.default_rng(14)
    model = workloads._gpt_model(lib, 65, size["width"], size["heads"], size["layers"], size["context"])
    workloads._seed_module(lib, model, rng, std=0.02)
    params = [p for _, p in sorted(model.named_parameters())]
    optimizer = lib.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    x, y = workloads._token_batches(lib, rng, 65, size["batch"], size["context"])[0]
    box = {}

    def forward():
        box["loss"] = model(x, y)

    def zero_grad():
        optimizer.zero_grad(set_to_none=True)

    def backward():
        box["loss"].backward()

    def step():
        optimizer.step()

    return {"forward": forward, "zero_grad": zero_grad, "backward": backward, "adamw step": step}


def time_phases(libs, size, repeat, threads):
    """{lib: {phase: best ms}}, the phases run in order, the libraries alternating step by step."""
    clock = _clock(threads)
    phases = {name: step_phases(lib, size) for name, lib in libs.items()}
    for _ in range(3):
        for ph in phases.values():
            for fn in ph.values():
                fn()
    best = {name: {p: float("inf") for p in ph} for name, ph in phases.items()}
    for _ in range(repeat):
        for name, ph in phases.items():
            for p, fn in ph.items():
                t0 = clock()
                fn()
                best[name][p] = min(best[name][p], (clock() - t0) / 1e6)
    return best


PROGRAMS = {
    "gpt-train": (workloads.gpt_train, {**REAL, "steps": 1, "lr": 1e-3}),
    "transformer-train": (workloads.transformer_train, {"batch": 16, "seq": 64, "steps": 1, "lr": 0.05}),
}


def time_programs(libs, repeat, threads):
    """{program: {lib: best ms of one step}}: the bench's steps (bench/workloads.py, their default sizes), the
    libraries alternating step by step; thread CPU time at 1 thread, wall time at more."""
    clock = _clock(threads)
    out = {}
    for name, (build, size) in PROGRAMS.items():
        runs = {lib_name: build(lib, size).run for lib_name, lib in libs.items()}
        for run in runs.values():
            for _ in range(3):
                run()
        best = {lib_name: float("inf") for lib_name in runs}
        for _ in range(repeat):
            for lib_name, run in runs.items():
                t0 = clock()
                run()
                best[lib_name] = min(best[lib_name], (clock() - t0) / 1e6)
        out[name] = best
    return out


def op_calls(lib):
    """name -> (calls per gpt step, fn): the step's Python-level calls on tiny tensors."""
    nn, F = lib.nn, lib.nn.functional
    rng = np.random.default_rng(0)

    def leaf(*shape):
        return lib.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)

    x, qkv, q = leaf(1, 4, 8), leaf(1, 4, 24), leaf(1, 4, 4, 2)
    y = x * 1.0
    t = y.transpose(1, 2)
    ln, lin, emb, ident = nn.LayerNorm(8), nn.Linear(8, 8), nn.Embedding(65, 8), nn.Identity()
    idx = lib.tensor(rng.integers(0, 65, (1, 4)), dtype=lib.int64)
    logits, targets = leaf(4, 65), lib.tensor(rng.integers(0, 65, (4,)), dtype=lib.int64)
    return {
        "Module call (Identity)": (33, lambda: ident(x)),
        "nn.Linear": (17, lambda: lin(x)),
        "F.linear": (17, lambda: F.linear(x, lin.weight, lin.bias)),
        "nn.LayerNorm": (9, lambda: ln(x)),
        "F.layer_norm": (9, lambda: F.layer_norm(x, (8,), ln.weight, ln.bias, 1e-5)),
        "nn.Embedding": (2, lambda: emb(idx)),
        "arange": (1, lambda: lib.arange(4)),
        "view": (20, lambda: y.view(1, 4, 4, 2)),
        "view(-1)": (2, lambda: y.view(-1)),
        "transpose": (16, lambda: y.transpose(1, 2)),
        "contiguous": (4, lambda: t.contiguous()),
        "split": (4, lambda: qkv.split(8, dim=2)),
        "F.gelu": (4, lambda: F.gelu(x)),
        "sdpa (causal)": (4, lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)),
        "F.cross_entropy": (1, lambda: F.cross_entropy(logits, targets)),
        "x + y": (9, lambda: x + y),
    }


def time_calls(libs, repeat, inner=200):
    """{lib: {name: best us a call}}, alternating block by block."""
    cases = {name: op_calls(lib) for name, lib in libs.items()}
    best = {name: {c: float("inf") for c in cs} for name, cs in cases.items()}
    names = list(next(iter(cases.values())))
    for c in names:
        for cs in cases.values():
            for _ in range(20):
                cs[c][1]()
        for _ in range(max(repeat // 20, 5)):
            for lib, cs in cases.items():
                fn = cs[c][1]
                t0 = time.perf_counter_ns()
                for _ in range(inner):
                    fn()
                best[lib][c] = min(best[lib][c], (time.perf_counter_ns() - t0) / inner / 1e3)
    return {lib: {c: (cases[lib][c][0], best[lib][c]) for c in names} for lib in cases}


def _row(label, ours, theirs, unit="ms", width=30):
    line = f"  {label:{width}s} {ours:9.3f}"
    if theirs is not None:
        line += f" {theirs:9.3f}  {theirs / ours:5.2f}x"
    return line + f"  {unit}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--threads", default="1")
    parser.add_argument("--no-real", action="store_true", help="skip the whole step at the bench's size")
    parser.add_argument("--programs", action="store_true",
                        help="only the whole gpt-train and transformer-train steps, dyngrad against torch")
    args = parser.parse_args()
    libs = {"dyngrad": dg}
    try:
        import torch
        libs["torch"] = torch
    except ImportError:
        torch = None
    print(machine_line())
    for threads in (int(t) for t in args.threads.split(",")):
        dg.set_num_threads(threads)
        if torch:
            torch.set_num_threads(threads)
        print(f"\n{threads} thread{'s' if threads > 1 else ''}; columns: dyngrad, torch, torch/dyngrad")
        if args.programs:
            for name, best in time_programs(libs, max(args.repeat // 5, 10), threads).items():
                print(_row(f"{name} step", best["dyngrad"], best.get("torch")))
            continue
        sizes = [("tiny step (overhead)", TINY, args.repeat)]
        if not args.no_real:
            sizes.append(("bench step", REAL, max(args.repeat // 10, 10)))
        for label, size, repeat in sizes:
            best = time_phases(libs, size, repeat, threads)
            ours, theirs = best["dyngrad"], best.get("torch")
            print(_row(f"{label}, sum of phases", sum(ours.values()), sum(theirs.values()) if theirs else None))
            for p in ours:
                print(_row("  " + p, ours[p], theirs[p] if theirs else None))
        calls = time_calls(libs, args.repeat)
        print(f"  op calls (us a call; x calls per step -> us per step of dyngrad)")
        total = [0.0, 0.0]
        for c, (n, ours) in calls["dyngrad"].items():
            theirs = calls["torch"][c][1] if torch else None
            total[0] += n * ours
            total[1] += n * (theirs or 0)
            print(_row(f"  {c} x{n}", ours, theirs, f"us  -> {n * ours:6.1f} us/step"))
        print(_row("  sum over a step", total[0], total[1] if torch else None, "us"))


if __name__ == "__main__":
    main()
