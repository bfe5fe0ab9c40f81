"""Differential test: random graphs built from the op table run on both engines with identical numpy inputs; every
forward value and every gradient must agree (float64, tight tolerance), and an op must fail in both or in neither.

One seeded generator picks, step by step, a row of test_ops.OPS and operands from a pool of tensors (leaves and
earlier results); each engine executes the same choice on its own tensors. Rows whose domain is restricted get
their operands through x*x + 0.5 first (in both engines). The budget is fixed: GRAPHS graphs of STEPS ops each.
"""
import numpy as np
import pytest

from helpers import Float, as_list, assert_close, to_numpy
from test_ops import OPS

GRAPHS, STEPS = 40, 14
RTOL, ATOL = 1e-8, 1e-10
# float32 values: the engines' kernels may round differently (SIMD vs numpy), by an ulp or so
TOL = {"float64": (RTOL, ATOL), "float32": (2e-6, 1e-7)}


def tol(t):
    return TOL.get(t.dtype.name, (RTOL, ATOL))
LEAF_SHAPES = [(3, 4), (4,), (3, 1), (), (2, 3, 4)]


def graph_row(op):
    """Rows usable anywhere in a graph: differentiable, float inputs only, no fixed index/mask inputs."""
    return (op.graph and op.grad and op.cases
            and all(isinstance(s, (tuple, Float)) for s in op.cases[0]))


ROWS = [op for op in OPS if graph_row(op)]


def needs_guard(op, k):
    """Inputs drawn from a restricted domain (log's, a divisor's...) get x*x + 0.5 in the random graphs."""
    spec = op.cases[0][k]
    if isinstance(spec, Float):
        return spec.low is not None or bool(spec.away_from)
    return op.check.get("low") is not None


def run_step(m, op, operands, guards):
    args = [x * x + 0.5 if g else x for x, g in zip(operands, guards)]
    return [o for o in as_list(op.fn(m, *args)) if o.is_floating_point()]


def test_rows_available():
    assert len(ROWS) > 60, [op.name for op in ROWS]


@pytest.mark.parametrize("seed", range(GRAPHS))
def test_random_graph(cpp, ref, seed):
    rng = np.random.default_rng(seed)
    engines = (cpp, ref)
    pools = {m: [] for m in engines}
    for shape in LEAF_SHAPES:
        value = rng.standard_normal(shape)
        for m in engines:
            pools[m].append(m.tensor(value, requires_grad=True))
    program = []
    for step in range(STEPS * 3):                            # attempts; rejected picks do not count
        if len(program) == STEPS:
            break
        op = ROWS[rng.integers(len(ROWS))]
        arity = len(op.cases[0])
        picks = [int(rng.integers(len(pools[cpp]))) for _ in range(arity)]
        guards = [needs_guard(op, k) for k in range(arity)]
        results, errors = {}, {}
        for m in engines:
            try:
                results[m] = run_step(m, op, [pools[m][i] for i in picks], guards)
            except Exception as exc:  # noqa: BLE001  both engines must agree on failing
                errors[m] = exc
        where = f"seed {seed}, step {len(program)}: {op.name} on pool {picks} (shapes " \
                f"{[tuple(pools[cpp][i].shape) for i in picks]})"
        if len(errors) == 2:
            assert type(errors[cpp]) is type(errors[ref]), f"{where}: dyngrad raised {errors[cpp]!r}, the " \
                                                          f"reference {errors[ref]!r}"
            continue
        assert not errors, f"{where}: only one engine raised: {errors}"
        assert len(results[cpp]) == len(results[ref]), f"{where}: output counts differ"
        values = [to_numpy(o) for o in results[cpp]]
        for i, (a, b) in enumerate(zip(results[cpp], results[ref])):
            assert tuple(a.shape) == tuple(b.shape), f"{where}: output {i} shapes {tuple(a.shape)} vs {tuple(b.shape)}"
            assert_close(to_numpy(a), to_numpy(b), *tol(a), f"{where}: output {i}")
        if not all(np.isfinite(v).all() and (v.size == 0 or np.abs(v).max() < 1e4) for v in values):
            continue                                          # keep the graph's values tame
        for m in engines:
            for o in results[m]:
                if o.requires_grad and not o.is_leaf:
                    o.retain_grad()
            pools[m].extend(results[m])
        program.append(f"{op.name}{picks}->{len(pools[cpp]) - len(results[cpp])}")

    # backpropagate sum(t * w) over the last few pool entries, with the same w in both engines
    targets = list(range(max(0, len(pools[cpp]) - 4), len(pools[cpp])))
    weights = [rng.standard_normal(tuple(pools[cpp][i].shape)) for i in targets]
    for m in engines:
        loss = sum((pools[m][i] * m.tensor(w)).sum() for i, w in zip(targets, weights))
        loss.backward()
    # a gradient that flowed through float32 values carries their rounding
    grad_tol = TOL["float32"] if any(t.dtype.name == "float32" for t in pools[cpp]) else TOL["float64"]
    for i, (a, b) in enumerate(zip(pools[cpp], pools[ref])):
        ga, gb = a.grad, b.grad
        assert (ga is None) == (gb is None), f"seed {seed}: pool entry {i} has a gradient only in " \
            f"{'dyngrad' if gb is None else 'the reference'} (program {program})"
        if ga is not None:
            assert_close(to_numpy(ga), to_numpy(gb), *grad_tol, f"seed {seed}: gradient of pool entry {i} "
                                                                   f"(program {program})")
