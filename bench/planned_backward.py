"""Static replay with and without the planned backward (Note [The backward as a recorded program] in
csrc/bindings/replay_backward.cpp), in one run: the workloads of bench/compile_modes.py, eager dyngrad, static
replay whose backward walks the graph its forward built (capture.PLANNED_BACKWARD = False) and static replay with
the plan. Ratios within one run are what to read on a loaded machine.

    python bench/planned_backward.py [--quick]

Times are CPU time of the calling thread, best of 5 blocks (compile_modes.timed). "planned" says whether the
steady-state variant took the plan, or why not.
"""
import argparse

import _path  # noqa: F401

import dyngrad
from dyngrad._api import capture
from dyngrad.bench.engines import machine_line
from compile_modes import WORKLOADS, timed


def static(step, inputs, planned, seconds):
    capture.PLANNED_BACKWARD = planned
    try:
        compiled = dyngrad.compile(step, mode="reduce-overhead")
        for _ in range(3):
            compiled(*inputs)
        reasons = {v.plan_reason for group in compiled._program.groups.values() for v in group}
        return timed(lambda: compiled(*inputs), seconds), compiled, reasons
    finally:
        capture.PLANNED_BACKWARD = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    seconds = 0.3 if args.quick else 1.5
    print(machine_line())
    print(f"{'workload':<30} {'eager':>10} {'graph':>10} {'x eager':>8} {'planned':>10} {'x eager':>8} "
          f"{'x graph':>8}  plan")
    for name, build in WORKLOADS.items():
        step, inputs = build(dyngrad)
        eager = timed(lambda: step(*inputs), seconds)
        graph, _, _ = static(step, inputs, False, seconds)
        plan, compiled, reasons = static(step, inputs, True, seconds)
        took = [r for r in reasons if r is not None]
        print(f"{name:<30} {eager * 1e6:>8.0f}us {graph * 1e6:>8.0f}us {eager / graph:>7.2f}x "
              f"{plan * 1e6:>8.0f}us {eager / plan:>7.2f}x {graph / plan:>7.2f}x  "
              f"{'yes' if None in reasons else 'no: ' + '; '.join(sorted(took))}", flush=True)


if __name__ == "__main__":
    main()
