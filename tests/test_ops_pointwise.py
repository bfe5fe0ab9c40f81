"""The elementwise family (issue 10): trigonometric and hyperbolic functions, logs and exponentials, rounding,
division modes, special functions, torch.special, comparisons, logic and bits, driven by ONE table.

Each row: Op(name, fn(m, *tensors), np_fn, cases, options) as in test_ops.py (`fn` takes the module first, so the
same row runs on dyngrad, dyngrad.reference and torch). On top of check_op (forward vs numpy/scipy, float64
gradients vs finite differences, float32, non-contiguous inputs, both engines):
  - every row against torch 2.13 (values and gradients, float64), when torch is installed;
  - gradients of gradients (gradgradcheck) where torch has them;
  - exact values at kinks, ties and special values (inf, nan, +-0) against torch, and hard-coded ones that run
    without torch;
  - dtype promotion (bool/int64/float32/float64 tensors and Python numbers on either side) against torch: the same
    result dtype and values, or the same exception type;
  - error types against torch; out=, in-place variants, methods, operators, dyngrad.special;
  - the accuracy of the numpy special-function kernels in their tails (scipy as the oracle, when installed).
Slow exhaustive variants run with DYNGRAD_LONG=1.
"""
import math
import os

import numpy as np
import pytest

from helpers import Const, Float, Ints, check_exact, check_gradgrad, check_op, check_torch, differentiable, \
    draw_inputs, as_spec, seed_of
from test_ops import Op

try:
    import scipy.special as sps
except ImportError:                    # the forwards without a numpy oracle are then checked against torch only
    sps = None
try:
    import torch
except ImportError:
    torch = None

LONG = os.environ.get("DYNGRAD_LONG") == "1"
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
nan, inf = math.nan, math.inf

UNARY = [[(3, 4)], [()], [(0, 3)], [(2, 3, 4)]]
BINARY = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)], [(), (3,)], [(0, 4), (4,)]]


def sp(name):
    """scipy.special.NAME as a numpy oracle, or None without scipy (the row's forward is then checked on torch)."""
    return None if sps is None else getattr(sps, name)


def S(m):
    """torch.special / dyngrad.special."""
    return m.special


def fn1(name):
    return lambda m, x: getattr(m, name)(x)


def unary(name, np_fn, low=None, high=None, away_from=(), cases=UNARY, method=True, **kw):
    """A unary op as a function (all cases) and as a method (first case)."""
    rows = [Op(name, fn1(name), np_fn, cases, low=low, high=high, away_from=away_from, **kw)]
    if method:
        rows.append(Op(name + "_method", lambda m, x: getattr(x, name)(), np_fn, cases[:1], low=low, high=high,
                       away_from=away_from, **{k: v for k, v in kw.items() if k not in ("gradgrad", "int_cases")}))
    return rows


def pos(*shape):
    return Float(shape, 0.5, 2.0)


def unit(*shape):
    return Float(shape, -0.9, 0.9)


def nonzero(*shape):
    return Float(shape, away_from=(0.0,), margin=0.3)


HALVES = tuple(np.arange(-4.0, 4.5, 0.5))          # the jumps of floor/ceil/round/trunc and their neighbours


def np_xlogy(x, y):
    return np.where(x == 0, 0.0, x * np.log(np.where(x == 0, 1.0, y)))


def np_lerp(a, b, w):
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))


def np_mvlgamma(x, p):
    return p * (p - 1) / 4 * math.log(math.pi) + sum(sps.gammaln(x - j / 2) for j in range(p))


def np_remainder(a, b):
    r = np.fmod(a, b)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r)


def np_entr(x):
    return np.where(x > 0, -x * np.log(np.where(x > 0, x, 1)), np.where(x == 0, 0.0, -np.inf))


def np_sinc(x):
    return np.sinc(x)


def np_logit(x, eps=None):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


def scipy_or_none(fn):
    return fn if sps is not None else None


OPS = [
    # ---- trigonometric and hyperbolic ----
    *unary("tan", np.tan, -1.2, 1.2, gradgrad=True, int_cases=[[Ints((3, 4), -1, 2)]]),
    *unary("asin", np.arcsin, -0.9, 0.9, gradgrad=True),
    *unary("arcsin", np.arcsin, -0.9, 0.9, method=False),
    *unary("acos", np.arccos, -0.9, 0.9),
    *unary("arccos", np.arccos, -0.9, 0.9, method=False),
    *unary("atan", np.arctan, gradgrad=True, int_cases=[[Ints((3, 4), -5, 6)]]),
    *unary("arctan", np.arctan, method=False),
    *unary("sinh", np.sinh, gradgrad=True),
    *unary("cosh", np.cosh, gradgrad=True),
    *unary("asinh", np.arcsinh),
    *unary("arcsinh", np.arcsinh, method=False),
    *unary("acosh", np.arccosh, 1.2, 3.0),
    *unary("arccosh", np.arccosh, 1.2, 3.0, method=False),
    *unary("atanh", np.arctanh, -0.9, 0.9, gradgrad=True),
    *unary("arctanh", np.arctanh, -0.9, 0.9, method=False),
    Op("atan2", lambda m, a, b: m.atan2(a, b), np.arctan2, BINARY, gradgrad=True,
       int_cases=[[Ints((3, 4), -3, 4), Ints((4,), -3, 4)]]),
    Op("arctan2_method", lambda m, a, b: a.arctan2(b), np.arctan2, BINARY[:1]),
    Op("hypot", lambda m, a, b: m.hypot(a, b), np.hypot, BINARY, gradgrad=True),
    Op("hypot_method", lambda m, a, b: a.hypot(b), np.hypot, BINARY[1:2]),
    *unary("deg2rad", np.deg2rad, int_cases=[[Ints((3, 4), -180, 180)]]),
    *unary("rad2deg", np.rad2deg),
    *unary("sinc", np_sinc, gradgrad=True),

    # ---- logs and exponentials ----
    *unary("log1p", np.log1p, -0.8, 2.0, gradgrad=True, int_cases=[[Ints((3, 4), 0, 9)]]),
    *unary("expm1", np.expm1, gradgrad=True),
    *unary("log2", np.log2, 0.2, 3.0, gradgrad=True, int_cases=[[Ints((3, 4), 1, 9)]]),
    *unary("log10", np.log10, 0.2, 3.0),
    *unary("exp2", np.exp2, gradgrad=True, int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("logaddexp", lambda m, a, b: m.logaddexp(a, b), np.logaddexp, BINARY, gradgrad=True),
    Op("logaddexp_method", lambda m, a, b: a.logaddexp(b), np.logaddexp, BINARY[:1]),
    Op("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), np.logaddexp2, BINARY, gradgrad=True),
    Op("xlogy", lambda m, a, b: m.xlogy(a, b), np_xlogy, [[(3, 4), pos(3, 4)], [(3, 4), pos(4)], [(), pos(3)]],
       gradgrad=True, int_cases=[[Ints((3, 4), -2, 3), Ints((3, 4), 1, 5)]]),
    Op("xlogy_number", lambda m, a: m.xlogy(2.5, a), lambda a: 2.5 * np.log(a), [[pos(3, 4)]]),
    Op("xlogy_method", lambda m, a, b: a.xlogy(b), np_xlogy, [[(3, 4), pos(3, 4)]]),
    Op("reciprocal", lambda m, a: m.reciprocal(a), lambda a: 1.0 / a, [[nonzero(3, 4)], [nonzero()]], gradgrad=True,
       int_cases=[[Ints((3, 4), 1, 5)]]),
    Op("reciprocal_method", lambda m, a: a.reciprocal(), np.reciprocal, [[nonzero(3, 4)]]),
    Op("float_power", lambda m, a, b: m.float_power(a, b), np.power, [[pos(3, 4), (3, 4)], [pos(3, 4), (4,)]],
       out_dtype="float64", gradgrad=True),
    Op("float_power_scalar", lambda m, a: m.float_power(a, 2.5), lambda a: a ** 2.5, [[pos(3, 4)]],
       out_dtype="float64"),
    Op("float_power_method", lambda m, a: a.float_power(3), lambda a: a ** 3, [[(3, 4)]], out_dtype="float64"),

    # ---- special functions ----
    *unary("erfc", scipy_or_none(lambda a: sps.erfc(a)), gradgrad=True, int_cases=[[Ints((3, 4), -3, 4)]]),
    *unary("erfinv", sp("erfinv"), -0.9, 0.9, gradgrad=True),
    *unary("lgamma", sp("gammaln"), 0.2, 5.0, gradgrad=True),
    Op("lgamma_negative", fn1("lgamma"), sp("gammaln"), [[Float((3, 4), -2.9, -2.1)]]),
    *unary("digamma", sp("digamma"), 0.3, 5.0, gradgrad=True, int_cases=[[Ints((3, 4), 1, 9)]]),
    Op("digamma_negative", fn1("digamma"), sp("digamma"), [[Float((3, 4), -3.9, -3.1)]]),
    Op("polygamma1", lambda m, a: m.polygamma(1, a), scipy_or_none(lambda a: sps.polygamma(1, a)),
       [[pos(3, 4)], [pos()]], gradgrad=True),
    Op("polygamma3", lambda m, a: m.polygamma(3, a), scipy_or_none(lambda a: sps.polygamma(3, a)),
       [[pos(3, 4)]], gradgrad=True),
    Op("polygamma0_method", lambda m, a: a.polygamma(0), sp("digamma"), [[pos(3, 4)]]),
    Op("polygamma2_negative", lambda m, a: m.polygamma(2, a), scipy_or_none(lambda a: sps.polygamma(2, a)),
       [[Float((3, 4), -1.8, -1.2)]]),
    Op("mvlgamma", lambda m, a: m.mvlgamma(a, 3), scipy_or_none(lambda a: np_mvlgamma(a, 3)),
       [[Float((3, 4), 1.5, 4.0)], [Float((), 1.5, 4.0)]], gradgrad=True),
    Op("mvlgamma_method", lambda m, a: a.mvlgamma(p=1), sp("gammaln"), [[pos(3, 4)]]),
    Op("i0", fn1("i0"), np.i0, UNARY, gradgrad=True, int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("i0_large", fn1("i0"), np.i0, [[Float((3, 4), 20.0, 60.0)]], fwd_tol=(1e-13, 0), dtypes=("float64",)),
    Op("logit", lambda m, a: m.logit(a), np_logit, [[Float((3, 4), 0.1, 0.9)], [Float((), 0.1, 0.9)]],
       gradgrad=True),
    Op("logit_eps", lambda m, a: m.logit(a, eps=0.2), lambda a: np_logit(a, 0.2),
       [[Float((3, 4), 0.0, 1.0, away_from=(0.2, 0.8))]], gradgrad=True),
    Op("logit_method", lambda m, a: a.logit(0.25), lambda a: np_logit(a, 0.25), [[Float((3, 4), 0.0, 1.0,
                                                                                        away_from=(0.25, 0.75))]]),

    # ---- rounding (zero gradients, as torch) ----
    *unary("floor", np.floor, -4.0, 4.0, away_from=HALVES, int_cases=[[Ints((3, 4), -5, 6)]]),
    *unary("ceil", np.ceil, -4.0, 4.0, away_from=HALVES),
    *unary("trunc", np.trunc, -4.0, 4.0, away_from=HALVES),
    *unary("fix", np.trunc, -4.0, 4.0, away_from=HALVES),
    *unary("round", np.round, -4.0, 4.0, away_from=HALVES, int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("round_decimals", lambda m, a: m.round(a, decimals=2), lambda a: np.round(a, 2),
       [[Float((3, 4), -4.0, 4.0)]]),
    Op("round_decimals_neg", lambda m, a: a.round(decimals=-1), lambda a: np.round(a, -1),
       [[Float((3, 4), -40.0, 40.0, away_from=tuple(range(-45, 50, 10)), margin=0.5)]]),
    *unary("frac", lambda a: a - np.trunc(a), -4.0, 4.0, away_from=HALVES),
    # torch's gradient of sgn is a ZeroTensor, which the torch oracle cannot read: its values are checked in EXACT
    *unary("sgn", np.sign, away_from=(0.0,), int_cases=[[Ints((3, 4), -5, 6)]], torch=False),
    Op("signbit", fn1("signbit"), np.signbit, UNARY, grad=False, int_cases=[[Ints((3, 4), -5, 6)]]),

    # ---- division and remainders ----
    Op("div_floor", lambda m, a, b: m.div(a, b, rounding_mode="floor"), np.floor_divide,
       [[(3, 4), nonzero(3, 4)], [(3, 4), nonzero(4)], [(), nonzero(3)]],
       int_cases=[[Ints((3, 4), -9, 10), Ints((4,), 1, 4)], [Ints((3, 4), -9, 10), Ints((4,), -4, -1)]]),
    Op("div_trunc", lambda m, a, b: a.div(b, rounding_mode="trunc"), lambda a, b: np.trunc(a / b).astype(a.dtype),
       [[(3, 4), nonzero(3, 4)], [(0, 4), nonzero(4)]],
       int_cases=[[Ints((3, 4), -9, 10), Ints((4,), 1, 4)], [Ints((3, 4), -9, 10), Ints((4,), -4, -1)]]),
    Op("divide", lambda m, a, b: m.divide(a, b), np.divide, [[(3, 4), nonzero(4)]]),
    Op("floor_divide", lambda m, a, b: m.floor_divide(a, b), np.floor_divide, [[(3, 4), nonzero(4)]], grad=False,
       int_cases=[[Ints((3, 4), -9, 10), Ints((4,), -4, -1)]]),
    Op("remainder", lambda m, a, b: m.remainder(a, b), np_remainder,
       [[(3, 4), nonzero(3, 4)], [(3, 4), nonzero(4)], [(), nonzero(3)], [(0, 4), nonzero(4)]], gradgrad=True,
       int_cases=[[Ints((3, 4), -9, 10), Ints((4,), 1, 4)], [Ints((3, 4), -9, 10), Ints((4,), -4, -1)]]),
    Op("remainder_number", lambda m, a: m.remainder(a, 0.75), lambda a: np_remainder(a, 0.75), [[(3, 4)]]),
    # torch has no derivative for remainder(number, tensor) (it raises in backward); dyngrad gives d/db = -floor(a/b)
    Op("remainder_rnumber", lambda m, a: m.remainder(5.5, a), lambda a: np_remainder(5.5, a), [[nonzero(3, 4)]],
       torch=False),
    Op("remainder_operator", lambda m, a, b: a % b, np_remainder, [[(3, 4), nonzero(4)]]),
    Op("fmod", lambda m, a, b: m.fmod(a, b), np.fmod, [[(3, 4), nonzero(3, 4)], [(3, 4), nonzero(4)]],
       gradgrad=True, int_cases=[[Ints((3, 4), -9, 10), Ints((4,), -4, -1)]]),
    Op("fmod_method", lambda m, a: a.fmod(-0.6), lambda a: np.fmod(a, -0.6), [[(3, 4)]]),
    Op("rsub", lambda m, a, b: m.rsub(a, b, alpha=2), lambda a, b: b - 2 * a, BINARY[:3],
       int_cases=[[Ints((3, 4), -5, 6), Ints((4,), -5, 6)]]),
    Op("rsub_number", lambda m, a: m.rsub(a, 1.5), lambda a: 1.5 - a, [[(3, 4)]]),
    Op("subtract", lambda m, a, b: m.subtract(a, b, alpha=0.5), lambda a, b: a - 0.5 * b, BINARY[:2]),
    Op("multiply", lambda m, a, b: a.multiply(b), np.multiply, BINARY[:2]),
    Op("addcdiv", lambda m, a, b, c: m.addcdiv(a, b, c, value=0.5), lambda a, b, c: a + 0.5 * b / c,
       [[(2, 3), (2, 3), nonzero(3)], [(), (4,), nonzero(2, 1)]], gradgrad=True),
    Op("addcdiv_method", lambda m, a, b, c: a.addcdiv(b, c), lambda a, b, c: a + b / c, [[(2, 3), (3,), pos(2, 3)]]),
    Op("lerp", lambda m, a, b, w: m.lerp(a, b, w), np_lerp,
       [[(3, 4), (3, 4), Float((3, 4), -0.5, 1.5, away_from=(-0.5, 0.5))], [(3, 4), (4,), Float((), 0.1, 0.4)],
        [(), (3,), Float((2, 1), 0.6, 1.2)]], gradgrad=True),
    Op("lerp_number", lambda m, a, b: m.lerp(a, b, 0.3), lambda a, b: a + 0.3 * (b - a), BINARY[:3]),
    Op("lerp_number_far", lambda m, a, b: a.lerp(b, 0.8), lambda a, b: b - (b - a) * 0.2, BINARY[:2]),
    Op("copysign", lambda m, a, b: m.copysign(a, b), np.copysign,
       [[nonzero(3, 4), nonzero(3, 4)], [nonzero(3, 4), nonzero(4)]], gradgrad=True,
       int_cases=[[Ints((3, 4), -5, 6), Ints((4,), -5, 6)]]),
    Op("copysign_number", lambda m, a: a.copysign(-1.0), lambda a: np.copysign(a, -1.0), [[nonzero(3, 4)]]),

    # ---- maxima, clamps, replacements ----
    Op("fmax", lambda m, a, b: m.fmax(a, b), np.fmax, BINARY, gradgrad=True,
       int_cases=[[Ints((3, 4), -5, 6), Ints((4,), -5, 6)]]),
    Op("fmin", lambda m, a, b: a.fmin(b), np.fmin, BINARY[:3]),
    Op("fmax_nan", lambda m, a, b: m.fmax(a, b), np.fmax,
       [[np.array([1.0, nan, 2.0, nan, -1.0]), np.array([0.5, 3.0, nan, nan, 4.0])]], grad=False),
    Op("clamp_min", lambda m, a: m.clamp_min(a, 0.2), lambda a: np.maximum(a, 0.2), UNARY[:2], away_from=(0.2,),
       int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("clamp_max_method", lambda m, a: a.clamp_max(-0.1), lambda a: np.minimum(a, -0.1), UNARY[:1],
       away_from=(-0.1,)),
    Op("clamp_min_tensor", lambda m, a, lo: m.clamp_min(a, lo), np.maximum, [[(3, 4), (4,)]], gradgrad=True),
    Op("clamp_tensor_bounds", lambda m, a, lo, hi: m.clamp(a, min=lo, max=hi),
       lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
       [[(3, 4), Float((4,), -1.0, -0.2), Float((3, 1), 0.2, 1.0)], [(3, 4), (3, 4), (4,)]], gradgrad=True),
    Op("clamp_tensor_max_only", lambda m, a, hi: a.clamp(max=hi), np.minimum, [[(3, 4), (3, 1)]]),
    Op("nan_to_num", lambda m, a: m.nan_to_num(a), np.nan_to_num, [[(3, 4)], [()]], gradgrad=True),
    Op("nan_to_num_defaults", lambda m, a: m.nan_to_num(a), np.nan_to_num, [[np.array([1.0, nan, inf, -inf, -2.5])]],
       grad=False, dtypes=("float64",)),
    Op("nan_to_num_args", lambda m, a: a.nan_to_num(nan=2.0, posinf=10.0, neginf=-10.0),
       lambda a: np.nan_to_num(a, nan=2.0, posinf=10.0, neginf=-10.0), [[np.array([[1.0, nan], [inf, -inf]])]],
       noncontig=False),
    Op("positive", lambda m, a: m.positive(a), lambda a: a, UNARY[:2], int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("absolute", lambda m, a: m.absolute(a), np.abs, UNARY[:1], away_from=(0.0,)),

    # ---- torch.special ----
    Op("special_expit", lambda m, a: S(m).expit(a), lambda a: 1 / (1 + np.exp(-a)), UNARY[:2]),
    Op("special_logit", lambda m, a: S(m).logit(a, eps=1e-3), lambda a: np_logit(a, 1e-3),
       [[Float((3, 4), 0.05, 0.95)]]),
    Op("special_erfcx", lambda m, a: S(m).erfcx(a), sp("erfcx"), [[Float((3, 4), -3.0, 20.0)], [()], [(0, 2)]],
       gradgrad=True),
    Op("special_log_ndtr", lambda m, a: S(m).log_ndtr(a), sp("log_ndtr"), [[Float((3, 4), -30.0, 6.0)], [()]],
       gradgrad=True),
    Op("special_ndtr", lambda m, a: S(m).ndtr(a), sp("ndtr"), [[Float((3, 4), -6.0, 6.0)]], gradgrad=True),
    Op("special_ndtri", lambda m, a: S(m).ndtri(a), sp("ndtri"), [[Float((3, 4), 0.02, 0.98)], [Float((), 0.1, 0.2)]],
       gradgrad=True),
    Op("special_xlog1py", lambda m, a, b: S(m).xlog1py(a, b),
       lambda a, b: np.where(a == 0, 0.0, a * np.log1p(b)), [[(3, 4), Float((3, 4), -0.5, 2.0)],
                                                               [(3, 4), Float((4,), -0.5, 2.0)]], gradgrad=True),
    Op("special_xlogy", lambda m, a, b: S(m).xlogy(a, b), np_xlogy, [[(3, 4), pos(4)]]),
    Op("special_entr", lambda m, a: S(m).entr(a), np_entr, [[pos(3, 4)], [Float((), 0.2, 3.0)]], gradgrad=True),
    Op("special_i0e", lambda m, a: S(m).i0e(a), sp("i0e"), [[Float((3, 4), -40.0, 40.0, away_from=(0.0,))]],
       gradgrad=True),
    Op("special_i1", lambda m, a: S(m).i1(a), sp("i1"), [[Float((3, 4), -8.0, 8.0)], [()]], gradgrad=True),
    Op("special_i1e", lambda m, a: S(m).i1e(a), sp("i1e"), [[Float((3, 4), -40.0, 40.0, away_from=(0.0,))]],
       gradgrad=True),
    Op("special_i0", lambda m, a: S(m).i0(a), np.i0, [[(3, 4)]]),
    Op("special_zeta", lambda m, s, q: S(m).zeta(s, q), sp("zeta"),
       [[Const(Float((3, 4), 1.5, 6.0)), Float((3, 4), 0.5, 5.0)], [Const(Float((4,), 2.0, 3.0)), pos(3, 1)]],
       gradgrad=True),
    Op("special_gammaln", lambda m, a: S(m).gammaln(a), sp("gammaln"), [[pos(3, 4)]]),
    Op("special_psi", lambda m, a: S(m).psi(a), sp("digamma"), [[pos(3, 4)]]),
    Op("special_digamma", lambda m, a: S(m).digamma(a), sp("digamma"), [[pos(3, 4)]]),
    Op("special_polygamma", lambda m, a: S(m).polygamma(2, a), scipy_or_none(lambda a: sps.polygamma(2, a)),
       [[pos(3, 4)]]),
    Op("special_multigammaln", lambda m, a: S(m).multigammaln(a, 2), scipy_or_none(lambda a: np_mvlgamma(a, 2)),
       [[Float((3, 4), 1.0, 4.0)]]),
    Op("special_erf", lambda m, a: S(m).erf(a), scipy_or_none(sps.erf) if sps else None, [[(3, 4)]]),
    Op("special_erfc", lambda m, a: S(m).erfc(a), sp("erfc"), [[(3, 4)]]),
    Op("special_erfinv", lambda m, a: S(m).erfinv(a), sp("erfinv"), [[unit(3, 4)]]),
    Op("special_log1p", lambda m, a: S(m).log1p(a), np.log1p, [[pos(3, 4)]]),
    Op("special_expm1", lambda m, a: S(m).expm1(a), np.expm1, [[(3, 4)]]),
    Op("special_exp2", lambda m, a: S(m).exp2(a), np.exp2, [[(3, 4)]]),
    Op("special_sinc", lambda m, a: S(m).sinc(a), np.sinc, [[(3, 4)]]),
    Op("special_round", lambda m, a: S(m).round(a), np.round, [[Float((3, 4), -4.0, 4.0, away_from=HALVES)]]),
    Op("special_logsumexp", lambda m, a: S(m).logsumexp(a, 1),
       lambda a: np.log(np.exp(a).sum(1)), [[(3, 4)]]),
    Op("special_softmax", lambda m, a: S(m).softmax(a, 0), lambda a: np.exp(a) / np.exp(a).sum(0), [[(3, 4)]]),
    Op("special_log_softmax", lambda m, a: S(m).log_softmax(a, dim=-1),
       lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True)), [[(3, 4)]]),

    # ---- in-place variants (on a clone, so the history is recorded) ----
    Op("tan_", lambda m, a: a.clone().tan_(), np.tan, [[Float((3, 4), -1.0, 1.0)]]),
    Op("lgamma_", lambda m, a: (a * 1).lgamma_(), sp("gammaln"), [[pos(3, 4)]]),
    Op("polygamma_", lambda m, a: (a * 1).polygamma_(1), scipy_or_none(lambda a: sps.polygamma(1, a)),
       [[pos(3, 4)]]),
    Op("remainder_", lambda m, a, b: (a * 1).remainder_(b), np_remainder, [[(3, 4), nonzero(4)]]),
    Op("floor_", lambda m, a: (a * 1).floor_(), np.floor, [[Float((3, 4), -4.0, 4.0, away_from=HALVES)]]),
    Op("lerp_", lambda m, a, b: (a * 1).lerp_(b, 0.25), lambda a, b: a + 0.25 * (b - a), [[(3, 4), (4,)]]),
    Op("clamp_min_", lambda m, a: (a * 1).clamp_min_(0.3), lambda a: np.maximum(a, 0.3), [[(3, 4)]],
       away_from=(0.3,)),
    Op("nan_to_num_", lambda m, a: (a * 1).nan_to_num_(posinf=5.0), lambda a: np.nan_to_num(a, posinf=5.0),
       [[np.array([1.0, inf, nan])]]),
]
OPS = [op for op in OPS]
OPS_BY_NAME = {op.name: op for op in OPS}
assert len(OPS_BY_NAME) == len(OPS), "duplicate op names in the table"

FLOAT_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))]
INT_CASES = [pytest.param(op, i, id=f"{op.name}-int{i}") for op in OPS for i in range(len(op.int_cases))]
GRADGRAD = [pytest.param(op, id=op.name) for op in OPS if op.gradgrad]


@pytest.mark.parametrize("op,case", FLOAT_CASES)
def test_op(dg, op, case):
    check_op(dg, op.cases[case], op.fn, op.np_fn, name=op.name, grad=op.grad, noncontig=op.noncontig, **op.check)


@pytest.mark.parametrize("op,case", INT_CASES)
def test_op_int(dg, op, case):
    """int64/bool inputs: float ops give float32 (as torch), integer-valued ones stay int64."""
    check_op(dg, op.int_cases[case], op.fn, op.np_fn, name=op.name, grad=False, dtypes=("float32",),
             out_dtype="float32", noncontig=False)


@pytest.mark.parametrize("op", GRADGRAD)
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], op.fn, name=op.name, **{k: v for k, v in op.check.items()
                                                             if k in ("low", "high", "away_from")})


TORCH_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases)) if op.torch]


@needs_torch
@pytest.mark.parametrize("op,case", TORCH_CASES)
def test_op_matches_torch(dg, op, case):
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    diff = differentiable(specs, arrays) if op.grad else []
    check_torch(dg, op.fn, arrays, diff, name=op.name)


def test_table_covers_the_issue():
    """Every name of the issue's elementwise list has a row (guards against a row being dropped by accident)."""
    required = """tan asin arcsin acos arccos atan arctan atan2 arctan2_method sinh cosh asinh arcsinh acosh arccosh
        atanh arctanh log1p expm1 log2 log10 exp2 reciprocal floor ceil round round_decimals trunc fix frac sgn
        signbit copysign remainder fmod floor_divide div_floor div_trunc lerp lerp_number addcdiv hypot logaddexp
        logaddexp2 xlogy erfc erfinv lgamma digamma polygamma1 mvlgamma sinc logit logit_eps nan_to_num clamp_min
        clamp_max_method clamp_tensor_bounds float_power fmax fmin deg2rad rad2deg positive rsub special_expit
        special_logit special_erf special_erfc special_erfinv special_erfcx special_log_ndtr special_ndtr
        special_ndtri special_xlogy special_xlog1py special_entr special_gammaln special_digamma special_psi
        special_polygamma special_multigammaln special_log1p special_expm1 special_exp2 special_sinc special_round
        special_logsumexp special_softmax special_log_softmax i0 special_i0e special_i1 special_i1e""".split()
    missing = [n for n in required if n not in OPS_BY_NAME]
    assert not missing, missing
