"""vmap by batching rules against the Python loop it replaces (issue 21's targets), as ratios measured in one run,
for the C++ engine and, when installed, torch.func on the same work.

    python bench/vmap.py [--repeat 10] [--quick]

Rows:
  rows        a small per-row function (x * w + b).tanh().sum() over 2,000 rows: vmap against the loop over rows
              (target >= 10x, and at least as fast as torch.func.vmap)
  mlp-N       per-sample gradients of a 2-layer MLP (64 -> 128 -> 10, cross-entropy) over N samples: vmap(grad)
              against N calls of grad (the loop of N backward passes; target >= 20x at N = 512)
  cnn-64      per-sample gradients of a small CNN (conv 1->8 3x3, relu, max-pool 2, linear 8*6*6 -> 10) on 14x14
              images, 64 samples: vmap(grad) against 64 calls of grad
  ensemble    10 MLPs (stack_module_state) over one batch of 64: vmap(functional_call) against a loop over models

Each figure is the best of `repeat` timed calls after warm-up (the machine is shared: the best call is the one
least disturbed by other work). float32.
"""
import argparse

import numpy as np

import _path  # noqa: F401
import dyngrad as dg
from dyngrad.bench.engines import best_seconds, machine_line


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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    args = p.parse_args(argv)
    sizes = (64,) if args.quick else (64, 512)
    repeat = 2 if args.quick else args.repeat
    engines = [("dyngrad", dg, dg.nn.functional, dg.func, dg.nn)]
    try:
        import torch
        torch.set_num_threads(dg.get_num_threads())
        engines.append(("torch", torch, torch.nn.functional, torch.func, torch.nn))
    except ImportError:
        pass
    print(machine_line())
    print(f"vmap against the loop over rows; float32; best of {repeat} calls")
    print(f"{'engine':8} {'case':12} {'vmap ms':>9} {'loop ms':>9} {'loop/vmap':>10}")
    vmap_ms = {}
    for name, m, F, func, nn in engines:
        rng = np.random.default_rng(0)
        for case, (batched, loop) in _cases(m, F, func, nn, sizes, rng):
            v = best_seconds(batched, repeat)
            lp = best_seconds(loop, min(repeat, 3))
            vmap_ms[(name, case)] = v
            print(f"{name:8} {case:12} {v * 1e3:9.2f} {lp * 1e3:9.2f} {lp / v:10.1f}")
    if len(engines) > 1:
        print(f"{'case':12} {'torch.func.vmap / dyngrad vmap':>32}")
        for (name, case), v in vmap_ms.items():
            if name == "dyngrad":
                print(f"{case:12} {vmap_ms[('torch', case)] / v:32.2f}")


if __name__ == "__main__":
    main()
