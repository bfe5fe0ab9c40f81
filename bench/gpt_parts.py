"""Where the GPT training step's time goes (issue 26), dyngrad against PyTorch in one process: the bench's gpt-train
step (4 layers, 4 heads, width 128, context 64, batch 12, AdamW) split into its phases (forward, backward, AdamW
step) and its op families timed alone at the step's shapes, forward and forward + backward, each multiplied by its
calls per step so that the table shows each family's share of a step. The two libraries alternate call by call
(best of --repeat), so a loaded machine slows both alike; ratios are torch / dyngrad (> 1: dyngrad faster).

    python bench/gpt_parts.py [--repeat 40] [--threads 1,2] [--only NAME[,NAME]] [--clock auto|cpu|wall]

Where the time went (2026-12-03, Intel Xeon family 6 model 167, 2 cores, KVM, 1 thread, load 3-5): perf samples of
dyngrad's step by op family (the root-most op frame of each stack) -- products 54%, attention 12%, Python and the
engine 14%, layer_norm 5%, GELU 5%, adds 4%, AdamW 3%, reshapes 1.4%, bias sums 0.7%; torch.profiler's self CPU time
of torch's step -- products 55%, AdamW 13%, attention 12%, GELU 9%, layer_norm 4%, reshapes 2.4%. Whole step, CPU
time, best of 40, three alternations of separate processes: dyngrad 60.0-60.3 ms before GELU's one-formula CDF,
the attention's heads layout and the register-tiled bias sums, 56.1-59.1 after; torch 65.7-69.1.

Attention's tiles (Note [Attention tiles for small head dims], kernels/attention.cpp), 2026-12-03 19:55 UTC, same
machine, load 0.0-0.4, best of 30, DYNGRAD_ATTENTION=generic (before) then the default (after), torch alongside:
1 thread (thread CPU time): sdpa family forward 0.425 -> 0.282 ms (torch/dyngrad 0.97x -> 1.52x), forward +
backward 1.419 -> 0.877 (1.17x -> 1.73x), 5.68 -> 3.51 ms per step; whole step 48.2 -> 46.3 ms (1.06x -> 1.11x).
2 threads (wall): forward 0.311 -> 0.210 (0.72x -> 1.03x), forward + backward 0.895 -> 0.860 (0.99x -> 0.95x);
whole step 28.7 -> 28.4 ms (1.12x -> 1.15x). Under load 5-11 (earlier runs) the family's 1-thread ratio was
1.25x -> 1.65x.
"""
import argparse
import os
import time

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import machine_line
from dyngrad.bench import workloads

B, T, C, H, V, LAYERS = 12, 64, 128, 4, 65, 4
SIZE = {"layers": LAYERS, "heads": H, "width": C, "context": T, "batch": B, "steps": 1, "lr": 1e-3}


CLOCK = {"clock": time.perf_counter}  # main() sets it: thread CPU time at one thread (--clock auto), else wall


def best_pair(ours, theirs, repeat):
    """Best ms of each (CLOCK's), the two alternating call by call after a warm-up."""
    for fn in (ours, theirs):
        if fn is not None:
            fn()
            fn()
    times = ([], [])
    for _ in range(repeat):
        for slot, fn in enumerate((ours, theirs)):
            if fn is None:
                continue
            t0 = CLOCK["clock"]()
            fn()
            times[slot].append(CLOCK["clock"]() - t0)
    return tuple(1e3 * min(t) if t else None for t in times)


def _leaf(lib, rng, shape, grad=True):
    return lib.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=grad)


def family_cases(lib, rng):
    """name -> (calls per step, forward fn, forward + backward fn); the shapes of the gpt-train step."""
    F = lib.nn.functional
    x = _leaf(lib, rng, (B, T, C))
    h4 = _leaf(lib, rng, (B, T, 4 * C))
    g_x, g_h4 = (lib.tensor(rng.normal(size=s).astype(np.float32)) for s in ((B, T, C), (B, T, 4 * C)))
    ln = lib.nn.LayerNorm(C)
    q, k, v = (_leaf(lib, rng, (B, H, T, C // H)) for _ in range(3))
    g_att = lib.tensor(rng.normal(size=(B, H, T, C // H)).astype(np.float32))
    qkv = _leaf(lib, rng, (B, T, 3 * C))
    idx = lib.tensor(rng.integers(0, V, (B, T)), dtype=lib.int64)
    targets = lib.tensor(rng.integers(0, V, (B * T,)), dtype=lib.int64)
    wte, wpe = lib.nn.Embedding(V, C), lib.nn.Embedding(T, C)
    logits = _leaf(lib, rng, (B * T, V))
    fc = {name: lib.nn.Linear(i, o, bias=bias) for name, (i, o, bias) in
          {"c_attn": (C, 3 * C, True), "c_proj": (C, C, True), "c_fc": (C, 4 * C, True),
           "mlp_proj": (4 * C, C, True), "lm_head": (C, V, False)}.items()}
    h4_in = _leaf(lib, rng, (B, T, 4 * C))

    def fb(forward, grad):
        def run():
            forward().backward(grad)
        return run

    def nograd(forward):
        def run():
            with lib.no_grad():
                forward()
        return run

    def glue():   # the attention input/output reshapes of one block: split, view, transpose, contiguous, view
        qq, kk, vv = qkv.split(C, dim=2)
        qq, kk, vv = (z.view(B, T, H, C // H).transpose(1, 2) for z in (qq, kk, vv))
        return (qq + kk + vv).transpose(1, 2).contiguous().view(B, T, C)

    def embed():
        return wte(idx) + wpe(lib.arange(T))

    def ce():
        return F.cross_entropy(logits, targets)

    def one_scalar(f):
        def run():
            f().backward()
        return run

    def linears():
        # one block's four linears and lm_head / 4 (a fifth of a block's count): gemm's area, here for the share
        return (fc["c_attn"](x).sum() + fc["c_proj"](x).sum() + fc["c_fc"](x).sum() + fc["mlp_proj"](h4_in).sum())

    cases = {
        "linear (4 per block, gemm's)": (LAYERS, nograd(linears), one_scalar(linears)),
        "lm_head linear": (1, nograd(lambda: fc["lm_head"](x)), one_scalar(lambda: fc["lm_head"](x).sum())),
        "layer_norm (12,64,128)": (2 * LAYERS + 1, nograd(lambda: ln(x)), fb(lambda: ln(x), g_x)),
        "sdpa causal (12,4,64,32)": (LAYERS, nograd(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                                     fb(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), g_att)),
        "gelu (12,64,512)": (LAYERS, nograd(lambda: F.gelu(h4)), fb(lambda: F.gelu(h4), g_h4)),
        "residual add (12,64,128)": (2 * LAYERS, nograd(lambda: x + x), fb(lambda: x + x, g_x)),
        "attn reshapes (split..view)": (LAYERS, nograd(glue), fb(glue, g_x)),
        "embedding wte+wpe": (1, nograd(embed), fb(embed, g_x)),
        "cross_entropy (768,65)": (1, nograd(ce), one_scalar(ce)),
    }
    return cases


def step_cases(lib):
    """The whole gpt-train step and its phases: forward, backward, AdamW step (each timed alone, the others run)."""
    case = workloads.gpt_train(lib, SIZE)
    run = case.run
    # rebuild the pieces: workloads.gpt_train keeps model and optimizer in its closure
    cells = {name: cell.cell_contents for name, cell in zip(run.__code__.co_freevars, run.__closure__)}
    model, optimizer, batches = cells["model"], cells["optimizer"], cells["batches"]
    x, y = batches[0]
    loss_box = {}

    def forward():
        optimizer.zero_grad(set_to_none=True)
        loss_box["loss"] = model(x, y)

    def backward():
        loss_box["loss"].backward()

    def step():
        optimizer.step()

    phases = {"forward": forward, "backward": backward, "adamw step": step}
    return run, phases


def time_phases(ours, theirs, repeat):
    """Best ms of each phase, the phases run in order (forward, backward, step) and the libraries alternating."""
    results = {}
    libs = [p for p in (ours, theirs) if p is not None]
    for phases in libs:           # warm-up
        for _ in range(2):
            for fn in phases.values():
                fn()
    best = [{name: float("inf") for name in ours} for _ in libs]
    for _ in range(repeat):
        for slot, phases in enumerate(libs):
            for name, fn in phases.items():
                t0 = CLOCK["clock"]()
                fn()
                best[slot][name] = min(best[slot][name], CLOCK["clock"]() - t0)
    for name in ours:
        results[name] = tuple(1e3 * b[name] for b in best) + ((None,) if len(libs) == 1 else ())
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--only", default="", help="substrings of the family names to run (default: all)")
    parser.add_argument("--clock", choices=("auto", "cpu", "wall"), default="auto",
                        help="auto: thread CPU time at one thread (a loaded machine's waits for a core not counted: "
                             "both libraries run a one-thread step in the calling thread), wall time at more")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    print(machine_line())
    only = [s for s in args.only.split(",") if s]
    for threads in (int(t) for t in args.threads.split(",")):
        dg.set_num_threads(threads)
        if torch:
            torch.set_num_threads(threads)
        cpu = args.clock == "cpu" or (args.clock == "auto" and threads == 1)
        CLOCK["clock"] = time.thread_time if cpu else time.perf_counter
        print(f"\n{threads} thread{'s' if threads > 1 else ''}: best ms of {args.repeat} ({'thread CPU' if cpu else 'wall'}"
              f" time), alternating, load {os.getloadavg()[0]:.1f}")
        if not only:
            run_ours, phases_ours = step_cases(dg)
            run_theirs, phases_theirs = step_cases(torch) if torch else (None, None)
            w, tw = best_pair(run_ours, run_theirs, args.repeat)
            step_total = (w, tw)
            print(f"  {'whole step':34s} {w:8.3f}  " + (f"{tw:8.3f}  {tw / w:5.2f}x" if tw else ""))
            for name, (w, tw) in time_phases(phases_ours, phases_theirs, args.repeat).items():
                print(f"    {name:32s} {w:8.3f}  " + (f"{tw:8.3f}  {tw / w:5.2f}x" if tw else ""))
        ours = family_cases(dg, np.random.default_rng(0))
        theirs = family_cases(torch, np.random.default_rng(0)) if torch else {}
        header = (f"  {'family x calls/step':34s} {'fwd dg':>8s} {'fwd pt':>8s}  {'pt/dg':>5s}   {'f+b dg':>8s}"
                  f" {'f+b pt':>8s}  {'pt/dg':>5s}   {'ms/step dg':>10s} {'pt':>7s}")
        print(header)
        total = [0.0, 0.0]
        for name, (calls, fwd, both) in ours.items():
            if only and not any(s in name for s in only):
                continue
            t_fwd, t_both = theirs.get(name, (None, None, None))[1:] if theirs else (None, None)
            w, tw = best_pair(fwd, t_fwd, args.repeat)
            wb, twb = best_pair(both, t_both, args.repeat)
            total[0] += calls * wb
            line = f"  {name + f' x{calls}':34s} {w:8.3f} "
            if tw is not None:
                total[1] += calls * twb
                line += f"{tw:8.3f}  {tw / w:5.2f}x  {wb:8.3f} {twb:8.3f}  {twb / wb:5.2f}x   {calls * wb:10.2f}" \
                        f" {calls * twb:7.2f}"
            else:
                line += f"{'':8s}  {'':5s}   {wb:8.3f}"
            print(line)
        if not only:
            print(f"  {'sum of families (f+b x calls)':34s} {'':8s} {'':8s}  {'':5s}   {'':8s} {'':8s}  {'':5s}   "
                  f"{total[0]:10.2f} {total[1]:7.2f}")
            print(f"  {'whole step - sum (adamw, autograd, ...)':40s} {'':60s}"
                  f"{step_total[0] - total[0]:7.2f} " + (f"{step_total[1] - total[1]:7.2f}" if step_total[1] else ""))
    print("\n" + machine_line())


if __name__ == "__main__":
    main()
