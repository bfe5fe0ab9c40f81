"""dyngrad.testing: torch.testing's assert_close and make_tensor, shared by both engines.

assert_close walks nested sequences and mappings, compares tensors (shape, dtype, device, optionally strides, then
values with |actual - expected| <= atol + rtol * |expected|) and Python numbers, and raises AssertionError with
torch's report: the number of mismatched elements and the greatest absolute and relative differences with their
indices. Values are compared in numpy in the two inputs' promoted dtype, so the reported differences are the ones
torch reports (bfloat16, which numpy lacks, is compared in float32).
"""
import collections.abc
import math

import numpy as np

from . import Tensor, empty, randint, finfo, iinfo, bfloat16, float32
from ._user_frame import warn

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# torch's default tolerances per dtype (rtol, atol); integers and bool compare exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A failed comparison, carrying the message before msg= is applied and the item path where it failed."""
    path = ()


def _tolerances(dtypes, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, "
                         f"but got no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    pairs = [_TOLERANCES.get(name, (0.0, 0.0)) for name in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _is_tensor(x):
    return isinstance(x, (Tensor, np.ndarray))


def _host(t):
    """A tensor's values as a numpy array in its own dtype (bfloat16 as float32) and its dtype's name."""
    if isinstance(t, np.ndarray):
        return t, {"float16": "float16", "float32": "float32", "float64": "float64", "bool": "bool"}.get(
            t.dtype.name, t.dtype.name)
    name = str(t.dtype).rpartition(".")[2]
    data = t.detach()
    if t.dtype == bfloat16:
        data = data.to(float32)
    return np.array(data.numpy()), name


def _diff_msg(kind, diff, idx, tol, equality):
    text = f"{kind.title()} difference: {diff}" if idx is None else f"Greatest {kind} difference: {diff} at index {idx}"
    return text + ("" if equality else f" (up to {tol} allowed)")


def _compare_values(a, e, rtol, atol, equal_nan, identifier):
    """Raises _Mismatch unless every element of a is close to e (numpy arrays of one dtype and shape)."""
    equality = rtol == 0 and atol == 0
    if a.dtype.kind in "biu":
        a64, e64 = a.astype(np.int64), e.astype(np.int64)
        matches = a64 == e64
    else:
        a64, e64 = a, e
        with np.errstate(invalid="ignore", over="ignore"):
            matches = a == e
            if equal_nan:
                matches |= np.isnan(a) & np.isnan(e)
            finite = np.isfinite(a) & np.isfinite(e)
            matches |= finite & (np.abs(a - e) <= atol + rtol * np.abs(e))
    if matches.all():
        return
    title = f"{identifier or ('Scalars' if a.ndim == 0 else 'Tensor-likes')} are not " \
            f"{'equal' if equality else 'close'}!"
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        abs_diff = np.abs(a64 - e64)
        rel_diff = abs_diff / np.abs(e64)
    if a.ndim == 0:
        lines = [f"Expected {e.item()} but got {a.item()}.",
                 _diff_msg("absolute", abs_diff.item(), None, atol, equality),
                 _diff_msg("relative", rel_diff.item(), None, rtol, equality)]
    else:
        flat_abs, flat_rel = abs_diff.reshape(-1).copy(), rel_diff.reshape(-1).copy()
        flat_matches = matches.reshape(-1)
        flat_abs[flat_matches] = 0
        flat_rel[flat_matches] = 0
        # the largest difference, where a nan counts as the largest (as torch.max finds it)
        i_abs = int(np.argmax(flat_abs)) if flat_abs.dtype.kind in "biu" or not np.isnan(flat_abs).any() \
            else int(np.flatnonzero(np.isnan(flat_abs))[0])
        i_rel = int(np.flatnonzero(np.isnan(flat_rel))[0]) if np.isnan(flat_rel).any() else int(np.argmax(flat_rel))
        total, bad = matches.size, int(matches.size - matches.sum())
        lines = [f"Mismatched elements: {bad} / {total} ({bad / total:.1%})",
                 _diff_msg("absolute", flat_abs[i_abs].item(), _index_text(i_abs, a.shape), atol, equality),
                 _diff_msg("relative", flat_rel[i_rel].item(), _index_text(i_rel, a.shape), rtol, equality)]
    raise _Mismatch(title + "\n\n" + "\n".join(lines))


def _index_text(flat, shape):
    return str(tuple(int(i) for i in np.unravel_index(flat, shape)))


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    if type(actual) is not type(expected) and not (isinstance(actual, Tensor) and isinstance(expected, Tensor)):
        raise TypeError(f"assert_close: no comparison for inputs of type {type(actual)} and {type(expected)}.")
    if tuple(actual.shape) != tuple(expected.shape):
        raise _Mismatch(f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.")
    if isinstance(actual, Tensor):
        if check_device and str(actual.device) != str(expected.device):
            raise _Mismatch(f"The values for attribute 'device' do not match: {actual.device} != "
                            f"{expected.device}.")
        if check_dtype and actual.dtype != expected.dtype:
            raise _Mismatch(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.")
        if check_stride and actual.stride() != expected.stride():
            raise _Mismatch(f"The values for attribute 'stride()' do not match: {actual.stride()} != "
                            f"{expected.stride()}.")
    elif check_dtype and actual.dtype != expected.dtype:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.")
    a, a_name = _host(actual)
    e, e_name = _host(expected)
    rtol, atol = _tolerances((a_name, e_name), rtol, atol)
    common = np.promote_types(a.dtype, e.dtype)
    if "c" not in (a.dtype.kind, e.dtype.kind) and (a.dtype.kind == "f") != (e.dtype.kind == "f"):
        # torch: an integer tensor with a float one is float (a complex one with anything stays complex)
        common = a.dtype if a.dtype.kind == "f" else e.dtype
    if a.dtype == np.bool_ and e.dtype == np.bool_:
        common = np.dtype(np.int64)
    _compare_values(a.astype(common), e.astype(common), rtol, atol, equal_nan, None)


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype):
    if isinstance(actual, bool) or isinstance(expected, bool):
        if not (isinstance(actual, bool) and isinstance(expected, bool)):
            raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
        if actual is not expected:
            raise _Mismatch(f"Booleans mismatch: {actual} is not {expected}")
        return
    if check_dtype and type(actual) is not type(expected):
        raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.")
    names = ["float64" if isinstance(v, float) else "int64" for v in (actual, expected)]
    rtol, atol = _tolerances(names, rtol, atol)
    dtype = np.float64 if "float64" in names else np.int64
    _compare_values(np.array(actual, dtype=dtype), np.array(expected, dtype=dtype), rtol, atol, equal_nan, None)


_NUMBER = (bool, int, float)


def _walk(actual, expected, options):
    if _is_tensor(actual) or _is_tensor(expected):
        if not (_is_tensor(actual) and _is_tensor(expected)) or (
                not options["allow_subclasses"] and type(actual) is not type(expected)):
            raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and "
                            f"{type(expected)}.")
        return _compare_tensors(actual, expected, **{k: v for k, v in options.items() if k != "allow_subclasses"})
    if isinstance(actual, _NUMBER) and isinstance(expected, _NUMBER):
        return _compare_numbers(actual, expected, options["rtol"], options["atol"], options["equal_nan"],
                                options["check_dtype"])
    strings = (str, bytes)
    if isinstance(actual, collections.abc.Sequence) and isinstance(expected, collections.abc.Sequence) \
            and not isinstance(actual, strings) and not isinstance(expected, strings):
        if len(actual) != len(expected):
            raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _walk_item(a, e, i, options)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        a_keys, e_keys = set(actual), set(expected)
        if a_keys != e_keys:
            missing, extra = sorted(e_keys - a_keys, key=repr), sorted(a_keys - e_keys, key=repr)
            text = "The keys of the mappings do not match:"
            if missing:
                text += f"\nMissing keys in the actual mapping: {missing}"
            if extra:
                text += f"\nAdditional keys in the actual mapping: {extra}"
            raise _Mismatch(text)
        for key in sorted(a_keys, key=repr) if not all(isinstance(k, str) for k in a_keys) else sorted(a_keys):
            _walk_item(actual[key], expected[key], key, options)
        return
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.")


def _walk_item(actual, expected, key, options):
    try:
        _walk(actual, expected, options)
    except _Mismatch as failure:
        failure.path = (key,) + failure.path
        raise


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """torch.testing.assert_close: raises AssertionError unless actual and expected are close.

    Tensors (or numpy arrays) must agree in shape, device and (with check_dtype) dtype, then elementwise
    |actual - expected| <= atol + rtol * |expected| (inf equal to inf of the same sign; nan equal to nan only with
    equal_nan). rtol/atol default per dtype as torch (float32: 1.3e-6/1e-5, float64: 1e-7/1e-7, float16:
    1e-3/1e-5, bfloat16: 1.6e-2/1e-5, integers and bool: exact); give both or neither (ValueError). Sequences and
    mappings are compared item by item. msg: a string that replaces the report, or a callable given the report.
    allow_subclasses=False refuses (TypeError, as torch) a pair of different tensor types, e.g. a Parameter and a
    Tensor. check_layout has nothing to check: every dyngrad tensor is strided.
    """
    if rtol is not None or atol is not None:
        _tolerances((), rtol, atol)
    options = dict(rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=check_device, check_dtype=check_dtype,
                   check_stride=check_stride, allow_subclasses=allow_subclasses)
    try:
        _walk(actual, expected, options)
    except _Mismatch as failure:
        text = str(failure)
        if failure.path:
            text += f"\n\nThe failure occurred for item {''.join(f'[{p!r}]' for p in failure.path)}"
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = msg
        raise AssertionError(text) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch.testing.assert_allclose (deprecated in torch: use assert_close); compares without the dtype check."""
    warn("dyngrad.testing.assert_allclose() is deprecated; use dyngrad.testing.assert_close() instead.",
         FutureWarning)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)


def _low_high(low, high, dtype, lowest, highest_exclusive, default_low, default_high):
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"make_tensor: low and high cannot be NaN, but got low={low} and high={high}.")
    if low == high and dtype.is_floating_point:
        warn("make_tensor: low == high for a floating-point dtype is deprecated (torch 2.1); use full().",
             FutureWarning)
    elif low >= high:
        raise ValueError(f"make_tensor: low must be less than high, but got {low} >= {high}.")
    elif high < lowest or low >= highest_exclusive:
        raise ValueError(f"make_tensor: the interval [{low}, {high}) is outside what {dtype} holds, "
                         f"[{lowest}, {highest_exclusive}).")
    low = min(max(low, lowest), highest_exclusive)
    high = min(max(high, lowest), highest_exclusive)
    if not dtype.is_floating_point:
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """torch.testing.make_tensor: a tensor of `shape` filled from the engine's generator, uniformly in [low, high)
    (floating point: default [-9, 9); integers: [-9, 10) clamped to the dtype; bool: False or True).

    noncontiguous: every other element of a twice-as-wide tensor; exclude_zero: zeros become 1 (integers) or the
    dtype's smallest normal number (floating point). requires_grad is only for floating-point dtypes (ValueError).
    """
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError("make_tensor: noncontiguous and memory_format are mutually exclusive.")
    if requires_grad and not dtype.is_floating_point:
        raise ValueError(f"make_tensor: requires_grad=True is not supported for boolean and integral dtypes, "
                         f"but got dtype={dtype}.")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if str(dtype).endswith(".bool"):
        low, high = _low_high(low, high, dtype, 0, 2, 0, 2)
        result = randint(low, high, shape, dtype=dtype, device=device)
    elif not dtype.is_floating_point:
        info = iinfo(dtype)
        top = info.max + (1 if info.max < 2 ** 63 - 1 else 0)
        low, high = _low_high(low, high, dtype, info.min, top, -9, 10)
        result = randint(low, high, shape, dtype=dtype, device=device)
    else:
        info = finfo(dtype)
        low, high = _low_high(low, high, dtype, info.min, info.max, -9, 9)
        result = empty(shape, dtype=dtype, device=device)
        result.uniform_(low, high)
    if noncontiguous:
        result = result[..., 1::2]
    if exclude_zero:
        result[result == 0] = 1 if not dtype.is_floating_point else finfo(dtype).tiny
    if dtype.is_floating_point:
        result.requires_grad_(requires_grad)
    return result
