"""Reference engine: tensor factories and the random generator. Mirrors csrc/dyngrad/ops_creation.cpp."""
import numbers
import warnings

import numpy as np

from . import dtypes as _dt
from . import errors
from .tensor import Tensor, check_allocation, make_tensor

DEFAULT_SEED = 67280421310721        # each process starts from the same seed, as torch does
_generator = [np.random.Generator(np.random.PCG64(DEFAULT_SEED))]


_seed = [DEFAULT_SEED]


def manual_seed(seed):
    """Reseed this engine's generator (reproducible run to run; not the same numbers as the C++ engine)."""
    _seed[0] = int(seed)
    _generator[0] = np.random.Generator(np.random.PCG64(int(seed)))
    return _generator[0]


def initial_seed():
    return _seed[0]


def seed():
    s = int(np.random.SeedSequence().entropy % (2 ** 63))
    manual_seed(s)
    return s


def generator():
    return _generator[0]


def _generator_arg(generator):
    if generator is None:
        return _generator[0]
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator: expected a numpy.random.Generator, got {type(generator).__name__}.")
    return generator


def _finish(arr, requires_grad, op):
    t = make_tensor(arr)
    if requires_grad:
        if arr.dtype.kind != "f":
            raise RuntimeError(errors.ERR_INT_REQUIRES_GRAD.format(dtype=t.dtype.name))
        t._requires_grad = True
    return t


def _dtype_or_default(dtype, op, default=None):
    if dtype is None:
        return default if default is not None else _dt.get_default_dtype()
    return _dt.to_dtype(dtype, op)


def parse_size(op, size):
    """Sizes as varargs `zeros(2, 3)` or one sequence `zeros((2, 3))`."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = s.item()
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"{op}: size must be a tuple of ints, got {type(s).__name__} in {tuple(size)}.")
        if s < 0:
            raise RuntimeError(f"{op}: negative dimension {s} in size {tuple(size)}; sizes must be >= 0.")
        out.append(int(s))
    return tuple(out)


def tensor(data, dtype=None, requires_grad=False, device=None):
    """A new tensor holding a copy of data (nested lists, numbers, numpy arrays or tensors)."""
    if isinstance(data, Tensor):
        arr = data._data.copy()
        inferred = data.dtype
    else:
        if isinstance(data, (list, tuple)):
            data = [d.detach()._data if isinstance(d, Tensor) else d for d in data]
        try:
            arr = np.array(data)
        except (ValueError, TypeError) as e:
            raise TypeError(f"tensor: could not convert data of type {type(data).__name__} to a tensor ({e}).") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"tensor: could not convert data of type {type(data).__name__} (numpy dtype {arr.dtype}) "
                            "to a tensor; expected numbers, bools, nested lists of them or a numpy array.")
        keeps_float64 = isinstance(data, (np.ndarray, np.generic))
        if arr.dtype.kind == "f" and not (keeps_float64 and arr.dtype == np.float64):
            inferred = _dt.get_default_dtype() if arr.dtype != np.float32 else _dt.float32
        else:
            inferred = _dt.from_numpy_dtype(arr.dtype, "tensor")
    target = _dt.to_dtype(dtype, "tensor") if dtype is not None else inferred
    return _finish(np.array(arr, dtype=target.np), requires_grad, "tensor")


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or _dt.to_dtype(dtype) is data.dtype):
        return data
    if isinstance(data, np.ndarray) and data.dtype in (np.float32, np.float64, np.int64, np.bool_) and dtype is None:
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(arr):
    """A tensor sharing arr's memory (no copy)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(arr).__name__}.")
    if arr.dtype not in (np.float32, np.float64, np.int64, np.bool_):
        raise TypeError(f"from_numpy: numpy dtype {arr.dtype} cannot be shared without a copy; expected float32, "
                        "float64, int64 or bool (use dyngrad.tensor(arr) to copy and convert).")
    if not arr.flags.writeable:   # Note [Writable tensors] in csrc/dyngrad/tensor.h: shared, never written
        warnings.warn("from_numpy: the given numpy array is not writable; the tensor shares its memory read-only, so "
                      "in-place operations on it will raise. Copy the array (dyngrad.tensor(array)) to get a "
                      "writable tensor.", UserWarning, stacklevel=2)
    return make_tensor(arr)


def _sized(op, size, dtype):
    """(shape, numpy dtype), checked as C++'s empty() checks them (check_allocation)."""
    shape, np_dtype = parse_size(op, size), _dtype_or_default(dtype, op).np
    check_allocation(shape, np_dtype)
    return shape, np_dtype


def zeros(*size, dtype=None, requires_grad=False, device=None):
    return _finish(np.zeros(*_sized("zeros", size, dtype)), requires_grad, "zeros")


def ones(*size, dtype=None, requires_grad=False, device=None):
    return _finish(np.ones(*_sized("ones", size, dtype)), requires_grad, "ones")


def empty(*size, dtype=None, requires_grad=False, device=None):
    return _finish(np.empty(*_sized("empty", size, dtype)), requires_grad, "empty")


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    default = _dt.scalar_dtype(fill_value)
    dtype = _dtype_or_default(dtype, "full", default)
    size = parse_size("full", (size,) if not isinstance(size, (int, np.integer)) else (size,))
    check_allocation(size, dtype.np)
    return _finish(np.full(size, fill_value, dtype.np), requires_grad, "full")


def _like_dtype(t, dtype, op):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}.")
    return _dt.to_dtype(dtype, op) if dtype is not None else t.dtype


def zeros_like(t, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "zeros_like")
    return zeros(t.shape, dtype=dtype, requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "ones_like")
    return ones(t.shape, dtype=dtype, requires_grad=requires_grad)


def empty_like(t, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "empty_like")
    return empty(t.shape, dtype=dtype, requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "full_like")
    return full(t.shape, fill_value, dtype=dtype, requires_grad=requires_grad)


def rand_like(t, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "rand_like")
    return rand(t.shape, dtype=dtype, requires_grad=requires_grad)


def randn_like(t, dtype=None, requires_grad=False, device=None):
    dtype = _like_dtype(t, dtype, "randn_like")
    return randn(t.shape, dtype=dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device=None):
    if end is None:
        start, end = 0, start
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if values[2] == 0:
        raise RuntimeError("arange: step must be nonzero.")
    is_float = any(isinstance(v, (float, np.floating)) for v in values)
    dtype = _dtype_or_default(dtype, "arange", _dt.get_default_dtype() if is_float else _dt.int64)
    _check_arange(values, is_float, dtype)
    return _finish(np.arange(*values, dtype=np.float64 if is_float else np.int64).astype(dtype.np),
                   requires_grad, "arange")


def _check_arange(values, is_float, dtype):
    """The checks of arange_int / arange_float in csrc/dyngrad/tensor.cpp, with their messages."""
    start, end, step = values
    if is_float:
        start, end, step = float(start), float(end), float(step)
        if not (np.isfinite(start) and np.isfinite(end)):
            raise RuntimeError(f"arange: unsupported range: {start:g} -> {end:g} (start and end must be finite).")
        if not np.isfinite(step):
            raise RuntimeError(f"arange: step must be finite and nonzero, got {step:g}.")
        count = np.ceil((end - start) / step)
    else:
        span = end - start
        count = -(-span // step)         # ceil, exact in Python ints
    if start != end and count < 0:
        raise RuntimeError(f"arange: upper bound and step are inconsistent (start={start}, end={end}, step={step}).")
    if count > 2 ** 63 - 1 or (is_float and count >= 9.2233720368547758e18):
        raise RuntimeError(f"arange: the range (start={start}, end={end}, step={step}) has more elements than fit in "
                           "64 bits.")
    check_allocation((max(int(count), 0),), dtype.np)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise RuntimeError(f"linspace: steps must be a non-negative int, got {steps!r}.")
    dtype = _dtype_or_default(dtype, "linspace")
    check_allocation((steps,), dtype.np)
    return _finish(np.linspace(start, end, steps).astype(dtype.np), requires_grad, "linspace")


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    for v in (n, m):
        if v is not None and (not isinstance(v, (int, np.integer)) or v < 0):
            raise RuntimeError(f"eye: n and m must be non-negative ints, got n={n!r}, m={m!r}.")
    check_allocation((n, n if m is None else m), _dtype_or_default(dtype, "eye").np)
    return _finish(np.eye(n, m, dtype=_dtype_or_default(dtype, "eye").np), requires_grad, "eye")


def _random_float_dtype(dtype, op):
    dtype = _dtype_or_default(dtype, op)
    if not dtype.is_floating_point:
        raise TypeError(f"{op}: random floats need a floating-point dtype, got {dtype}.")
    return dtype


def rand(*size, dtype=None, requires_grad=False, generator=None, device=None):
    dtype = _random_float_dtype(dtype, "rand")
    gen = _generator_arg(generator)
    return _finish(gen.random(_sized("rand", size, dtype)[0], dtype=dtype.np), requires_grad, "rand")


def randn(*size, dtype=None, requires_grad=False, generator=None, device=None):
    dtype = _random_float_dtype(dtype, "randn")
    gen = _generator_arg(generator)
    return _finish(gen.standard_normal(_sized("randn", size, dtype)[0], dtype=dtype.np), requires_grad, "randn")


def randint(low, high=None, size=None, dtype=None, requires_grad=False, generator=None, device=None):
    """randint(low, high, size) or randint(high, size), as torch."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None or size is None:
        raise TypeError("randint: expected randint(low, high, size) or randint(high, size).")
    if high <= low:
        raise RuntimeError(f"randint: expected low < high, got low={low}, high={high}.")
    dtype = _dtype_or_default(dtype, "randint", _dt.int64)
    check_allocation(parse_size("randint", (size,)), dtype.np)
    gen = _generator_arg(generator)
    return _finish(gen.integers(low, high, parse_size("randint", (size,)), dtype=np.int64).astype(dtype.np),
                   requires_grad, "randint")


def randperm(n, dtype=None, generator=None, device=None):
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError(f"randperm: n must be a non-negative int, got {n!r}.")
    check_allocation((n,), np.int64)
    gen = _generator_arg(generator)
    return make_tensor(gen.permutation(n).astype(_dtype_or_default(dtype, "randperm", _dt.int64).np))


def normal(mean, std, size, dtype=None, generator=None):
    gen = _generator_arg(generator)
    dtype = _random_float_dtype(dtype, "normal")
    return make_tensor((gen.standard_normal(parse_size("normal", (size,))) * std + mean).astype(dtype.np))


def bernoulli(p, generator=None):
    gen = _generator_arg(generator)
    if not isinstance(p, Tensor):
        raise TypeError(f"bernoulli: expected a Tensor of probabilities, got {type(p).__name__}.")
    probs = p._data
    return make_tensor((gen.random(probs.shape) < probs).astype(probs.dtype if probs.dtype.kind == "f" else np.float32))


def _is_number(x):
    return isinstance(x, numbers.Number)
