"""Reference engine: arithmetic, unary, comparison and reduction ops and matmul: check, run the kernel, record the
node. Mirrors csrc/dyngrad/ops_math.cpp, function for function.

Every function here takes tensors (the shared layer turns Python numbers into 0-d tensors first). What each node saves
is chosen here, next to the forward; the formulas using it are in derivatives.py.
"""
import math

import numpy as np

from . import dtypes as _dt
from . import errors, kernels
from . import forward_ad
from . import ops_shape
from .errors import shape_str
from .ops import record, any_requires_grad, needs_input_grad, check_float, normalize_dims, unary_float_op
from .ops import fresh as _fresh
from .tensor import make_tensor, broadcast_shapes, wrap_dim, scalar_tensor


def _cast(arr, dtype):
    return dtype.cast(arr)


_ORDERED = ("maximum", "minimum", "atan2", "lt", "le", "gt", "ge")


def check_not_complex(dtype, op):
    """Complex numbers have no order: the ops that compare them are refused, as in elementwise.cpp."""
    if dtype.is_complex:
        raise TypeError(f"{op}: not supported for complex tensors ({dtype.name}); complex numbers have no order.")


def _binary(kernel, a, b, dtype, op):
    """kernel(a, b) computed in `dtype` after broadcasting (csrc/dyngrad/kernels/elementwise.cpp binary_kernel)."""
    if op in _ORDERED:
        check_not_complex(dtype, op)
    x, y = a._data, b._data
    if x.shape != y.shape:
        broadcast_shapes(x.shape, y.shape, op)
    compute = _wide(dtype)
    return make_tensor(_fresh(_cast(kernel(_cast(x, compute), _cast(y, compute)), dtype)))


def _wide(dtype):
    """float16/bfloat16 compute in float32 (the inputs are not rounded to 16 bits first), as C++ (Note [Half
    types] in csrc/dyngrad/dtype.h)."""
    return _dt.float32 if dtype.is_floating_point and dtype.itemsize == 2 else dtype


def _tier(t):
    """Tensors with dims outrank 0-d tensors, which outrank wrapped Python numbers (scalar_operand)."""
    return 2 if t.ndim else (0 if t._wrapped_number else 1)


def result_type(a, b):
    """torch's promotion of two operands (Note [Integers that do not fit the tensor's dtype] in ops_math.cpp): a
    lower tier (0-d below dims, a Python number below 0-d) widens a higher one only when it is of a higher category
    (bool < int < float): float32 tensor * float64 0-d is float32, 0-d uint8 * the number 1000 is uint8."""
    if a.dtype is b.dtype:
        return a.dtype
    ta, tb = _tier(a), _tier(b)
    if ta == tb:
        return _dt.promote(a.dtype, b.dtype)
    higher, lower = (a, b) if ta > tb else (b, a)
    return _dt.combine_categories(higher.dtype, lower.dtype)


def to_floating(dtype):
    return dtype if dtype.is_floating_point or dtype.is_complex else _dt.get_default_dtype()


def scalar_like(t, v, is_integral):
    """A Python number as a 0-d tensor of the dtype the result will have: it never widens a float tensor."""
    dtype = t.dtype
    if dtype.is_complex:
        pass
    elif not is_integral and not dtype.is_floating_point:
        dtype = _dt.get_default_dtype()
    elif not is_integral and dtype.is_floating_point and dtype.itemsize == 2 and t.ndim > 0:
        dtype = _dt.float32          # not rounded to 16 bits before the float32 computation (as ops_math.cpp)
    elif is_integral and (dtype is _dt.bool_ or not _fits(v, dtype)):
        dtype = _dt.int64        # Note [Integers that do not fit the tensor's dtype] in ops_math.cpp
    return scalar_tensor(v, dtype)


def _fits(v, dtype):
    """Whether the Python int v is representable in the integer dtype (always true for other dtypes)."""
    if dtype.is_floating_point or dtype.is_complex or dtype is _dt.bool_:
        return True
    info = np.iinfo(dtype.np)
    return info.min <= v <= info.max


def scalar_operand(value, like):
    """A Python bool/int/float as the operand of an op whose other operand is `like` (None: the number alone).
    torch's rule, as csrc/bindings/module.cpp: a number never widens the tensor's dtype within its category; a
    number of a higher category (bool < int < float) gives that category's default dtype. The operand is a
    wrapped number, which result_type ranks below 0-d tensors."""
    t = _number_as_tensor(value, like)
    t._wrapped_number = True
    return t


def _number_as_tensor(value, like):
    if isinstance(value, bool):
        return scalar_tensor(value, like.dtype if like is not None and like.dtype is not _dt.bool_ else _dt.bool_)
    if isinstance(value, int):
        if not -2 ** 63 <= value < 2 ** 63:
            raise RuntimeError("an integer operand does not fit in int64.")
        return scalar_like(like, value, True) if like is not None else scalar_tensor(value, _dt.int64)
    if isinstance(value, float):
        return scalar_like(like, value, False) if like is not None else scalar_tensor(value, _dt.get_default_dtype())
    if isinstance(value, complex):
        # torch's wrapped complex number: the default complex dtype, or the precision of a float tensor with dims
        # (float64 * 1j is complex128), as csrc/dyngrad/ops_math.cpp scalar_like_complex
        dtype = _dt.complex_of(_dt.get_default_dtype())
        if like is not None and like.dtype.is_complex:
            dtype = like.dtype
        elif like is not None and like.dtype.is_floating_point and like.ndim > 0:
            dtype = _dt.complex_of(like.dtype)
        return scalar_tensor(value, dtype)
    raise TypeError(f"expected a Python number (bool, int, float or complex), got {type(value).__name__}.")


# ===== arithmetic ==============================================================================================

# out = a + b
def add(a, b):
    out = _binary(kernels.add, a, b, result_type(a, b), "add")
    if any_requires_grad(a, b):
        record("add", out, (a, b))
    if forward_ad.active(): forward_ad.attach("add", out, (a, b))
    return out


# out = a - b
def sub(a, b):
    # torch refuses a bool operand on either side (a Python bool is refused by the shared layer, before it becomes
    # a tensor of the other operand's dtype)
    if a.dtype is _dt.bool_ and b.dtype is _dt.bool_:
        raise RuntimeError("sub: subtracting two bool tensors (the `-` operator) is not supported; use `^` or "
                           "logical_xor() instead.")
    if a.dtype is _dt.bool_ or b.dtype is _dt.bool_:
        raise RuntimeError("sub: subtracting with a bool tensor (the `-` operator) is not supported; to invert a "
                           "mask, use `~` or logical_not() instead.")
    out = _binary(kernels.sub, a, b, result_type(a, b), "sub")
    if any_requires_grad(a, b):
        record("sub", out, (a, b))
    if forward_ad.active(): forward_ad.attach("sub", out, (a, b))
    return out


# out = a * b; saves b for da and a for db
def mul(a, b):
    out = _binary(kernels.mul, a, b, result_type(a, b), "mul")
    if any_requires_grad(a, b):
        node = record("mul", out, (a, b))
        if needs_input_grad(node, 1):
            node.save("a", a)
        if needs_input_grad(node, 0):
            node.save("b", b)
    if forward_ad.active(): forward_ad.attach("mul", out, (a, b), a=a, b=b)
    return out


# out = a / b (true division: integers divide in float32)
def div(a, b):
    out = _binary(kernels.div, a, b, to_floating(result_type(a, b)), "div")
    if any_requires_grad(a, b):
        node = record("div", out, (a, b))
        if needs_input_grad(node, 1):
            node.save("a", a)
        node.save("b", b)
    if forward_ad.active(): forward_ad.attach("div", out, (a, b), a=a, b=b)
    return out


def neg(a):
    if a.dtype is _dt.bool_:
        raise RuntimeError("neg: negation of a bool tensor (the `-` operator) is not supported; to invert a mask, use "
                           "`~` or logical_not().")
    out = make_tensor(_fresh(kernels.neg(a._data)))
    if any_requires_grad(a):
        record("neg", out, (a,))
    if forward_ad.active(): forward_ad.attach("neg", out, (a,))
    return out


# out = a ** b (tensor exponent)
def pow(a, b):
    dtype = result_type(a, b)
    if dtype is _dt.bool_:
        raise TypeError("pow: not supported for bool tensors; convert with .long() or .float() first.")
    inexact = dtype.is_floating_point or dtype.is_complex
    out = _binary(kernels.pow if inexact else kernels.int_pow, a, b, dtype, "pow")
    if any_requires_grad(a, b):
        node = record("pow", out, (a, b))
        node.save("a", a)
        node.save("b", b)
        if needs_input_grad(node, 1):
            node.save("out", out, is_output=True)
    if forward_ad.active(): forward_ad.attach("pow", out, (a, b), a=a, b=b, out=out)
    return out


# out = a ** p (number exponent)
def pow_scalar(a, p):
    integral_result = not (a.dtype.is_floating_point or a.dtype.is_complex) and p == int(p) and p >= 0
    if integral_result:
        dtype = _dt.int64 if a.dtype is _dt.bool_ else a.dtype
        out = make_tensor(_cast(kernels.pow(_cast(a._data, dtype), np.array(int(p), dtype=dtype.np)), dtype))
    else:
        dtype = to_floating(a.dtype)
        out = make_tensor(_cast(kernels.pow(_cast(a._data, dtype), dtype.np.type(p)), dtype))
    if any_requires_grad(a):
        node = record("pow_scalar", out, (a,))
        node.save("a", a)
        node.args = {"exponent": p}
    if forward_ad.active(): forward_ad.attach("pow_scalar", out, (a,), a=a, exponent=p)
    return out


# out = atan2(a, b), the angle of the point (b, a): computed in floating point (float32 for integers)
def atan2(a, b):
    dtype = result_type(a, b)
    if dtype.is_complex:
        raise TypeError(f"atan2: not supported for complex tensors ({dtype.name}); complex numbers have no order "
                        "(the angle of a complex z is angle(z)).")
    out = _binary(kernels.atan2, a, b, dtype if dtype.is_floating_point else _dt.float32, "atan2")
    if any_requires_grad(a, b):
        node = record("atan2", out, (a, b))
        node.save("a", a)
        node.save("b", b)
    if forward_ad.active(): forward_ad.attach("atan2", out, (a, b), a=a, b=b)
    return out


# out = a - floor(a / b) b (remainder) or a - trunc(a / b) b (fmod) in the promoted dtype; an integer divisor 0 is
# refused (ops_math.cpp's modulo)
def _modulo(kernel, a, b, op):
    dtype = result_type(a, b)
    if dtype is _dt.bool_:
        raise NotImplementedError(f"{op}: not implemented for bool tensors.")
    x, y = a._data, b._data
    if x.shape != y.shape:
        broadcast_shapes(x.shape, y.shape, op)
    # each operand rounded to the result's dtype first, as torch's kernel: float16 x % 0.7 divides by 0.7002, and an
    # int8 tensor % 256 divides by the 0 that 256 wraps to (torch: ZeroDivisionError), so the divisor is checked after
    x, y = _cast(x, dtype), _cast(y, dtype)
    if not dtype.is_floating_point and y.size and (y == 0).any():
        raise RuntimeError(f"{op}: integer division by zero (ZeroDivisionError).")
    compute = _wide(dtype)
    return make_tensor(_fresh(_cast(kernel(_cast(x, compute), _cast(y, compute)), dtype)))


def remainder(a, b):
    out = _modulo(kernels.remainder, a, b, "remainder")
    if any_requires_grad(a, b):
        node = record("remainder", out, (a, b))
        if needs_input_grad(node, 1):     # db = -grad floor(a / b); da = grad reads nothing
            node.save("a", a)
            node.save("b", b)
    if forward_ad.active(): forward_ad.attach("remainder", out, (a, b), a=a, b=b)
    return out


def fmod(a, b):
    out = _modulo(kernels.fmod, a, b, "fmod")
    if any_requires_grad(a, b):
        node = record("fmod", out, (a, b))
        if needs_input_grad(node, 1):
            node.save("a", a)
            node.save("b", b)
    if forward_ad.active(): forward_ad.attach("fmod", out, (a, b), a=a, b=b)
    return out


def quotient(kernel, a, b, dtype):
    """The quotient floor(a / b) or trunc(a / b) of remainder's and fmod's derivatives in `dtype`: a kernel's
    value, no node (it is piecewise constant)."""
    return _binary(kernel, a, b, dtype, "quotient")


def maximum(a, b):
    out = _binary(kernels.maximum, a, b, result_type(a, b), "maximum")
    if any_requires_grad(a, b):
        node = record("maximum", out, (a, b))
        node.save("a", a)
        node.save("b", b)
    if forward_ad.active(): forward_ad.attach("maximum", out, (a, b), a=a, b=b)
    return out


def minimum(a, b):
    out = _binary(kernels.minimum, a, b, result_type(a, b), "minimum")
    if any_requires_grad(a, b):
        node = record("minimum", out, (a, b))
        node.save("a", a)
        node.save("b", b)
    if forward_ad.active(): forward_ad.attach("minimum", out, (a, b), a=a, b=b)
    return out


# out = cond ? a : b; saves cond
def where(cond, a, b):
    if cond.dtype is not _dt.bool_:
        cond = compare("ne", cond, scalar_tensor(0, cond.dtype))
    dtype = result_type(a, b)
    broadcast_shapes(broadcast_shapes(cond.shape, a.shape, "where"), b.shape, "where")
    out = make_tensor(_fresh(_cast(kernels.where(cond._data, _cast(a._data, dtype), _cast(b._data, dtype)), dtype)))
    if any_requires_grad(a, b):
        node = record("where", out, (None, a, b))
        node.save("cond", cond)
    if forward_ad.active(): forward_ad.attach("where", out, (None, a, b), cond=cond)
    return out


# out = min(max(a, lo), hi)
def clamp(a, lo, hi):
    """A NaN bound is a bound (every element NaN, gradient 0, as torch); an integer tensor with a bound it cannot
    hold (NaN, inf, 2.5) is clamped in float32, as torch promotes it (mirrors ops_math.cpp)."""
    if lo is None and hi is None:
        raise RuntimeError("clamp: at least one of min and max must be given.")
    check_not_complex(a.dtype, "clamp")
    if not a.dtype.is_floating_point and any(b is not None and not float(b).is_integer() for b in (lo, hi)):
        a = to_dtype(a, _dt.float32)
    out = make_tensor(_fresh(_cast(kernels.clamp(a._data, lo, hi), a.dtype)))
    if any_requires_grad(a):
        node = record("clamp", out, (a,))
        node.save("a", a)
        nan_bound = any(b is not None and b != b for b in (lo, hi))
        # a NaN bound: recorded as the empty interval [inf, -inf], so the gradient is 0 everywhere
        node.args = {"lo": np.inf, "hi": -np.inf} if nan_bound else {"lo": lo, "hi": hi}
    if forward_ad.active(): forward_ad.attach("clamp", out, (a,), a=a, lo=lo, hi=hi)
    return out


def mul_scalar(a, s):
    return mul(a, scalar_like(a, s, False))


def add_scalar(a, s):
    return add(a, scalar_like(a, s, False))


# ===== unary ===================================================================================================

# exp, log, tanh, abs, relu, ...: the forwards of ops.def's kernel ops, made in primitives.py (ops.py).

def leaky_relu(a, slope):
    return unary_float_op("leaky_relu", lambda x: kernels.leaky_relu(x, slope), a, slope=slope)


def softplus(a, beta, threshold):
    return unary_float_op("softplus", lambda x: kernels.softplus(x, beta, threshold), a, beta=beta,
                          threshold=threshold)


# ===== comparisons and logic (no grad) =========================================================================

def compare(op, a, b):
    """op is one of eq ne lt le gt ge; a bool result."""
    dtype = result_type(a, b)
    x, y = a._data, b._data
    if x.shape != y.shape:
        broadcast_shapes(x.shape, y.shape, op)
    if op in _ORDERED:
        check_not_complex(dtype, op)
    if dtype.category == 1 and dtype.itemsize < 8:    # an unfitting Python int wraps into the dtype first, as torch
        x, y = _cast(x, dtype), _cast(y, dtype)        # (Note [Integers that do not fit the tensor's dtype])
    return make_tensor(kernels.compare[op](_cast(x, _wide(dtype)), _cast(y, _wide(dtype))))


def _logical(kernel, a, b, op):
    if a.shape != b.shape:
        broadcast_shapes(a.shape, b.shape, op)
    return make_tensor(kernel(a._data, b._data))


def logical_and(a, b): return _logical(np.logical_and, a, b, "logical_and")
def logical_or(a, b): return _logical(np.logical_or, a, b, "logical_or")
def logical_xor(a, b): return _logical(np.logical_xor, a, b, "logical_xor")


def logical_not(a): return make_tensor(np.logical_not(a._data))
def isnan(a): return make_tensor(np.isnan(a._data))
def isfinite(a): return make_tensor(np.isfinite(a._data))


# ===== reductions ==============================================================================================

# Every reduction saves the reduced dims (sorted, wrapped) and keepdim.
def _record_reduction(op, out, a, dims, keepdim):
    node = record(op, out, (a,))
    node.args = {"dims": dims, "keepdim": keepdim}
    return node


def sum(a, dims, keepdim, dtype=None):
    dims = normalize_dims(dims, a.ndim, "sum")
    src = to_dtype(a, dtype) if dtype is not None and dtype is not a.dtype else a
    arr = src._data if src._data.dtype.kind in "fc" else src._data.astype(np.int64)   # ints sum in int64
    if src.dtype.itemsize == 2 and src.dtype.is_floating_point:   # half types accumulate in float32, as C++
        out = make_tensor(np.array(src.dtype.cast(kernels.sum(arr.astype(np.float32), dims, keepdim))))
    else:
        out = make_tensor(np.asarray(kernels.sum(arr, dims, keepdim), dtype=arr.dtype))
    if dtype is not None and out.dtype is not dtype and not (dtype.is_floating_point or dtype.is_complex):
        out = to_dtype(out, dtype)       # an explicit narrow integer dtype= is the result's (wrapping, as torch)
    if any_requires_grad(src):
        _record_reduction("sum", out, src, dims, keepdim)
    if forward_ad.active(): forward_ad.attach("sum", out, (src,), dims=dims, keepdim=keepdim)
    return out


def mean(a, dims, keepdim):
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        raise RuntimeError(f"mean: expected a floating-point or complex tensor, got {a.dtype.name}; convert with "
                           ".float() first.")
    dims = normalize_dims(dims, a.ndim, "mean")
    if a.dtype.itemsize == 2:      # half types: the float32 mean rounded once (Note [Half types] in dtype.h, as C++)
        out = make_tensor(np.array(a.dtype.cast(kernels.mean(a._data.astype(np.float32), dims, keepdim))))
    else:
        out = make_tensor(np.asarray(kernels.mean(a._data, dims, keepdim), dtype=a._data.dtype))
    if any_requires_grad(a):
        _record_reduction("mean", out, a, dims, keepdim)
    if forward_ad.active(): forward_ad.attach("mean", out, (a,), dims=dims, keepdim=keepdim)
    return out


# var = sum((a - mean)^2) / (n - correction): composite
def var(a, dims, correction, keepdim):
    check_float(a, "var")
    if a.dtype.itemsize == 2:      # half types: computed in float32 and rounded once (as C++ and torch)
        return to_dtype(var(to_dtype(a, _dt.float32), dims, correction, keepdim), a.dtype)
    dims = normalize_dims(dims, a.ndim, "var")
    count = _count(a.shape, dims)
    centered = sub(a, mean(a, dims, True))
    ss = sum(mul(centered, centered), dims, keepdim)
    denom = max(0.0, count - correction)
    return div(ss, scalar_tensor(denom, a.dtype))


def std(a, dims, correction, keepdim):
    """sqrt(var), except where var is 0: there the gradient is 0, as in torch (sqrt's would be inf * 0 = NaN), by
    taking sqrt of 1 there and selecting 0 (docs/numerics.md). Only an exact 0 is masked: a NaN variance (one
    element or none, or NaN inputs) gives NaN, as var, torch and numpy do."""
    v = var(a, dims, correction, keepdim)
    zero = scalar_tensor(0.0, v.dtype)
    is_zero = compare("eq", v, zero)
    return where(is_zero, zero, sqrt(where(is_zero, scalar_tensor(1.0, v.dtype), v)))


def _count(shape, dims):
    n = 1
    for d in dims:
        n *= shape[d]
    return n


def _extremum(op, kernel, a, dims, keepdim):
    check_not_complex(a.dtype, op)
    dims = normalize_dims(dims, a.ndim, op)
    for d in dims:
        if a.shape[d] == 0:
            raise RuntimeError(f"{op}: cannot reduce over dimension {d} of size 0 (input shape {shape_str(a.shape)}):"
                               f" an empty tensor has no {'max' if op == 'amax' else 'min'}.")
    out = make_tensor(np.asarray(kernel(a._data, dims, keepdim), dtype=a._data.dtype))
    if any_requires_grad(a):
        node = _record_reduction(op, out, a, dims, keepdim)
        node.save("a", a)
        node.save("out", out, is_output=True)
    if forward_ad.active(): forward_ad.attach(op, out, (a,), a=a, out=out, dims=dims, keepdim=keepdim)
    return out


def amax(a, dims, keepdim): return _extremum("amax", kernels.amax, a, dims, keepdim)
def amin(a, dims, keepdim): return _extremum("amin", kernels.amin, a, dims, keepdim)


def _arg_extremum(fn, a, dim, keepdim, op):
    check_not_complex(a.dtype, op)
    if dim is None:
        if a.numel() == 0:
            raise RuntimeError(f"{op}: cannot take the {op} of an empty tensor (shape {shape_str(a.shape)}).")
        r = make_tensor(np.asarray(fn(a._data.reshape(-1)), dtype=np.int64))
        return make_tensor(r._data.reshape((1,) * a.ndim)) if keepdim else r
    d = wrap_dim(dim, a.ndim, op)
    if a.ndim == 0:
        return make_tensor(np.zeros((), dtype=np.int64))
    if a.shape[d] == 0:
        raise IndexError(f"{op}: cannot reduce over dimension {d} of size 0 (input shape {shape_str(a.shape)}).")
    return make_tensor(np.asarray(fn(a._data, axis=d, keepdims=keepdim), dtype=np.int64))


def argmax(a, dim, keepdim): return _arg_extremum(np.argmax, a, dim, keepdim, "argmax")
def argmin(a, dim, keepdim): return _arg_extremum(np.argmin, a, dim, keepdim, "argmin")


# out = log(sum(exp(a))) computed stably; saves a and out
def logsumexp(a, dims, keepdim):
    check_not_complex(a.dtype, "logsumexp")
    if not a.dtype.is_floating_point:
        a = to_dtype(a, _dt.float32)
    dims = normalize_dims(dims, a.ndim, "logsumexp")
    out = make_tensor(np.asarray(kernels.logsumexp(a._data, dims, keepdim), dtype=a._data.dtype))
    if any_requires_grad(a):
        node = _record_reduction("logsumexp", out, a, dims, keepdim)
        node.save("a", a)
        node.save("out", out, is_output=True)
    if forward_ad.active(): forward_ad.attach("logsumexp", out, (a,), a=a, out=out, dims=dims, keepdim=keepdim)
    return out


# out_i = sum_{j <= i} a_j along dim (j >= i if reverse): ops_math.cpp's cumsum
def cumsum(a, dim, reverse):
    check_not_complex(a.dtype, "cumsum")
    d = wrap_dim(dim, a.ndim, "cumsum")
    if a.dtype.is_floating_point and a.dtype.itemsize == 2:    # accumulated in float32, rounded once (scan.cpp)
        out = make_tensor(_cast(kernels.cumsum(a._data.astype(np.float32), d, reverse), a.dtype)
                          if a.ndim else a._data.copy())
    else:
        out = make_tensor(kernels.cumsum(a._data, d, reverse) if a.ndim else a._data.copy())
    if any_requires_grad(a):
        node = record("cumsum", out, (a,))
        node.args = {"dim": d, "reverse": bool(reverse)}
    if forward_ad.active(): forward_ad.attach("cumsum", out, (a,), dim=d, reverse=bool(reverse))
    return out


def _scan_dim(a, dim, op):
    return wrap_dim(dim, a.ndim, op) if a.ndim else (wrap_dim(dim, 0, op), 0)[1]


def _check_scan_dtype(a, integers, op):
    if not (a.dtype in (_dt.float32, _dt.float64) or (integers and a.dtype is _dt.int64) or
            (a.dtype.is_floating_point and a.dtype.itemsize == 2)):
        raise TypeError(f"{op}: expected a float32, float64{' or int64' if integers else ''} tensor (the API "
                        f"converts the others), got {a.dtype.name}.")


def _scan_kernel(kernel, a, d, reverse, integers, op):
    """kernel on a's values along d in a's dtype, the halves accumulated in float32 and rounded once (scan.cpp)."""
    _check_scan_dtype(a, integers, op)
    if a.ndim == 0:
        return make_tensor(a._data.copy())
    if a.dtype.itemsize == 2:
        return make_tensor(_cast(kernel(a._data.astype(np.float32), d, reverse), a.dtype))
    return make_tensor(kernel(a._data, d, reverse))


# out_i = prod_{j <= i} a_j along dim (j >= i if reverse): ops_math.cpp's cumprod
def cumprod(a, dim, reverse):
    d = _scan_dim(a, dim, "cumprod")
    out = _scan_kernel(kernels.cumprod, a, d, reverse, True, "cumprod")
    if any_requires_grad(a):
        node = record("cumprod", out, (a,))
        node.save("a", a)
        node.save("out", out, is_output=True)
        node.args = {"dim": d, "reverse": bool(reverse)}
    if forward_ad.active(): forward_ad.attach("cumprod", out, (a,), a=a, out=out, dim=d, reverse=bool(reverse))
    return out


# out_i = log(sum_{j <= i} exp(a_j)) along dim (j >= i if reverse), floating point
def logcumsumexp(a, dim, reverse):
    d = _scan_dim(a, dim, "logcumsumexp")
    out = _scan_kernel(kernels.logcumsumexp, a, d, reverse, False, "logcumsumexp")
    if any_requires_grad(a):
        node = record("logcumsumexp", out, (a,))
        node.save("a", a)
        node.save("out", out, is_output=True)
        node.args = {"dim": d, "reverse": bool(reverse)}
    if forward_ad.active():
        forward_ad.attach("logcumsumexp", out, (a,), a=a, out=out, dim=d, reverse=bool(reverse))
    return out


# y_k = b_k + c_k y_{k-1} along dim (y_{k+1} if reverse); b and c of one shape and floating dtype
def linear_recurrence(b, c, dim, reverse):
    d = _scan_dim(b, dim, "linear_recurrence")
    if b.shape != c.shape or b.dtype is not c.dtype:
        raise RuntimeError(f"linear_recurrence: expected b and c of one shape and dtype, got {shape_str(b.shape)} "
                           f"{b.dtype.name} and {shape_str(c.shape)} {c.dtype.name}.")
    _check_scan_dtype(b, False, "linear_recurrence")
    if b.ndim == 0:
        out = make_tensor(b._data.copy())
    elif b.dtype.itemsize == 2:
        out = make_tensor(_cast(kernels.linear_recurrence(b._data.astype(np.float32), c._data.astype(np.float32),
                                                          d, reverse), b.dtype))
    else:
        out = make_tensor(kernels.linear_recurrence(b._data, c._data, d, reverse))
    if any_requires_grad(b, c):
        node = record("linear_recurrence", out, (b, c))
        node.save("c", c)
        if needs_input_grad(node, 1):
            node.save("out", out, is_output=True)
        node.args = {"dim": d, "reverse": bool(reverse)}
    if forward_ad.active():
        forward_ad.attach("linear_recurrence", out, (b, c), c=c, out=out, dim=d, reverse=bool(reverse))
    return out


# t moved one place along a scan: out_k = t_{k-1} (t_{k+1} if reverse), `fill` where the scan starts (ops_math.cpp)
def scan_shift(t, d, reverse, fill):
    if t.ndim == 0:
        return make_tensor(np.full((), fill, dtype=t._data.dtype))
    n = t.shape[d]
    if n == 0:
        return t
    edge_shape = list(t.shape)
    edge_shape[d] = 1
    edge = make_tensor(np.full(tuple(edge_shape), fill, dtype=t._data.dtype))
    if reverse:
        return ops_shape.cat([ops_shape.slice(t, d, 1, n, 1), edge], d)
    return ops_shape.cat([edge, ops_shape.slice(t, d, 0, n - 1, 1)], d)


# Note [Unbroadcast]: sum the broadcast dims of t away so that it has `shape`.
def sum_to(t, shape):
    shape = tuple(shape)
    if t.shape == shape:
        return t
    lead = t.ndim - len(shape)
    if lead < 0:
        raise RuntimeError(f"sum_to: cannot sum shape {shape_str(t.shape)} to {shape_str(shape)}.")
    dims = []
    for d in range(t.ndim):
        if d < lead:
            dims.append(d)
        elif shape[d - lead] == 1 and t.shape[d] != 1:
            dims.append(d)
        elif shape[d - lead] != t.shape[d]:
            raise RuntimeError(f"sum_to: cannot sum shape {shape_str(t.shape)} to {shape_str(shape)}.")
    r = sum(t, dims, True) if dims else t
    return r if r.shape == shape else reshape(r, shape)


# ===== linear algebra ==========================================================================================

# out = a @ b for inputs of at least 2 dims; 1-D operands are promoted to matrices and the extra dim removed after.
def matmul(a, b):
    if a.ndim < 1 or b.ndim < 1:
        raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got {shape_str(a.shape)} @ "
                           f"{shape_str(b.shape)}.")
    if a.dtype is _dt.bool_ or b.dtype is _dt.bool_:
        raise TypeError("matmul: not supported for bool tensors.")
    if a.ndim == 1 or b.ndim == 1:
        ka, kb = a.shape[-1], b.shape[0 if b.ndim == 1 else -2]
        if ka != kb:
            raise RuntimeError(errors.ERR_MATMUL.format(a=shape_str(a.shape), b=shape_str(b.shape), k1=ka, k2=kb))
        a2 = unsqueeze(a, 0) if a.ndim == 1 else a
        b2 = unsqueeze(b, 1) if b.ndim == 1 else b
        r = matmul(a2, b2)
        if a.ndim == 1:
            r = squeeze(r, (-2,))
        if b.ndim == 1:
            r = squeeze(r, (-1,))
        return r
    ka, kb = a.shape[-1], b.shape[-2]
    if ka != kb:
        raise RuntimeError(errors.ERR_MATMUL.format(a=shape_str(a.shape), b=shape_str(b.shape), k1=ka, k2=kb))
    broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul")
    if a.dtype is not b.dtype:  # torch never promotes in a matrix product (after the shapes)
        raise RuntimeError(f"matmul: expected both operands to have the same dtype, got {a.dtype.name} @ "
                           f"{b.dtype.name}; convert one with .to(dtype).")
    dtype = a.dtype                                  # = b.dtype: no promotion, no conversion
    if dtype.itemsize < 4 or dtype is _dt.int32:    # half types and narrow integers: computed wide (as C++)
        wide = _dt.float32 if dtype.is_floating_point else _dt.int64
        return to_dtype(matmul(to_dtype(a, wide), to_dtype(b, wide)), dtype)
    if a.ndim > 2 and b.ndim == 2:   # Note [Folded batch] (csrc/dyngrad/ops_math.cpp): one 2-D product
        rows = tuple(a.shape[:-1])
        return reshape(matmul(reshape(a, (math.prod(rows), ka)), b), rows + (b.shape[1],))
    out = make_tensor(kernels.matmul(a._data, b._data))
    if any_requires_grad(a, b):
        node = record("matmul", out, (a, b))
        if needs_input_grad(node, 1):
            node.save("a", a)
        if needs_input_grad(node, 0):
            node.save("b", b)
        # Note [Gradient in the operand's layout] (csrc/dyngrad/derivatives.cpp): a (..., n, k) view of a
        # (..., k, n) matrix
        def transposed(t):
            st = t.stride()
            return t.ndim == out.ndim and st[-2] == 1 and st[-1] != 1 and t.shape[-2] > 1
        node.args = {"a_transposed": transposed(a), "b_transposed": transposed(b)}
    if forward_ad.active(): forward_ad.attach("matmul", out, (a, b), a=a, b=b)
    return out


from .ops_shape import to_dtype, reshape, squeeze, unsqueeze  # noqa: E402  (ops_shape uses this module too)
from .primitives import sqrt  # noqa: E402  (primitives.py imports this module too)
