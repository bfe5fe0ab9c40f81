"""torch names a training script meets that the families' modules did not have yet (issue 10): set membership
(isin), more factories (logspace, range, scalar_tensor, asarray, frombuffer, empty_strided), index arithmetic
(unravel_index), differences and statistics (diff, cov, corrcoef, dist, renorm), integer and float bit helpers
(gcd, lcm, ldexp, frexp, nextafter), split aliases, predicates (is_nonzero, is_signed, ...) and a few Tensor
methods (fill_diagonal_, sum_to_size, nbytes, itemsize, new, bernoulli). Composites of existing ops; the numpy
ones have no gradient or a custom Function's (Note [numpy forwards] in pointwise.py)."""
import builtins
import collections
import math
import warnings

import numpy as np

from ... import _C
from ..args import (DTYPE_NAMES, Tensor, check_device, check_factory_options, dtype_arg, finish, get_default_dtype,
                   host_array, number, optional_dtype, shape_str, tensor_arg, tensor_list, to_int, type_name, wrap_dim)
from ..node_names import shows_as
from .pointwise import _NumpyFunction, _cast, _from_numpy, _numpy_function, _pair, _values

return_frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


def _no_grad():
    from ...autograd.grad_mode import no_grad
    return no_grad()


# ----- set membership --------------------------------------------------------------------------------------------

def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of `elements` occurs in `test_elements` (either may be a number, not both); values are
    compared in the two operands' promoted dtype, as torch. No gradient."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin: expected a Tensor as elements or test_elements, got {type_name(elements)} and "
                        f"{type_name(test_elements)}.")
    a, b = _pair(elements, test_elements, "isin", numbers=(True, True))
    if a.dtype is _C.bool or b.dtype is _C.bool:
        raise RuntimeError("isin: bool tensors are not supported (as in torch); compare as integers instead.")
    dtype = _C.result_type(a, b)
    va, vb = host_array(_cast(a.detach(), dtype)), host_array(_cast(b.detach(), dtype))
    found = np.isin(va, vb.reshape(-1), assume_unique=bool(assume_unique), invert=bool(invert))
    return _from_numpy(np.asarray(found, dtype=np.bool_).reshape(va.shape), _C.bool)


# ----- factories -------------------------------------------------------------------------------------------------

def _host_values(n, dt, values):
    """A new 1-D tensor of dtype dt holding `values` (float64 numbers; cast as torch casts a float to dt)."""
    from .creation import _as_dtype, _host_dtype
    out = _C.empty((n,), _host_dtype(dt))           # the core refuses a size it cannot allocate
    if n:
        view = out._numpy_view()
        with np.errstate(all="ignore"):
            view[...] = values(view.size) if view.dtype.kind == "f" else np.trunc(values(view.size))
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
    warnings.warn("dyngrad.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use dyngrad.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=3)
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
    from .creation import from_numpy, tensor
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
        from .numeric import from_dlpack
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
        warnings.warn("frombuffer: the given buffer is not writable; the tensor shares its memory read-only, so "
                      "in-place operations on it will raise. Pass a bytearray (or clone() the tensor) to write.",
                      UserWarning, stacklevel=2)
    return finish(_share(arr), requires_grad)


def _share(arr):
    """The tensor over arr's memory (a read-only array gives a read-only tensor; the caller has warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return _C.from_numpy(arr)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor of `size` with the given strides (in elements) over fresh memory. Its values are zeros here
    (torch leaves them undefined)."""
    from .shape import _int_seq
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
    arr = np.lib.stride_tricks.as_strided(base._numpy_view(), shape, [s * base.element_size() for s in strides])
    return finish(_C.from_numpy(arr), requires_grad)


def concatenate(tensors, axis=0, *, dim=None):
    """cat under numpy's name: torch takes axis= (and dim=)."""
    return _C.cat(tensor_list(tensors, "concatenate"), to_int(axis if dim is None else dim, "concatenate", "axis"))


# ----- index arithmetic ------------------------------------------------------------------------------------------

def unravel_index(indices, shape):
    """The coordinates of flat (row-major) `indices` in a tensor of `shape`: a tuple of int64 tensors of indices'
    shape, one per dim. Negative indices count from the end; an index outside the tensor raises."""
    a = tensor_arg(indices, "unravel_index", "indices")
    if a.dtype.is_floating_point or a.dtype is _C.bool:
        raise TypeError(f"unravel_index: expected 'indices' of an integer dtype, got {a.dtype.name}.")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"unravel_index: expected an int or a sequence of ints as shape, got {type_name(shape)}.")
    dims = tuple(to_int(s, "unravel_index", "shape", TypeError) for s in shape)
    if any(s < 0 for s in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {shape_str(dims)}.")
    total = math.prod(dims)
    v = host_array(a.detach()).astype(np.int64)
    if v.size and (v.min() < -total or v.max() >= total):
        bad = int(v.min()) if v.min() < -total else int(v.max())
        raise RuntimeError(f"unravel_index: index {bad} is out of bounds for shape {shape_str(dims)} "
                           f"({total} elements).")
    v = np.where(v < 0, v + total, v)
    out = []
    for s in reversed(dims):
        out.append(v % s if s else v)
        v = v // s if s else v
    return tuple(_from_numpy(c, _C.int64) for c in reversed(out))


# ----- differences and statistics --------------------------------------------------------------------------------

def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (out[i] = x[i+1] - x[i], n times), after concatenating prepend and
    append along dim; bool inputs give the logical xor of neighbours, as torch."""
    a = tensor_arg(input, "diff")
    n = to_int(n, "diff", "n")
    if a.ndim == 0:
        raise RuntimeError("diff: expects input to be at least one-dimensional.")
    if n < 0:
        raise RuntimeError(f"diff: order must be non-negative, got {n}.")
    d = wrap_dim(to_int(dim, "diff", "dim"), a.ndim, "diff")
    parts = []
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            parts.append(None)
            continue
        if not isinstance(extra, Tensor):
            extra = _C.scalar_operand(number(extra, "diff", name), a)
        if extra.ndim == 0:           # a number stands for a slice of size 1 along dim
            extra = _C.expand(_C.reshape(extra, (1,) * a.ndim),
                              tuple(1 if i == d else s for i, s in enumerate(a.shape)))
        if extra.ndim != a.ndim:
            raise RuntimeError(f"diff: expected {name} to have {a.ndim} dimensions as input, got {extra.ndim}.")
        parts.append(extra)
    if parts[0] is not None or parts[1] is not None:
        pieces = [p for p in (parts[0], a, parts[1]) if p is not None]
        dtype = pieces[0].dtype
        for p in pieces[1:]:
            dtype = _C.result_type(_C.empty((1,), dtype), p)
        a = _C.cat([_cast(p, dtype) for p in pieces], d)
    for _ in builtins.range(n):
        size = a.shape[d]
        if size == 0:
            break
        hi, lo = _C.slice(a, d, 1, size, 1), _C.slice(a, d, 0, size - 1, 1)
        a = _C.logical_xor(hi, lo) if a.dtype is _C.bool else _C.sub(hi, lo)
    return a


def _check_weights(w, name, x, integral):
    w = tensor_arg(w, "cov", name)
    if w.ndim > 1:
        raise RuntimeError(f"cov: expected {name} to have one or fewer dimensions, got {w.ndim}.")
    n = x.shape[1]
    if w.numel() != n:
        raise RuntimeError(f"cov: expected {name} to have the same number of elements as input has observations "
                           f"({n}), got {w.numel()}.")
    if integral and w.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have an integral dtype, got {w.dtype.name}.")
    if not integral and not w.dtype.is_floating_point:
        raise RuntimeError(f"cov: expected {name} to have a floating-point dtype, got {w.dtype.name}.")
    values = host_array(w.detach())
    if values.size and values.min() < 0:
        raise RuntimeError(f"cov: {name} cannot be negative.")
    return _C.reshape(w, (n,))


@shows_as("Cov")
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations in its columns; a 1-D input is one
    variable): with weights w = fweights * aweights, mean m = sum(w x) / sum(w),
    cov = (x - m) (w (x - m))^T / (sum(w) - correction * sum(w aweights) / sum(w)) (sum(w) - correction without
    aweights). A non-positive divisor warns and gives inf/nan, as torch."""
    a = tensor_arg(input, "cov")
    if a.ndim > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions, got {a.ndim}.")
    correction = number(correction, "cov", "correction")
    x = _C.reshape(a, (1, -1) if a.ndim < 2 else tuple(a.shape))
    if not x.dtype.is_floating_point:
        x = _C.to_dtype(x, get_default_dtype())
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _check_weights(fweights, "fweights", x, True)
    if aweights is not None:
        aw = _check_weights(aweights, "aweights", x, False)
        w = aw if w is None else _C.mul(_C.to_dtype(w, aw.dtype), aw)
    if w is not None:
        w = _C.to_dtype(w, x.dtype) if w.dtype is not x.dtype else w
        w_sum = _C.sum(w, (), False, None)
        avg = _C.div(_C.sum(_C.mul(x, w), (1,), True, None), w_sum)
    else:
        w_sum = _C.full((), float(n), x.dtype)
        avg = _C.mean(x, (1,), True)
    if w is None:
        norm = _C.sub(w_sum, _C.scalar_operand(float(correction), w_sum))
    elif aweights is None:
        norm = _C.sub(w_sum, _C.scalar_operand(float(correction), w_sum))
    else:
        awx = _C.to_dtype(aw, x.dtype)
        norm = _C.sub(w_sum, _C.div(_C.mul(_C.scalar_operand(float(correction), w_sum),
                                           _C.sum(_C.mul(w, awx), (), False, None)), w_sum))
    if float(norm.item()) <= 0:
        warnings.warn("cov: degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        norm = _C.full((), 0.0, x.dtype)
    centred = _C.sub(x, avg)
    weighted = centred if w is None else _C.mul(centred, w)
    c = _C.div(_C.matmul(centred, _C.permute(weighted, (1, 0))), norm)
    return _C.reshape(c, ()) if a.ndim < 2 else c


def corrcoef(input):
    """Pearson correlation coefficients of the variables in input's rows: cov / (std_i std_j), clipped to
    [-1, 1] as torch (rounding can step past it)."""
    from .pointwise import clamp
    a = tensor_arg(input, "corrcoef")
    if a.ndim > 2:
        raise RuntimeError(f"corrcoef: expected input to have two or fewer dimensions, got {a.ndim}.")
    c = cov(a)
    if c.ndim == 0:
        return _C.div(c, c)
    d = _C.sqrt(_C.take(c, _from_numpy(np.arange(c.shape[0]) * (c.shape[0] + 1), _C.int64)))
    c = _C.div(_C.div(c, _C.reshape(d, (-1, 1))), _C.reshape(d, (1, -1)))
    return clamp(c, -1, 1)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), as a 0-d tensor."""
    from .linalg import vector_norm
    a, b = tensor_arg(input, "dist"), tensor_arg(other, "dist", "other")
    dtype = _C.result_type(a, b)
    if not dtype.is_floating_point:
        raise RuntimeError(f"dist: expected floating-point tensors, got {a.dtype.name} and {b.dtype.name}.")
    p = float(number(p, "dist", "p"))
    return vector_norm(_C.sub(_cast(a, dtype), _cast(b, dtype)), p)


def renorm(input, p, dim, maxnorm):
    """Each slice of input along dim whose p-norm (over the slice) exceeds maxnorm is scaled to norm maxnorm:
    factor = maxnorm / (norm + 1e-7) where norm > maxnorm, else 1 (torch's epsilon)."""
    from .linalg import vector_norm
    a = tensor_arg(input, "renorm")
    p, maxnorm = float(number(p, "renorm", "p")), float(number(maxnorm, "renorm", "maxnorm"))
    if p <= 0:
        raise RuntimeError(f"renorm: p must be positive (non-positive norms are not supported), got {p:g}.")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm:g}.")
    if a.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {a.ndim}.")
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"renorm: expected a floating-point tensor, got {a.dtype.name}.")
    d = wrap_dim(to_int(dim, "renorm", "dim"), a.ndim, "renorm")
    others = tuple(i for i in builtins.range(a.ndim) if i != d)
    norms = vector_norm(a, p, others, True)
    limit = _C.scalar_operand(maxnorm, norms)
    scale = _C.div(limit, _C.add(norms, _C.scalar_operand(1e-7, norms)))
    factor = _C.where(_C.compare("gt", norms, limit), scale, _C.scalar_operand(1.0, norms))
    return _C.mul(a, factor)


# ----- integer and floating-point bit helpers --------------------------------------------------------------------

def _integer_pair(input, other, op):
    a, b = tensor_arg(input, op), tensor_arg(other, op, "other")
    dtype = _C.result_type(a, b)
    if dtype.is_floating_point:
        raise NotImplementedError(f"{op}: expected integer tensors, got {a.dtype.name} and {b.dtype.name}.")
    if dtype is _C.bool:
        raise NotImplementedError(f"{op}: expected integer tensors, got bool.")
    return _cast(a, dtype), _cast(b, dtype), dtype


def gcd(input, other):
    """The greatest common divisor of each pair of elements (non-negative; gcd(0, 0) = 0). Integers only."""
    a, b, dtype = _integer_pair(input, other, "gcd")
    return _from_numpy(np.gcd(_values(a), _values(b)), dtype)


def lcm(input, other):
    """The least common multiple of each pair of elements (non-negative). Integers only."""
    a, b, dtype = _integer_pair(input, other, "lcm")
    with np.errstate(all="ignore"):
        return _from_numpy(np.abs(np.lcm(_values(a), _values(b))), dtype)


def ldexp(input, other):
    """input * 2**other, in input and other's promoted float dtype (float for integer inputs)."""
    from .pointwise import _float_pair
    a, b = _float_pair(tensor_arg(input, "ldexp"), tensor_arg(other, "ldexp", "other"), "ldexp",
                       numbers=(False, False))
    return _C.mul(a, _C.pow(_C.full((), 2.0, b.dtype), b))


class Frexp(_NumpyFunction):
    """The mantissa of frexp; d mantissa / dx = 2**-exponent (the exponent is piecewise constant)."""

    @classmethod
    def forward(cls, ctx, x):
        mantissa, exponent = np.frexp(_values(x))
        ctx.scale = np.ldexp(np.ones_like(mantissa), -exponent)
        ctx.dtype = x.dtype
        return _from_numpy(mantissa, x.dtype)

    @classmethod
    def backward(cls, ctx, grad):
        return _C.mul(grad, _from_numpy(ctx.scale, ctx.dtype))


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent and 0.5 <= |mantissa| < 1 (0 for 0): mantissa of
    input's dtype, exponent int32. Floating-point inputs only."""
    a = tensor_arg(input, "frexp")
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"frexp: only supports floating-point dtypes, got {a.dtype.name}.")
    work = a if a.dtype.name in ("float32", "float64", "float16") else _C.to_dtype(a, _C.float32)
    mantissa = Frexp.apply(work)
    exponent = _from_numpy(np.frexp(_values(work))[1], _C.int32)
    return return_frexp(_cast(mantissa, a.dtype), exponent)


def _nextafter_derivative(g, out, x, y):
    # torch's convention: the gradient passes to input where input != other (0 where they are equal, the result
    # then being other), none to other
    moved = _C.compare("ne", x.detach(), y.detach())
    return _C.where(moved, g, _C.scalar_operand(0.0, g)), (_C.full(tuple(y.shape), 0, y.dtype) if y.requires_grad
                                                           else None)


_Nextafter = _numpy_function("Nextafter", np.nextafter, _nextafter_derivative)


def nextafter(input, other):
    """The next representable value after input towards other, in their promoted float dtype. Floats only; its
    gradient passes to input where input != other (torch's convention), none to other."""
    from ..args import broadcast_shapes
    a, b = tensor_arg(input, "nextafter"), tensor_arg(other, "nextafter", "other")
    dtype = _C.result_type(a, b)
    if not dtype.is_floating_point:
        raise NotImplementedError(f"nextafter: expected floating-point tensors, got {a.dtype.name} and "
                                  f"{b.dtype.name}.")
    shape = broadcast_shapes(a.shape, b.shape, "nextafter")
    # both at the result's shape first: the Function's gradient then has input's shape after expand's backward
    return _Nextafter.apply(_C.expand(_cast(a, dtype), shape), _C.expand(_cast(b, dtype), shape))


# ----- splits under other names ----------------------------------------------------------------------------------

@shows_as("SplitWithSizes")
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of the listed sizes along dim; the sizes must be non-negative and add up to the dim's size."""
    from .shape import _int_seq
    a = tensor_arg(input, "split_with_sizes")
    sizes = _int_seq(split_sizes, "split_with_sizes", "split_sizes")
    d = wrap_dim(to_int(dim, "split_with_sizes", "dim"), a.ndim, "split_with_sizes")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes: expects split_sizes to have only non-negative entries, got "
                           f"{list(sizes)}.")
    if sum(sizes) != a.shape[d]:
        raise RuntimeError(f"split_with_sizes: expects split_sizes to sum exactly to {a.shape[d]} (the size of "
                           f"dimension {d}), got {list(sizes)}.")
    return tuple(_C.split(a, sizes, d))


def unsafe_chunk(input, chunks, dim=0):
    """chunk (torch's unsafe_ variant only skips view tracking, which dyngrad's pieces do not need)."""
    from .shape import chunk
    return chunk(input, chunks, dim)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    """split (torch's unsafe_ variant only skips view tracking)."""
    from .shape import split
    return split(tensor, split_size_or_sections, dim)


def unsafe_split_method(self, split_size, dim=0):
    return unsafe_split(self, split_size, dim)


# ----- predicates ------------------------------------------------------------------------------------------------

def is_nonzero(input):
    """Whether the one element of input is nonzero (an empty or larger tensor is ambiguous: RuntimeError)."""
    a = tensor_arg(input, "is_nonzero")
    n = a.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous.")
    return bool(host_array(a.detach()).reshape(-1)[0] != 0)


def is_same_size(input, other):
    a, b = tensor_arg(input, "is_same_size"), tensor_arg(other, "is_same_size", "other")
    return tuple(a.shape) == tuple(b.shape)


def is_signed(input):
    """Whether input's dtype holds negative values (every dtype but bool and uint8)."""
    return tensor_arg(input, "is_signed").dtype.name not in ("bool", "uint8")


def is_complex(input):
    """False: dyngrad has no complex dtypes."""
    tensor_arg(input, "is_complex")
    return False


def fill_(input, value):
    from .tensor import fill_ as method
    return method(tensor_arg(input, "fill_"), value)


def zero_(input):
    from .tensor import zero_ as method
    return method(tensor_arg(input, "zero_"))


# ----- Tensor methods --------------------------------------------------------------------------------------------

def fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal (in place). Every dim must have the same length beyond 2-D; a tall
    matrix's diagonal restarts after every (columns + 1) rows when wrap=True, as numpy's fill_diagonal."""
    from .tensor import overwrite
    if self.ndim < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must be larger than 1, got {self.ndim}.")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got "
                           f"{shape_str(self.shape)}.")
    value = number(fill_value, "fill_diagonal_", "fill_value")
    positions = np.arange(math.prod(self.shape), dtype=np.int64).reshape(self.shape)
    if self.ndim == 2:
        rows, cols = self.shape
        step = cols + 1
        limit = rows * cols if wrap else min(rows, cols) * cols
        flat = np.arange(0, limit, step, dtype=np.int64)
    else:
        n = self.shape[0]
        flat = np.array([positions[(i,) * self.ndim] for i in builtins.range(n)], dtype=np.int64)
    before = _C.inplace_input(self, "fill_diagonal_", False)
    index = _from_numpy(flat, _C.int64)
    result = _C.put(before, index, _C.scalar_operand(value, before))
    _C.assign_inplace(self, overwrite(before, result, "fill_diagonal_"), "fill_diagonal_")
    return self


def sum_to_size(self, *size):
    """The sum of self down to `size`, a shape self can be expanded from (as the gradient of an expand)."""
    from ..args import shape_args
    shape = shape_args(size, "sum_to_size")
    ok = len(shape) <= self.ndim and all(
        s == t or s == 1 for s, t in zip(shape, tuple(self.shape)[self.ndim - len(shape):]))
    if not ok:
        raise RuntimeError(f"sum_to_size: size {shape_str(shape)} is not expandable to size "
                           f"{shape_str(self.shape)}.")
    lead = self.ndim - len(shape)
    dims = tuple(builtins.range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                                if s == 1 and self.shape[lead + i] != 1)
    if not dims:
        return self
    out = _C.sum(self, dims, True, None)
    return _C.reshape(out, shape)


def nbytes(self):
    return self.numel() * self.element_size()


def itemsize(self):
    return self.element_size()


def new(self, *args, **kwargs):
    """torch's legacy constructor: x.new() is an empty tensor of x's dtype, x.new(2, 3) or x.new(Size) an
    uninitialised one of that size, x.new(data) a copy of data (a sequence) in x's dtype, x.new(tensor) that
    tensor (of the same dtype)."""
    from ..args import Size
    from .creation import tensor
    if kwargs.get("device") is not None:
        check_device(kwargs.pop("device"), "new")
    kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new: unexpected keyword argument {next(iter(kwargs))!r}.")
    if not args:
        return _C.empty((0,), self.dtype)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not self.dtype:
            raise TypeError(f"new: expected a tensor of {self.dtype.name}, got {args[0].dtype.name}.")
        return args[0].detach()
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and isinstance(args[0], Size)):
        from ..args import sizes_arg
        return _C.empty(sizes_arg(args, "new"), self.dtype)
    if len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):
        return tensor(args[0], dtype=self.dtype)
    raise TypeError(f"new: expected sizes, a sequence of data or a tensor, got "
                    f"{', '.join(type_name(a) for a in args)}.")


# ----- more names of torch's namespace: comparison aliases, detach, fill, angle, imag, nonzero_static, ... -------

def detach(input):
    """input.detach(): the same memory, cut from the graph."""
    return tensor_arg(input, "detach").detach()


def fill(input, value):
    """A new tensor of input's shape and dtype filled with value (torch.fill, out of place)."""
    a = tensor_arg(input, "fill")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill: only supports a 0-dimensional value tensor, got {value.ndim} dimensions.")
        return _C.expand(_C.reshape(_cast(value, a.dtype), (1,) * a.ndim), tuple(a.shape)) if a.ndim else \
            _C.clone(_cast(value, a.dtype))
    v = number(value, "fill", "value")
    return _C.full(tuple(a.shape), v if isinstance(v, int) and not isinstance(v, bool) else float(v), a.dtype)


def _angle_kernel(x):
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0)).astype(x.dtype)


_Angle = _numpy_function("Angle", _angle_kernel, None)


def angle(input):
    """The argument of each element as a complex number: pi for negative reals, 0 otherwise (nan stays nan);
    float for integer inputs; zero gradient, as torch."""
    from .pointwise import _float
    return _Angle.apply(_float(tensor_arg(input, "angle")))


def imag(input):
    tensor_arg(input, "imag")
    raise RuntimeError("imag: not implemented for tensors with non-complex dtypes (dyngrad has no complex dtypes).")


def get_device(input):
    """-1: the tensor lives on the CPU (torch's answer for CPU tensors)."""
    return tensor_arg(input, "get_device").get_device()


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """split_with_sizes (the unsafe_ variant only skips view tracking)."""
    return split_with_sizes(input, split_sizes, dim)


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero(input) padded with rows of fill_value (or cut) to exactly `size` rows: an output shape known before
    the values are."""
    a = tensor_arg(input, "nonzero_static")
    size = to_int(size, "nonzero_static", "size")
    if size < 0:
        raise RuntimeError(f"nonzero_static: size must be non-negative, got {size}.")
    fill_value = to_int(fill_value, "nonzero_static", "fill_value")
    found = np.argwhere(host_array(a.detach()))
    out = np.full((size, a.ndim), fill_value, dtype=np.int64)
    out[:min(size, len(found))] = found[:size]
    return _from_numpy(out, _C.int64)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with the elements that input.as_strided(size, stride, storage_offset) reads (of input laid out
    contiguously) replaced by src."""
    from .shape import _int_seq, _scatter_part
    a = tensor_arg(input, "as_strided_scatter")
    shape, strides = _int_seq(size, "as_strided_scatter", "size"), _int_seq(stride, "as_strided_scatter", "stride")
    offset = 0 if storage_offset is None else to_int(storage_offset, "as_strided_scatter", "storage_offset")
    if len(shape) != len(strides):
        raise RuntimeError(f"as_strided_scatter: size {shape_str(shape)} and stride {shape_str(strides)} must have "
                           "the same length.")
    if any(s < 0 for s in shape) or any(s < 0 for s in strides) or offset < 0:
        raise RuntimeError("as_strided_scatter: size, stride and storage_offset must be non-negative.")
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides)) if 0 not in shape else offset
    if 0 not in shape and last >= a.numel():
        raise RuntimeError(f"as_strided_scatter: size {shape_str(shape)}, stride {shape_str(strides)} and offset "
                           f"{offset} reach element {last}, outside a tensor of {a.numel()} elements.")
    grid = np.arange(max(a.numel(), 1), dtype=np.int64)
    positions = np.lib.stride_tricks.as_strided(grid[offset:] if offset < grid.size else grid[:0], shape,
                                                [s * 8 for s in strides]) if 0 not in shape else \
        np.zeros(shape, dtype=np.int64)
    return _scatter_part(a, tensor_arg(src, "as_strided_scatter", "src"), np.array(positions),
                         "as_strided_scatter")


# ----- Tensor queries a script asks of any tensor (dyngrad's are dense, CPU, unquantized, never pinned) ---------

def _false(self):
    return False


is_sparse = is_sparse_csr = is_quantized = is_nested = is_mkldnn = _false
is_mps = is_xpu = is_xla = is_ipu = is_vulkan = is_maia = is_mtia = _false


def is_pinned(self, device=None):
    """False: dyngrad has no page-locked host memory (there is no accelerator to copy to)."""
    return False


def pin_memory(self, device=None):
    raise RuntimeError("pin_memory: cannot access an accelerator device when none is available (dyngrad runs on the "
                       "CPU; pinned memory only speeds up copies to one).")


def is_inference(input):
    """False: dyngrad's inference_mode turns recording off but makes ordinary tensors (no inference tensors)."""
    tensor_arg(input, "is_inference")
    return False


def to_dense(self, dtype=None, *, masked_grad=None):
    """The tensor itself (it is dense already), or a copy in dtype."""
    return self if dtype is None else self.to(dtype_arg(dtype, "to_dense"))


def dim_order(self, *, ambiguity_check=False):
    """The dims from the outermost to the innermost in memory (by decreasing stride; ties keep dim order)."""
    strides = self.stride()
    return tuple(sorted(builtins.range(self.ndim), key=lambda d: -strides[d]))


def const_data_ptr(self):
    return self.data_ptr()


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False):
    """empty_strided with self's dtype (unless dtype= says otherwise)."""
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype, layout=layout, device=device,
                         requires_grad=requires_grad, pin_memory=pin_memory)


# ----- vmap ----------------------------------------------------------------------------------------------------
# Note [vmap as a loop]: torch's vmap runs func once on batched tensors through batching rules. dyngrad has no
# batching rules, so vmap runs func once per index of the mapped dimension, on that slice of each mapped input
# (a view: in-place writes reach the input, as in torch), and stacks the results along out_dims. Values and
# gradients are torch's; the cost is a Python loop. Random ops inside func draw different values per element
# (torch's randomness='different'); 'same' cannot be honoured by a loop and is refused.

def _tree_map_dims(obj, dims, fn, op):
    """fn(tensor, dim) over the tensors of obj (nested tuples, lists and dicts), dims an int/None for all of them
    or a structure matching obj's."""
    if isinstance(obj, Tensor):
        if isinstance(dims, (tuple, list, dict)):
            raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs.")
        return fn(obj, dims)
    if isinstance(obj, (tuple, list)):
        if isinstance(dims, (tuple, list)):
            if len(dims) != len(obj):
                raise ValueError(f"{op}: in_dims is not compatible with the structure of the inputs "
                                 f"({len(dims)} in_dims for {len(obj)} inputs).")
            items = [_tree_map_dims(o, d, fn, op) for o, d in zip(obj, dims)]
        else:
            items = [_tree_map_dims(o, dims, fn, op) for o in obj]
        return type(obj)(items) if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        if isinstance(dims, dict):
            return {k: _tree_map_dims(v, dims.get(k), fn, op) for k, v in obj.items()}
        return {k: _tree_map_dims(v, dims, fn, op) for k, v in obj.items()}
    return obj


def _leaves(obj):
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in _leaves(o)]
    if isinstance(obj, dict):
        return [x for o in obj.values() for x in _leaves(o)]
    return [obj]


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a dimension of its inputs: vmap(f)(x) stacks f(x[i]) for every i (in_dims says which dim
    of each input is mapped, None for an input passed whole; out_dims where the mapped dim goes in each output).
    Note [vmap as a loop]."""
    if not callable(func):
        raise TypeError(f"vmap: expected a function as func, got {type_name(func)}.")
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"vmap: the allowed values for randomness are 'error', 'different' or 'same', got "
                           f"{randomness!r}.")
    if randomness == "same":
        raise NotImplementedError("vmap: randomness='same' is not supported: dyngrad's vmap calls func once per "
                                  "element, so random ops draw different values (Note [vmap as a loop]).")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or
                                   chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}.")
    name = getattr(func, "__name__", type(func).__name__)
    op = f"vmap({name}, ...)"

    def mapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"{op}: in_dims has {len(in_dims)} entries but {len(args)} inputs were given.")
        sizes = []

        def wrap(t, d):
            if d is None:
                return (t, None)
            d = to_int(d, op, "in_dims")
            if not -t.ndim <= d < max(t.ndim, 0) or t.ndim == 0:
                raise ValueError(f"{op}: got in_dim={d} for an input of {t.ndim} dimensions; expected "
                                 f"{-t.ndim} <= in_dim < {t.ndim}.")
            d = d + t.ndim if d < 0 else d
            sizes.append(t.shape[d])
            return (t, d)
        plan = _tree_map_dims(tuple(args), tuple(dims), wrap, op)
        if not sizes:
            raise ValueError(f"{op}: expected at least one Tensor to vmap over.")
        if len(set(sizes)) != 1:
            raise ValueError(f"{op}: expected all tensors to have the same size in the mapped dimension, got sizes "
                             f"{sizes}.")
        n = sizes[0]
        if n == 0:
            raise RuntimeError(f"{op}: cannot map over a dimension of size 0 (Note [vmap as a loop]).")

        def pick(i):
            def take(x):
                if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], Tensor) and (
                        x[1] is None or isinstance(x[1], int)):
                    t, d = x
                    return t if d is None else _C.select(t, d, i)
                if isinstance(x, (tuple, list)):
                    items = [take(o) for o in x]
                    return type(x)(items) if isinstance(x, list) else tuple(items)
                if isinstance(x, dict):
                    return {k: take(v) for k, v in x.items()}
                return x
            return take(plan)
        results = [func(*pick(i), **kwargs) for i in builtins.range(n)]
        single = not isinstance(results[0], tuple)
        outs = [(r,) if single else tuple(r) for r in results]
        odims = (out_dims,) * len(outs[0]) if not isinstance(out_dims, (tuple, list)) else tuple(out_dims)
        if len(odims) != len(outs[0]):
            raise ValueError(f"{op}: out_dims has {len(odims)} entries but func returned {len(outs[0])} outputs.")
        stacked = []
        for k, od in enumerate(odims):
            column = [o[k] for o in outs]
            if od is None:
                stacked.append(column[0])
                continue
            if not all(isinstance(c, Tensor) for c in column):
                raise ValueError(f"{op}: `{name}` must only return Tensors, got {type_name(column[0])}; set out_dims "
                                 "to None for that output to return it unmapped.")
            od = to_int(od, op, "out_dims")
            rank = column[0].ndim + 1
            if not -rank <= od < rank:
                raise IndexError(f"{op}: out_dims {od} is out of range for an output of {rank} dimensions.")
            stacked.append(_C.stack(column, od))
        return stacked[0] if single else tuple(stacked)
    mapped.__name__ = mapped.__qualname__ = f"vmap_{name}"
    mapped.__doc__ = f"{name} mapped by vmap over in_dims={in_dims!r}, out_dims={out_dims!r}."
    return mapped
