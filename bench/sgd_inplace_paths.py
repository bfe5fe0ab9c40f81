"""The SGD update of the wide-MLP training step (784-1024-1024-10: six parameters, 1.8 M floats) three ways, in one
run, interleaved: eager `p.add_(g, alpha=-lr)` (computed into p: Note [In-place arithmetic without a temporary] in
csrc/bindings/fast_paths.cpp), the same loop under dyngrad.compile(mode="reduce-overhead"), and the calls its
recording holds (inplace_input, scalar_operand, mul, add, assign_inplace: the in-place ops' general path) issued
eagerly. Issue 20: the wide-MLP step is 4-6% slower static than eager, and Note [Slots live until the run ends]
(csrc/bindings/capture_bind.cpp) found the temporaries' lifetime is not why.

    python bench/sgd_inplace_paths.py [--blocks 7]
"""
import argparse
import time

import _path  # noqa: F401
import numpy as np

import dyngrad as dg
from dyngrad import _C
from dyngrad.bench.engines import machine_line

SHAPES = [(1024, 784), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)]
LR = 0.05


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]

    def params():
        ps = [dg.tensor(a.copy(), requires_grad=True) for a in start]
        for q, g in zip(ps, grads):
            q.grad = dg.tensor(g)
        return ps

    def sgd(ps):
        with dg.no_grad():
            for q in ps:
                q.add_(q.grad, alpha=-LR)

    def general(ps):
        with dg.no_grad():
            for q in ps:
                before = _C.inplace_input(q, "add_", False)
                _C.assign_inplace(q, _C.add(before, _C.mul(q.grad, _C.scalar_operand(-LR, q.grad))), "add_")

    static = dg.compile(sgd, mode="reduce-overhead")
    cases = {"eager add_": (sgd, params()), "static replay": (static, params()),
             "general path": (general, params())}
    for fn, ps in cases.values():
        for _ in range(3):
            fn(ps)
    print(machine_line())
    for threads in (1, 2):
        dg.set_num_threads(threads)
        best = {}
        for _ in range(args.blocks):
            for name, (fn, ps) in cases.items():
                t = time.process_time()
                for _ in range(args.calls):
                    fn(ps)
                best[name] = min(best.get(name, float("inf")), (time.process_time() - t) / args.calls)
        same = all(np.array_equal(a.detach().numpy(), b.detach().numpy())
                   for a, b in zip(cases["eager add_"][1], cases["static replay"][1]))
        print(f"{threads} thread{'s' if threads > 1 else ''}: static == eager bitwise: {same}")
        for name, t in best.items():
            print(f"  {name:14s} cpu {t * 1e3:7.3f} ms/update  this/eager {t / best['eager add_']:5.2f}x")


if __name__ == "__main__":
    main()
