"""Tensor factories and random numbers, with torch's signatures: tensor, zeros, arange, rand, ... Each engine's
core makes the memory (_C.empty, _C.full; numpy data arrives through the bridge) and owns the generator (_C.rand, _C.manual_seed)."""

import builtins
import math
import warnings

import numpy as np

from ... import _C
from .. import bridge
from ..._user_frame import warn
from ..args import (DTYPE_NAMES, Tensor, array_from_data, check_factory_options, checked_write, core, dtype_arg,
                    finish, get_default_dtype, number, optional_dtype, shape_str, sizes_arg, tensor_arg, to_int,
                    type_name)
from ..bridge import canonical_bools
from ..device import check_device
from ..node_names import shows_as
from .dlpack import from_dlpack
from .shape import _int_seq


def _dtype_or(dtype, default, op):
    return default if dtype is None else dtype_arg(dtype, op)


# ----- from data -------------------------------------------------------------------------------------------------


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays or tensors)."""
    check_device(device, "tensor")
    dt = None if dtype is None else dtype_arg(dtype, "tensor")
    if isinstance(data, Tensor):
        src = data.detach()
        return bridge.from_array(bridge.host_array(src), src.dtype if dt is None else dt, requires_grad)
    return bridge.from_array(array_from_data(data, "tensor", dt), dt, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """A tensor sharing memory with `data` where possible (a tensor, a numpy array of a dyngrad dtype), else a copy."""
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and data.dtype.name in DTYPE_NAMES and _unshareable(data) is None and (
            dtype is None or dtype_arg(dtype, "as_tensor").name == data.dtype.name):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def _unshareable(arr):
    """Why a tensor cannot share this array's memory (None when it can). Both cores would otherwise copy it
    silently, and a from_numpy whose writes do not reach the array is a silent wrong answer."""
    if not arr.dtype.isnative:
        return (f"the array's byte order ({arr.dtype.str}) is not the machine's; a tensor cannot share it. "
                "Convert it with array.astype(array.dtype.newbyteorder('=')), or copy it with dyngrad.tensor(array)")
    if any(s < 0 for s in arr.strides):
        return (f"the array has a negative stride (strides {arr.strides}); a tensor cannot share it. Copy it with "
                "array.copy() or dyngrad.tensor(array)")
    if any(s % arr.itemsize for s in arr.strides):
        return (f"the array's strides {arr.strides} are not multiples of its item size {arr.itemsize}; a tensor "
                "cannot share it. Copy it with array.copy() or dyngrad.tensor(array)")
    return None


def from_numpy(ndarray):
    """A tensor sharing the array's memory (no copy)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type_name(ndarray)}.")
    if ndarray.dtype.name in DTYPE_NAMES and (why := _unshareable(ndarray)) is not None:
        raise ValueError(f"from_numpy: {why}.")     # torch raises ValueError for the first two as well
    if ndarray.dtype == np.bool_:
        ndarray = canonical_bools(ndarray)       # bytes other than 0/1: a copy (memory not shared), see there
    return bridge.share(ndarray)


# ----- filled ----------------------------------------------------------------------------------------------------

def _filled(op, value):
    def factory(*size, dtype=None, device=None, requires_grad=False):
        check_device(device, op)
        shape = sizes_arg(size, op)
        dt = _dtype_or(dtype, get_default_dtype(), op)
        t = _C.empty(shape, dt) if value is None else _C.full(shape, value, dt)
        return finish(t, requires_grad)
    factory.__name__ = factory.__qualname__ = op
    factory.__doc__ = f"A new tensor of the given size ({op}(2, 3) or {op}((2, 3)))."
    return factory


zeros = _filled("zeros", 0)
ones = _filled("ones", 1)
empty = _filled("empty", None)


def _default_dtype_of(value):
    if isinstance(value, bool):
        return _C.bool
    if isinstance(value, (int, np.integer)):
        return _C.int64
    if isinstance(value, complex):
        return _C.complex128 if get_default_dtype() is _C.float64 else _C.complex64
    return get_default_dtype()


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A new tensor of `size` filled with `fill_value` (its dtype follows the value: bool, int64 or float)."""
    check_device(device, "full")
    fill_value = number(fill_value, "full", "fill_value")
    shape = sizes_arg((size,), "full")
    dt = _dtype_or(dtype, _default_dtype_of(fill_value), "full")
    return finish(_C.full(shape, checked_write(fill_value, dt, "full"), dt), requires_grad)


def _like(op, make):
    def factory(input, *, dtype=None, device=None, requires_grad=False):
        tensor_arg(input, op)
        check_device(device, op)
        return finish(make(input.shape, _dtype_or(dtype, input.dtype, op)), requires_grad)
    factory.__name__ = factory.__qualname__ = op
    factory.__doc__ = f"{op[:-5]}() with the shape (and by default the dtype) of `input`."
    return factory


zeros_like = _like("zeros_like", lambda shape, dt: _C.full(shape, 0, dt))
ones_like = _like("ones_like", lambda shape, dt: _C.full(shape, 1, dt))
empty_like = _like("empty_like", core("empty"))


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    tensor_arg(input, "full_like")
    check_device(device, "full_like")
    fill_value = number(fill_value, "full_like", "fill_value")
    dt = _dtype_or(dtype, input.dtype, "full_like")
    return finish(_C.full(input.shape, checked_write(fill_value, dt, "full_like"), dt), requires_grad)


# ----- ranges ----------------------------------------------------------------------------------------------------

def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values from start (default 0) up to end, exclusive, by step: int64 when all three are ints (exact: Python
    ints never pass through a double)."""
    check_device(device, "arange")
    if end is None:
        start, end = 0, start
    # bools count as the ints 0 and 1, as torch's (torch.arange(True) is tensor([0]))
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    values = [int(v) if isinstance(v, (bool, np.bool_)) else v for v in values]
    for name, v in zip(("start", "end", "step"), values):
        if not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: expected a number as {name}, got {type_name(v)}.")
    is_float = any(isinstance(v, (float, np.floating)) for v in values)
    if is_float:
        start, end, step = (float(v) for v in values)
        if not (np.isfinite(start) and np.isfinite(end)):
            raise RuntimeError(f"arange: unsupported range: {start:g} -> {end:g} (start and end must be finite).")
        if not np.isfinite(step) or step == 0:
            raise RuntimeError(f"arange: step must be finite and nonzero, got {step:g}.")
        count = np.ceil((end - start) / step)
    else:
        start, end, step = (int(v) for v in values)
        if step == 0:
            raise RuntimeError("arange: step must be nonzero.")
        count = -(-(end - start) // step)               # ceil, exact in Python ints
    if start != end and count < 0:
        raise RuntimeError(f"arange: upper bound and step are inconsistent (start={start}, end={end}, step={step}).")
    if count >= 2 ** 63:
        raise RuntimeError(f"arange: the range (start={start}, end={end}, step={step}) has more elements than fit in "
                           "64 bits.")
    dt = _dtype_or(dtype, get_default_dtype() if is_float else _C.int64, "arange")
    out = _C.empty((max(int(count), 0),), _host_dtype(dt))  # the core refuses a size it cannot allocate
    if is_float:
        bridge.view(out)[...] = start + np.arange(out.numel(), dtype=np.float64) * step
    else:
        bridge.view(out)[...] = start + np.arange(out.numel(), dtype=np.int64) * step
    return finish(_as_dtype(out, dt), requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """`steps` values evenly spaced from start to end, inclusive."""
    check_device(device, "linspace")
    steps = to_int(steps, "linspace", "steps")
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}.")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    dt = _dtype_or(dtype, get_default_dtype(), "linspace")
    out = _C.empty((steps,), _host_dtype(dt))           # the core refuses a size it cannot allocate
    bridge.view(out)[...] = np.linspace(start, end, steps)
    return finish(_as_dtype(out, dt), requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """The n x m identity matrix (m defaults to n)."""
    check_device(device, "eye")
    n = to_int(n, "eye", "n")
    m = n if m is None else to_int(m, "eye", "m")
    if n < 0 or m < 0:
        raise RuntimeError(f"eye: sizes must be non-negative, got {n} and {m}.")
    dt = _dtype_or(dtype, get_default_dtype(), "eye")
    out = _C.full((n, m), 0, _host_dtype(dt))           # the core refuses a size it cannot allocate
    np.fill_diagonal(bridge.view(out), 1)
    return finish(_as_dtype(out, dt), requires_grad)


def _host_dtype(dt):
    """The dtype a factory fills through numpy: dt, or float32 for bfloat16 (converted after by _as_dtype)."""
    return _C.float32 if dt.name == "bfloat16" else dt


def _as_dtype(t, dt):
    return t if t.dtype is dt else _C.to_dtype(t, dt)


# ----- random ----------------------------------------------------------------------------------------------------


# ----- Tensor.new_*: a new tensor with this tensor's dtype (unless dtype= says otherwise) -------------------------

def _new_filled(op, value):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        check_device(device, op)
        if not size:
            raise TypeError(f"{op}: missing the required argument size.")
        shape = sizes_arg(size, op)
        dt = _dtype_or(dtype, self.dtype, op)
        return finish(_C.empty(shape, dt) if value is None else _C.full(shape, value, dt), requires_grad)
    method.__name__ = method.__qualname__ = op
    method.__doc__ = f"A new tensor of the given size ({op}(2, 3) or {op}((2, 3))), this tensor's dtype by default."
    return method


new_zeros = _new_filled("new_zeros", 0)
new_ones = _new_filled("new_ones", 1)
new_empty = _new_filled("new_empty", None)


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A new tensor of `size` (a sequence) filled with fill_value, with this tensor's dtype by default."""
    check_device(device, "new_full")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"new_full: expected a tuple of ints as size, got {type_name(size)}.")
    fill_value = number(fill_value, "new_full", "fill_value")
    dt = _dtype_or(dtype, self.dtype, "new_full")
    return finish(_C.full(sizes_arg((size,), "new_full"), checked_write(fill_value, dt, "new_full"), dt),
                  requires_grad)


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """A copy of data as a new leaf tensor with this tensor's dtype by default (torch warns when data is a
    tensor: data.detach().clone() says the same more plainly)."""
    if isinstance(data, Tensor):
        warn("new_tensor: to copy construct from a tensor, use t.detach().clone() (as torch recommends) "
             "rather than new_tensor(t).", UserWarning)
    return tensor(data, dtype=_dtype_or(dtype, self.dtype, "new_tensor"), device=device, requires_grad=requires_grad)


# ----- about tensors ---------------------------------------------------------------------------------------------

def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return tensor_arg(input, "numel").numel()


def is_floating_point(input):
    return tensor_arg(input, "is_floating_point").dtype.is_floating_point


# ----- more factories: logspace, range, scalar_tensor, asarray, frombuffer, empty_strided, fill --------------------

def _host_values(n, dt, values):
    """A new 1-D tensor of dtype dt holding `values` (float64 numbers; cast as torch casts a float to dt)."""
    out = _C.empty((n,), _host_dtype(dt))           # the core refuses a size it cannot allocate
    if n:
        view = bridge.view(out)
        with np.errstate(all="ignore"):
            view[...] = values(view.size) if view.dtype.kind in "fc" else np.trunc(values(view.size))
    return _as_dtype(out, dt)


def _range_number(v, op, name):
    v = v.item() if isinstance(v, Tensor) else v
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: expected a number as {name}, got {type_name(v)}.")
    return v


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """`steps` values base**t for t evenly spaced from start to end, inclusive."""
    check_device(device, "logspace")
    check_factory_options("logspace", layout)
    start, end = (_range_number(v, "logspace", n) for v, n in ((start, "start"), (end, "end")))
    base = float(number(base, "logspace", "base"))
    steps = to_int(steps, "logspace", "steps")
    if steps < 0:
        raise RuntimeError(f"logspace: number of steps must be non-negative, got {steps}.")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, "logspace")
    return finish(_host_values(steps, dt, lambda n: np.power(base, np.linspace(float(start), float(end), n))),
                  requires_grad)


def range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):
    """Deprecated in torch: values from start to end INCLUSIVE by step, in the default float dtype (arange is the
    one to use; this warns as torch does)."""
    if end is None:
        raise TypeError('range: missing the required argument "end".')
    warn("dyngrad.range is deprecated and will be removed in a future release because its behavior is "
         "inconsistent with Python's range builtin. Instead, use dyngrad.arange, which produces values in "
         "[start, end).", UserWarning)
    check_device(device, "range")
    check_factory_options("range", layout)
    start, end, step = (float(_range_number(v, "range", n)) for v, n in ((start, "start"), (end, "end"),
                                                                        (step, "step")))
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise RuntimeError(f"range: unsupported range: {start:g} -> {end:g} by {step:g} (all must be finite).")
    if step == 0:
        raise RuntimeError("range: step must be nonzero.")
    if (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound and step are inconsistent (start={start:g}, end={end:g}, "
                           f"step={step:g}).")
    count = int(math.floor((end - start) / step)) + 1
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, "range")
    return finish(_host_values(count, dt, lambda n: start + np.arange(n, dtype=np.float64) * step), requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """A 0-d tensor holding the number s, in the default float dtype unless dtype= says otherwise."""
    check_device(device, "scalar_tensor")
    check_factory_options("scalar_tensor", layout, pin_memory)
    v = number(s, "scalar_tensor", "s")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, "scalar_tensor")
    return finish(_C.full((), float(v) if dt.is_floating_point else v, dt), requires_grad)


def _is_buffer(obj):
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return True
    if isinstance(obj, (np.ndarray, np.generic)):     # numpy scalars export a buffer too, but are numbers
        return False
    try:
        memoryview(obj)
    except TypeError:
        return False
    return not isinstance(obj, np.ndarray)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """obj as a tensor, sharing memory where it can (a tensor, a numpy array, a buffer) unless copy=True;
    copy=False refuses to copy (ValueError), as torch. A tensor keeps its requires_grad unless requires_grad= is
    given; buffers are read as raw bytes of `dtype` (the default float dtype if none is given)."""
    check_device(device, "asarray")
    dt = optional_dtype(dtype, "asarray")
    if copy is not None and not isinstance(copy, (bool, np.bool_)):
        raise TypeError(f"asarray: expected a bool or None as copy, got {type_name(copy)}.")

    def refuse(have):
        raise ValueError(f"asarray: copy=False, but a {have} cannot be aliased as {dt.name}; a copy is needed.")

    if isinstance(obj, Tensor):
        out = obj
        if dt is not None and dt is not obj.dtype:
            if copy is False:
                refuse(f"tensor of {obj.dtype.name}")
            out = obj.to(dt)
        elif copy:
            out = obj.clone()
        if requires_grad is not None and bool(requires_grad) != out.requires_grad:
            out.requires_grad_(bool(requires_grad))     # on the tensor itself, as torch (a leaf; else it raises)
        return out
    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray):     # another library's tensor
        return asarray(from_dlpack(obj), dtype=dt, copy=copy, requires_grad=requires_grad)
    if isinstance(obj, np.ndarray) or _is_buffer(obj):
        if isinstance(obj, np.ndarray):
            arr = obj
        else:
            element = dt or get_default_dtype()
            arr = _frombuffer_array(obj, element, -1, 0, "asarray")
        if arr.dtype.name not in DTYPE_NAMES:
            out = tensor(arr, dtype=dt)
        elif dt is not None and dt.name != arr.dtype.name:
            if copy is False:
                refuse(f"numpy array of {arr.dtype.name}")
            out = tensor(arr, dtype=dt)
        elif copy:
            out = tensor(arr, dtype=dt)
        elif (why := _unshareable(arr)) is not None:
            if copy is False:
                raise ValueError(f"asarray: copy=False, but {why}.")
            out = tensor(arr, dtype=dt)
        else:
            out = from_numpy(arr)
        return finish(out, bool(requires_grad))
    if copy is False:
        raise ValueError(f"asarray: copy=False, but a {type_name(obj)} has no memory to share; a copy is needed.")
    return tensor(obj, dtype=dt, requires_grad=bool(requires_grad))


def _frombuffer_array(buffer, dt, count, offset, op):
    """The numpy array over `buffer`'s bytes (offset on, count elements or all of them) that frombuffer shares."""
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(f"{op}: expected an object supporting the buffer protocol, got {type_name(buffer)}.") from None
    nbytes = view.nbytes
    itemsize = np.dtype(dt.name if dt.name != "bfloat16" else "float16").itemsize
    if dt.name == "bfloat16":
        raise TypeError(f"{op}: bfloat16 has no numpy dtype to read a buffer as; read float32 and convert.")
    if nbytes == 0 or count == 0:
        raise ValueError(f"{op}: both the buffer length ({nbytes}) and count ({count}) must be nonzero.")
    if not 0 <= offset < nbytes:
        raise ValueError(f"{op}: offset ({offset} bytes) must be non-negative and less than the buffer length "
                         f"({nbytes} bytes).")
    if count < 0:
        if (nbytes - offset) % itemsize:
            raise ValueError(f"{op}: the buffer length ({nbytes} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of the element size ({itemsize}).")
        count = (nbytes - offset) // itemsize
    elif offset + count * itemsize > nbytes:
        raise ValueError(f"{op}: the requested length ({count} * {itemsize} bytes) after offset ({offset} bytes) "
                         f"exceeds the buffer length ({nbytes} bytes).")
    flat = view.cast("B") if view.ndim != 1 or view.format != "B" else view
    return np.frombuffer(flat, dtype=dt.name, count=count, offset=offset)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor sharing the memory of a Python buffer (bytearray, memoryview, array.array, ...): count
    elements of dtype from byte `offset` on (-1: all the rest). A read-only buffer warns, as torch: writing to the
    tensor would be undefined."""
    dt = dtype_arg(dtype, "frombuffer")
    count, offset = to_int(count, "frombuffer", "count"), to_int(offset, "frombuffer", "offset")
    arr = _frombuffer_array(buffer, dt, count, offset, "frombuffer")
    if not arr.flags.writeable:
        warn("frombuffer: the given buffer is not writable; the tensor shares its memory read-only, so "
             "in-place operations on it will raise. Pass a bytearray (or clone() the tensor) to write.",
             UserWarning)
    return finish(_share(arr), requires_grad)


def _share(arr):
    """The tensor over arr's memory (a read-only array gives a read-only tensor; the caller has warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bridge.share(arr)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor of `size` with the given strides (in elements) over fresh memory. Its values are zeros here
    (torch leaves them undefined)."""
    check_device(device, "empty_strided")
    check_factory_options("empty_strided", layout, pin_memory)
    shape, strides = _int_seq(size, "empty_strided", "size"), _int_seq(stride, "empty_strided", "stride")
    if len(shape) != len(strides):
        raise RuntimeError(f"empty_strided: size {shape_str(shape)} and stride {shape_str(strides)} must have the "
                           "same length.")
    if any(s < 0 for s in shape):
        raise RuntimeError(f"empty_strided: negative dimension in size {shape_str(shape)}; sizes must be >= 0.")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"empty_strided: strides must be non-negative, got {shape_str(strides)}.")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, "empty_strided")
    storage = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    base = _C.full((storage,), 0, dt)
    if dt.name == "bfloat16":            # no numpy dtype to stride over: a contiguous tensor of that size
        return finish(_C.full(shape, 0, dt), requires_grad)
    arr = np.lib.stride_tricks.as_strided(bridge.view(base), shape, [s * base.element_size() for s in strides])
    return finish(bridge.share(arr), requires_grad)


def fill(input, value):
    """A new tensor of input's shape and dtype filled with value (torch.fill, out of place)."""
    a = tensor_arg(input, "fill")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill: only supports a 0-dimensional value tensor, got {value.ndim} dimensions.")
        return _C.expand(_C.reshape(_as_dtype(value, a.dtype), (1,) * a.ndim), tuple(a.shape)) if a.ndim else \
            _C.clone(_as_dtype(value, a.dtype))
    v = number(value, "fill", "value")
    return _C.full(tuple(a.shape), v if isinstance(v, int) and not isinstance(v, bool) else float(v), a.dtype)


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False):
    """empty_strided with self's dtype (unless dtype= says otherwise)."""
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype, layout=layout, device=device,
                         requires_grad=requires_grad, pin_memory=pin_memory)


# ----- windows -----------------------------------------------------------------------------------------------------

@shows_as("Vander")
def _window(op, values):
    def window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
        return _make_window(op, window_length, periodic, dtype, device, requires_grad, values, layout)
    window.__name__ = window.__qualname__ = op
    return window


def _make_window(op, window_length, periodic, dtype, device, requires_grad, values, layout=None):
    check_device(device, op)
    check_factory_options(op, layout)
    n = to_int(window_length, op, "window_length")
    if n < 0:
        raise RuntimeError(f"{op}: requires a non-negative window_length, got {n}.")
    dt = get_default_dtype() if dtype is None else dtype_arg(dtype, op)
    if not dt.is_floating_point:
        raise RuntimeError(f"{op}: expects a floating-point dtype, got {dt.name}.")
    if n <= 1:
        return finish(_C.full((n,), 1.0, dt), requires_grad)
    m = n + 1 if periodic else n              # a periodic window is the symmetric one of n + 1, less its end
    w = values(np.arange(m, dtype=np.float64), m)[:n]
    return finish(bridge.host_result(w, dt), requires_grad)


def _cosine_sum(*a):
    return lambda k, m: builtins.sum(c * np.cos(2 * math.pi * j * k / (m - 1)) * (-1) ** j for j, c in enumerate(a))


hann_window = _window("hann_window", _cosine_sum(0.5, 0.5))


blackman_window = _window("blackman_window", _cosine_sum(0.42, 0.5, 0.08))


bartlett_window = _window("bartlett_window", lambda k, m: 1 - np.abs(2 * k / (m - 1) - 1))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """alpha - beta cos(2 pi k / (N - 1))."""
    alpha, beta = float(number(alpha, "hamming_window", "alpha")), float(number(beta, "hamming_window", "beta"))
    return _make_window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                        lambda k, m: alpha - beta * np.cos(2 * math.pi * k / (m - 1)), layout)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - ((k - M/2) / (M/2))**2)) / I0(beta), M = N - 1."""
    beta = float(number(beta, "kaiser_window", "beta"))
    return _make_window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                        lambda k, m: np.i0(beta * np.sqrt(np.clip(1 - ((k - (m - 1) / 2) / ((m - 1) / 2)) ** 2, 0,
                                                                  None))) / np.i0(beta), layout)
