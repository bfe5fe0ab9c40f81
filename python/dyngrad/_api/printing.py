"""repr and str of tensors in torch's style: `tensor([1., 2.], requires_grad=True)`, summarised with ... above 1000
elements, sci notation when the magnitudes call for it, dtype shown when it is not the default."""
import numpy as np

from .args import get_default_dtype, host_array, shape_str

_EDGE_ITEMS = 3
_SUMMARIZE_ABOVE = 1000
_LINE_WIDTH = 80


def _edge_values(arr, summarize):
    """The values that will be printed (the corners only, when the tensor is summarised)."""
    if not summarize or arr.ndim == 0:
        return arr.reshape(-1)
    for axis in range(arr.ndim):
        if arr.shape[axis] > 2 * _EDGE_ITEMS:
            keep = list(range(_EDGE_ITEMS)) + list(range(arr.shape[axis] - _EDGE_ITEMS, arr.shape[axis]))
            arr = np.take(arr, keep, axis=axis)
    return arr.reshape(-1)


def _make_formatter(arr, summarize):
    values = _edge_values(arr, summarize)
    kind = arr.dtype.kind
    if kind == "b":
        strings = ["True" if v else "False" for v in values]
        width = max(len(s) for s in strings) if strings else 0
        return lambda v: ("True" if v else "False").rjust(width)
    if kind in "iu":
        width = max((len(str(int(v))) for v in values), default=1)
        return lambda v: str(int(v)).rjust(width)
    finite = values[np.isfinite(values)].astype(np.float64)
    nonzero = np.abs(finite[finite != 0])
    int_mode = bool(np.all(finite == np.ceil(finite)))
    sci_mode = False
    if nonzero.size:
        big, small = nonzero.max(), nonzero.min()
        sci_mode = big > 1e8 or (not int_mode and (big / small > 1000.0 or small < 1e-4))

    def fmt(v):
        v = float(v)
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        if sci_mode:
            return f"{v:.4e}"
        if int_mode:
            return f"{v:.0f}."
        return f"{v:.4f}"

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
            if summarize and n > 2 * _EDGE_ITEMS:
                shown = list(range(_EDGE_ITEMS)) + [None] + list(range(n - _EDGE_ITEMS, n))
            frame[2] = shown
            if sub.ndim == 1:
                items = [fmt(sub[i]) if i is not None else "..." for i in shown]
                item_width = max((len(s) for s in items), default=1) + 2
                per_line = max(1, (_LINE_WIDTH - ind - 1) // item_width)
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
    arr = host_array(t)
    summarize = arr.size > _SUMMARIZE_ABOVE
    suffixes = []
    if arr.size == 0:
        body = "[]"
        if arr.shape != (0,):
            suffixes.append(f"size={shape_str(arr.shape)}")
    else:
        fmt = _make_formatter(arr, summarize)
        body = _format_array(arr, fmt, len(prefix), summarize)
    if t.dtype.name not in (get_default_dtype().name, "int64", "bool"):
        suffixes.append(f"dtype=dyngrad.{t.dtype.name}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffixes) + ")"

