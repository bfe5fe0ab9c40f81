"""vmap by batching rules against the Python loop it replaces (issue 21's targets), as ratios measured in one run,
for the C++ engine and, when installed, torch.func on the same work.

    python bench/vmap.py [--repeat 10] [--quick] [--threads N]

--threads N runs both engines on N threads (default: dyngrad's own count, which torch is given too). On the
shared 2-core machine torch's 2-thread pool stalled under load (its loop of 512 gradients took 18 s against
dyngrad's 0.09 s, at load 10): --threads 1 compares the engines without either pool's waiting.

Rows:
  rows        a small per-row function (x * w + b).tanh().sum() over 2,000 rows: vmap against the loop over rows
              (target >= 10x, and at least as fast as torch.func.vmap)
  mlp-N       per-sample gradients of a 2-layer MLP (64 -> 128 -> 10, cross-entropy) over N samples: vmap(grad)
              against N calls of grad (the loop of N backward passes; target >= 20x at N = 512)
  cnn-64      per-sample gradients of a small CNN (conv 1->8 3x3, relu, max-pool 2, linear 8*6*6 -> 10) on 14x14
              images, 64 samples: vmap(grad) against 64 calls of grad
  ensemble    10 MLPs (stack_module_state) over one batch of 64: vmap(functional_call) against a loop over models
  jvp/forward, hvp/grad   bench/forward_ad.py's network (3 tanh layers of 256, batch 64): func.jvp against the
              forward pass (target <= 2x), autograd.functional.hvp (forward over reverse) against a gradient (<= 3x)

torch (when installed) runs the same cases in a subprocess of its own (`--engine torch`): measured in this process
its timings were erratic.

Each figure is the best of `repeat` timed calls after warm-up (the machine is shared: the best call is the one
least disturbed by other work). float32.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import best_seconds, machine_line
from forward_ad import _rows


def _mlp_case(m, F, func, n, rng):
    w1 = m.tensor(rng.standard_normal((128, 64)).astype(np.float32) / 8)
    b1 = m.tensor(np.zeros(128, np.float32))
    w2 = m.tensor(rng.standard_normal((10, 128)).astype(np.float32) / 11)
    b2 = m.tensor(np.zeros(10, np.float32))
    params = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}
    x = m.tensor(rng.standard_normal((n, 64)).astype(np.float32))
    t = m.tensor(rng.integers(0, 10, n))

    def loss(p, xi, ti):
        h = F.linear(xi, p["w1"], p["b1"]).relu()
        return F.cross_entropy(F.linear(h, p["w2"], p["b2"]).unsqueeze(0), ti.unsqueeze(0))
    batched = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
    one = func.grad(loss)
    return (lambda: batched(params, x, t)), (lambda: [one(params, x[i], t[i]) for i in range(n)])


def _cnn_case(m, F, func, n, rng):
    params = {"cw": m.tensor(rng.standard_normal((8, 1, 3, 3)).astype(np.float32) / 3),
              "cb": m.tensor(np.zeros(8, np.float32)),
              "lw": m.tensor(rng.standard_normal((10, 8 * 6 * 6)).astype(np.float32) / 17),
              "lb": m.tensor(np.zeros(10, np.float32))}
    x = m.tensor(rng.standard_normal((n, 1, 14, 14)).astype(np.float32))
    t = m.tensor(rng.integers(0, 10, n))

    def loss(p, xi, ti):
        h = F.max_pool2d(F.conv2d(xi.unsqueeze(0), p["cw"], p["cb"]).relu(), 2)
        return F.cross_entropy(F.linear(h.flatten(1), p["lw"], p["lb"]), ti.unsqueeze(0))
    batched = func.vmap(func.grad(loss), in_dims=(None, 0, 0))
    one = func.grad(loss)
    return (lambda: batched(params, x, t)), (lambda: [one(params, x[i], t[i]) for i in range(n)])


def _rows_case(m, n, rng):
    x = m.tensor(rng.standard_normal((n, 16)).astype(np.float32))
    w = m.tensor(rng.standard_normal(16).astype(np.float32))
    b = m.tensor(rng.standard_normal(16).astype(np.float32))

    def row(r):
        return (r * w + b).tanh().sum()
    batched = m.vmap(row)
    return (lambda: batched(x)), (lambda: m.stack([row(x[i]) for i in range(n)]))


def _ensemble_case(m, func, nn, rng):
    models = [nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 10)) for _ in range(10)]
    params, buffers = func.stack_module_state(models)
    x = m.tensor(rng.standard_normal((64, 32)).astype(np.float32))

    def run(p, b, data):
        return func.functional_call(models[0], (p, b), (data,))
    batched = func.vmap(run, in_dims=(0, 0, None))
    return (lambda: batched(params, buffers, x)), (lambda: m.stack([mod(x) for mod in models]))


def _cases(m, F, func, nn, sizes, rng):
    out = [("rows-2000", _rows_case(m, 2000, rng))]
    out += [(f"mlp-{n}", _mlp_case(m, F, func, n, rng)) for n in sizes]
    out.append(("cnn-64", _cnn_case(m, F, func, 64, rng)))
    out.append(("ensemble-10", _ensemble_case(m, func, nn, rng)))
    return out


def _measure(name, m, F, func, nn, sizes, repeat):
    """{case: (vmap s, loop s)} and the forward-mode rows {jvp, forward, hvp, grad} for one engine."""
    rng = np.random.default_rng(0)
    out = {}
    for case, (batched, loop) in _cases(m, F, func, nn, sizes, rng):
        out[case] = (best_seconds(batched, repeat), best_seconds(loop, min(repeat, 3)))
    f, j, g, h = _forward_mode(m, func, repeat)
    out["jvp/forward"] = (j, f)
    out["hvp/grad"] = (h, g)
    return out


def _forward_mode(m, func, repeat, width=256, batch=64):
    """bench/forward_ad.py's network (3 tanh layers): forward, jvp, gradient, hvp (forward over reverse)."""
    rng = np.random.default_rng(0)
    ws = [m.tensor((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)) for _ in range(3)]
    x = m.tensor(rng.standard_normal((batch, width)).astype(np.float32))
    v = m.tensor(rng.standard_normal((batch, width)).astype(np.float32))

    def grad(loss, z):
        z = z.detach().requires_grad_(True)
        return m.autograd.grad(loss(z), z)
    return _rows(m, func.jvp, m.autograd.functional.hvp, grad, ws, x, v, 3 * repeat)


def _engine(name, threads=None):
    if threads is not None:
        dg.set_num_threads(threads)
    if name == "dyngrad":
        return dg, dg.nn.functional, dg.func, dg.nn
    import torch
    torch.set_num_threads(dg.get_num_threads())
    return torch, torch.nn.functional, torch.func, torch.nn


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    p.add_argument("--engine", choices=["dyngrad", "torch"], default=None,
                   help="measure one engine and print its figures as JSON (how the torch run is made)")
    p.add_argument("--threads", type=int, default=None, help="threads for both engines (default: dyngrad's)")
    args = p.parse_args(argv)
    sizes = (64,) if args.quick else (64, 512)
    repeat = 2 if args.quick else args.repeat
    if args.engine:
        print(json.dumps(_measure(args.engine, *_engine(args.engine, args.threads), sizes, repeat)))
        return
    results = {"dyngrad": _measure("dyngrad", *_engine("dyngrad", args.threads), sizes, repeat)}
    try:
        import torch  # noqa: F401
        # torch in a process of its own: in this one its timings were erratic (its thread pool and ours share
        # the 2 cores)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine", "torch", "--repeat",
                               str(args.repeat)] + (["--quick"] if args.quick else []) +
                              (["--threads", str(args.threads)] if args.threads else []),
                              capture_output=True, text=True, timeout=1800)
        if done.returncode == 0:
            results["torch"] = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            print(f"(torch run failed: {done.stderr.strip().splitlines()[-1:]})")
    except ImportError:
        pass
    print(machine_line())
    print(f"vmap against the loop over rows; float32; best of {repeat} calls; {dg.get_num_threads()} thread(s) per "
          "engine (torch.func in a separate process)")
    print(f"{'engine':8} {'case':12} {'vmap ms':>9} {'loop ms':>9} {'loop/vmap':>10}")
    for name, res in results.items():
        for case, (v, lp) in res.items():
            if "/" not in case:
                print(f"{name:8} {case:12} {v * 1e3:9.2f} {lp * 1e3:9.2f} {lp / v:10.1f}")
    print(f"{'engine':8} {'case':12} {'ms':>9} {'base ms':>9} {'ratio':>10}   (jvp / forward pass; hvp / gradient)")
    for name, res in results.items():
        for case in ("jvp/forward", "hvp/grad"):
            a, b = res[case]
            print(f"{name:8} {case:12} {a * 1e3:9.3f} {b * 1e3:9.3f} {a / b:10.2f}")
    if "torch" in results:
        print(f"{'case':12} {'torch.func.vmap / dyngrad vmap (time)':>40}")
        for case, (v, _) in results["dyngrad"].items():
            if "/" not in case:
                print(f"{case:12} {results['torch'][case][0] / v:40.2f}")


if __name__ == "__main__":
    main()
