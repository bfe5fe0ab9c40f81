"""Reductions, scans and sorting (issue 10), driven by tables, on both engines:

- OPS (rows as in test_ops.py): forward vs numpy, float64 gradients vs central differences, float32, non-contiguous
  inputs; the same rows against torch 2.13 when it is installed; second derivatives where torch has them.
- TORCH: calls whose expected result IS torch's (computed live): values, dtypes, shapes, the named pairs, and the
  gradients for a cotangent of distinct weights, exactly where ties, zeros and NaNs decide which element gets the
  gradient; int/bool inputs, 0-d and empty tensors, dim as int/tuple/None/(), keepdim, dtype=.
- ERRORS: odd calls raise the exception type torch raises.
Skipped cleanly without torch (the OPS rows still run against numpy).
"""
import inspect
import itertools
import os
import math
import warnings

import numpy as np
import pytest

from helpers import Float, Ints, Mask, as_list, check_gradgrad, check_op, check_torch, differentiable, draw_inputs
from helpers import as_spec, is_float_array, make_tensor, seed_of, to_numpy
from test_ops import Op

try:
    import torch
except ImportError:  # pragma: no cover - the torch oracle is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
nan, inf = math.nan, math.inf


# ---- numpy oracles ----

def np_lower_median(a, axis=None):
    if axis is None:
        a, axis = a.reshape(-1), 0
    return np.take(np.sort(a, axis=axis), (a.shape[axis] - 1) // 2, axis=axis)


def np_mode(a, axis=-1):
    """(values, last index of the value) per slice: the most frequent value, the smallest among equally frequent."""
    rows = np.moveaxis(a, axis, -1)
    values = np.empty(rows.shape[:-1], a.dtype)
    indices = np.empty(rows.shape[:-1], np.int64)
    for i in np.ndindex(*rows.shape[:-1]):
        r = rows[i]
        u, c = np.unique(r, return_counts=True)
        v = u[np.argmax(c)]
        values[i], indices[i] = v, np.nonzero(r == v)[0][-1]
    return values, indices


def np_running(a, axis, is_max):
    ufunc = np.maximum if is_max else np.minimum
    values = ufunc.accumulate(a, axis=axis)
    rows, vals = np.moveaxis(a, axis, -1), np.moveaxis(values, axis, -1)
    idx = np.empty(rows.shape, np.int64)
    for i in np.ndindex(*rows.shape[:-1]):
        best = 0
        for j in range(rows.shape[-1]):
            if rows[i][j] == vals[i][j]:
                best = j
            idx[i][j] = best
    return values, np.moveaxis(idx, -1, axis)


def np_stable_desc(a, axis=-1):
    n = a.shape[axis]
    return (n - 1) - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


def np_topk(a, k, axis=-1, largest=True):
    order = np_stable_desc(a, axis) if largest else np.argsort(a, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(a, idx, axis=axis), idx


def np_vector_norm(a, p, axis=None, keepdims=False):
    x = np.abs(a)
    if p == inf:
        return x.max(axis=axis, keepdims=keepdims)
    if p == -inf:
        return x.min(axis=axis, keepdims=keepdims)
    if p == 0:
        return (x != 0).sum(axis=axis, keepdims=keepdims).astype(a.dtype)
    return (x ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


def np_nuclear(a, axes=(0, 1)):
    m = np.moveaxis(a, axes, (-2, -1))
    return np.linalg.svd(m, compute_uv=False).sum(-1)


def with_nan(shape, where, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    a.reshape(-1)[list(where)] = nan
    return a


# ---- shapes ----

R3 = [[(3, 4, 5)]]
R2 = [[(3, 4)]]
DIMS = [[(3, 4, 5)], [(5,)], [(4, 1)]]
INTS = [[Ints((3, 4), -5, 6)]]
BOOLS = [[Mask((3, 4))]]
ZERO_D = [[()]]
EMPTY = [[(0, 3)]]

OPS = [
    # ---- sums, means, variances ----
    Op("sum_dim_empty_tuple", lambda m, a: a.sum(dim=()), np.sum, R3 + ZERO_D, int_cases=INTS, gradgrad=True),
    Op("sum_dim_list_keepdim", lambda m, a: m.sum(a, [0, -1], keepdim=True), lambda a: a.sum((0, -1), keepdims=True),
       R3),
    Op("sum_dtype", lambda m, a: a.sum(1, dtype=m.float64), lambda a: a.sum(1), R2, out_dtype="float64"),
    Op("nansum", lambda m, a: m.nansum(a), np.nansum, R3 + [[with_nan((3, 4), [1, 5])]], int_cases=INTS),
    Op("nansum_dim", lambda m, a: a.nansum(1, keepdim=True), lambda a: np.nansum(a, 1, keepdims=True),
       [[with_nan((3, 4), [0, 1, 2, 3])]]),
    Op("mean_dim_empty_tuple", lambda m, a: a.mean(()), np.mean, R3),
    Op("mean_dtype", lambda m, a: m.mean(a, 0, dtype=m.float64), lambda a: a.mean(0), R2, out_dtype="float64"),
    Op("nanmean", lambda m, a: m.nanmean(a), np.nanmean, R3 + [[with_nan((3, 4), [1, 5])]]),
    Op("nanmean_dim", lambda m, a: a.nanmean(dim=(0,), keepdim=True), lambda a: np.nanmean(a, 0, keepdims=True),
       [[with_nan((3, 4), [0, 4, 5])]], gradgrad=True),
    # (torch's var/std over dim=() reduce every dim but their gradient is inf; torch's logsumexp over dim=()
    # fails without keepdim: these rows are checked against numpy only)
    Op("var_dim_empty_tuple", lambda m, a: a.var(()), lambda a: np.var(a, ddof=1), R3, torch=False),
    Op("var_positional_unbiased", lambda m, a: m.var(a, 1, False, True), lambda a: np.var(a, 1, keepdims=True), R2),
    Op("var_correction_2", lambda m, a: a.var(dim=0, correction=2), lambda a: np.var(a, 0, ddof=2), R2),
    Op("std_old_overload", lambda m, a: m.std(a, False), np.std, R2),
    Op("var_mean", lambda m, a: m.var_mean(a, 1), lambda a: (np.var(a, 1, ddof=1), a.mean(1)), R3, gradgrad=True),
    Op("var_mean_all_correction0", lambda m, a: m.var_mean(a, correction=0), lambda a: (np.var(a), a.mean()), R2),
    Op("std_mean", lambda m, a: m.std_mean(a, dim=(0, 2), keepdim=True),
       lambda a: (np.std(a, (0, 2), ddof=1, keepdims=True), a.mean((0, 2), keepdims=True)), R3),
    Op("std_mean_unbiased", lambda m, a: m.std_mean(a, 0, unbiased=False), lambda a: (np.std(a, 0), a.mean(0)), R2),
    # ---- products ----
    Op("prod", lambda m, a: a.prod(), np.prod, [[(3, 4)], [(7,)], [()], [(0, 3)]], int_cases=INTS, gradgrad=True),
    Op("prod_dim", lambda m, a: m.prod(a, 1), lambda a: a.prod(1), DIMS[:1] + [[(4, 1)], [(2, 7)]],
       int_cases=INTS, gradgrad=True),
    Op("prod_dim_keepdim", lambda m, a: a.prod(-1, keepdim=True), lambda a: a.prod(-1, keepdims=True), R3),
    Op("prod_dtype", lambda m, a: a.prod(0, dtype=m.float64), lambda a: a.prod(0), R2, out_dtype="float64"),
    # ---- extrema ----
    Op("amax_dim_empty_tuple", lambda m, a: a.amax(()), np.max, R3),
    Op("amin_dim_list", lambda m, a: m.amin(a, [0, 2], True), lambda a: a.min((0, 2), keepdims=True), R3),
    Op("aminmax", lambda m, a: m.aminmax(a), lambda a: (a.min(), a.max()), R3 + ZERO_D, int_cases=INTS),
    Op("aminmax_dim", lambda m, a: a.aminmax(dim=1, keepdim=True),
       lambda a: (a.min(1, keepdims=True), a.max(1, keepdims=True)), R3),
    Op("max_dim", lambda m, a: m.max(a, dim=-1), lambda a: (a.max(-1), a.argmax(-1)), R3, int_cases=INTS),
    Op("min_dim_keepdim", lambda m, a: a.min(0, True), lambda a: (a.min(0, keepdims=True), a.argmin(0)[None]), R2),
    Op("logsumexp_dim_empty_tuple", lambda m, a: m.logsumexp(a, ()),
       lambda a: np.log(np.exp(a - a.max()).sum()) + a.max(), R3, torch=False),
    # ---- norms ----
    Op("norm", lambda m, a: a.norm(), lambda a: np.sqrt((a * a).sum()), R3 + ZERO_D, gradgrad=True),
    Op("norm_p1_dim", lambda m, a: m.norm(a, 1, 1), lambda a: np.abs(a).sum(1), R3, away_from=(0.0,)),
    Op("norm_p3_keepdim", lambda m, a: a.norm(3, dim=(0, 2), keepdim=True),
       lambda a: np_vector_norm(a, 3, (0, 2), True), R3, gradgrad=True),
    Op("norm_p_half", lambda m, a: a.norm(0.5, 0), lambda a: np_vector_norm(a, 0.5, 0), R2, away_from=(0.0,)),
    Op("norm_p_neg", lambda m, a: a.norm(-1.5, 1), lambda a: np_vector_norm(a, -1.5, 1), R2, away_from=(0.0,)),
    Op("norm_inf", lambda m, a: m.norm(a, inf, dim=1), lambda a: np_vector_norm(a, inf, 1), R3),
    Op("norm_neg_inf", lambda m, a: a.norm(-inf), lambda a: np_vector_norm(a, -inf), R3),
    Op("norm_fro_dims", lambda m, a: m.norm(a, "fro", (0, 2)), lambda a: np.sqrt((a * a).sum((0, 2))), R3),
    Op("norm_fro_dtype", lambda m, a: a.norm(dtype=m.float64), lambda a: np.sqrt((a * a).sum()), R2,
       out_dtype="float64"),
    Op("norm_nuc", lambda m, a: m.norm(a, "nuc"), lambda a: np_nuclear(a), [[(3, 4)], [(4, 2)]]),
    Op("norm_nuc_dims_keepdim", lambda m, a: a.norm("nuc", dim=(0, 2), keepdim=True),
       lambda a: np_nuclear(a, (0, 2))[None, :, None], R3),
    # ---- scans ----
    Op("cumsum", lambda m, a: a.cumsum(1), lambda a: np.cumsum(a, 1), DIMS[:1] + [[(0, 3)]], int_cases=INTS,
       gradgrad=True),
    Op("cumsum_fn_neg_dim", lambda m, a: m.cumsum(a, dim=-1), lambda a: np.cumsum(a, -1).reshape(a.shape),
       [[(6,)], [()]]),
    Op("cumsum_dtype", lambda m, a: m.cumsum(a, 0, dtype=m.float64), lambda a: np.cumsum(a, 0), R2,
       out_dtype="float64"),
    Op("cumprod", lambda m, a: a.cumprod(1), lambda a: np.cumprod(a, 1), R3 + [[(0, 3)]], int_cases=INTS,
       gradgrad=True),
    Op("cumprod_zeros", lambda m, a: m.cumprod(a, 1),
       lambda a: np.cumprod(a, 1), [[np.array([[1.5, 0.0, 2.0, -3.0], [0.0, 2.0, 0.0, 1.5], [2.0, -1.0, 0.5, 0.0]])]],
       gradgrad=True, noncontig=False),
    Op("cumprod_0d", lambda m, a: a.cumprod(0), lambda a: a, ZERO_D),
    Op("logcumsumexp", lambda m, a: a.logcumsumexp(1), lambda a: np.logaddexp.accumulate(a, 1), R3 + [[(0, 2)]],
       gradgrad=True),
    Op("logcumsumexp_large", lambda m, a: m.logcumsumexp(a, 0), lambda a: np.logaddexp.accumulate(a, 0),
       [[Float((6,), -800, 800)]]),
    Op("cummax", lambda m, a: a.cummax(1), lambda a: np_running(a, 1, True), R3, int_cases=INTS),
    Op("cummin", lambda m, a: m.cummin(a, 0), lambda a: np_running(a, 0, False), R2, int_cases=INTS),
    # ---- sorting ----
    Op("sort", lambda m, a: a.sort(), lambda a: (np.sort(a, -1), np.argsort(a, -1, kind="stable")) if a.ndim
       else (a, np.array(0)), DIMS + [[()], [(0, 3)]], int_cases=INTS),
    Op("sort_dim0_descending", lambda m, a: m.sort(a, 0, descending=True),
       lambda a: (np.take_along_axis(a, np_stable_desc(a, 0), 0), np_stable_desc(a, 0)), R3, int_cases=INTS),
    Op("sort_stable_kw", lambda m, a: m.sort(a, stable=True, dim=1), lambda a: (np.sort(a, 1), np.argsort(a, 1)), R2),
    Op("argsort", lambda m, a: a.argsort(dim=0, descending=True), lambda a: np_stable_desc(a, 0), R2, grad=False,
       int_cases=INTS),
    Op("msort", lambda m, a: m.msort(a), lambda a: np.sort(a, 0), R3),
    Op("topk", lambda m, a: a.topk(2), lambda a: np_topk(a, 2), R3 + [[(5,)]], int_cases=INTS),
    Op("topk_smallest_dim0", lambda m, a: m.topk(a, 3, dim=0, largest=False),
       lambda a: np_topk(a, 3, 0, largest=False), [[(4, 3)]]),
    Op("kthvalue", lambda m, a: a.kthvalue(2), lambda a: (np.sort(a)[..., 1], np.argsort(a)[..., 1]), R3,
       int_cases=INTS),
    Op("kthvalue_dim_keepdim", lambda m, a: m.kthvalue(a, 3, 0, True),
       lambda a: (np.sort(a, 0)[2:3], np.argsort(a, 0)[2:3]), R2),
    Op("median", lambda m, a: a.median(), np_lower_median, [[(3, 4)], [(3, 5)], [()]], int_cases=INTS),
    Op("median_dim", lambda m, a: m.median(a, 1), lambda a: (np_lower_median(a, 1),
                                                             np.argsort(a, 1)[:, (a.shape[1] - 1) // 2]),
       [[(3, 4)], [(3, 5)]], int_cases=INTS),
    Op("nanmedian", lambda m, a: a.nanmedian(), lambda a: np_lower_median(a[~np.isnan(a)]),
       [[(3, 4)], [with_nan((3, 4), [0, 3, 7])]]),
    Op("nanmedian_dim", lambda m, a: m.nanmedian(a, 0, keepdim=True),
       lambda a: (np.sort(a, 0)[1:2], np.argsort(a, 0)[1:2]), [[(3, 4)]]),
    # (mode's inputs have ties on purpose, where finite differences mean nothing: its gradient is checked
    # against torch's in TORCH)
    Op("mode", lambda m, a: a.mode(), np_mode, [[Float((3, 6), -2, 2, step=1.0)]], int_cases=[[Ints((3, 6), 0, 3)]],
       grad=False),
    Op("mode_dim0", lambda m, a: m.mode(a, 0, True), lambda a: tuple(r[None] for r in np_mode(a, 0)),
       [[Float((5, 3), -1, 1, step=1.0)]], grad=False),
    Op("quantile", lambda m, a: a.quantile(0.3), lambda a: np.quantile(a, 0.3), R3 + ZERO_D),
    Op("quantile_dim", lambda m, a: m.quantile(a, 0.75, dim=1, keepdim=True),
       lambda a: np.quantile(a, 0.75, 1, keepdims=True), R3),
    Op("quantile_q_tensor", lambda m, a: m.quantile(a, m.tensor([0.1, 0.5, 1.0], dtype=a.dtype), 0),
       lambda a: np.quantile(a, [0.1, 0.5, 1.0], 0), R2),
    Op("quantile_midpoint", lambda m, a: a.quantile(0.4, 1, interpolation="midpoint"),
       lambda a: np.quantile(a, 0.4, 1, method="midpoint"), R2),
    Op("quantile_nearest", lambda m, a: a.quantile(0.5, interpolation="nearest"),
       lambda a: np.quantile(a, 0.5, method="nearest"), [[(3, 3)]]),
    Op("quantile_lower_higher", lambda m, a: (a.quantile(0.7, 0, interpolation="lower"),
                                              a.quantile(0.7, 0, interpolation="higher")),
       lambda a: (np.quantile(a, 0.7, 0, method="lower"), np.quantile(a, 0.7, 0, method="higher")), R2),
    Op("nanquantile", lambda m, a: m.nanquantile(a, 0.25, 1), lambda a: np.nanquantile(a, 0.25, 1),
       [[with_nan((3, 5), [1, 2, 6])]], noncontig=False),
]


@pytest.mark.parametrize("op,case", [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS
                                     for i in range(len(op.cases))])
def test_op(dg, op, case):
    check_op(dg, op.cases[case], op.fn, op.np_fn, name=op.name, grad=op.grad, noncontig=op.noncontig, **op.check)


@pytest.mark.parametrize("op,case", [pytest.param(op, i, id=f"{op.name}-int{i}") for op in OPS
                                     for i in range(len(op.int_cases))])
def test_op_int(dg, op, case):
    """int64/bool inputs: forward only, exact; float results float32 as in torch."""
    check_op(dg, op.int_cases[case], op.fn, op.np_fn, name=op.name, grad=False, dtypes=("float32",),
             out_dtype="float32", noncontig=False)


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in OPS if op.gradgrad])
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], op.fn, name=op.name, **{k: v for k, v in op.check.items()
                                                             if k in ("low", "high", "away_from")})


@needs_torch
@pytest.mark.parametrize("op,case", [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS
                                     for i in range(len(op.cases)) if op.torch])
def test_op_matches_torch(dg, op, case):
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    check_torch(dg, op.fn, arrays, differentiable(specs, arrays) if op.grad else [], name=op.name)


# ---- against torch, exactly: ties, zeros, NaN, ints, bools, 0-d, empty ----

class T:
    """A call checked against torch: `fn(m, *tensors)` on numpy `inputs` (float arrays get requires_grad unless
    grad=False); exact=True compares float values and gradients bit for bit, exact="values" the values only."""

    def __init__(self, name, fn, *inputs, grad=True, exact=False, dtypes=("float64",)):
        self.name, self.fn, self.inputs = name, fn, [np.asarray(i) for i in inputs]
        self.grad, self.exact, self.dtypes = grad, exact, dtypes


TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 5.0], [0.0, 0.0, 1.0, 1.0]])
ZEROS = np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 1.5, -2.0, 4.0], [1.0, 2.0, 3.0, 0.0]])
NANS = np.array([[1.0, nan, 3.0, nan], [2.0, -1.0, 0.5, 4.0], [nan, 0.0, nan, 1.0]])
I = np.array([[3, 1, 2, 1], [0, -2, 5, 5]])
B = np.array([[True, False, True], [False, False, True]])
E = np.zeros((0, 3))
Z = np.array(2.5)
SMALL = np.random.default_rng(7).integers(0, 3, size=(4, 12)).astype(np.float64)     # many ties, n <= 16

TORCH = [
    # sum / mean / var family: dim forms, dtype rules, 0-d, empty
    T("sum_tuple_dims", lambda m, x: x.sum((0, 1)), TIES),
    T("sum_empty_tuple_keepdim", lambda m, x: m.sum(x, (), True), TIES),
    T("sum_none_keepdim", lambda m, x: m.sum(x, None, True), TIES),
    T("sum_0d_dim_keepdim", lambda m, x: x.sum(0, keepdim=True), Z),
    T("sum_int", lambda m, x: (x.sum(), x.sum(1), x.sum(0, dtype=m.float64), m.sum(x, dtype=m.float32)), I,
      exact=True),
    T("sum_bool", lambda m, x: (x.sum(), m.sum(x, 0, dtype=m.float32), x.sum(dtype=m.bool)), B, exact=True),
    T("sum_float_to_int", lambda m, x: x.sum(dtype=m.int64), TIES, grad=False, exact=True),
    T("sum_empty", lambda m, x: (x.sum(), x.sum(0), x.sum(1, True)), E),
    T("nansum_int_bool", lambda m, x, y: (m.nansum(x), y.nansum(), m.nansum(x, dtype=m.float64)), I, B, exact=True),
    T("nansum_nan", lambda m, x: (x.nansum(), m.nansum(x, 1), x.nansum(dtype=m.float32)), NANS),
    T("mean_int_dtype", lambda m, x: (x.mean(dtype=m.float64), m.mean(x, 1, dtype=m.float32)), I),
    T("mean_empty", lambda m, x: (x.mean(), x.mean(1)), E),
    T("nanmean_nan", lambda m, x: (x.nanmean(), m.nanmean(x, 1, True), m.nanmean(x, 0)), NANS),
    T("var_0d", lambda m, x: (x.var(correction=0), x.std(0, correction=0)), Z),
    T("var_std_correction", lambda m, x: (x.var(1, correction=0.5), m.std(x, (0, 1), correction=3)), TIES),
    # (torch's var/std with dim=() reduce every dim but their gradient is inf: compared with dim=None here)
    T("var_mean_std_mean", lambda m, x: (m.var_mean(x, 1, True, True), m.std_mean(x, None, correction=0)), TIES),
    T("var_mean_old_overload", lambda m, x: (m.var_mean(x, False), m.std_mean(x, True)), TIES),
    # prod: zeros decide the gradient
    T("prod_zeros", lambda m, x: (x.prod(), x.prod(1), m.prod(x, 0, True)), ZEROS, exact=True),
    T("prod_one_zero", lambda m, x: (x.prod(), x.prod(0)), np.array([[2.0, 0.0], [3.0, 4.0]]), exact=True),
    T("prod_int_bool", lambda m, x, y: (x.prod(), x.prod(1), y.prod(), y.prod(0, dtype=m.float64)), I, B,
      exact=True),
    T("prod_empty_0d", lambda m, x, z: (x.prod(), x.prod(0), z.prod(0, True), z.prod()), E, Z),
    # extrema: ties and NaN
    T("max_min_ties", lambda m, x: (x.max(), x.min(), x.max(1), m.min(x, 0, True)), TIES, exact=True),
    T("amax_amin_ties", lambda m, x: (x.amax(1), m.amin(x, (0, 1)), x.amax(()), m.amax(x, [])), TIES, exact=True),
    T("aminmax_ties", lambda m, x: tuple(m.aminmax(x)) + tuple(x.aminmax(dim=1)), TIES, exact=True),
    T("extrema_nan", lambda m, x: (x.max(1), x.min(0), x.amax(1), x.argmax(1), x.argmin(), x.max()), NANS),
    T("extrema_int_bool", lambda m, x, y: (x.max(1), x.amin(), y.max(0), y.min(), y.amax(1), m.aminmax(y)), I, B,
      exact=True),
    T("extrema_0d", lambda m, z: (z.max(0), z.amax(0, True), z.argmax(0), z.argmin(), m.aminmax(z, dim=0)), Z),
    T("extrema_empty_dim", lambda m, x: (x.amax(1), x.max(1), x.argmax(1), m.aminmax(x, dim=-1)), E),
    T("argmax_keepdim", lambda m, x: (x.argmax(keepdim=True), m.argmin(x, 1, True)), TIES, grad=False),
    T("logsumexp_int_bool", lambda m, x, y: (m.logsumexp(x, 1), y.logsumexp(0)), I, B),
    T("logsumexp_empty", lambda m, x: (x.logsumexp(0), x.logsumexp(1)), E),
    T("logsumexp_tuple_keepdim", lambda m, x: x.logsumexp((0, 1), True), TIES),
    # all / any / count_nonzero
    T("all_any", lambda m, x: (x.all(), x.any(), m.all(x, 1), m.any(x, (0, 1)), x.all(dim=(1,), keepdim=True),
                               x.any(()), m.all(x, None, True)), ZEROS, grad=False),
    T("all_any_int_bool_empty", lambda m, x, y, e: (m.all(x), y.any(0), m.all(y, 1, True), e.all(), e.any(0)),
      I, B, E, grad=False),
    T("count_nonzero", lambda m, x, y: (x.count_nonzero(), m.count_nonzero(x, 1), x.count_nonzero((0, 1)),
                                        y.count_nonzero(()), m.count_nonzero(y, dim=[0])), ZEROS, B, grad=False),
    # norms at kinks (torch's subgradients)
    T("norm_zero_vector", lambda m, x: tuple(x.norm(p) for p in (0, 0.5, 1, 1.5, 2, 3, inf, -inf, -1, "fro")),
      np.zeros(3), exact=True),
    T("norm_some_zeros", lambda m, x: tuple(m.norm(x, p, 1) for p in (0.5, 1, 1.5, 2, 3, inf, -inf, -2)),
      np.array([[0.0, 2.0, -1.0], [0.0, 0.0, 0.0]])),
    T("norm_inf_ties", lambda m, x: (x.norm(inf), x.norm(-inf, 1)), np.array([[2.0, -2.0, 1.0], [1.0, -1.0, 3.0]]),
      exact=True),
    T("norm_p0", lambda m, x: (x.norm(0), x.norm(0, 1, True)), ZEROS),
    T("norm_dims", lambda m, x: (x.norm(dim=()), m.norm(x, 2, [0]), x.norm(p=None), x.norm(True, 1),
                                 m.norm(x, "fro", None, True)), TIES),
    T("norm_nuc_empty", lambda m, x: (x.norm("nuc"), x.norm(1)), E),
    # scans
    T("cumsum_int_bool", lambda m, x, y: (x.cumsum(1), m.cumsum(y, 0), y.cumsum(1, dtype=m.float32)), I, B,
      exact=True),
    T("cumsum_0d_empty", lambda m, z, e: (z.cumsum(0), e.cumsum(0), e.cumsum(1)), Z, E),
    T("scans_float32", lambda m, x: (x.cumsum(1), x.cumprod(1), x.logcumsumexp(1)),
      np.random.default_rng(3).uniform(0.5, 1.5, (3, 50)), dtypes=("float32",), exact="values"),
    T("cumprod_zeros", lambda m, x: (x.cumprod(1), m.cumprod(x, 0)), ZEROS, exact=True),
    T("cumprod_int_bool", lambda m, x, y: (x.cumprod(1), y.cumprod(1), m.cumprod(x, 0, dtype=m.float64)), I, B,
      exact=True),
    T("logcumsumexp_inf", lambda m, x: x.logcumsumexp(1), np.array([[-inf, 0.0, -inf, 1.0], [inf, 2.0, -inf, inf]])),
    T("logcumsumexp_0d_empty", lambda m, z, e: (z.logcumsumexp(0), e.logcumsumexp(1)), Z, E),
    T("cummax_cummin_ties", lambda m, x: (x.cummax(1), m.cummin(x, 0), x.cummin(1)), TIES, exact=True),
    T("cummax_cummin_nan", lambda m, x: (x.cummax(1), x.cummin(1), m.cummax(x, 0)), NANS),
    T("cummax_int_bool_0d_empty", lambda m, x, y, z, e: (x.cummax(1), y.cummin(1), z.cummax(0), e.cummin(0)),
      I, B, Z, E, exact=True),
    # sorting: stable, NaN as the largest value
    T("sort_ties", lambda m, x: (x.sort(), x.sort(descending=True), m.sort(x, dim=0, stable=True), x.argsort(),
                                 m.argsort(x, 0, True), x.msort()), SMALL, exact=True),
    T("sort_nan", lambda m, x: (x.sort(1), m.sort(x, 1, descending=True), x.argsort(0), x.msort()), NANS),
    T("sort_int_bool", lambda m, x, y: (x.sort(), x.sort(0, True), y.sort(), y.sort(descending=True), y.argsort(),
                                        y.msort()), I, B, exact=True),
    T("sort_0d_empty", lambda m, z, e: (z.sort(), z.argsort(), z.msort(), e.sort(0), e.argsort(1), e.msort()), Z, E),
    T("topk_distinct", lambda m, x: (x.topk(3), m.topk(x, 2, 0, False), x.topk(1, largest=False)),
      np.random.default_rng(4).standard_normal((4, 6))),
    T("topk_nan", lambda m, x: (x.topk(2), x.topk(2, largest=False)), NANS),
    T("topk_k0_0d_empty", lambda m, x, z, e: (x.topk(0), z.topk(1), z.topk(0), e.topk(0, 0), e.topk(2, 1)),
      TIES, Z, E),
    T("kthvalue_distinct", lambda m, x: (x.kthvalue(2), m.kthvalue(x, 1, 0, True)),
      np.random.default_rng(5).standard_normal((4, 6))),
    T("kthvalue_nan_int_0d", lambda m, x, y, z: (x.kthvalue(2), x.kthvalue(1, 0), y.kthvalue(2), z.kthvalue(1)),
      NANS, I, Z),
    T("median_ties", lambda m, x: (x.median(), x.median(1), m.median(x, 0, True), x.nanmedian(), x.nanmedian(1)),
      SMALL, exact=True),
    T("median_nan", lambda m, x: (x.median(), x.median(1), x.nanmedian(), m.nanmedian(x, 1), x.nanmedian(0)), NANS),
    T("median_all_nan", lambda m, x: (x.nanmedian(), x.nanmedian(0), x.median(0)), np.array([nan, nan])),
    T("median_int_0d_empty", lambda m, x, z, e: (x.median(), x.median(1), x.nanmedian(), z.median(), z.median(0),
                                                 e.median(), e.median(1)), I, Z, E),
    T("mode_ties", lambda m, x: (x.mode(), m.mode(x, 0), x.mode(1, True)), SMALL, exact=True),
    T("mode_int_bool_0d", lambda m, y, b, z: (y.mode(), y.mode(0), b.mode(), z.mode()), I, B, Z),
    T("quantile_ties", lambda m, x: tuple(x.quantile(0.5, 1, interpolation=i) for i in
                                          ("linear", "lower", "higher", "midpoint", "nearest")), SMALL),
    T("quantile_round_half_even", lambda m, x: tuple(x.quantile(q, interpolation="nearest") for q in
                                                     (0.125, 0.375, 0.625, 0.875)), np.arange(5.0)),
    T("quantile_float32_ranks", lambda m, x: tuple(x.quantile(q, interpolation=i) for q in (0.1, 0.3, 0.7)
                                                   for i in ("lower", "nearest", "linear")),
      np.arange(11.0), dtypes=("float32", "float64")),
    T("quantile_shapes", lambda m, x: (m.quantile(x, m.tensor([0.2, 0.8], dtype=x.dtype), 1, True),
                                       x.quantile(m.tensor([0.5], dtype=x.dtype)),
                                       x.quantile(m.tensor([0.1, 0.9], dtype=x.dtype), keepdim=True),
                                       x.quantile(0.5, keepdim=True), x.quantile(m.tensor(0.5, dtype=x.dtype), 0),
                                       x.quantile(1), x.quantile(True, 0)), TIES),
    T("quantile_nan", lambda m, x: (x.quantile(0.5, 1), x.nanquantile(0.5, 1), x.nanquantile(0.3),
                                    m.nanquantile(x, 0.9, 0, interpolation="nearest")), NANS),
    T("quantile_0d", lambda m, z: (z.quantile(0.5), z.quantile(0.5, 0, True), z.nanquantile(0.2)), Z),
    # counting (no gradient)
    T("unique", lambda m, x: (m.unique(x), x.unique(return_inverse=True), x.unique(return_counts=True),
                              m.unique(x, True, True, True), x.unique(sorted=False)), TIES, grad=False),
    T("unique_nan_bool_0d", lambda m, x, b, z: (x.unique(return_inverse=True, return_counts=True), b.unique(),
                                                m.unique(z, return_inverse=True)), NANS, B, Z, grad=False),
    T("unique_dim", lambda m, x: (x.unique(dim=0, return_inverse=True, return_counts=True),
                                  m.unique(x, dim=1, return_inverse=True), x.unique(dim=-1)),
      np.array([[1, 2, 1, 2], [1, 2, 1, 0], [1, 2, 1, 2]]), grad=False),
    T("unique_dim_empty", lambda m, e: e.unique(dim=0, return_inverse=True, return_counts=True), E, grad=False),
    T("unique_consecutive", lambda m, x: (x.unique_consecutive(), m.unique_consecutive(x, True, True),
                                          x.unique_consecutive(return_counts=True, dim=0),
                                          x.unique_consecutive(return_inverse=True, dim=1)),
      np.array([[3, 3, 1, 1], [3, 3, 1, 1], [2, 2, 2, 1]]), grad=False),
    T("unique_consecutive_0d_empty_nan", lambda m, z, e, x: (z.unique_consecutive(return_inverse=True),
                                                             e.unique_consecutive(return_counts=True),
                                                             x.unique_consecutive()), Z, E, NANS, grad=False),
    T("histc", lambda m, x: (x.histc(), m.histc(x, 4), x.histc(bins=3, min=0, max=2), x.histc(5, -1, 1.5),
                             x.histc(4, 1.5, 1.5)), TIES, grad=False, dtypes=("float32", "float64")),
    T("histc_edges", lambda m, x: (x.histc(10, 0.0, 1.0), x.histc(7, 0.1, 0.8), x.histc(3)),
      np.linspace(0.0, 1.0, 31), grad=False, dtypes=("float32", "float64")),
    T("histc_constant_empty", lambda m, x, e: (x.histc(4), e.histc(3), e.histc(2, 0, 1)), np.ones(3), E,
      grad=False),
    T("bincount", lambda m, i, w: (m.bincount(i), i.bincount(minlength=7), m.bincount(i, w), i.bincount(w.float()),
                                   i.bincount(w.long()), m.bincount(i, i.bool())),
      np.array([1, 3, 1, 0, 5]), np.array([0.5, 1.0, 2.0, -1.0, 3.0]), grad=False),
    T("bincount_empty", lambda m, i: (m.bincount(i), i.bincount(minlength=3)), np.zeros(0, np.int64), grad=False),
]


def _weights(shape, dtype_name, m):
    """A cotangent of distinct, exactly representable weights, so the element a gradient lands on shows."""
    w = np.asarray((np.arange(int(np.prod(shape))) % 13 + 1.0).reshape(shape) / 4)
    return make_tensor(m, w, dtype_name, False)


def _flatten(out, acc):
    """Tensors in order, each (named) tuple announced by ("group", its type name, its length)."""
    if isinstance(out, tuple):
        acc.append(("group", type(out).__name__, len(out)))
        for o in out:
            _flatten(o, acc)
    else:
        acc.append(out)
    return acc


def _run_call(m, case, dtype):
    tensors = [make_tensor(m, a, dtype, case.grad and is_float_array(a)) for a in case.inputs]
    flat = _flatten(case.fn(m, *tensors), [])
    grads = []
    if case.grad:
        loss = None
        for o in flat:
            if not isinstance(o, tuple) and o.is_floating_point() and o.requires_grad and o.numel():
                term = (o * _weights(tuple(o.shape), dtype, m)).sum()
                loss = term if loss is None else loss + term
        if loss is not None:
            loss.backward()
        grads = [None if t.grad is None else to_numpy(t.grad) for t in tensors if t.requires_grad]
    return flat, grads


def _compare(got, want, exact, dtype, what):
    """Equal (exact=True: bit for bit, NaN where torch has NaN); floats within a few ulps of their dtype."""
    if exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
    elif got.dtype.kind == "f":
        rtol = 1e-12 if dtype == "float64" else 2e-6
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@needs_torch
@pytest.mark.parametrize("case", TORCH, ids=[c.name for c in TORCH])
def test_matches_torch_exactly(dg, case):
    for dtype in case.dtypes:
        ours, our_grads = _run_call(dg, case, dtype)
        theirs, their_grads = _run_call(torch, case, dtype)
        assert len(ours) == len(theirs), f"{case.name}: {len(ours)} results, torch {len(theirs)}"
        for k, (o, t) in enumerate(zip(ours, theirs)):
            what = f"{case.name} {dtype} result {k}"
            if isinstance(t, tuple):                          # a (named) tuple of results starts here
                assert o == t, f"{what}: {o}, torch {t}"
                continue
            assert tuple(o.shape) == tuple(t.shape), f"{what}: shape {tuple(o.shape)}, torch {tuple(t.shape)}"
            assert str(o.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{what}: {o.dtype}, torch {t.dtype}"
            _compare(to_numpy(o), to_numpy(t), bool(case.exact), str(t.dtype).split(".")[-1], what)
        for k, (g, tg) in enumerate(zip(our_grads, their_grads)):
            shape = case.inputs[[i for i, a in enumerate(case.inputs) if is_float_array(a)][k]].shape
            g = np.zeros(shape) if g is None else g
            tg = np.zeros(shape) if tg is None else tg
            _compare(g, tg, case.exact is True, dtype, f"{case.name} {dtype}: gradient of input {k}")


# ---- errors: the exception type torch raises ----

X = lambda m: m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])                    # noqa: E731
XI = lambda m: m.tensor([[1, 2, 3], [4, 5, 6]])                               # noqa: E731
XB = lambda m: m.tensor([True, False])                                        # noqa: E731
XE = lambda m: m.ones(0, 3)                                                    # noqa: E731

ERRORS = [
    ("sum_dim_float", lambda m: X(m).sum(1.0)),
    ("sum_dim_bool", lambda m: X(m).sum(True)),
    ("sum_dim_range", lambda m: X(m).sum(5)),
    ("sum_dims_repeat", lambda m: X(m).sum((0, 0))),
    ("sum_dims_range", lambda m: X(m).sum((0, 5))),
    ("mean_int", lambda m: XI(m).mean()),
    ("mean_bool", lambda m: XB(m).mean()),
    ("mean_dtype_int", lambda m: X(m).mean(dtype=m.int64)),
    ("mean_dim_range", lambda m: X(m).mean(-3)),
    ("nanmean_int", lambda m: XI(m).nanmean()),
    ("nanmean_int_dtype", lambda m: XI(m).nanmean(dtype=m.float64)),
    ("var_int", lambda m: XI(m).var()),
    ("std_int", lambda m: XI(m).std(1)),
    ("var_both_corrections", lambda m: m.var(X(m), 1, unbiased=True, correction=0)),
    ("var_mean_int", lambda m: m.var_mean(XI(m))),
    ("prod_tuple_dim", lambda m: X(m).prod((0,))),
    ("prod_dim_range", lambda m: X(m).prod(2)),
    ("max_empty", lambda m: XE(m).max()),
    ("min_empty_dim", lambda m: XE(m).min(0)),
    ("max_dim_float", lambda m: X(m).max(1.0)),
    ("amax_empty", lambda m: XE(m).amax()),
    ("amax_empty_dim", lambda m: XE(m).amax(0)),
    ("amin_empty_dims", lambda m: XE(m).amin((0, 1))),
    ("amax_dim_float", lambda m: X(m).amax(1.5)),
    ("aminmax_empty", lambda m: m.aminmax(XE(m))),
    ("aminmax_empty_dim", lambda m: XE(m).aminmax(dim=0)),
    ("argmax_empty", lambda m: XE(m).argmax()),
    ("argmin_empty_dim", lambda m: XE(m).argmin(0)),
    ("argmax_bool", lambda m: XB(m).argmax()),
    ("argmin_bool", lambda m: m.argmin(XB(m), 0)),
    ("argmax_tuple_dim", lambda m: X(m).argmax((0,))),
    ("logsumexp_no_dim", lambda m: m.logsumexp(X(m))),
    ("logsumexp_dim_range", lambda m: X(m).logsumexp(2)),
    ("logsumexp_dim_none", lambda m: m.logsumexp(X(m), None)),
    ("argmax_bool_tuple_dim", lambda m: XB(m).argmax((0,))),
    ("median_bool_tuple_dim", lambda m: XB(m).median((0,))),
    ("quantile_int_tuple_dim", lambda m: XI(m).quantile(0.5, (0,))),
    ("quantile_int_q_list", lambda m: XI(m).quantile([0.5])),
    ("count_nonzero_repeat", lambda m: X(m).count_nonzero((1, 1))),
    ("any_dim_range", lambda m: X(m).any(2)),
    ("norm_int", lambda m: XI(m).norm()),
    ("norm_bool", lambda m: XB(m).norm(1)),
    ("norm_dtype_int", lambda m: X(m).norm(dtype=m.int64)),
    ("norm_dtype_narrowing", lambda m: X(m).double().norm(dtype=m.float32)),
    ("norm_int_with_dtype", lambda m: XI(m).norm(dtype=m.float64)),
    ("norm_inf_empty", lambda m: XE(m).norm(inf)),
    ("norm_inf_empty_dim", lambda m: XE(m).norm(-inf, 0)),
    ("norm_fro_three_dims", lambda m: m.ones(2, 3, 4).norm("fro", (0, 1, 2))),
    ("norm_nuc_3d", lambda m: m.ones(2, 3, 4).norm("nuc")),
    ("norm_nuc_one_dim", lambda m: X(m).norm("nuc", 1)),
    ("norm_nuc_same_dims", lambda m: X(m).norm("nuc", (0, 0))),
    ("norm_nuc_0d", lambda m: m.tensor(2.0).norm("nuc")),
    ("norm_unknown_order", lambda m: X(m).norm("foo")),
    ("norm_dims_repeat", lambda m: X(m).norm(2, (-1, 1))),
    ("cumsum_no_dim", lambda m: X(m).cumsum()),
    ("cumsum_tuple_dim", lambda m: X(m).cumsum((0,))),
    ("cumsum_dim_float", lambda m: X(m).cumsum(1.0)),
    ("cumsum_dim_range", lambda m: X(m).cumsum(2)),
    ("cumsum_dtype_bool", lambda m: XB(m).cumsum(0, dtype=m.bool)),
    ("cumprod_dim_none", lambda m: m.cumprod(X(m), None)),
    ("logcumsumexp_int", lambda m: XI(m).logcumsumexp(1)),
    ("cummax_dim_range", lambda m: X(m).cummax(-3)),
    ("sort_dim_range", lambda m: X(m).sort(2)),
    ("argsort_dim_float", lambda m: X(m).argsort(0.5)),
    ("topk_k_large", lambda m: X(m).topk(4)),
    ("topk_k_negative", lambda m: X(m).topk(-1)),
    ("topk_k_float", lambda m: X(m).topk(1.0)),
    ("topk_bool", lambda m: XB(m).topk(1)),
    ("topk_0d_k2", lambda m: m.tensor(1.0).topk(2)),
    ("kthvalue_k0", lambda m: X(m).kthvalue(0)),
    ("kthvalue_k_large", lambda m: X(m).kthvalue(4)),
    ("kthvalue_bool", lambda m: XB(m).kthvalue(1)),
    ("kthvalue_empty_dim", lambda m: XE(m).kthvalue(1, 0)),
    ("median_bool", lambda m: XB(m).median()),
    ("median_bool_dim", lambda m: XB(m).median(0)),
    ("median_empty_dim", lambda m: XE(m).median(0)),
    ("nanmedian_bool", lambda m: XB(m).nanmedian()),
    ("mode_empty_dim", lambda m: XE(m).mode(0)),
    ("mode_dim_range", lambda m: X(m).mode(3)),
    ("quantile_int", lambda m: XI(m).quantile(0.5)),
    ("quantile_bool", lambda m: XB(m).quantile(0.5)),
    ("quantile_q_large", lambda m: X(m).quantile(1.5)),
    ("quantile_q_negative", lambda m: X(m).quantile(-0.1)),
    ("quantile_q_tensor_range", lambda m: X(m).quantile(m.tensor([0.5, 2.0]))),
    ("quantile_q_dtype", lambda m: X(m).quantile(m.tensor([0.5], dtype=m.float64))),
    ("quantile_q_2d", lambda m: X(m).quantile(m.tensor([[0.5]]))),
    ("quantile_q_list", lambda m: X(m).quantile([0.5])),
    ("quantile_interpolation", lambda m: X(m).quantile(0.5, interpolation="cubic")),
    ("quantile_empty", lambda m: XE(m).quantile(0.5)),
    ("quantile_dim_range", lambda m: X(m).quantile(0.5, 2)),
    ("nanquantile_int", lambda m: XI(m).nanquantile(0.5)),
    ("unique_dim_0d", lambda m: m.tensor(3).unique(dim=0)),
    ("unique_dim_range", lambda m: X(m).unique(dim=2)),
    ("unique_dim_other_empty", lambda m: XE(m).unique(dim=1)),
    ("histc_int", lambda m: XI(m).histc()),
    ("histc_bool", lambda m: XB(m).histc()),
    ("histc_bins_zero", lambda m: X(m).histc(0)),
    ("histc_bins_float", lambda m: X(m).histc(2.5)),
    ("histc_min_gt_max", lambda m: X(m).histc(4, 3, 1)),
    ("histc_nan_range", lambda m: m.tensor([1.0, nan]).histc(4)),
    ("histc_inf_range", lambda m: m.tensor([1.0, inf]).histc(4)),
    ("bincount_float", lambda m: m.bincount(m.tensor([1.0]))),
    ("bincount_bool", lambda m: m.bincount(XB(m))),
    ("bincount_2d", lambda m: m.bincount(m.tensor([[1]]))),
    ("bincount_negative", lambda m: m.bincount(m.tensor([-1, 2]))),
    ("bincount_minlength", lambda m: m.bincount(m.tensor([1]), minlength=-1)),
    ("bincount_weights_length", lambda m: m.bincount(m.tensor([1, 2]), m.tensor([1.0]))),
    ("nontensor_sum", lambda m: m.sum([1.0, 2.0])),
    ("nontensor_sort", lambda m: m.sort(3)),
    ("nontensor_cumsum", lambda m: m.cumsum([1, 2], 0)),
]


def _exception(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001  the type is what is compared
        return type(err)
    return None


@needs_torch
@pytest.mark.parametrize("name,fn", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_types_are_torchs(dg, name, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _exception(lambda: fn(torch))
    assert want is not None, f"{name}: torch does not raise"
    got = _exception(lambda: fn(dg))
    assert got is not None, f"{name}: dyngrad does not raise (torch raises {want.__name__})"
    assert issubclass(got, want) or issubclass(want, got), f"{name}: dyngrad raises {got.__name__}, torch " \
                                                           f"{want.__name__}"


# ---- the rest: warnings, out=, in-place, named results, signatures, second derivatives ----

@pytest.mark.parametrize("call", [lambda m: m.tensor(2.0).var(), lambda m: m.ones(1, 3).std(0),
                                  lambda m: m.var_mean(m.ones(2, 3), correction=6),
                                  lambda m: m.std_mean(m.ones(0))])
def test_no_degrees_of_freedom_warns(dg, call):
    """torch warns (and returns nan) when the correction leaves no degrees of freedom."""
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        out = call(dg)
    assert math.isnan(as_list(out)[0].reshape(-1)[0].item())


def test_out_keyword(dg):
    x = dg.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    values, indices = dg.empty(2, 3), dg.empty(2, 3, dtype=dg.int64)
    r = dg.sort(x, 1, out=(values, indices))
    assert r.values is values and r.indices is indices and values.tolist() == [[1, 2, 3], [0, 4, 5]]
    total = dg.empty(2)
    assert dg.cumsum(x, 1, out=dg.empty(2, 3))[1].tolist() == [0, 5, 9]
    assert dg.prod(x, 1, out=total) is total and total.tolist() == [6, 0]
    n = dg.empty(())
    assert dg.norm(x, 1, None, False, n) is n and n.item() == 15.0
    q = dg.empty(())
    assert dg.quantile(x, 0.5, out=q) is q and q.item() == 2.5
    with pytest.raises(RuntimeError):                        # an int result cannot go into a bool tensor
        dg.argmax(x, out=dg.empty((), dtype=dg.bool))


def test_inplace_scans(dg):
    x = dg.tensor([[1.0, 2.0, 3.0], [0.5, 2.0, 4.0]])
    y = x.clone()
    assert y.cumsum_(1) is y and y.tolist() == [[1, 3, 6], [0.5, 2.5, 6.5]]
    assert y.cumprod_(0) is y and y.tolist() == [[1, 3, 6], [0.5, 7.5, 39]]
    leaf = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = leaf * 1
    z.cumprod_(0)
    z.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), [1 + 2 + 6, 1 + 3, 2])


def test_named_results(dg):
    x = dg.tensor([[3.0, 1.0], [0.0, 5.0]])
    for result, name, fields in [(x.sort(), "sort", ("values", "indices")), (x.topk(1), "topk", None),
                                 (x.kthvalue(1), "kthvalue", None), (x.median(0), "median", None),
                                 (x.nanmedian(0), "nanmedian", None), (x.mode(), "mode", None),
                                 (x.cummax(0), "cummax", None), (x.cummin(0), "cummin", None),
                                 (x.max(1), "max", None), (x.min(1), "min", None),
                                 (x.aminmax(), "aminmax", ("min", "max"))]:
        assert type(result).__name__ == name
        assert result._fields == (fields or ("values", "indices"))
    assert type(dg.var_mean(x)) is tuple and type(dg.unique(x, return_counts=True)) is tuple


@pytest.mark.parametrize("n", [5, 16, 17, 100, 255, 256, 3000])
def test_unstable_and_stable_sort(dg, n):
    """sort(stable=False) orders by the values alone (Note [Sorting by keys] in kernels/sort.cpp: introsort below
    256 elements, not stable): distinct values come in numpy's order; among ties any order, as long as it is a
    permutation with the values sorted and NaN last (first descending, as torch). stable=True keeps equal values
    in their order in both directions, as numpy's stable argsort; argsort likewise."""
    rng = np.random.default_rng(n)
    distinct = (rng.permutation(n) * 0.5 - 7).astype(np.float32)
    for descending in (False, True):
        values, indices = dg.sort(dg.tensor(distinct), descending=descending)
        want = np.argsort(-distinct if descending else distinct, kind="stable")
        np.testing.assert_array_equal(indices.numpy(), want)
        np.testing.assert_array_equal(values.numpy(), distinct[want])
    ties = rng.integers(0, 4, n).astype(np.float64)
    ties[rng.integers(0, n, 2)] = np.nan
    for descending in (False, True):
        key = np.where(np.isnan(ties), -9.0, -ties) if descending else np.where(np.isnan(ties), 9.0, ties)  # NaN: ends
        values, indices = dg.sort(dg.tensor(ties), 0, descending)
        got = indices.numpy()
        np.testing.assert_array_equal(np.sort(got), np.arange(n))
        np.testing.assert_array_equal(values.numpy(), ties[got])
        assert (np.diff(key[got]) >= 0).all(), "not sorted"
        stable_order = np.argsort(key, kind="stable")
        for result in (dg.sort(dg.tensor(ties), descending=descending, stable=True).indices,
                       dg.argsort(dg.tensor(ties), descending=descending, stable=True)):
            np.testing.assert_array_equal(result.numpy(), stable_order)


@pytest.mark.parametrize("order", ["random", "ascending", "descending"])
def test_topk_of_long_rows(dg, order):
    """topk of rows of at least 64 with 4k <= n selects in one pass (select_first in kernels/sort.cpp): the first k
    of numpy's stable order (ties: the earlier index; NaN the largest), for inputs where nearly every element
    replaces a candidate (a monotone row, which fills and compacts the candidate buffer many times), along the last
    and a middle dim, float32, float64 and int64."""
    rng = np.random.default_rng(7)
    n = 5000
    base = {"random": rng.integers(-50, 50, n), "ascending": np.arange(n) // 3,
            "descending": -(np.arange(n) // 3)}[order].astype(np.float64)
    nan_row = base.copy()
    nan_row[rng.integers(0, n, 9)] = np.nan
    for dtype in (np.float32, np.float64, np.int64):
        rows = np.stack([base, nan_row]) if dtype != np.int64 else np.stack([base, base[::-1]])
        a = rows.astype(dtype)
        for k in (1, 5, 300, 1250):
            for largest in (True, False):
                key = np.where(np.isnan(a), np.inf, a) if dtype != np.int64 else a
                want = np.argsort(-key if largest else key, axis=1, kind="stable")[:, :k]
                if dtype != np.int64 and largest:   # NaN first, in their order
                    want = np.argsort(np.where(np.isnan(a), -np.inf, -a), axis=1, kind="stable")[:, :k]
                values, indices = dg.topk(dg.tensor(a), k, 1, largest)
                np.testing.assert_array_equal(indices.numpy(), want, err_msg=f"{dtype} k={k} largest={largest}")
                np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, want, 1))
                middle = dg.topk(dg.tensor(np.ascontiguousarray(a.T[None])), k, 1, largest).indices.numpy()
                np.testing.assert_array_equal(middle[0].T, want)


def test_float32_logcumsumexp_rounds_the_float64_scan(dg):
    """float32 logcumsumexp along contiguous rows of finite values goes by the running max with float64 exps and
    logs that vectorise (logcumsumexp_row_f32 in kernels/scan.cpp), other rows by log_add_exp's scan: every element
    within half an ulp of float64's logaddexp.accumulate (both engines: correctly rounded but in float64's rarest
    ties), over long random, rising and falling rows (the max changing at every step, or never), and rows with
    infinities and NaN."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 3000)) * 30).astype(np.float32)
    x[2], x[3] = np.sort(x[2]), np.sort(x[3])[::-1]
    x[4, 100], x[5, 7], x[5, 2000] = np.inf, -np.inf, np.nan
    got = dg.logcumsumexp(dg.tensor(x), 1).numpy().astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.logaddexp.accumulate(x.astype(np.float64), 1)
    special = ~np.isfinite(want)
    np.testing.assert_array_equal(got[special], want[special])
    ulps = np.abs(got[~special] - want[~special]) / np.spacing(np.abs(want[~special]).astype(np.float32))
    assert ulps.max() <= 0.5 + 1e-6, ulps.max()


def test_gradient_node_names(dg):
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert x.cumsum(0).grad_fn.name() == "CumsumBackward"
    assert x.cumprod(0).grad_fn.name() == "CumprodBackward"
    assert x.logcumsumexp(0).grad_fn.name() == "LogcumsumexpBackward"
    assert x.median().grad_fn.name() == "MedianBackward"
    assert x.sort().values.grad_fn.name() == "GatherBackward"


@needs_torch
@pytest.mark.parametrize("name,fn,value", [
    ("cumsum", lambda m, x: m.cumsum(x, 1), None),
    ("cumprod_zeros", lambda m, x: m.cumprod(x, 1), ZEROS),
    ("logcumsumexp", lambda m, x: m.logcumsumexp(x, 0), None),
    ("prod_zeros", lambda m, x: x.prod(1), ZEROS),
    ("norm_p3", lambda m, x: x.norm(3, 1), None),
    ("quantile", lambda m, x: x.quantile(0.3, 1), None),
    ("sort", lambda m, x: x.sort(1).values, None),
])
def test_second_derivatives_match_torch(dg, name, fn, value):
    """Gradients of gradients, equal to torch's (zeros included)."""
    a = np.random.default_rng(11).standard_normal((3, 4)) if value is None else value
    results = []
    for m in (dg, torch):
        x = make_tensor(m, a, "float64", True)
        w = _weights(tuple(fn(m, x).shape), "float64", m)
        (g,) = m.autograd.grad((fn(m, x) * w).sum(), x, create_graph=True)
        h = m.autograd.grad((g * g).sum(), x, allow_unused=True)[0] if g.requires_grad else None
        results.append((to_numpy(g), np.zeros(a.shape) if h is None else to_numpy(h)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-11)


def test_nuclear_norm_second_derivative(dg):
    """norm('nuc') is the sum of linalg.svdvals, differentiable to any order: its second derivative against central
    finite differences of its (reverse-mode) gradient."""
    a = np.random.default_rng(2).standard_normal((3, 3))
    w = np.random.default_rng(3).standard_normal((3, 3))

    def grad_dot_w(v):
        x = dg.tensor(v, requires_grad=True)
        (g,) = dg.autograd.grad(x.norm("nuc"), x, create_graph=True)
        return g, (g * dg.tensor(w)).sum()

    _, gw = grad_dot_w(a)
    x = dg.tensor(a, requires_grad=True)
    (g,) = dg.autograd.grad(x.norm("nuc"), x, create_graph=True)
    (h,) = dg.autograd.grad((g * dg.tensor(w)).sum(), x)
    e = np.zeros(9)
    fd = np.zeros(9)
    for i in range(9):
        e[:] = 0
        e[i] = 1e-6
        fd[i] = (float(grad_dot_w(a + e.reshape(3, 3))[1]) - float(grad_dot_w(a - e.reshape(3, 3))[1])) / 2e-6
    np.testing.assert_allclose(h.numpy().reshape(-1), fd, rtol=1e-5, atol=1e-7)


SIGNATURES = {
    # torch's parameters (names, in order; after * keyword-only), as documented
    "sum": "input, dim=None, keepdim=False, *, dtype=None",
    "nansum": "input, dim=None, keepdim=False, *, dtype=None",
    "mean": "input, dim=None, keepdim=False, *, dtype=None",
    "nanmean": "input, dim=None, keepdim=False, *, dtype=None",
    "var": "input, dim=None, unbiased=None, keepdim=False, *, correction=None",
    "var_mean": "input, dim=None, unbiased=None, keepdim=False, *, correction=None",
    "prod": "input, dim=None, keepdim=False, *, dtype=None",
    "amax": "input, dim=(), keepdim=False", "argmax": "input, dim=None, keepdim=False",
    "aminmax": "input, *, dim=None, keepdim=False", "logsumexp": "input, dim, keepdim=False",
    "all": "input, dim=None, keepdim=False", "count_nonzero": "input, dim=None",
    "norm": "input, p='fro', dim=None, keepdim=False, out=None, dtype=None",
    "cumsum": "input, dim, *, dtype=None", "cummax": "input, dim", "logcumsumexp": "input, dim",
    "sort": "input, dim=-1, descending=False, *, stable=False",
    "argsort": "input, dim=-1, descending=False, *, stable=False", "msort": "input",
    "topk": "input, k, dim=-1, largest=True, sorted=True", "kthvalue": "input, k, dim=-1, keepdim=False",
    "median": "input, dim=None, keepdim=False", "mode": "input, dim=-1, keepdim=False",
    "quantile": "input, q, dim=None, keepdim=False, *, interpolation='linear'",
    "unique": "input, sorted=True, return_inverse=False, return_counts=False, dim=None",
    "unique_consecutive": "input, return_inverse=False, return_counts=False, dim=None",
    "histc": "input, bins=100, min=0, max=0", "bincount": "input, weights=None, minlength=0",
}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures(dg, name):
    params = [p for p in inspect.signature(getattr(dg, name)).parameters.values() if p.name != "out"
              or name == "norm"]
    text, star = [], False
    for p in params:
        if p.kind == p.KEYWORD_ONLY and not star:
            text.append("*")
            star = True
        text.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    assert ", ".join(text) == SIGNATURES[name]
    method = getattr(dg.Tensor, name, None)
    if method is not None and name != "norm":
        assert list(inspect.signature(method).parameters)[1:] == [p.name for p in params][1:]


def test_tensor_norm_signature(dg):
    assert str(inspect.signature(dg.Tensor.norm)) == "(self, p='fro', dim=None, keepdim=False, dtype=None)"


@needs_torch
def test_topk_kthvalue_ties(dg):
    """With ties, topk and kthvalue return torch's values; their indices point at equal values, the first ones in
    the input (torch's quickselect leaves the choice unspecified: the module docstring of _api/ops/sorting.py)."""
    a = SMALL
    for call, dim in ((lambda m, x: x.topk(5), 1), (lambda m, x: x.topk(4, 0, largest=False), 0),
                      (lambda m, x: x.kthvalue(6, 1, True), 1), (lambda m, x: x.kthvalue(2, 0, True), 0)):
        values, indices = call(dg, dg.tensor(a))
        t_values, _ = call(torch, torch.tensor(a))
        np.testing.assert_array_equal(values.numpy(), t_values.numpy())
        np.testing.assert_array_equal(np.take_along_axis(a, indices.numpy(), dim), values.numpy())
    np.testing.assert_array_equal(dg.tensor(a).topk(5).indices.numpy(), np_topk(a, 5)[1])
    np.testing.assert_array_equal(dg.tensor(a).kthvalue(2, 0).indices.numpy(), np.argsort(a, 0, kind="stable")[1])


@needs_torch
@pytest.mark.parametrize("seed", range(8))
def test_ties_pick_torchs_elements(dg, seed):
    """Random small slices (n <= 16) full of ties: sort, argsort, median, nanmedian, mode, cummax, cummin, unique
    and the quantiles give torch's values and indices exactly."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 6, size=int(rng.integers(1, 4))))
    a = rng.integers(-2, 3, size=shape).astype(np.float64)
    d = int(rng.integers(-len(shape), len(shape)))
    calls = [lambda m, x: x.sort(d), lambda m, x: x.sort(d, descending=True), lambda m, x: x.argsort(d, True),
             lambda m, x: x.median(d), lambda m, x: x.nanmedian(d, True), lambda m, x: x.mode(d),
             lambda m, x: x.cummax(d), lambda m, x: x.cummin(d), lambda m, x: x.median(),
             lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
             lambda m, x: x.quantile(0.37, d, interpolation="nearest"), lambda m, x: x.quantile(0.5, d)]
    for k, call in enumerate(calls):
        ours = _flatten(call(dg, dg.tensor(a)), [])
        theirs = _flatten(call(torch, torch.tensor(a)), [])
        for o, t in zip(ours, theirs):
            if not isinstance(t, tuple):
                np.testing.assert_array_equal(to_numpy(o), to_numpy(t), err_msg=f"call {k}, shape {shape}, dim {d}")


def test_dim_empty_tuple_is_every_dim(dg):
    """dim=() reduces every dim, as dim=None (torch 2.x); the gradients are the same too (torch's var/std over
    dim=() give inf gradients, a torch bug not reproduced)."""
    a = np.random.default_rng(1).standard_normal((3, 4))
    for name in ("sum", "mean", "nansum", "nanmean", "var", "std", "amax", "amin", "logsumexp", "norm"):
        results = []
        for dim in ((), None):
            x = dg.tensor(a, requires_grad=True)
            if name == "norm":
                out = x.norm(dim=dim)
            elif name == "logsumexp":
                out = x.logsumexp(dim if dim is not None else (0, 1))
            else:
                out = getattr(x, name)(dim)
            out.backward()
            results.append((out.item(), x.grad.numpy()))
        assert results[0][0] == results[1][0], name
        np.testing.assert_array_equal(results[0][1], results[1][1], err_msg=name)


# ---- DYNGRAD_LONG=1: every op over a grid of shapes, dtypes, dims and keepdim, against torch ----

LONG = os.environ.get("DYNGRAD_LONG", "") not in ("", "0")

GRID_OPS = {
    "sum": lambda m, x, d, k: m.sum(x, d, k), "nansum": lambda m, x, d, k: m.nansum(x, d, k),
    "mean": lambda m, x, d, k: m.mean(x, d, k), "nanmean": lambda m, x, d, k: m.nanmean(x, d, k),
    "var": lambda m, x, d, k: m.var(x, d, keepdim=k), "std": lambda m, x, d, k: m.std(x, d, correction=0, keepdim=k),
    "var_mean": lambda m, x, d, k: m.var_mean(x, d, keepdim=k),
    "prod": lambda m, x, d, k: m.prod(x, d, k) if d is not None else m.prod(x),
    "amax": lambda m, x, d, k: m.amax(x, () if d is None else d, k), "argmin": lambda m, x, d, k: m.argmin(x, d, k),
    "max": lambda m, x, d, k: m.max(x, d, k) if d is not None else m.max(x),
    "all": lambda m, x, d, k: m.all(x, d, k), "any": lambda m, x, d, k: m.any(x, d, k),
    "count_nonzero": lambda m, x, d, k: m.count_nonzero(x, d), "logsumexp": lambda m, x, d, k: m.logsumexp(x, d, k),
    "norm": lambda m, x, d, k: m.norm(x, 3, d, k), "norm_inf": lambda m, x, d, k: m.norm(x, inf, d, k),
    "aminmax": lambda m, x, d, k: m.aminmax(x, dim=d, keepdim=k), "cumsum": lambda m, x, d, k: m.cumsum(x, d),
    "cumprod": lambda m, x, d, k: m.cumprod(x, d), "cummax": lambda m, x, d, k: m.cummax(x, d),
    "logcumsumexp": lambda m, x, d, k: m.logcumsumexp(x, d), "sort": lambda m, x, d, k: m.sort(x, d, k),
    "argsort": lambda m, x, d, k: m.argsort(x, d, k), "topk": lambda m, x, d, k: m.topk(x, 1, d, k),
    "kthvalue": lambda m, x, d, k: m.kthvalue(x, 1, d, k),
    "median": lambda m, x, d, k: m.median(x, d, k) if d is not None else m.median(x),
    "nanmedian": lambda m, x, d, k: m.nanmedian(x, d, k) if d is not None else m.nanmedian(x),
    "mode": lambda m, x, d, k: m.mode(x, d, k), "quantile": lambda m, x, d, k: m.quantile(x, 0.4, d, k),
    "nanquantile": lambda m, x, d, k: m.nanquantile(x, 0.4, d, k), "msort": lambda m, x, d, k: m.msort(x),
    "unique": lambda m, x, d, k: m.unique(x, return_inverse=True, return_counts=k, dim=d),
    "unique_consecutive": lambda m, x, d, k: m.unique_consecutive(x, return_inverse=k, return_counts=True, dim=d),
    "histc": lambda m, x, d, k: m.histc(x, 5),
}
# Known, documented differences (skipped): which of equal values topk/kthvalue pick; the order of ties in slices
# longer than 16 (torch's unstable introsort: sort, argsort, mode); NaNs in mode and unique(dim=) (torch's
# unstable sorts with NaN); torch's logsumexp over dim=() fails without keepdim; torch's cummax skips the dim
# check on empty inputs.
TIE_ORDER = {"topk", "kthvalue", "sort", "argsort", "mode"}


@pytest.mark.skipif(not LONG or torch is None, reason="exhaustive grid: set DYNGRAD_LONG=1 (needs torch)")
@pytest.mark.parametrize("name", sorted(GRID_OPS))
def test_grid_against_torch(dg, name):
    fn = GRID_OPS[name]
    rng = np.random.default_rng(seed_of("grid", name))
    differ = []
    for shape in [(), (0,), (3,), (2, 3), (3, 0), (2, 1, 4), (17,)]:
        for dt in (np.float64, np.float32, np.int64, np.bool_):
            for d in (None, (), 0, -1, 1, (0,), (0, 1), [1, -1], 2, (0, 0)):
                for k in (False, True):
                    a = rng.integers(-2, 3, size=shape).astype(dt)
                    if dt is np.float64 and a.size > 2:
                        a.reshape(-1)[1] = nan
                    has_nan = dt is np.float64 and a.size > 2
                    if (name == "logsumexp" and d == ()) or (name == "cummax" and 0 in shape) or (
                            has_nan and (name == "mode" or name == "unique" and d is not None)):
                        continue
                    got, want = [], []
                    for m, acc in ((dg, got), (torch, want)):
                        try:
                            acc.extend(_flatten(fn(m, make_tensor(m, a, np.dtype(dt).name, False), d, k), []))
                        except Exception as err:  # noqa: BLE001  the type is what is compared
                            acc.append(type(err).__name__)
                    what = f"{name}{shape} {np.dtype(dt).name} dim={d} keepdim={k}"
                    if len(got) != len(want) or any(isinstance(w, str) != isinstance(g, str)
                                                    for g, w in zip(got, want)):
                        differ.append(f"{what}: {got[:1]} vs torch {want[:1]}")
                        continue
                    for j, (g, w) in enumerate(zip(got, want)):
                        if isinstance(w, (str, tuple)):
                            if g != w:
                                differ.append(f"{what}: {g} vs torch {w}")
                            continue
                        is_index = str(w.dtype) == "torch.int64" and j == len(got) - 1 and name in TIE_ORDER
                        if is_index and np.unique(a).size < a.size and (name in ("topk", "kthvalue") or 17 in shape):
                            continue
                        try:
                            _compare(to_numpy(g), to_numpy(w), False, str(w.dtype).split(".")[-1], what)
                            assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[-5:] == str(w.dtype)[-5:]
                        except AssertionError:
                            differ.append(f"{what}: result {j} {to_numpy(g).ravel()[:4]} vs torch "
                                          f"{to_numpy(w).ravel()[:4]}")
    assert not differ, f"{len(differ)} differences:\n" + "\n".join(differ[:20])


NO_GRADIENT = {"argmin", "argsort", "all", "any", "count_nonzero", "unique", "unique_consecutive", "histc"}


@pytest.mark.skipif(not LONG or torch is None, reason="exhaustive grid: set DYNGRAD_LONG=1 (needs torch)")
@pytest.mark.parametrize("name", sorted(set(GRID_OPS) - NO_GRADIENT))
def test_grid_gradients_against_torch(dg, name):
    """First and second derivatives of every differentiable op, over dims and keepdim, equal torch's (distinct
    values, NaNs for the nan* ops)."""
    fn = GRID_OPS[name]
    rng = np.random.default_rng(seed_of("grid gradients", name))
    for shape, d, k in itertools.product([(3, 5), (2, 3, 4)], (0, -1, None), (False, True)):
        if d is None and name in ("cumsum", "cumprod", "cummax", "logcumsumexp", "sort", "topk", "kthvalue", "mode",
                                  "logsumexp"):
            continue
        a = rng.standard_normal(shape)
        if name.startswith("nan"):
            # (no slice of NaNs only: there torch's nanmean gradient is nan (inf * 0), dyngrad's 0)
            a.reshape(-1)[::7] = nan
        results = []
        for m in (dg, torch):
            x = make_tensor(m, a, "float64", True)
            outs = [o for o in _flatten(fn(m, x, d, k), []) if not isinstance(o, tuple) and o.is_floating_point()]
            loss = sum((o * _weights(tuple(o.shape), "float64", m)).nansum() for o in outs)
            (g,) = m.autograd.grad(loss, x, create_graph=True, allow_unused=True)
            h = m.autograd.grad((g * g).nansum(), x, allow_unused=True)[0] if g is not None and g.requires_grad \
                else None
            results.append([np.zeros(shape) if t is None else np.array(t.detach().numpy(force=True) if m is torch
                                                                       else t.detach().numpy()) for t in (g, h)])
        what = f"{name}{shape} dim={d} keepdim={k}"
        np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-9, atol=1e-11, err_msg=what + " gradient")
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-8, atol=1e-10, err_msg=what + " 2nd")


@pytest.mark.parametrize("shape, dims", [((97, 204), (0,)), ((3, 5, 17), (0, 1)), ((1000, 9), (0,)), ((7, 300), (0,)),
                                         ((9, 8), (0,)), ((16, 130), (0,))])
def test_float64_sums_over_leading_dims_as_the_transposing_path(dg, shape, dims):
    """float64 sums over leading dims of a contiguous input walk the rows in memory order (column_sums_f64 in
    kernels/reduce.cpp) in the same order of additions as the general path (the reduced dims moved last), so the
    two layouts give the same numbers in the C++ engine; both engines close to an exactly rounded sum."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)
    got = dg.tensor(a).sum(dims).numpy()
    moved = np.ascontiguousarray(np.moveaxis(a, list(dims), list(range(a.ndim - len(dims), a.ndim))))
    other = dg.tensor(moved).movedim(list(range(a.ndim - len(dims), a.ndim)), list(dims)).sum(dims).numpy()
    if dg.__name__ == "dyngrad":         # (the reference engine's numpy sums pairwise, its order by layout)
        np.testing.assert_array_equal(got, other)
    cols = a.reshape(-1, got.size).T
    exact = np.array([math.fsum(col) for col in cols]).reshape(got.shape)
    assert np.all(np.abs(got - exact) <= 1e-14 * np.abs(cols).sum(axis=1).reshape(got.shape))


@pytest.mark.parametrize("shape", [(768, 512), (5, 64), (33, 130), (7, 3, 200), (16, 519), (300, 8)])
def test_float32_sums_over_leading_dims_in_row_order(cpp, shape):
    """float32 sums over leading dims of a contiguous input (a bias gradient): column_sums in kernels/reduce.cpp adds
    each column's values in row order in double (in registers, 64 columns at a time, where the build targets
    AVX-512F; the rest of the columns by the array loop), then rounds once: the bits of a sequential float64 sum,
    whatever the column count's remainder, at 1 and 2 threads."""
    rng = np.random.default_rng(4)
    a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(np.float32)
    rows = a.reshape(-1, shape[-1])
    expect = np.cumsum(rows.astype(np.float64), axis=0)[-1].astype(np.float32)
    before = cpp.get_num_threads()
    try:
        for threads in (1, 2):
            cpp.set_num_threads(threads)
            got = cpp.tensor(a).sum(tuple(range(a.ndim - 1))).numpy()
            np.testing.assert_array_equal(got, expect)
    finally:
        cpp.set_num_threads(before)
