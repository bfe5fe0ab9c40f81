"""Runs every op of the API table under vmap and records whether a batching rule did the work or the fallback loop
over the rows did (Note [vmap by batching rules] in python/dyngrad/_api/ops/vmap.py); tests/test_vmap_coverage.py
runs it in a subprocess per engine (some rows change process-wide state, and a crash must not take pytest with it)
and compares the report with its FALLS_BACK list.

    python tests/vmap_driver.py --engine dyngrad --report R

Each row's sample call is found as tests/bridge_driver.py finds it (its sample_lists: SAMPLES[row name], then the
generic CANDIDATES, the first list that returns); a row takes part when that call has a tensor argument and returns a tensor
(or a structure holding one). Its first tensor argument is then batched: B rows, row b the sample plus 0.05 b for a
floating tensor (the same values for an integer or bool one), and the call runs once under dyngrad.vmap over those
rows (randomness='different' for a random op), with vmap.FALLBACKS cleared before. The result is checked against
the explicit loop over the rows (each row's call on fresh inputs; random ops: shapes and dtypes only). The report
(JSON) maps each row's dispatcher key to {"status": rule | fallback | error | mismatch, "keys": the keys the
fallback loop ran for, "how": the argument list, "error": the message of a failed call}.
"""
import argparse
import importlib
import json
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bridge_driver import SAMPLES_ONLY, _call, _list, inputs, sample_lists  # noqa: E402

B = 3


def _leaves(out):
    if isinstance(out, dict):
        return [x for v in out.values() for x in _leaves(v)]
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _leaves(o)]
    return [out]


def _variant(m, t, b):
    """Row b of the batch made from tensor t."""
    if t.dtype.is_floating_point and bool((t == t.round()).all()):
        return t + b                            # whole numbers stay whole (binomial's counts)
    if t.dtype.is_floating_point or t.is_complex():
        return (t.detach() + 0.05 * b).requires_grad_(t.requires_grad) if t.is_leaf else t + 0.05 * b
    return t.clone()


def _numpy(m, t):
    t = t.detach()
    if t.is_complex():
        return np.stack([m.real(t).numpy(), m.imag(t).numpy()], -1)
    return t.to(m.float64).numpy() if t.dtype.is_floating_point and t.dtype != m.float64 else t.numpy()


def _compare(m, got, rows, random):
    """None if vmap's result matches the loop's rows, else what differs."""
    g_leaves = _leaves(got)
    r_leaves = [_leaves(r) for r in rows]
    if any(len(r) != len(g_leaves) for r in r_leaves):
        return f"{len(g_leaves)} outputs under vmap, {len(r_leaves[0])} per row"
    for k, g in enumerate(g_leaves):
        col = [r[k] for r in r_leaves]
        if isinstance(col[0], m.Tensor):
            if not isinstance(g, m.Tensor):
                return f"output {k}: {type(g).__name__} under vmap, a tensor per row"
            want_shape = (B,) + tuple(col[0].shape)
            if tuple(g.shape) != want_shape:
                return f"output {k}: shape {tuple(g.shape)} under vmap, {want_shape} by the loop"
            if g.dtype != col[0].dtype:
                return f"output {k}: dtype {g.dtype} under vmap, {col[0].dtype} by the loop"
            if random:
                continue
            want = np.stack([_numpy(m, c) for c in col])
            have = _numpy(m, g)
            if want.dtype.kind in "fc":
                tol = 1e-4 if col[0].dtype not in (m.float64, m.complex128) else 1e-8
                if not np.allclose(have, want, rtol=tol, atol=tol, equal_nan=True):
                    return f"output {k}: values differ from the loop (max |diff| {np.nanmax(np.abs(have - want))})"
            elif not np.array_equal(have, want):
                return f"output {k}: values differ from the loop"
        elif not all(c == col[0] for c in col) or g != col[0]:
            return f"output {k}: {g!r} under vmap, {col!r} by the loop"
    return None


def _property_reader(name):
    def read(x):
        return getattr(x, name)
    read.__name__ = name
    return read


def _sample(m, fn, row):
    """(names, position of the first tensor argument) of the first argument list that calls fn, or None."""
    for names, args, kwargs in sample_lists(m, row):
        try:
            out = _call(fn, args, kwargs)
        except Exception:
            continue
        if not any(isinstance(a, m.Tensor) for a in args):
            return None
        if not any(isinstance(o, m.Tensor) for o in _leaves(out)):
            return None
        pos = next(k for k, a in enumerate(args) if isinstance(a, m.Tensor))
        return names, pos
    return None


def run_row(m, vm, fn, names, pos, random):
    def call_with(b_value):
        env = inputs(m)
        args, kwargs = _list(m, names, env)
        args[pos] = b_value
        return _call(fn, args, kwargs)

    env = inputs(m)
    base = _list(m, names, env)[0][pos]
    rows_in = [_variant(m, base, b) for b in range(B)]
    stacked = m.stack([r.detach() for r in rows_in])

    def f(x):
        env = inputs(m)
        args, kwargs = _list(m, names, env)
        args[pos] = x
        return _call(fn, args, kwargs)
    vm.FALLBACKS.clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = m.vmap(f, randomness="different" if random else "error")(stacked)
    except Exception as e:                          # noqa: BLE001 - the report says what failed
        return {"status": "error", "keys": sorted(set(vm.FALLBACKS)), "error": f"{type(e).__name__}: {e}"[:300]}
    keys = sorted(set(vm.FALLBACKS))
    rows = [call_with(_variant(m, base, b)) for b in range(B)]
    diff = _compare(m, got, rows, random)
    if diff is not None:
        return {"status": "mismatch", "keys": keys, "error": diff}
    return {"status": "fallback" if keys else "rule", "keys": keys}


def _bound_method(name):
    def call(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)
    call.__name__ = name
    return call


# rows whose results hold uninitialised memory: shapes and dtypes are checked, not values
UNINITIALISED = {"empty_like", "new_empty", "new_empty_strided", "empty", "empty_strided"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", default="dyngrad")
    parser.add_argument("--report", required=True)
    parser.add_argument("--only", default=None, help="comma-separated row keys (for debugging)")
    opts = parser.parse_args()
    m = importlib.import_module(opts.engine)
    vm = importlib.import_module(f"{opts.engine}._api.ops.vmap")
    from dyngrad._api.table import rows
    only = set(opts.only.split(",")) if opts.only else None
    spaces = {"fn": m, "F": m.nn.functional, "special": m.special, "linalg": m.linalg, "masked": m.masked,
              "fft": m.fft, "windows": m.signal.windows}
    report = {}
    for row in rows():
        key = vm._key_of(row)
        if row.name in SAMPLES_ONLY or (only and key not in only) or key in report:
            continue
        for kind in row.kinds:
            if kind in spaces:
                fn = getattr(spaces[kind], row.name, None)
            elif kind in ("method", "op"):
                if not callable(getattr(m.Tensor, row.name, None)):
                    continue
                fn = _bound_method(row.name)          # x.name(...), as a user calls it on a batched row
            elif kind == "prop":                      # x.T, x.mH, x.imag, ...: read on a batched row
                fn = _property_reader(row.name)
            else:
                continue
            if fn is None or not callable(fn):
                continue
            m.manual_seed(0)
            found = _sample(m, fn, row)
            if found is None:
                break
            names, pos = found
            entry = run_row(m, vm, fn, names, pos, key in vm.RANDOM or key in UNINITIALISED)
            entry["how"] = f"{kind} {names!r} batched at argument {pos}"
            report[key] = entry
            break
    with open(opts.report, "w") as f:
        json.dump(report, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
