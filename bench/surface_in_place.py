"""Eager mode with the recorder's stand-ins in place and without them, in one run (Note [The recorded surface stays
in place] in python/dyngrad/_api/capture.py): after the first dyngrad.compile recording, every _C function and the
recorded Tensor members are _VerifiedFunction stand-ins for the rest of the process, so each eager call of one pays
an indirection. This measures what that costs eager code, and what it saves a verified call (no swap of ~200 names
in and out).

    python bench/surface_in_place.py [--rounds 6]

Rows: op-overhead-fwd and op-overhead (python -m dyngrad.bench's workloads, 100 steps: operators and dg.tanh on
their C++ fast paths), a Python-defined op that calls _C (softmax, no fast path), p.grad reads and writes, the MLP
training step and the 200 one-element ops of bench/compile_modes.py run eagerly, and verified calls of the one-op
program and of the 200 ops. The stand-ins are put in place and taken out alternately; times are CPU time per call,
best of 5 blocks, per round, the two halves of a round in alternating order; the ratio is in place / taken out
(above 1: slower in place), per round and its median.
"""
import argparse
import time

import _path  # noqa: F401
import numpy as np

import dyngrad
from dyngrad._api import capture
from dyngrad.bench.engines import machine_line
from dyngrad.bench.workloads import op_overhead, op_overhead_fwd
from compile_modes import chain, mlp


def best(fn, seconds=0.25, blocks=5):
    n, t = 1, 0.0
    while t < seconds / blocks:
        n *= 2
        start = time.thread_time()
        for _ in range(n):
            fn()
        t = time.thread_time() - start
    times = []
    for _ in range(blocks):
        start = time.thread_time()
        for _ in range(n):
            fn()
        times.append((time.thread_time() - start) / n)
    return min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    rounds = p.parse_args().rounds
    print(machine_line())
    dg = dyngrad
    fwd, full = op_overhead_fwd(dg, {"steps": 100}), op_overhead(dg, {"steps": 100})
    x = dg.tensor(np.linspace(-1, 1, 8).astype(np.float32))
    w = dg.tensor(np.ones(4, np.float32), requires_grad=True)
    w.grad = dg.tensor(np.ones(4, np.float32))
    step_mlp, args_mlp = mlp(dg)
    step_chain, args_chain = chain(dg)
    one = dg.compile(lambda t: t * 2, mode="verified")
    chain_verified = dg.compile(step_chain, mode="verified")
    for _ in range(3):
        one(x), chain_verified(*args_chain)

    def grad_rw():
        g = w.grad
        w.grad = g

    rows = [("op-overhead-fwd, per op", fwd.run, fwd.units), ("op-overhead (fwd+bwd), per op", full.run, full.units),
            ("softmax (Python definition)", lambda: dg.softmax(x, 0), 1), ("p.grad read + write", grad_rw, 1),
            ("MLP step eager", lambda: step_mlp(*args_mlp), 1), ("200 ops eager", lambda: step_chain(*args_chain), 1),
            ("verified one-op call", lambda: one(x), 1), ("verified 200 ops", lambda: chain_verified(*args_chain), 1)]
    results = {name: {True: [], False: []} for name, _, _ in rows}
    for r in range(rounds):
        for in_place in ((True, False) if r % 2 == 0 else (False, True)):   # ABBA: a drift cancels
            capture.STAY_IN_PLACE = in_place
            if in_place:
                one(x)                           # a recording's swap puts them back
            else:
                capture._take_out_of_place()
            assert (type(dg._C.softmax).__name__ == "_VerifiedFunction") == in_place
            for name, fn, ops in rows:
                results[name][in_place].append(best(fn) / ops)
            if in_place:
                capture._take_out_of_place()     # the same state for the next half
    capture.STAY_IN_PLACE = True
    print(f"{'row':32} {'in place (us)':>14} {'taken out (us)':>15}  {'median':>6}  ratios per round (in place / out)")
    for name, _, _ in rows:
        a, b = results[name][True], results[name][False]
        ratios = sorted(x / y for x, y in zip(a, b))
        median = (ratios[(len(ratios) - 1) // 2] + ratios[len(ratios) // 2]) / 2
        print(f"{name:32} {min(a) * 1e6:13.3f} {min(b) * 1e6:14.3f}  {median:6.3f}  "
              + " ".join(f"{x / y:.3f}" for x, y in zip(a, b)))


if __name__ == "__main__":
    main()
