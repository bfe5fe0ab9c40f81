"""repr and str of tensors in torch's style: `tensor([1., 2.], requires_grad=True)`, summarised with ... above 1000
elements, sci notation when the magnitudes call for it, dtype shown when it is not the default; set_printoptions
changes these as torch's does (per engine: each engine's copy of this module keeps its own options)."""
import math
import numbers

import numpy as np

from . import bridge
from .args import get_default_dtype, shape_str

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
_options = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """How tensors print: digits after the point, the element count above which a tensor is summarised with
    ..., the items kept at each edge when summarised, the line width, a profile ('default', 'short', 'full')
    applied first, and sci_mode (True/False forces scientific notation on/off; None: chosen from the values)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
        _options.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0 or (
                name != "threshold" and not isinstance(value, numbers.Integral)):
            raise TypeError(f"set_printoptions: {name} must be a non-negative "
                            f"{'number' if name == 'threshold' else 'int'}, got {value!r}")
        _options[name] = value
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions: sci_mode must be True, False or None, got {sci_mode!r}")
    _options["sci_mode"] = sci_mode


def _edge_values(arr, summarize):
    """The values that will be printed (the corners only, when the tensor is summarised)."""
    if not summarize or arr.ndim == 0:
        return arr.reshape(-1)
    edge = _options["edgeitems"]
    for axis in range(arr.ndim):
        if arr.shape[axis] > 2 * edge:
            keep = list(range(edge)) + list(range(arr.shape[axis] - edge, arr.shape[axis]))
            arr = np.take(arr, keep, axis=axis)
    return arr.reshape(-1)


def _make_formatter(arr, summarize, nonzero_width=False):
    """A function formatting one value of arr to a common width: the widest value's, or with nonzero_width the
    widest nonzero finite value's, as torch's _Formatter measures (used for complex parts, where -0. is common)."""
    values = _edge_values(arr, summarize)
    kind = arr.dtype.kind
    if kind == "b":
        strings = ["True" if v else "False" for v in values]
        width = max(len(s) for s in strings) if strings else 0
        return lambda v: ("True" if v else "False").rjust(width)
    if kind in "iu":
        width = max((len(str(int(v))) for v in values), default=1)
        return lambda v: str(int(v)).rjust(width)
    if kind == "c":
        # torch: the real and the imaginary parts each get a float formatter of their own; the imaginary part
        # loses its padding and is joined with its sign (1.+2.j, 3.-4.j)
        real_fmt = _make_formatter(arr.real, summarize, nonzero_width=True)
        imag_fmt = _make_formatter(arr.imag, summarize, nonzero_width=True)

        def complex_fmt(v):
            v = complex(v)
            imag = (imag_fmt(v.imag) + "j").lstrip()
            return real_fmt(v.real) + (imag if imag[0] in "+-" else "+" + imag)
        return complex_fmt
    finite = values[np.isfinite(values)].astype(np.float64)
    nonzero = np.abs(finite[finite != 0])
    int_mode = bool(np.all(finite == np.ceil(finite)))
    sci_mode = False
    if nonzero.size:
        big, small = nonzero.max(), nonzero.min()
        sci_mode = big > 1e8 or big / small > 1000.0 or (not int_mode and small < 1e-4)
    if _options["sci_mode"] is not None:
        sci_mode = _options["sci_mode"]
    digits = _options["precision"]

    def fmt(v):
        v = float(v)
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        if sci_mode:
            return f"{v:.{digits}e}"
        if int_mode:
            return f"{v:.0f}."
        return f"{v:.{digits}f}"

    if nonzero_width:
        width = max([1] + [len(fmt(v)) for v in values if np.isfinite(v) and v != 0])
    else:
        width = max((len(fmt(v)) for v in values), default=1)
    return lambda v: fmt(v).rjust(width)


def _format_array(arr, fmt, indent, summarize):
    """Nested brackets, one row per line, blank lines between 3-d blocks; an explicit stack, no recursion."""
    if arr.ndim == 0:
        return fmt(arr.item())
    result = []
    # frame: [sub, indent, shown indices, position, parts, sink]
    stack = [[arr, indent, None, 0, [], result]]
    while stack:
        frame = stack[-1]
        sub, ind, shown, pos, parts, sink = frame
        if shown is None:
            n = sub.shape[0]
            shown = list(range(n))
            edge = _options["edgeitems"]
            if summarize and n > 2 * edge:
                shown = list(range(edge)) + [None] + list(range(n - edge, n))
            frame[2] = shown
            if sub.ndim == 1:
                # torch writes the gap of a summarised row as " ..." and leaves it out of the width per item
                items = [fmt(sub[i]) if i is not None else " ..." for i in shown]
                item_width = max((len(s) for s, i in zip(items, shown) if i is not None), default=1) + 2
                per_line = max(1, (_options["linewidth"] - ind - 1) // item_width)
                lines = [", ".join(items[k:k + per_line]) for k in range(0, len(items), per_line)]
                sink.append("[" + (",\n" + " " * (ind + 1)).join(lines) + "]")
                stack.pop()
                continue
        if pos == len(shown):
            sep = "," + "\n" * (sub.ndim - 1) + " " * (ind + 1)
            sink.append("[" + sep.join(parts) + "]")
            stack.pop()
            continue
        frame[3] = pos + 1
        i = shown[pos]
        if i is None:
            parts.append("...")
        else:
            stack.append([sub[i], ind + 1, None, 0, [], parts])
    return result[0]


def format_tensor(t, prefix="tensor("):
    if t.ndim > 64:      # numpy, which formats the values, stops at 64 dims
        return f"{prefix}<{t.ndim}-d tensor of shape {shape_str(t.shape)} and dtype dyngrad.{t.dtype.name}>)"
    arr = bridge.host_array(t)
    summarize = arr.size > _options["threshold"]
    suffixes = []
    if arr.size == 0:
        body = "[]"
        if arr.shape != (0,):
            suffixes.append(f"size={shape_str(arr.shape)}")
    else:
        fmt = _make_formatter(arr, summarize)
        body = _format_array(arr, fmt, len(prefix), summarize)
    default_complex = "complex128" if get_default_dtype().name == "float64" else "complex64"
    if t.dtype.name not in (get_default_dtype().name, "int64", "bool", default_complex):
        suffixes.append(f"dtype=dyngrad.{t.dtype.name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffixes) + ")"

