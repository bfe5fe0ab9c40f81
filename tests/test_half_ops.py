"""float16 and bfloat16 through the ops that compute on the host (numpy forwards, scans, sorts, unique, ...) and the
reductions, on both engines against torch: torch's result dtype, and its values to the last bit of the half type
(Note [Half types on the host] in python/dyngrad/_api/bridge.py: computed in float32, rounded once). Then numbers
written into tensors of every dtype (Note [Numbers written into tensors]) and subtraction with bool operands."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HALVES = ["float16", "bfloat16"]
X = [[0.5, 1.5, -2.25, 3.0], [0.75, -0.125, 2.5, 1.0], [1.25, 0.3, -0.7, 2.0]]
Y = [[0.25, -1.75, 2.0, 0.6], [1.5, 0.375, -0.9, 1.0], [-1.25, 0.3, 0.45, 3.5]]
UNIT = [[0.5, -0.25, 0.9, 0.0], [0.75, -0.125, 0.3, -0.95], [0.05, 0.3, -0.7, 0.6]]    # in (-1, 1)
WITH_NAN = [[0.5, math.nan, -2.25, 3.0], [0.75, -0.125, math.nan, 1.0], [1.25, 0.3, -0.7, 2.0]]

# name -> call(m, x, y, u, n): x, y tensors of X and Y, u of UNIT, n of WITH_NAN (all of the dtype under test)
CALLS = {
    # pointwise numpy forwards, one and two operands
    **{name: (lambda f: lambda m, x, y, u, n: getattr(m, f)(x))(name) for name in """tan atan sinh cosh asinh log1p
        expm1 exp2 erfc lgamma digamma sinc i0 floor ceil round trunc frac signbit nan_to_num""".split()},
    **{name: (lambda f: lambda m, x, y, u, n: getattr(m, f)(u))(name) for name in """asin acos atanh erfinv
        logit""".split()},
    **{name: (lambda f: lambda m, x, y, u, n: getattr(m, f)(x.abs() + 0.5))(name) for name in """log2 log10
        acosh""".split()},
    **{name: (lambda f: lambda m, x, y, u, n: getattr(m, f)(x, y))(name) for name in """floor_divide remainder fmod
        copysign hypot atan2 logaddexp logaddexp2 heaviside isclose allclose equal""".split()},
    "xlogy": lambda m, x, y, u, n: m.xlogy(x, y.abs()),
    "angle": lambda m, x, y, u, n: m.angle(x), "frexp": lambda m, x, y, u, n: m.frexp(x),
    "igamma": lambda m, x, y, u, n: m.igamma(x.abs(), y.abs()), "igammac": lambda m, x, y, u, n: m.igammac(x.abs(), 2),
    "round_decimals": lambda m, x, y, u, n: m.round(x * 3.7, decimals=1),
    "div_floor": lambda m, x, y, u, n: m.div(x, y, rounding_mode="floor"),
    "mod_number": lambda m, x, y, u, n: x % 0.7,
    "mvlgamma": lambda m, x, y, u, n: m.mvlgamma(x.abs() + 1, 2),
    "nan_to_num_inf": lambda m, x, y, u, n: m.nan_to_num(x / 0.0),
    "isclose_nan": lambda m, x, y, u, n: m.isclose(n, n, equal_nan=True),
    # reductions
    "max": lambda m, x, y, u, n: m.max(x), "min": lambda m, x, y, u, n: x.min(),
    "max_nan": lambda m, x, y, u, n: m.max(n),
    "mean": lambda m, x, y, u, n: x.mean(), "mean_dim": lambda m, x, y, u, n: m.mean(x * 7.3, 1),
    "var": lambda m, x, y, u, n: x.var(0), "std": lambda m, x, y, u, n: m.std(x * 3.1),
    "var_mean": lambda m, x, y, u, n: m.var_mean(x, 1), "std_mean": lambda m, x, y, u, n: m.std_mean(x),
    "median": lambda m, x, y, u, n: x.median(), "median_dim": lambda m, x, y, u, n: m.median(x, 1),
    "nanmedian": lambda m, x, y, u, n: m.nanmedian(n), "mode": lambda m, x, y, u, n: m.mode(x.round(), 0),
    "kthvalue": lambda m, x, y, u, n: m.kthvalue(x, 2, 1),
    # scans
    "cumsum": lambda m, x, y, u, n: m.cumsum(x * 1.37, 1), "cumprod": lambda m, x, y, u, n: x.cumprod(0),
    "cummax": lambda m, x, y, u, n: m.cummax(n, 1), "cummin": lambda m, x, y, u, n: m.cummin(x, 0),
    "logcumsumexp": lambda m, x, y, u, n: m.logcumsumexp(x, 1),
    # sorting and counting
    "sort": lambda m, x, y, u, n: m.sort(n), "sort_desc": lambda m, x, y, u, n: x.sort(0, descending=True),
    "argsort": lambda m, x, y, u, n: m.argsort(x, 1), "msort": lambda m, x, y, u, n: m.msort(x),
    "topk": lambda m, x, y, u, n: m.topk(x, 2), "topk_smallest": lambda m, x, y, u, n: x.topk(2, 0, largest=False),
    "unique": lambda m, x, y, u, n: m.unique(x.round(), return_inverse=True, return_counts=True),
    "unique_dim": lambda m, x, y, u, n: m.unique(m.cat([x, x]), dim=0),
    "unique_consecutive": lambda m, x, y, u, n: m.unique_consecutive(x.round().flatten(), return_counts=True),
    "histc": lambda m, x, y, u, n: m.histc(x, 100), "histc_range": lambda m, x, y, u, n: x.histc(7, -1, 2),
    "nonzero": lambda m, x, y, u, n: m.nonzero(x.round()), "argwhere": lambda m, x, y, u, n: m.argwhere(x.floor()),
    "where_cond": lambda m, x, y, u, n: m.where(x.round()),
    "searchsorted": lambda m, x, y, u, n: m.searchsorted(m.sort(x).values, y),
    "count_nonzero": lambda m, x, y, u, n: m.count_nonzero(x.round(), 1),
    # float and double only in torch
    "quantile": lambda m, x, y, u, n: m.quantile(x, 0.5),
    "nanquantile": lambda m, x, y, u, n: m.nanquantile(n, 0.25, dim=1),
    "cdist": lambda m, x, y, u, n: m.cdist(x, y), "pdist": lambda m, x, y, u, n: m.nn.functional.pdist(x),
    # losses and layers whose reductions are means
    "kl_div": lambda m, x, y, u, n: m.nn.functional.kl_div(x, y.abs(), reduction="batchmean"),
    "bce_with_logits": lambda m, x, y, u, n: m.nn.functional.binary_cross_entropy_with_logits(x, u.abs()),
    "mse_loss": lambda m, x, y, u, n: m.nn.functional.mse_loss(x, y),
    "binary_cross_entropy": lambda m, x, y, u, n: m.nn.functional.binary_cross_entropy(u.abs(), (u * 0.5).abs()),
    "group_norm": lambda m, x, y, u, n: m.nn.functional.group_norm(x, 2),
    "margin_ranking_loss": lambda m, x, y, u, n: m.nn.functional.margin_ranking_loss(x, y, u.sign()),
    # differences, integrals and powers computed on the host
    "nextafter": lambda m, x, y, u, n: m.nextafter(x, y),
    "cumulative_trapezoid": lambda m, x, y, u, n: m.cumulative_trapezoid(x, dim=1),
    "vander": lambda m, x, y, u, n: m.vander(x[0], 3),
}
# the last bit may differ where dyngrad's float32 arithmetic (numpy's, or a sum in a different order) is not torch's
NOT_EXACT = {"tan", "sinh", "cosh", "asinh", "acosh", "atanh", "expm1", "exp2", "erfc", "erfinv", "lgamma",
             "digamma", "sinc", "i0", "logit", "log2", "log10", "hypot", "atan2", "logaddexp", "logaddexp2", "xlogy",
             "mvlgamma", "var", "std", "var_mean", "std_mean", "logcumsumexp", "kl_div", "bce_with_logits",
             "group_norm", "cumprod", "mean_dim", "asin", "acos", "atan", "log1p", "binary_cross_entropy", "igamma",
             "igammac"}


def _eps(dtype):
    return 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -10


def _outcome(m, call, dtype):
    d = getattr(m, dtype)
    args = [m.tensor(v, dtype=d) for v in (X, Y, UNIT, WITH_NAN)]
    try:
        return call(m, *args)
    except Exception as exc:  # noqa: BLE001  both must fail alike
        return exc


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [out]


def _values(t):
    return np.asarray(t.float().tolist() if str(t.dtype).endswith(("bfloat16", "float16")) else t.tolist(),
                      dtype=float)


def _check(got, want, what, dtype, exact):
    if isinstance(want, Exception):
        assert isinstance(got, Exception) and type(got).__name__ == type(want).__name__, \
            f"{what}: torch raised {want!r}, dyngrad gave {got!r}"
        return
    assert not isinstance(got, Exception), f"{what}: dyngrad raised {got!r}, torch gave {want}"
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        if isinstance(w, (bool, int, float)):
            assert g == w, f"{what}: {g} != {w}"
            continue
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], f"{what}: dtype {g.dtype} vs {w.dtype}"
        assert tuple(g.shape) == tuple(w.shape), f"{what}: shape {tuple(g.shape)} vs {tuple(w.shape)}"
        gv, wv = _values(g), _values(w)
        if str(w.dtype).endswith(dtype):
            # on the dtype's grid: converting the value to the dtype again changes nothing
            np.testing.assert_array_equal(_values(torch.tensor(gv).to(w.dtype)), gv, err_msg=f"{what}: off the grid")
        tol = 0 if exact or not w.dtype.is_floating_point else _eps(dtype)     # one step of the half type
        np.testing.assert_allclose(gv, wv, rtol=tol, atol=tol * 1e-3, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_half_ops_like_torch(dg, name, dtype):
    call = CALLS[name]
    _check(_outcome(dg, call, dtype), _outcome(torch, call, dtype), f"{name}({dtype})", dtype,
           name not in NOT_EXACT)


@pytest.mark.parametrize("dtype", HALVES)
def test_half_gradients_keep_the_dtype(dg, dtype):
    """The gradients through the host-computed ops are of the input's half dtype, with torch's values."""
    outs = {}
    for m in (dg, torch):
        x = m.tensor(X, dtype=getattr(m, dtype), requires_grad=True)
        loss = m.cumsum(x, 1).sum() + m.sort(x, 1).values[:, 0].sum() + x.tan().sum() + x.mean() + m.median(x) \
            + m.remainder(x, 0.7).sum()
        loss.backward()
        outs[m] = x.grad
    g, w = outs[dg], outs[torch]
    assert str(g.dtype).split(".")[-1] == dtype
    np.testing.assert_allclose(_values(g), _values(w), rtol=2 * _eps(dtype))


def test_sweep_covers_the_numpy_forwards(dg):
    """Every op of the table that computes with a tensor's values on the host (its call passes values through the
    numpy bridge's host_values or round_to: tests/bridge_driver.py records that) and takes floats is in CALLS or
    named here."""
    from dyngrad._api.table import INPLACE_FUNCTIONS, rows
    from helpers import bridge_report
    elsewhere = {**dict.fromkeys(("div", "divide", "fix", "arctan2", "arcsin", "arccos", "arctan", "arcsinh", "arccosh",
                                  "arctanh", "polygamma", "special", "float_power"), "swept under another name"),
                 "where": "where(condition) is swept as where_cond", "bucketize": "searchsorted's kernel, swept",
                 "gcd": "integers only", "lcm": "integers only", "bincount": "counts integers",
                 "float_power_": "float_power's in-place form",
                 "istft": "takes complex spectra only (dyngrad has no half complex dtype)"}
    table = rows()
    host_rows = {table[i].name for i, e in bridge_report().items() if {"host_values", "round_to"} & set(e["functions"])
                 and ("fn" in table[i].kinds or "method" in table[i].kinds)}
    linalg = {"inverse", "det", "logdet", "slogdet", "pinverse", "cholesky", "qr", "svd", "matrix_power", "norm"}
    in_place = set(INPLACE_FUNCTIONS) | {row.inplace for row in table if row.inplace}     # their functions are swept
    missing = sorted(n for n in host_rows - set(CALLS) - set(elsewhere) - linalg - in_place
                     if not n.startswith("bitwise"))
    assert not missing, f"numpy-routed ops not swept over half types: {missing}"


# ----- numbers written into tensors ------------------------------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"]
NUMBERS = [300, -1, -255, -256, 70000, 2 ** 31, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 1.5, -0.5, 127.9, -129.0,
           math.inf, math.nan, 1e300, 65520.0, 3.4e38, True]


def _write(op, m, d, v):
    mask = m.tensor([True, False, True])
    if op == "setitem":
        x = m.zeros(3, dtype=d)
        x[0] = v
        return x
    if op == "setitem_slice":
        x = m.zeros(3, dtype=d)
        x[1:] = v
        return x
    if op == "setitem_mask":
        x = m.zeros(3, dtype=d)
        x[mask] = v
        return x
    if op == "setitem_index":
        x = m.zeros(3, dtype=d)
        x[m.tensor([0, 2])] = v
        return x
    calls = {
        "fill_": lambda: m.zeros(3, dtype=d).fill_(v),
        "masked_fill": lambda: m.zeros(3, dtype=d).masked_fill(mask, v),
        "masked_fill_": lambda: m.zeros(3, dtype=d).masked_fill_(mask, v),
        "full": lambda: m.full((2,), v, dtype=d),
        "full_like": lambda: m.full_like(m.zeros(2, dtype=d), v),
        "new_full": lambda: m.zeros(2, dtype=d).new_full((2,), v),
        "index_fill": lambda: m.zeros(3, dtype=d).index_fill(0, m.tensor([0]), v),
        "scatter": lambda: m.zeros(3, dtype=d).scatter(0, m.tensor([0]), v),
        "where": lambda: m.where(mask, m.zeros(3, dtype=d), v),
        "clamp": lambda: m.zeros(3, dtype=d).clamp(min=v),
        "tensor": lambda: m.tensor([v, 1], dtype=d),
        "add_alpha": lambda: m.add(m.zeros(3, dtype=d), m.ones(3, dtype=d), alpha=v),
        "sub_alpha": lambda: m.sub(m.zeros(3, dtype=d), m.ones(3, dtype=d), alpha=v),
        # arithmetic wraps, as torch (not refused)
        "add": lambda: m.zeros(3, dtype=d) + v,
        "mul_": lambda: m.ones(3, dtype=d).mul_(v),
    }
    return calls[op]()


WRITES = ["setitem", "setitem_slice", "setitem_mask", "setitem_index", "fill_", "masked_fill", "masked_fill_", "full",
          "full_like", "new_full", "index_fill", "scatter", "where", "clamp", "tensor", "add_alpha", "sub_alpha", "add",
          "mul_"]
# where dyngrad is knowingly not torch, with the reason
WRITE_EXCEPTIONS = {
    **{(op, v): "torch reads these as uint64 numbers; the cores take int64 ones (RuntimeError)"
       for op in ("where", "add", "mul_", "add_alpha", "sub_alpha") for v in (2 ** 63,)},
    **{(op, v): "an int below int64's range is refused by the core's number conversion (RuntimeError), torch's "
                "Python binding raises OverflowError"
       for op in ("add", "mul_", "clamp", "add_alpha", "sub_alpha") for v in (-2 ** 63 - 1,)},
    ("tensor", -2 ** 63 - 1): "numpy holds the list as objects: refused as not numbers (TypeError)",
    ("clamp", 2 ** 63): "clamp(min=2**63) on a float tensor: the core's number conversion",
    ("clamp", 2 ** 63 - 1): "the core's clamp takes its bounds as doubles (2**63 - 1 becomes 2**63)",
    ("tensor", 2 ** 63): "numpy reads [2**63, 1] as float64 values (RuntimeError, torch: ValueError)",
}


@pytest.mark.parametrize("op", WRITES)
def test_numbers_written_like_torch(dg, op):
    """Every dtype and number: torch's value, or its exception type (int8 300, uint8 -256, int nan, float16 70000
    raise; uint8 -1 writes 255; arithmetic wraps)."""
    for name in DTYPES:
        for v in NUMBERS:
            if (op, v) in WRITE_EXCEPTIONS and not isinstance(v, bool):
                continue
            what = f"{op}({name}, {v!r})"
            outcomes = []
            for m in (dg, torch):
                try:
                    outcomes.append(_write(op, m, getattr(m, name), v))
                except Exception as exc:  # noqa: BLE001
                    outcomes.append(exc)
            got, want = outcomes
            if isinstance(want, Exception):
                assert isinstance(got, Exception) and type(got).__name__ == type(want).__name__, \
                    f"{what}: torch raised {want!r}, dyngrad gave {got!r}"
                if isinstance(want, RuntimeError) and "overflow" in str(want):
                    prefix = "__setitem__" if op.startswith("setitem") else op.split("_")[0]
                    assert "without overflow" in str(got) and str(got).startswith(prefix), what
                continue
            assert not isinstance(got, Exception), f"{what}: dyngrad raised {got!r}, torch gave {want}"
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], what
            np.testing.assert_array_equal(_values(got), _values(want), err_msg=what)


def test_write_error_names_the_op_and_dtype(dg):
    with pytest.raises(RuntimeError, match=r"fill_: value 70000 cannot be converted to int16 without overflow"):
        dg.zeros(3, dtype=dg.int16).fill_(70000)
    with pytest.raises(RuntimeError, match=r"__setitem__: value 300 cannot be converted to int8 without overflow"):
        dg.zeros(3, dtype=dg.int8)[0] = 300
    x = dg.zeros(3, dtype=dg.int16)
    x[0] = dg.tensor(70000)                         # a tensor is copied, wrapping (as torch)
    assert x.tolist() == [4464, 0, 0]


# ----- subtraction with bool operands ----------------------------------------------------------------------------

SUBTRACTIONS = {
    "b - b": lambda m, b, f: b - b, "b - 1": lambda m, b, f: b - 1, "1 - b": lambda m, b, f: 1 - b,
    "f - b": lambda m, b, f: f - b, "b - f": lambda m, b, f: b - f, "f - True": lambda m, b, f: f - True,
    "True - f": lambda m, b, f: True - f, "sub(b, f)": lambda m, b, f: m.sub(b, f),
    "sub(f, b, alpha=2)": lambda m, b, f: m.sub(f, b, alpha=2),
    "subtract(f, True)": lambda m, b, f: m.subtract(f, True),
    "rsub(b, 1)": lambda m, b, f: m.rsub(b, 1), "rsub(f, True)": lambda m, b, f: m.rsub(f, True),
    "f.sub_(b)": lambda m, b, f: f.clone().sub_(b), "f -= b": lambda m, b, f: f.clone().__isub__(b),
    "f -= True": lambda m, b, f: f.clone().__isub__(True), "b - np.int64": lambda m, b, f: b - np.int64(1),
    "empty b - 1": lambda m, b, f: b[:0] - 1, "-b": lambda m, b, f: -b,
}


@pytest.mark.parametrize("name", sorted(SUBTRACTIONS))
def test_bool_subtraction_refused(dg, name):
    call = SUBTRACTIONS[name]
    with pytest.raises(RuntimeError):
        call(torch, torch.tensor([True, False]), torch.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"^(sub|neg): .*bool tensor"):
        call(dg, dg.tensor([True, False]), dg.tensor([1.0, 2.0]))


def test_subtraction_without_bools_still_works(dg):
    f = dg.tensor([1.0, 2.0])
    assert (f - 1).tolist() == [0.0, 1.0] and (3 - f).tolist() == [2.0, 1.0]
    assert dg.sub(f, f, alpha=2).tolist() == [-1.0, -2.0] and dg.rsub(f, 1).tolist() == [0.0, -1.0]
    assert (dg.tensor([3, 4]) - dg.tensor([1, 1], dtype=dg.uint8)).tolist() == [2, 3]
    assert (f - np.bool_(True)).tolist() == [0.0, 1.0]          # a numpy bool is a number to torch
