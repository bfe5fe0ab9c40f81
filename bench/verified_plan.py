"""Verified replay with and without running matched ops from the plan (Note [Verified ops run from the plan] in
csrc/bindings/fast_paths.cpp), against eager mode, in one run (ratios are what to read on a loaded machine).

    python bench/verified_plan.py [--split]

Rows: the 200 one-element ops and the MLP step of bench/compile_modes.py, a chain of 400 one-element multiplies
forward + backward, and a one-op program (the fixed cost of a verified call). Columns: eager, verified replay
running ops from the plan, verified replay with capture.PLANNED_BACKWARD off (every op eager, checked), and eager
mode's forward under no_grad (what the program's Python and kernels cost without any graph: the floor of a mode
whose Python runs at every call), and static replay (mode="reduce-overhead": every kernel and the planned backward,
no Python). Then, per workload, the target against that floor and what verified replay spends above it. Times are
CPU time of the calling thread, best of 5 blocks.
"""
import argparse

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad._api import capture
from dyngrad.bench.engines import machine_line
from compile_modes import chain, mlp, timed


def muls(dg, n=400):
    a = dg.tensor(np.array([0.5], np.float32), requires_grad=True)
    x = dg.tensor(np.array([0.3], np.float32))

    def step(x):
        y = x
        for _ in range(n):
            y = y * a
        y.sum().backward()
        return y
    return step, (x,)


def one_op(dg):
    def step(x):
        return x * 2
    return step, (dyngrad.tensor(np.array([0.3], np.float32)),)


def verified(step, args, plan):
    capture.PLANNED_BACKWARD = plan
    try:
        compiled = dyngrad.compile(step, mode="verified")
        for _ in range(3):
            compiled(*args)
    finally:
        capture.PLANNED_BACKWARD = True
    return compiled


def main():
    print(machine_line())
    print(f"{'workload':32} {'eager':>8} {'planned':>8} {'x eager':>8} {'no plan':>8} {'x eager':>8} {'no_grad fwd':>12}"
          f" {'static':>8}")
    floors = []
    for name, make in (("200 one-element ops fwd+bwd", chain), ("MLP step b32 64-128-10", mlp),
                       ("400 multiplies fwd+bwd", muls), ("one op (fixed cost)", one_op)):
        step, args = make(dyngrad)
        planned, unplanned = verified(step, args, True), verified(step, args, False)
        eager = timed(lambda: step(*args), 0.6)
        t_plan = timed(lambda: planned(*args), 0.6)
        t_none = timed(lambda: unplanned(*args), 0.6)

        def forward_no_grad():
            with dyngrad.no_grad():
                try:
                    step(*args)
                except RuntimeError:   # backward() of a tensor without history
                    pass
        floor = timed(forward_no_grad, 0.6)
        static = dyngrad.compile(step, mode="reduce-overhead")
        for _ in range(3):
            static(*args)
        t_static = timed(lambda: static(*args), 0.6)
        assert planned.compile_stats.verified_planned > 0 or name.startswith("one op"), name
        print(f"{name:32} {eager * 1e6:7.1f}us {t_plan * 1e6:7.1f}us {eager / t_plan:7.2f}x {t_none * 1e6:7.1f}us "
              f"{eager / t_none:7.2f}x {floor * 1e6:10.1f}us {t_static * 1e6:7.1f}us")
        floors.append((name, eager, t_plan, floor, t_static))
    fixed = floors[-1][2] - floors[-1][1]
    print(f"\nthe floor of a mode whose Python runs at every call (the no_grad forward: the program's Python and "
          f"forward kernels, no graph), against the targets; fixed cost of a verified call {fixed * 1e6:.1f}us:")
    for (name, eager, t_plan, floor, t_static), target in zip(floors, (3, 2, None, None)):
        goal = f"target {target}x = {eager / target * 1e6:6.1f}us, floor {'above' if floor > eager / target else 'below'}" \
            if target else " " * 35
        print(f"  {name:32} {goal}  above the floor: {(t_plan - floor) * 1e6:6.1f}us (fixed {fixed * 1e6:.1f}us, "
              f"the rest {(t_plan - floor - fixed) * 1e6:6.1f}us: checks, slots, the planned backward; static replay "
              f"runs the whole program in {t_static * 1e6:.1f}us)")


def split():
    """--split: where a call's time goes, phase by phase, timed inside the program (time.perf_counter_ns around
    each phase; the 10th percentile of 2,000 calls, which a loaded machine disturbs least): eager, verified, and the
    forward under no_grad. `outside` is the call minus its phases: for eager the freeing of the graph the call
    returns; for verified the fixed cost of a call plus the cursor's end (_VerifyCursor.finish: the slots' tensors
    and Python objects freed, as eager mode frees its graph)."""
    import time
    pc = time.perf_counter_ns
    phases = {}

    def note(name, t0):
        t = pc()
        phases.setdefault(name, []).append(t - t0)
        return t

    a = dyngrad.tensor(np.array([0.5], np.float32), requires_grad=True)
    b = dyngrad.tensor(np.array([0.1], np.float32), requires_grad=True)

    def ops(x):
        t = pc()
        y = x
        for _ in range(67):
            y = (y * a + b).tanh()
        t = note("forward", t)
        y.sum().backward()
        note("backward", t)
        return y

    rng = np.random.default_rng(0)
    model = dyngrad.nn.Sequential(dyngrad.nn.Linear(64, 128), dyngrad.nn.ReLU(), dyngrad.nn.Linear(128, 10))
    opt = dyngrad.optim.SGD(model.parameters(), lr=0.01)
    xs = dyngrad.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    ys = dyngrad.tensor(rng.integers(0, 10, 32))

    def mlp_step(x, y):
        t = pc()
        opt.zero_grad()
        t = note("zero_grad", t)
        loss = dyngrad.nn.functional.cross_entropy(model(x), y)
        t = note("forward", t)
        loss.backward()
        t = note("backward", t)
        opt.step()
        note("step", t)
        return loss

    for name, fn, args in (("200 one-element ops fwd+bwd", ops, (dyngrad.tensor(np.array([0.3], np.float32)),)),
                           ("MLP step b32 64-128-10", mlp_step, (xs, ys))):
        compiled = dyngrad.compile(fn, mode="verified")
        for _ in range(3):
            compiled(*args)

        def no_grad(*args):
            with dyngrad.no_grad():
                try:
                    fn(*args)
                except RuntimeError:   # backward() of a tensor without history
                    pass
        print(f"\n{name}:")
        for label, f in (("eager", fn), ("verified", compiled), ("no_grad", no_grad)):
            phases.clear()
            for _ in range(2000):
                a.grad = b.grad = None
                t = pc()
                f(*args)
                note("call", t)
            p10 = {k: sorted(v)[len(v) // 10] / 1000 for k, v in phases.items()}
            if label == "no_grad":
                p10 = {"forward": p10["forward"], "call": p10["call"]}
            inside = sum(v for k, v in p10.items() if k != "call")
            print(f"  {label:9}" + "".join(f" {k} {v:6.1f}us" for k, v in p10.items())
                  + f"  outside {p10['call'] - inside:5.1f}us")
        assert compiled.compile_stats.verified_planned > 0, name


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="verified replay with and without the plan, against eager mode (one "
                                            "run; ratios are what to read on a loaded machine)")
    p.add_argument("--split", action="store_true", help="time each phase of a call inside the program (split())")
    if p.parse_args().split:
        print(machine_line())
        split()
    else:
        main()
