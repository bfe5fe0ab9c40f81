"""Static replay's fixed and per-op cost (issue 20's targets: <= 2 us fixed per call, <= 50 ns per recorded
one-element op forward + backward), against eager mode, in one run.

    python bench/static_replay.py [--quick] [--compare]

Rows: a one-op program (the fixed cost of a call: entry guard, Program.__call__, the loop's set-up); chains of
n one-element ops forward + backward (y = tanh(y * a + b), 3 ops a round) for two n, whose difference over the
difference in ops is the per-op cost; the same chain without grad (forward only). Times are CPU time of the
calling thread (time.thread_time), best of 5 blocks.

--compare: bench/compile_modes.py's three workloads, eager against static replay with the scalar replay, the
in-place entry guard (and its in-place module state), the target check in the loop and the one-C++-call path
(compiling.FAST_CALL) off (as before them) and on, alternating, in one run. The in-place arithmetic and optimiser
steps of the loop have no switch: they are on in both columns.
"""
import argparse
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg
from dyngrad.bench.engines import machine_line

import compile_modes


def timed(fn, seconds):
    fn()
    t0 = time.perf_counter()
    fn()
    calls = max(1, min(20_000, int(seconds / 5 / max(time.perf_counter() - t0, 1e-7))))
    return compile_modes.best_of_blocks(fn, calls)


def chain(rounds, backward=True):
    return compile_modes.chain(dg, rounds, backward)[0]


def one_op():
    a = dg.tensor(np.array([0.5], np.float32))
    return lambda x: x * a


def set_features(on):
    from dyngrad._api import capture, compiling
    capture.SCALAR_REPLAY = capture.TARGET_CHECKS_IN_LOOP = compiling.KEY_IN_PLACE = compiling.FAST_CALL = on
    program = getattr(dg._C, "_ReplayProgram", None)
    if hasattr(program, "set_module_state_in_place"):   # Note [Module state compared in place]
        program.set_module_state_in_place(on)


def compare(seconds):
    import compile_modes
    print(f"{'workload':<30} {'eager':>10} {'static before':>14} {'x eager':>8} {'static after':>13} {'x eager':>8}")
    for name, build in compile_modes.WORKLOADS.items():
        step, inputs = build(dg)
        eager = timed(lambda: step(*inputs), seconds)
        times = {}
        for on in (False, True, False, True):   # alternating: the machine's load drifts
            set_features(on)
            compiled = dg.compile(step, mode="reduce-overhead")
            compiled(*inputs)
            t = timed(lambda: compiled(*inputs), seconds)
            times[on] = min(times.get(on, t), t)
        set_features(True)
        print(f"{name:<30} {eager * 1e6:>8.0f}us {times[False] * 1e6:>12.1f}us {eager / times[False]:>7.2f}x "
              f"{times[True] * 1e6:>11.1f}us {eager / times[True]:>7.2f}x", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--compare", action="store_true")
    args = p.parse_args()
    seconds = 0.3 if args.quick else 1.0
    if args.compare:
        print(machine_line())
        return compare(seconds)
    x = dg.tensor(np.array([0.3], np.float32))
    print(machine_line())
    print(f"{'program':<34} {'ops':>5} {'eager':>10} {'static':>10} {'x eager':>8}")
    rows = [("one op (fixed cost)", one_op(), 1)]
    for rounds in (10, 67):
        rows.append((f"chain fwd+bwd, {rounds} rounds", chain(rounds), 3 * rounds + 1))
    rows.append(("chain fwd only, 67 rounds", chain(67, backward=False), 201))
    static_times = {}
    for name, fn, ops in rows:
        eager = timed(lambda: fn(x), seconds)
        compiled = dg.compile(fn, mode="reduce-overhead")
        static = timed(lambda: compiled(x), seconds)
        static_times[name] = (ops, static)
        print(f"{name:<34} {ops:>5} {eager * 1e6:>8.2f}us {static * 1e6:>8.2f}us {eager / static:>7.2f}x", flush=True)
    (n0, t0), (n1, t1) = static_times["chain fwd+bwd, 10 rounds"], static_times["chain fwd+bwd, 67 rounds"]
    per_op = (t1 - t0) / (n1 - n0)
    print(f"static replay: fixed {static_times['one op (fixed cost)'][1] * 1e6:.2f} us per call, "
          f"{per_op * 1e9:.0f} ns per one-element op forward + backward (targets: 2 us, 50 ns)")


if __name__ == "__main__":
    main()
