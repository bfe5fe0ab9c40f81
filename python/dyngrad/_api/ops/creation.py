"""Tensor factories and random numbers, with torch's signatures: tensor, zeros, arange, rand, ... Each engine's
core makes the memory (_C.empty, _C.full, _C.copy_from_numpy) and owns the generator (_C.rand, _C.manual_seed)."""

import numpy as np

from ... import _C
from ..generator import drawing
from ..args import (DTYPE_NAMES, Tensor, check_device, check_factory_options, checked_write, dtype_arg, finish,
                   get_default_dtype, host_array, number, numpy_dtype, sizes_arg, tensor_arg, to_int, type_name)


def _dtype_or(dtype, default, op):
    return default if dtype is None else dtype_arg(dtype, op)


# ----- from data -------------------------------------------------------------------------------------------------

def _flatten(data):
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            yield x


def _nested_values(data):
    """Nested lists of tensors (or numbers) as nested lists of numbers."""
    if isinstance(data, Tensor):
        return host_array(data.detach()).tolist()
    if not isinstance(data, (list, tuple)):
        return data
    return [_nested_values(x) for x in data]


def _as_array(data, op, dtype=None):
    """data as a numpy array of `dtype`, or of the dtype torch.tensor would infer: Python floats become the default
    float dtype, numpy arrays and scalars of a dyngrad dtype keep it, other ints become int64, bools stay bool."""
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flatten(data)):
        data = _nested_values(data)
    try:
        arr = np.array(data)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{op}: could not convert data of type {type_name(data)} to a tensor ({exc}).") from None
    kind = arr.dtype.kind
    if kind not in "biuf":
        raise TypeError(f"{op}: could not convert data of type {type_name(data)} (numpy dtype {arr.dtype}) to a "
                        "tensor; expected numbers, bools, nested lists of them or a numpy array.")
    arr = _canonical_bools(arr)
    if dtype is not None:
        if arr.size and not dtype.is_floating_point and not isinstance(data, (np.ndarray, np.generic)):
            for v in (arr.min(), arr.max()):       # Python numbers must fit an integer dtype (numpy arrays wrap)
                checked_write(v.item(), dtype, op, int64_numbers=True)
        return arr.astype(numpy_dtype(dtype))
    if kind == "f":
        keeps = isinstance(data, (np.ndarray, np.generic))       # numpy floats keep their width (float16 too)
        return arr if keeps else arr.astype(numpy_dtype(get_default_dtype()))
    if kind in "iu":
        keeps = isinstance(data, (np.ndarray, np.generic)) and arr.dtype.name in ("uint8", "int8", "int16", "int32")
        if keeps:
            return arr
        _check_fits_int64(arr, op)
        return arr.astype(np.int64)
    return arr


def _check_fits_int64(arr, op):
    # dyngrad has no uint64 dtype: a value above 2**63-1 would wrap silently in the int64 it becomes
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise OverflowError(f"{op}: a uint64 value ({arr.max()}) does not fit int64, the widest integer dtype "
                            "dyngrad has.")


def _canonical_bools(arr):
    """A numpy bool array may hold bytes other than 0 and 1 (a uint8 array viewed as bool): kernels that read the
    byte (sum, casts) would count 2 or 255 as such, where numpy and torch see True. Such an array becomes a copy
    holding 0/1 (a well-formed one is returned as it is)."""
    if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
        return arr.view(np.uint8) != 0
    return arr


def from_array(arr, dtype, requires_grad=False):
    """A new tensor of `dtype` holding a copy of the numpy array (of numpy_dtype(dtype)); bfloat16, which numpy
    lacks, arrives as float32 and is rounded here."""
    t = _C.copy_from_numpy(np.asarray(arr), False)
    if dtype is not None and t.dtype is not dtype:
        t = _C.to_dtype(t, dtype)
    return finish(t, bool(requires_grad))


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, numpy arrays or tensors)."""
    check_device(device, "tensor")
    dt = None if dtype is None else dtype_arg(dtype, "tensor")
    if isinstance(data, Tensor):
        src = data.detach()
        return from_array(host_array(src), src.dtype if dt is None else dt, requires_grad)
    return from_array(_as_array(data, "tensor", dt), dt, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """A tensor sharing memory with `data` where possible (a tensor, a numpy array of a dyngrad dtype), else a copy."""
    check_device(device, "as_tensor")
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and data.dtype.name in DTYPE_NAMES and (
            dtype is None or dtype_arg(dtype, "as_tensor").name == data.dtype.name):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A tensor sharing the array's memory (no copy)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type_name(ndarray)}.")
    if ndarray.dtype == np.bool_:
        ndarray = _canonical_bools(ndarray)       # bytes other than 0/1: a copy (memory not shared), see there
    return _C.from_numpy(ndarray)


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
empty_like = _like("empty_like", _C.empty)


def _random_like(op, draw):
    def factory(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
                memory_format=None):
        tensor_arg(input, op)
        check_device(device, op)
        check_factory_options(op, layout)
        dt = _float_dtype(_dtype_or(dtype, input.dtype, op), op)
        with drawing(generator, op):
            return finish(draw(tuple(input.shape), dt), requires_grad)
    factory.__name__ = factory.__qualname__ = op
    factory.__doc__ = f"{op[:-5]}() with the shape (and by default the dtype) of `input`."
    return factory


rand_like = _random_like("rand_like", _C.rand)
randn_like = _random_like("randn_like", _C.randn)


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
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    for name, v in zip(("start", "end", "step"), values):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
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
        out._numpy_view()[...] = start + np.arange(out.numel(), dtype=np.float64) * step
    else:
        out._numpy_view()[...] = start + np.arange(out.numel(), dtype=np.int64) * step
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
    out._numpy_view()[...] = np.linspace(start, end, steps)
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
    np.fill_diagonal(out._numpy_view(), 1)
    return finish(_as_dtype(out, dt), requires_grad)


def _host_dtype(dt):
    """The dtype a factory fills through numpy: dt, or float32 for bfloat16 (converted after by _as_dtype)."""
    return _C.float32 if dt.name == "bfloat16" else dt


def _as_dtype(t, dt):
    return t if t.dtype is dt else _C.to_dtype(t, dt)


# ----- random ----------------------------------------------------------------------------------------------------

def _float_dtype(dtype, op):
    if not dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point dtype, got {dtype.name}.")
    return dtype


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples from [0, 1)."""
    check_device(device, "rand")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "rand"), "rand")
    shape = sizes_arg(size, "rand")
    with drawing(generator, "rand"):
        return finish(_C.rand(shape, dt), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples from the standard normal distribution."""
    check_device(device, "randn")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "randn"), "randn")
    shape = sizes_arg(size, "randn")
    with drawing(generator, "randn"):
        return finish(_C.randn(shape, dt), requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """randint(high, size) or randint(low, high, size): integers from [low, high)."""
    check_device(device, "randint")
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None or size is None:
        raise TypeError("randint: expected randint(high, size) or randint(low, high, size).")
    low, high = to_int(low, "randint", "low"), to_int(high, "randint", "high")
    shape, dt = sizes_arg((size,), "randint"), _dtype_or(dtype, _C.int64, "randint")
    with drawing(generator, "randint"):
        return finish(_C.randint(low, high, shape, dt), requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """randint_like(input, high) or randint_like(input, low, high): integers from [low, high) with input's shape,
    in input's dtype unless dtype= says otherwise (floats hold the integers)."""
    tensor_arg(input, "randint_like")
    check_device(device, "randint_like")
    check_factory_options("randint_like", layout)
    if high is None:
        if low == 0 and not isinstance(low, Tensor):
            raise TypeError("randint_like: expected randint_like(input, high) or randint_like(input, low, high).")
        low, high = 0, low
    dt = _dtype_or(dtype, input.dtype, "randint_like")
    from .random import check_integer_bounds, random_integers
    low, high = to_int(low, "randint_like", "low"), to_int(high, "randint_like", "high")
    if low < high:
        check_integer_bounds(dt, low, high, "randint_like")
    return finish(random_integers(tuple(input.shape), dt, low, high, generator, "randint_like"), requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1."""
    check_device(device, "randperm")
    n = to_int(n, "randperm", "n")
    with drawing(generator, "randperm"):
        t = _C.randperm(n)
    return finish(t if dtype is None else _C.to_dtype(t, dtype_arg(dtype, "randperm")), requires_grad)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std**2): numbers with a size, or tensors of means and/or stds (broadcast); std defaults to
    1 with a tensor of means, as torch.normal(mean)."""
    check_device(device, "normal")
    if isinstance(std, Tensor):
        values = host_array(std.detach())
        if values.size and not (values >= 0).all():
            raise RuntimeError("normal: expected every element of std to be >= 0.0.")
    elif not float(number(std, "normal", "std")) >= 0:
        raise RuntimeError(f"normal: expected std >= 0.0, but found std={float(std):g}.")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        like = mean if isinstance(mean, Tensor) else std
        from .pointwise import add, mul
        a = tuple(mean.shape) if isinstance(mean, Tensor) else ()
        b = tuple(std.shape) if isinstance(std, Tensor) else ()
        try:
            shape = np.broadcast_shapes(a, b)
        except ValueError:
            raise RuntimeError(f"normal: the shapes of mean {a} and std {b} cannot be broadcast together.") from None
        with drawing(generator, "normal"):
            noise = _C.randn(shape, _float_dtype(like.dtype, "normal"))
        with _no_grad():
            return add(mul(noise, std), mean)
    if size is None:
        raise TypeError("normal: with number mean and std, size is required.")
    dt = _float_dtype(_dtype_or(dtype, get_default_dtype(), "normal"), "normal")
    shape = sizes_arg((size,), "normal")
    with drawing(generator, "normal"):
        t = _C.randn(shape, dt)
    return finish(_C.add(_C.mul(t, _C.scalar_operand(float(std), t)), _C.scalar_operand(float(mean), t)),
                  requires_grad)


def _no_grad():
    from ...autograd.grad_mode import no_grad
    return no_grad()


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (elementwise), else 0; no gradient."""
    tensor_arg(input, "bernoulli")
    probs = input.detach()
    if p is not None:
        probs = _C.full(input.shape, float(p), input.dtype if input.dtype.is_floating_point else _C.float32)
    if not probs.dtype.is_floating_point:
        probs = _C.to_dtype(probs, _C.float32)
    values = host_array(probs)
    if values.size and not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError("bernoulli: expected every probability to be in [0, 1].")
    with drawing(generator, "bernoulli"):
        u = _C.rand(probs.shape, probs.dtype)
    return _C.to_dtype(_C.compare("lt", u, probs), probs.dtype)


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
        import warnings
        warnings.warn("new_tensor: to copy construct from a tensor, use t.detach().clone() (as torch recommends) "
                      "rather than new_tensor(t).", UserWarning, stacklevel=2)
    return tensor(data, dtype=_dtype_or(dtype, self.dtype, "new_tensor"), device=device, requires_grad=requires_grad)


# ----- about tensors ---------------------------------------------------------------------------------------------

def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return tensor_arg(input, "numel").numel()


def is_floating_point(input):
    return tensor_arg(input, "is_floating_point").dtype.is_floating_point

