"""Profiling a training step with dyngrad.autograd.profiler, written as PyTorch code.

    python examples/profiling.py [--engine reference] [--smoke] [--trace trace.json]

Trains a small CNN on random images for a few steps inside `profile(record_shapes=True)`, with
`record_function` ranges around the forward pass, the backward pass and the optimizer step, then prints
- the per-op table sorted by self CPU time (name, self and total CPU time, number of calls),
- the same grouped by input shapes (which conv/linear calls are the expensive ones),
- and writes a Chrome trace (open it in chrome://tracing or https://ui.perfetto.dev).
`torch` below is the dyngrad engine chosen with --engine.
"""
import json
import os
import tempfile

import numpy as np

from _common import parse_args


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--trace", default=None))
    torch = args.dg                      # the rest is PyTorch code
    nn = torch.nn
    profiler = torch.autograd.profiler
    steps, batch = (2, 4) if args.smoke else (10, 32)

    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(args.seed)
    x = torch.tensor(rng.normal(size=(batch, 1, 16, 16)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 10, size=batch))

    with profiler.profile(record_shapes=True) as prof:
        for _ in range(steps):
            with profiler.record_function("forward"):
                loss = nn.functional.cross_entropy(model(x), y)
            with profiler.record_function("backward"):
                opt.zero_grad()
                loss.backward()
            with profiler.record_function("optimizer.step"):
                opt.step()
    print(f"final loss {loss.item():.4f}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total", row_limit=6))

    keys = {e.key for e in prof.key_averages()}
    for needed in ("forward", "backward", "optimizer.step", "conv2d", "linear", "autograd::backward"):
        if needed not in keys:
            print(f"MISMATCH: {needed} missing from the profile")
    calls = {e.key: e.count for e in prof.key_averages()}
    if calls.get("conv2d") != 2 * steps:
        print(f"MISMATCH: conv2d was called {2 * steps} times, the profile says {calls.get('conv2d')}")

    # --smoke writes nothing into the working directory: the trace goes to a temporary one
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace or os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
        print(f"wrote {len(events)} trace events to {path}" + ("" if args.trace else " (temporary; pass --trace)"))


if __name__ == "__main__":
    main()
