"""Verified replay with and without running matched ops from the plan (Note [Verified ops run from the plan] in
csrc/bindings/fast_paths.cpp), against eager mode, in one run (ratios are what to read on a loaded machine).

    python bench/verified_plan.py

Rows: the 200 one-element ops and the MLP step of bench/compile_modes.py, a chain of 400 one-element multiplies
forward + backward, and a one-op program (the fixed cost of a verified call). Columns: eager, verified replay
running ops from the plan, verified replay with capture.PLANNED_BACKWARD off (every op eager, checked), and eager
mode's forward under no_grad (what the program's Python and kernels cost without any graph: the floor of a mode
whose Python runs at every call). Times are CPU time of the calling thread, best of 5 blocks.
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
    print(f"{'workload':32} {'eager':>8} {'planned':>8} {'x eager':>8} {'no plan':>8} {'x eager':>8} {'no_grad fwd':>12}")
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
        assert planned.compile_stats.verified_planned > 0 or name.startswith("one op"), name
        print(f"{name:32} {eager * 1e6:7.1f}us {t_plan * 1e6:7.1f}us {eager / t_plan:7.2f}x {t_none * 1e6:7.1f}us "
              f"{eager / t_none:7.2f}x {floor * 1e6:10.1f}us")


if __name__ == "__main__":
    argparse.ArgumentParser(description="verified replay with and without the plan, against eager mode (one "
                                        "run; ratios are what to read on a loaded machine)").parse_args()
    main()
