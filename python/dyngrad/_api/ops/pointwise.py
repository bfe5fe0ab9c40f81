"""Elementwise ops with torch's signatures: arithmetic (numbers as operands, alpha=, rounding modes), unary math,
special functions, comparisons, logic and bitwise ops. Most are one or two core calls (_C.<op>), where the core does
the dtype promotion, broadcasting and checks; the rest are custom Functions with numpy forwards (Note [numpy
forwards])."""
import builtins
import collections
import math

import numpy as np

from ... import _C
from ...autograd.function import Function, _jvp_input_has_tangent, _jvp_primal, _jvp_primal_has_tangents
from .. import bridge, primitive_rows
from ..args import (Tensor, broadcast_shapes, checked_write, core, get_default_dtype, number, operand_or_throw,
                    operands, refuse_complex, tensor_arg, to_int, type_name)
from ..bridge import is_half
from ..dtype_info import finfo
from ..host import special as sn
from ..node_names import rename, shows_as

_LN2 = math.log(2.0)


# ----- dtype helpers ---------------------------------------------------------------------------------------------

def _float(a, op=None):
    """a, or a as float32 if it is an integer or bool tensor: float ops compute in float32 on those, as torch. A
    complex tensor is refused (these ops have no complex kernel; converting would drop the imaginary part)."""
    if a.dtype.is_complex:
        _refuse_complex(op or "this operation", a.dtype)
    return a if a.dtype.is_floating_point else _C.to_dtype(a, _C.float32)


def _refuse_complex(op, dtype):
    raise TypeError(f"{op}: not supported for complex tensors (dtype {dtype.name}).")


def _cast(a, dtype):
    return a if a.dtype is dtype else _C.to_dtype(a, dtype)


def _pair(input, other, op, numbers=(False, True)):
    """(input, other) as tensors; numbers[i] says whether position i may be a Python number (never both)."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        return input, other
    if isinstance(input, Tensor):
        if not numbers[1]:
            raise TypeError(f"{op}: expected a Tensor as other, got {type_name(other)}.")
        return input, operand_or_throw(other, input, op)
    if isinstance(other, Tensor):
        if not numbers[0]:
            raise TypeError(f"{op}: expected a Tensor as input, got {type_name(input)}.")
        return operand_or_throw(input, other, op, "input"), other
    raise TypeError(f"{op}: expected a Tensor as input or other, got {type_name(input)} and {type_name(other)}.")


def _float_pair(input, other, op, numbers=(False, True), integers=True):
    """(input, other) cast to their promoted float dtype (float32 for integer inputs, as torch); integers=False
    refuses integer inputs as torch does for ops without an integer kernel (hypot, logaddexp)."""
    a, b = _pair(input, other, op, numbers)
    broadcast_shapes(a.shape, b.shape, op)
    dtype = _C.result_type(a, b)
    if dtype.is_complex:
        _refuse_complex(op, dtype)
    if not dtype.is_floating_point:
        if not integers:
            raise NotImplementedError(f"{op}: expected floating-point tensors, got {dtype.name}.")
        dtype = _C.float32
    return _cast(a, dtype), _cast(b, dtype)


def _result_type(*tensors):
    """torch's promotion of several tensors, folded pairwise (0-d ones count only with a higher category)."""
    dtype, dims = tensors[0].dtype, tensors[0].ndim > 0
    for t in tensors[1:]:
        dtype = _C.result_type(_C.empty((1,) if dims else (), dtype), t)
        dims = dims or t.ndim > 0
    return dtype


def _zeros(like):
    return _C.full(tuple(like.shape), 0, like.dtype)


def _where(cond, a, b, like=None):
    """_C.where with numbers allowed for a and b (of the dtype of the tensor branch, or of `like`)."""
    if like is None:
        like = a if isinstance(a, Tensor) else b
    return _C.where(cond, operand_or_throw(a, like, "where"), operand_or_throw(b, like, "where"))


# ----- Note [numpy forwards] -------------------------------------------------------------------------------------
# The core has no kernel for these ops (tan, asin, lgamma, erfinv, remainder, ...), and a composite of core ops
# would lose accuracy (log(1 + x) for log1p, exp(x) - 1 for expm1) or torch's conventions at special points. Each is
# a custom Function: its forward computes the values with numpy (host/special.py has what numpy lacks) and its
# backward is written with dyngrad ops, so gradients of gradients work. A backward that needs the op's own output
# recomputes it through the Function when it is recording a graph (create_graph=True), so that the output is a
# differentiable function of the input; otherwise it reads the saved output. The forward derivative (jvp) applies
# the same formula to the input tangents. They are candidates for C++ kernels.

_NOT_A_TENSOR = object()


class _NumpyFunction(Function):
    """kernel(*values) is the forward on the arguments' values (numpy arrays for tensors, other arguments as given),
    converted to the first tensor argument's dtype; derivative(grad, out, *args) returns the gradients (one per
    argument, None for non-tensors), or None when the op's gradient is zero (integer-valued results, as torch).
    no_forward_ad names the op where torch has no forward derivative (jvp then raises, as torch).

    The ops are elementwise with real inputs, so derivative(grad, ...)[i] = grad * df/darg_i is also the forward
    derivative's linear map: jvp applies it to each input's tangent and sums (torch's auto_element_wise), one
    formula for both modes (Note [numpy forwards])."""
    kernel = None
    derivative = None
    uses_out = False
    no_forward_ad = None

    @classmethod
    def forward(cls, ctx, *args):
        values = [bridge.host_values(a) if isinstance(a, Tensor) else a for a in args]
        dtype = next(a.dtype for a in args if isinstance(a, Tensor))
        with np.errstate(all="ignore"):
            out = bridge.host_result(cls.kernel(*values), dtype)
        if any(ctx.needs_input_grad):
            ctx.constants = [_NOT_A_TENSOR if isinstance(a, Tensor) else a for a in args]
            ctx.save_for_backward(*[a for a in args if isinstance(a, Tensor)], out.detach() if cls.uses_out else None)
        if _C._current_dual_level() >= 0:
            ctx.jvp_args, ctx.jvp_out = args, out.detach()
        return out

    @classmethod
    def backward(cls, ctx, grad):
        *tensors, out = ctx.saved_tensors
        tensors = iter(tensors)
        args = [next(tensors) if c is _NOT_A_TENSOR else c for c in ctx.constants]
        if cls.derivative is None:
            return tuple(_zeros(a) if isinstance(a, Tensor) else None for a in args)
        if cls.uses_out and _C.is_grad_enabled():
            out = cls.apply(*args)
        grads = cls.derivative(grad, out, *args)
        return grads if isinstance(grads, tuple) else (grads,)

    @classmethod
    def jvp(cls, ctx, *tangents):
        if cls.no_forward_ad is not None:
            raise NotImplementedError(f"{cls.no_forward_ad}: forward-mode AD (a dual tensor as input) is not "
                                      "implemented (as in torch).")
        args, out = ctx.jvp_args, ctx.jvp_out
        if cls.derivative is None:
            return _zeros(out)
        # the derivative on the primals (Note [Nested levels]); recomputed `out` when the tangent must be
        # differentiable (recorded for reverse mode, or carrying a lower level's tangent)
        primals = [_jvp_primal(ctx, a) for a in args]
        tensors = [a for a in primals if isinstance(a, Tensor)]
        if cls.uses_out and ((_C.is_grad_enabled() and any(a.requires_grad for a in tensors))
                             or _jvp_primal_has_tangents(ctx, *args)):
            out = cls.apply(*primals)
        total = None
        for i, (a, t) in enumerate(zip(args, tangents)):
            if not _jvp_input_has_tangent(ctx, a):
                continue
            d = cls.derivative(t, out, *primals)
            d = d[i] if isinstance(d, tuple) else d
            if d is not None:
                total = d if total is None else _C.add(total, d)
        if total is None:
            return _zeros(out)
        return total if tuple(total.shape) == tuple(out.shape) else _C.expand(total, tuple(out.shape))


def _numpy_function(name, kernel, derivative=None, uses_out=False, no_forward_ad=None):
    """A _NumpyFunction subclass named as torch's op (its node shows as <name>Backward)."""
    return type(name, (_NumpyFunction,), {"kernel": staticmethod(kernel), "uses_out": uses_out,
                                          "derivative": None if derivative is None else staticmethod(derivative),
                                          "no_forward_ad": no_forward_ad})


def _not_differentiable(op):
    def derivative(grad, out, *args):
        raise RuntimeError(f"{op}: the derivative is not implemented (as in torch).")
    return derivative


# The derivatives: `g` is dL/d(out), `out` the op's result, then the op's arguments.
# d exp2 x = exp2(x) ln 2
Exp2 = _numpy_function("Exp2", np.exp2, lambda g, out, x: g * (out * _LN2), uses_out=True)
# d erfc x = -2/sqrt(pi) exp(-x^2)
Erfc = _numpy_function("Erfc", sn.erfc, lambda g, out, x: g * (_C.exp(-(x * x)) * (-2.0 / math.sqrt(math.pi))))
# d erfinv y = sqrt(pi)/2 exp(erfinv(y)^2)
Erfinv = _numpy_function("Erfinv", sn.erfinv, lambda g, out, x: g * (_C.exp(out * out) * (math.sqrt(math.pi) / 2)),
                         uses_out=True)
# d lgamma x = digamma x; d digamma x = polygamma(1, x); d polygamma(n, x) = polygamma(n + 1, x)
Lgamma = _numpy_function("Lgamma", sn.lgamma, lambda g, out, x: g * Digamma.apply(x))
Digamma = _numpy_function("Digamma", sn.digamma, lambda g, out, x: g * Polygamma.apply(1, x))
Polygamma = _numpy_function("Polygamma", lambda n, x: sn.polygamma(n, x),
                            lambda g, out, n, x: (None, g * Polygamma.apply(n + 1, x)))


def _sinc_derivative(g, out, x):
    """d sinc x = (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at x = 0 (as torch)."""
    zero = x == 0
    safe = _where(zero, 1.0, x)
    px = safe * math.pi
    return _where(zero, 0.0, g * ((px * _C.cos(px) - _C.sin(px)) / (px * safe)))


Sinc = _numpy_function("Sinc", np.sinc, _sinc_derivative)


def _logit_kernel(x, eps):
    if eps is not None:
        lo, hi = x.dtype.type(eps), x.dtype.type(1 - eps)
        x = np.where(x < lo, lo, np.where(x > hi, hi, x))
    return np.log(x / (1 - x))


def _logit_derivative(g, out, x, eps):
    """d logit x = 1 / (x (1 - x)) inside the clamp, 0 outside it (with eps); without eps nan outside [0, 1] and
    +inf at 0 and 1 (torch's values)."""
    if eps is not None:
        return _where((x < eps) | (x > 1 - eps), 0.0, g / (x * (1 - x))), None
    inside = g / (x * (1 - x))        # +-inf at the ends: at -0 the product is -0, and torch gives -inf there
    return _where((x < 0) | (x > 1), math.nan, inside), None


Logit = _numpy_function("Logit", _logit_kernel, _logit_derivative)


def _entr_kernel(x):
    return np.where(x > 0, -x * np.log(np.where(x > 0, x, 1)), np.where(x == 0, 0.0, np.where(np.isnan(x), x, -np.inf)))


# d entr x = -(1 + ln x)
Entr = _numpy_function("Entr", _entr_kernel, lambda g, out, x: g * -(_C.log(x) + 1))
# d erfcx x = 2x erfcx(x) - 2/sqrt(pi)
Erfcx = _numpy_function("Erfcx", sn.erfcx, lambda g, out, x: g * (x * out * 2 - 2.0 / math.sqrt(math.pi)),
                        uses_out=True)
# d log_ndtr x = exp(-x^2/2) / sqrt(2 pi) / ndtr(x) = exp(-(log_ndtr(x) + x^2/2)) / sqrt(2 pi)
LogNdtr = _numpy_function("LogNdtr", sn.log_ndtr,
                          lambda g, out, x: g * (_C.exp(-(out + x * x * 0.5)) / math.sqrt(2 * math.pi)),
                          uses_out=True)
# d ndtri p = sqrt(2 pi) exp(ndtri(p)^2 / 2)
Ndtri = _numpy_function("Ndtri", sn.ndtri, lambda g, out, x: g * (_C.exp(out * out * 0.5) * math.sqrt(2 * math.pi)),
                        uses_out=True)
# d i0 x = i1 x; d i0e x = i1e x - sign(x) i0e x
I0 = _numpy_function("I0", lambda x: sn.bessel_i(0, x, False), lambda g, out, x: g * I1.apply(x))
I0e = _numpy_function("I0e", lambda x: sn.bessel_i(0, x, True),
                      lambda g, out, x: g * (I1e.apply(x) - _C.sign(x) * out), uses_out=True)


def _tiny(x):
    """|x| <= the dtype's epsilon (or NaN), where torch sets the derivatives of i1 and i1e to their limit 1/2."""
    return _C.logical_not(_C.compare("gt", _C.abs(x), _C.scalar_operand(finfo(x.dtype).eps, x)))


def _i1_derivative(g, out, x):
    """d i1 x = i0 x - i1(x) / x, 1/2 near 0."""
    tiny = _tiny(x)
    return g * _where(tiny, 0.5, I0.apply(x) - out / _where(tiny, 1.0, x))


def _i1e_derivative(g, out, x):
    """d i1e x = i0e x - i1e(x) (sign(x) + 1/x), 1/2 near 0."""
    tiny = _tiny(x)
    return g * _where(tiny, 0.5, I0e.apply(x) - out * (_C.sign(x) + 1 / _where(tiny, 1.0, x)))


I1 = _numpy_function("I1", lambda x: sn.bessel_i(1, x, False), _i1_derivative, uses_out=True)
I1e = _numpy_function("I1e", lambda x: sn.bessel_i(1, x, True), _i1e_derivative, uses_out=True)


def _zeta_derivative(g, out, s, q):
    """d zeta(s, q) / dq = -s zeta(s + 1, q); torch has no derivative in s either."""
    if s.requires_grad:
        raise NotImplementedError("zeta: the derivative with respect to input (s) is not implemented (as in torch).")
    return None, g * -s * Zeta.apply(s + 1, q)


Zeta = _numpy_function("Zeta", sn.zeta, _zeta_derivative, no_forward_ad="zeta")


def _xlogy_kernel(x, y):
    return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log(y))


def _xlog1py_kernel(x, y):
    return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))


def _xlogy_derivative(g, out, x, y):
    """d/dx xlogy = log y (0 where x = 0 and y <= 0); d/dy = x / y."""
    return _where((x == 0) & (y <= 0), 0.0, Xlogy.apply(g, y)), g * x / y


def _xlog1py_derivative(g, out, x, y):
    """d/dx xlog1py = log1p y (0 where x = 0 and y <= -1); d/dy = x / (1 + y)."""
    return _where((x == 0) & (y <= -1), 0.0, Xlog1py.apply(g, y)), g * x / (y + 1)


Xlogy = _numpy_function("Xlogy", _xlogy_kernel, _xlogy_derivative)
Xlog1py = _numpy_function("Xlog1py", _xlog1py_kernel, _xlog1py_derivative)


# d hypot(a, b) = (a da + b db) / hypot(a, b)
Hypot = _numpy_function("Hypot", np.hypot, lambda g, out, a, b: (g * a / out, g * b / out), uses_out=True)
# d logaddexp(a, b) = (da + exp(b - a) db) / (1 + exp(b - a))
Logaddexp = _numpy_function("Logaddexp", np.logaddexp,
                            lambda g, out, a, b: (g / (_C.exp(b - a) + 1), g / (_C.exp(a - b) + 1)))
# d logaddexp2(a, b) = (da + 2^(b - a) db) / (1 + 2^(b - a))
Logaddexp2 = _numpy_function("Logaddexp2", np.logaddexp2,
                             lambda g, out, a, b: (g / (_C.exp((b - a) * _LN2) + 1), g / (_C.exp((a - b) * _LN2) + 1)))


def _copysign_derivative(g, out, a, b):
    """d copysign(a, b) = copysign(a, b) / a da (+-1; 0 at a = 0, nan at a = +-inf, as torch); nothing in b."""
    zero = a == 0
    return _where(zero, 0.0, g * out / _where(zero, 1.0, a)), _zeros(b)


Copysign = _numpy_function("Copysign", np.copysign, _copysign_derivative, uses_out=True)


# ----- integer-valued results: zero gradients, as torch ------------------------------------------------------------

def _round_kernel(x, decimals):
    """torch's rounding to `decimals` places, half to even: rint(x * 10^d) / 10^d (x / 10^-d for negative d), in
    x's own precision."""
    if decimals == 0:
        return np.rint(x)
    scale = x.dtype.type(10.0 ** (decimals if decimals > 0 else -decimals))
    return np.rint(x * scale) / scale if decimals > 0 else np.rint(x / scale) * scale


Floor = _numpy_function("Floor", np.floor)
Ceil = _numpy_function("Ceil", np.ceil)
Trunc = _numpy_function("Trunc", np.trunc)
Round = _numpy_function("Round", _round_kernel)


def _check_divisor(b, op):
    if not b.dtype.is_floating_point and (bridge.host_values(b) == 0).any():
        raise RuntimeError(f"{op}: integer division by zero (ZeroDivisionError).")


def _floor_divide_kernel(a, b):
    return np.floor_divide(a, b)


def _trunc_divide_kernel(a, b):
    if a.dtype.kind == "f":
        return np.trunc(a / b)
    q = np.floor_divide(a, b)
    return q + ((q * b != a) & ((a < 0) != (b < 0)))


# rounding divisions: zero gradients (torch's DivBackward with a rounding mode); floor_divide has none at all
DivFloor = _numpy_function("Div", _floor_divide_kernel)
DivTrunc = _numpy_function("Div", _trunc_divide_kernel)
FloorDivide = _numpy_function("FloorDivide", _floor_divide_kernel, _not_differentiable("floor_divide"),
                              no_forward_ad="floor_divide")


Heaviside = _numpy_function("Heaviside", lambda x, v: np.where(x == 0, v, x > 0),
                            _not_differentiable("heaviside"), no_forward_ad="heaviside")


# ----- arithmetic ------------------------------------------------------------------------------------------------

def _scaled(b, alpha, op, integral=False, dtype=None, negated=False):
    """alpha * b (b itself when alpha is absent or the int 1); a float alpha is refused for integer inputs, a bool
    one for non-bool results, and alpha must fit the result's `dtype` (torch converts it: int8 alpha=300 raises;
    a subtraction converts -alpha, `negated`). Given the result's `dtype`, b is converted to it before it is scaled,
    as torch computes alpha * other in the common dtype: 0-d uint8 + 300 * 2 wraps 300 first (a Python number next to
    a 0-d tensor is an int64 operand, Note [Integers that do not fit the tensor's dtype])."""
    if alpha is None or (type(alpha) is int and alpha == 1):
        return b
    alpha = number(alpha, op, "alpha")
    if isinstance(alpha, complex) and dtype is not None and not dtype.is_complex:
        raise RuntimeError(f"{op}: for non-complex input tensors, alpha must not be a complex number, got {alpha}.")
    if integral and isinstance(alpha, float):
        raise RuntimeError(f"{op}: for integer input tensors, alpha must not be a floating-point number, got "
                           f"{alpha}.")
    if dtype is not None:
        if isinstance(alpha, bool) and dtype is not _C.bool:
            raise RuntimeError(f"{op}: a bool alpha is only supported for bool results, got {dtype.name}.")
        checked_write(-alpha if negated and not isinstance(alpha, bool) else alpha, dtype, op)
        if dtype is _C.bool:
            alpha = bool(alpha)                 # converted to the bool result's dtype, as torch (b stays bool)
        b = _cast(b, dtype)
        return _cast(_C.mul(b, _C.scalar_operand(alpha, b)), dtype)    # (an unfitting alpha: int64 0-d product)
    return _C.mul(b, _C.scalar_operand(alpha, b))


def _integral(*tensors):
    """Whether every tensor is an integer or bool one (complex tensors are not)."""
    return not any(t.dtype.is_floating_point or t.dtype.is_complex for t in tensors)


def add(input, other, *, alpha=1):
    """input + alpha * other."""
    a, b = operands(input, other, "add")
    return _C.add(a, _scaled(b, alpha, "add", _integral(a, b), _C.result_type(a, b)))


def refuse_bool_subtraction(a, b):
    """torch refuses a subtraction with a bool operand, a tensor or a Python bool. The core refuses bool tensors, but
    a number reaches it as a tensor of the other operand's dtype: a Python bool is made a bool tensor here, so that
    the core raises its error (a numpy bool is a number 0 or 1 to torch). Used by sub, rsub and the operators - and
    -=."""
    a = _C.scalar_operand(a, None) if isinstance(a, bool) else a
    b = _C.scalar_operand(b, None) if isinstance(b, bool) else b
    if any(isinstance(t, Tensor) and t.dtype is _C.bool for t in (a, b)):     # (before alpha scales it to int64)
        like = a if isinstance(a, Tensor) else b
        _C.sub(*(t if isinstance(t, Tensor) else operand_or_throw(t, like, "sub") for t in (a, b)))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    refuse_bool_subtraction(input, other)
    a, b = operands(input, other, "sub")
    return _C.sub(a, _scaled(b, alpha, "sub", _integral(a, b), _C.result_type(a, b), negated=True))


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    a = tensor_arg(input, "rsub")
    refuse_bool_subtraction(other, a)
    b = operand_or_throw(other, a, "rsub")
    return _C.sub(b, _scaled(a, alpha, "rsub", _integral(a, b), _C.result_type(a, b), negated=True))


def mul(input, other):
    return _C.mul(*operands(input, other, "mul"))


def _rounding_division(a, b, mode, op, function=None):
    """a / b rounded toward zero ('trunc') or down ('floor'), in the promoted dtype (integers stay integers)."""
    broadcast_shapes(a.shape, b.shape, op)
    dtype = _C.result_type(a, b)
    if dtype is _C.bool:
        raise NotImplementedError(f"{op}: rounding division is not implemented for bool tensors.")
    if dtype.is_complex:
        _refuse_complex(op, dtype)
    a, b = _cast(a, dtype), _cast(b, dtype)
    _check_divisor(b, op)
    if function is None:
        function = DivFloor if mode == "floor" else DivTrunc
    return function.apply(a, b)


def div(input, other, *, rounding_mode=None):
    """input / other: true division (int inputs give float32), or rounded with rounding_mode 'trunc' / 'floor'."""
    a, b = operands(input, other, "div")
    if rounding_mode is None:
        return _C.div(a, b)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}.")
    return _rounding_division(a, b, rounding_mode, "div")


def true_divide(dividend, divisor):
    return _C.div(*operands(dividend, divisor, "true_divide"))


def floor_divide(input, other):
    """input / other rounded down (integers stay integers); not differentiable, as in torch."""
    a, b = _pair(input, other, "floor_divide", (True, True))
    return _rounding_division(a, b, "floor", "floor_divide", FloorDivide)


def _modulo(op, numbers):
    def fn(input, other):
        a, b = _pair(input, other, op, numbers)
        if a.dtype.is_complex or b.dtype.is_complex:
            _refuse_complex(op, _C.result_type(a, b))
        return getattr(_C, op)(a, b)
    fn.__name__ = fn.__qualname__ = op
    return fn


# the engines' primitives: broadcasting, promotion, bool and integer division by zero are refused there
remainder = _modulo("remainder", (True, True))
remainder.__doc__ = "input - floor(input / other) * other: the remainder with the divisor's sign (Python's %)."
fmod = _modulo("fmod", (False, True))
fmod.__doc__ = "input - trunc(input / other) * other: the remainder with the dividend's sign (C's fmod)."


@shows_as("Addcmul")
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2 (broadcast)."""
    a = tensor_arg(input, "addcmul")
    t1, t2 = tensor_arg(tensor1, "addcmul", "tensor1"), tensor_arg(tensor2, "addcmul", "tensor2")
    dtype = _result_type(a, t1, t2)
    if dtype is _C.bool:
        raise NotImplementedError("addcmul: not implemented for bool tensors (as in torch).")
    value = number(value, "addcmul", "value")
    if isinstance(value, bool):
        value = int(value)                       # torch takes value=True as 1 (add's alpha=True it refuses)
    if isinstance(value, float) and not (dtype.is_floating_point or dtype.is_complex):
        value = int(checked_write(value, dtype, "addcmul"))      # torch converts value to the dtype: 2.5 -> 2
    return _C.add(a, _scaled(_C.mul(t1, t2), value, "addcmul", dtype=dtype))     # value must fit dtype (torch)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2 (broadcast); integer tensor1 and tensor2 are refused, as in torch."""
    a = tensor_arg(input, "addcdiv")
    t1, t2 = tensor_arg(tensor1, "addcdiv", "tensor1"), tensor_arg(tensor2, "addcdiv", "tensor2")
    if _integral(t1, t2):
        raise RuntimeError("addcdiv: integer division of tensor1 by tensor2 is not supported (as in torch); use "
                           "input + value * torch.div(tensor1, tensor2, rounding_mode='trunc') for the old behaviour.")
    if isinstance(value, bool):
        value = int(value)                       # torch takes value=True as 1 (add's alpha=True it refuses)
    return _C.add(a, _C.div(_scaled(t1, value, "addcdiv", dtype=_result_type(a, t1, t2)), t2))


def lerp(input, end, weight):
    """input + weight * (end - input), computed as torch does: from the nearer end (|weight| < 0.5 or not)."""
    start = tensor_arg(input, "lerp")
    end = tensor_arg(end, "lerp", "end")
    if end.dtype is not start.dtype:
        raise RuntimeError(f"lerp: expected dtype {start.dtype.name} for end, got {end.dtype.name}.")
    if isinstance(weight, Tensor) and weight.dtype is not start.dtype and weight.ndim == 0:
        # a 0-d weight takes part in the promotion below the tensors, as torch's: f32 with a 0-d int64 2 is 2.0,
        # int64 tensors with a 0-d float32 weight compute in float32
        common = _C.result_type(start, weight)
        if common is not start.dtype and common.is_floating_point:
            start, end = _C.to_dtype(start, common), _C.to_dtype(end, common)
        weight = _C.to_dtype(weight, start.dtype)
    if isinstance(weight, Tensor) and weight.dtype is not start.dtype:
        raise RuntimeError(f"lerp: expected dtype {start.dtype.name} for weight, got {weight.dtype.name}.")
    if not (start.dtype.is_floating_point or start.dtype.is_complex):
        raise NotImplementedError(f"lerp: expected floating-point or complex tensors, got {start.dtype.name}.")
    broadcast_shapes(start.shape, end.shape, "lerp")
    diff = _C.sub(end, start)
    if isinstance(weight, Tensor):
        broadcast_shapes(diff.shape, weight.shape, "lerp")
        size = _C.abs(weight)                        # |weight|, real for a complex weight too
        near_start = _C.compare("lt", size, _C.scalar_operand(0.5, size))
        return _C.where(near_start, _C.add(start, _C.mul(weight, diff)),
                        _C.sub(end, _C.mul(diff, _C.sub(_C.scalar_operand(1, weight), weight))))
    w = number(weight, "lerp", "weight")
    if not isinstance(w, complex):
        w = float(w)
    if builtins.abs(w) < 0.5:
        return _C.add(start, _C.mul(diff, _C.scalar_operand(w, diff)))
    return _C.sub(end, _C.mul(diff, _C.scalar_operand(1 - w, diff)))


def pow_number(a, exponent, op="pow"):
    """a ** a Python number, with torch's dtype rule: an int exponent keeps the tensor's dtype, a float exponent
    makes an integer or bool tensor the default float dtype; integers to negative int powers are refused."""
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        if isinstance(exponent, float):
            a = _C.to_dtype(a, get_default_dtype())
        elif exponent < 0:
            raise RuntimeError(f"{op}: integers to negative integer powers are not allowed (a {a.dtype.name} "
                               f"tensor to the power {exponent}); convert the tensor to a floating dtype first.")
        elif a.dtype is not _C.bool and not _int_fits(exponent, a.dtype):
            # torch converts the exponent to the tensor's dtype and refuses one that does not fit
            raise RuntimeError(f"{op}: the exponent {exponent} cannot be converted to {a.dtype.name} (the dtype of "
                               f"the integer tensor) without overflow.")
    return _C.pow_scalar(a, float(exponent))


def _int_fits(value, dtype):
    info = np.iinfo(np.dtype(dtype.name))
    return info.min <= value <= info.max


def pow(input, exponent):
    """input ** exponent (number exponents: pow_number's dtype rule)."""
    if isinstance(input, Tensor) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        return pow_number(input, exponent)
    return _C.pow(*operands(input, exponent, "pow"))


def _float_power_derivative(g, out, b, e):
    """torch's derivatives of b^e: d/db = e b^(e-1) (0 where e = 0); d/de = b^e ln b (0 where b = 0 and e >= 0)."""
    number = not isinstance(e, Tensor)
    if number:
        db = g * 0.0 if e == 0 else g * (FloatPower.apply(b, e - 1.0) * e)
        return db, None
    db = _where(e == 0, 0.0, g * e * FloatPower.apply(b, e - 1))
    de = _where((b == 0) & (e >= 0), 0.0, g * out * _C.log(b))
    return db, de


FloatPower = _numpy_function("FloatPower", np.power, _float_power_derivative, uses_out=True)


def float_power(input, exponent):
    """input ** exponent in float64, whatever the inputs' dtypes (complex128 when either is complex, as torch)."""
    if any(isinstance(v, complex) or (isinstance(v, Tensor) and v.dtype.is_complex) for v in (input, exponent)):
        a, b = _pair(input, exponent, "float_power", (True, True))
        broadcast_shapes(a.shape, b.shape, "float_power")
        return _C.pow(_cast(a, _C.complex128), _cast(b, _C.complex128))
    if isinstance(input, Tensor) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        return FloatPower.apply(_cast(input, _C.float64), float(exponent))
    a, b = _pair(input, exponent, "float_power", (True, True))
    broadcast_shapes(a.shape, b.shape, "float_power")
    return FloatPower.apply(_cast(a, _C.float64), _cast(b, _C.float64))


def float_power_(self, exponent):
    """In-place float_power: the tensor must be float64 already (as torch)."""
    if self.dtype is not _C.float64:
        raise RuntimeError(f"float_power_: the result is float64, but the tensor is {self.dtype.name}; in-place "
                           "float_power needs a float64 tensor.")
    other_requires_grad = isinstance(exponent, Tensor) and exponent.requires_grad
    before = _C.inplace_input(self, "float_power_", other_requires_grad)
    _C.assign_inplace(self, float_power(before, exponent), "float_power_")
    return self


def neg(input):
    return _C.neg(tensor_arg(input, "neg"))


def positive(input):
    """input itself (unary +); refused for bool tensors, as torch."""
    a = tensor_arg(input, "positive")
    if a.dtype is _C.bool:
        raise RuntimeError("positive: the + operator is not supported on bool tensors.")
    return a


def maximum(input, other):
    return _C.maximum(tensor_arg(input, "maximum"), operand_or_throw(other, input, "maximum"))


def minimum(input, other):
    return _C.minimum(tensor_arg(input, "minimum"), operand_or_throw(other, input, "minimum"))


def _nan_aware_extremum(op, keep_input):
    def fn(input, other):
        a, b = _pair(input, other, op, (False, False))
        broadcast_shapes(a.shape, b.shape, op)
        dtype = _C.result_type(a, b)
        a, b = _cast(a, dtype), _cast(b, dtype)
        # input where it wins, ties included, or where other is NaN; the gradient follows the value taken (torch)
        take = _C.logical_or(_C.compare(keep_input, a, b), _C.isnan(b))
        return _C.where(take, a, b)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input, other): elementwise {'maximum' if op == 'fmax' else 'minimum'} ignoring NaN."
    return fn


fmax = _nan_aware_extremum("fmax", "ge")
fmin = _nan_aware_extremum("fmin", "le")


def _clamp_tensors(a, lo, hi):
    """torch's clamp with tensor bounds: min(max(a, lo), hi), NaN from any of them; the gradient goes to a where
    lo <= a <= hi, to lo where a < lo < hi, to hi where a > hi or hi < lo (torch's rule)."""
    present = [t for t in (a, lo, hi) if t is not None]
    for t in present[1:]:
        broadcast_shapes(a.shape, t.shape, "clamp")
    dtype = _result_type(*present)
    a, lo, hi = (None if t is None else _cast(t, dtype) for t in (a, lo, hi))
    value = a
    if lo is not None:
        value = _C.maximum(value, lo)
    if hi is not None:
        value = _C.minimum(value, hi)
    out = value.detach()                      # torch's value, NaN included, where no input takes the gradient
    if hi is not None:
        take_hi = _C.compare("gt", a, hi)
        if lo is not None:
            take_hi = _C.logical_and(_C.logical_or(take_hi, _C.compare("lt", hi, lo)),
                                     _C.logical_not(_C.logical_or(_C.isnan(a), _C.isnan(lo))))
        out = _C.where(take_hi, hi, out)
    if lo is not None:
        take_lo = _C.compare("lt", a, lo)
        if hi is not None:
            take_lo = _C.logical_and(take_lo, _C.compare("lt", lo, hi))
        out = _C.where(take_lo, lo, out)
    keep = _C.compare("ge", a, lo) if lo is not None else None
    if hi is not None:
        below = _C.compare("le", a, hi)
        keep = below if keep is None else _C.logical_and(keep, below)
    return _C.where(keep, a, out)


def clamp(input, min=None, max=None):
    """input limited to [min, max] (max wins when min > max); the bounds are numbers or tensors."""
    a = tensor_arg(input, "clamp")
    refuse_complex("clamp", a, min if isinstance(min, Tensor) else None, max if isinstance(max, Tensor) else None,
                   ordered=True)
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if (min is not None and not isinstance(min, Tensor)) or (max is not None and not isinstance(max, Tensor)):
            raise TypeError(f"clamp: min and max must both be tensors or both be numbers, got {type_name(min)} and "
                            f"{type_name(max)}.")
        return rename(_clamp_tensors(a, min, max), "ClampBackward", (a, min, max))
    lo = None if min is None else number(min, "clamp", "min")
    hi = None if max is None else number(max, "clamp", "max")
    if lo is None and hi is None:
        raise RuntimeError("clamp: at least one of min or max must not be None.")
    bounds = [v for v in (lo, hi) if v is not None]
    if a.dtype is _C.bool and all(isinstance(v, bool) for v in bounds):
        raise NotImplementedError("clamp: not implemented for bool tensors with bool bounds.")
    if any(isinstance(v, float) for v in bounds) and not a.dtype.is_floating_point:
        a = _C.to_dtype(a, _C.float32)        # an integer tensor clamped to float bounds is float32, as torch
    elif a.dtype is _C.bool and any(not isinstance(v, bool) for v in bounds):
        a = _C.to_dtype(a, _C.int64)
    # the bounds are converted to a's dtype, as torch: they must fit it (uint8 takes -1 as 255)
    lo, hi = (None if v is None else checked_write(v, a.dtype, "clamp") for v in (lo, hi))
    if a.dtype is _C.uint8:
        lo, hi = (v % 256 if isinstance(v, int) else v for v in (lo, hi))
    if any(isinstance(v, float) and math.isnan(v) for v in bounds):
        return _C.add(_C.mul(a, _C.scalar_operand(0.0, a)), _C.scalar_operand(math.nan, a))   # NaN, zero gradient
    return _C.clamp(a, None if lo is None else float(lo), None if hi is None else float(hi))


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by nan, posinf and neginf (default: the dtype's largest and lowest values); the
    gradient is 0 at the replaced elements."""
    a = tensor_arg(input, "nan_to_num")
    if a.dtype.is_complex:     # each part on its own, in the real dtype's limits (torch's)
        pairs = _C.view_as_real(a)
        re, im = (nan_to_num(_C.select(pairs, -1, i), nan, posinf, neginf) for i in (0, 1))
        return _C.view_as_complex(_C.stack([re, im], -1))
    if not a.dtype.is_floating_point:
        return _C.clone(a)
    info = finfo(a.dtype)           # (bfloat16's own limits: numpy has none)
    values = [float(info.max) if posinf is None else number(posinf, "nan_to_num", "posinf"),
              float(info.min) if neginf is None else number(neginf, "nan_to_num", "neginf")]
    out = _C.where(_C.isnan(a), _C.scalar_operand(float(number(nan, "nan_to_num", "nan")), a), a)
    for value, infinity in zip(values, (math.inf, -math.inf)):
        out = _C.where(_C.compare("eq", a, _C.scalar_operand(infinity, a)), _C.scalar_operand(float(value), a), out)
    return out


# ----- unary -----------------------------------------------------------------------------------------------------

def _unary(op):
    kernel = core(op)

    def fn(input):
        return kernel(tensor_arg(input, op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input), elementwise."
    return fn


# every plain unary primitive of ops.def (primitive_rows.py, generated), by name: the table's rows of those without
# a row of their own name this dict
UNARY_PRIMITIVES = {name: _unary(name) for name, _ in primitive_rows.UNARY_PRIMITIVES}
(exp, log, sqrt, rsqrt, abs, sin, cos, tanh, sigmoid, relu, erf, log1p, expm1, asin, acos, atan, asinh, atanh, cosh,
 acosh) = (UNARY_PRIMITIVES[n] for n in ("exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "relu",
                                         "erf", "log1p", "expm1", "asin", "acos", "atan", "asinh", "atanh", "cosh",
                                         "acosh"))
logical_not, isnan, isfinite = (_unary(n) for n in ("logical_not", "isnan", "isfinite"))


def _float_unary(op, function):
    """A float op of one tensor through its Function (integer and bool inputs compute in float32)."""
    def fn(input):
        return function.apply(_float(tensor_arg(input, op), op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input), elementwise (float32 for integer inputs)."
    return fn


_exp2_real = _float_unary("exp2", Exp2)


def exp2(input):
    """2 ** input, elementwise (float32 for integer inputs); of a complex z, exp(z ln 2)."""
    a = tensor_arg(input, "exp2")
    if a.dtype.is_complex:
        return _C.exp(_C.mul(a, _C.scalar_operand(_LN2, a)))
    return _exp2_real(a)
erfc, erfinv, lgamma, digamma = (_float_unary(n, f) for n, f in (("erfc", Erfc), ("erfinv", Erfinv),
                                                                  ("lgamma", Lgamma), ("digamma", Digamma)))
_sinc_real = _float_unary("sinc", Sinc)


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (float32 for integer inputs); of a complex z the same composite of the complex
    sin (gradient 0 at 0, as torch's)."""
    a = tensor_arg(input, "sinc")
    if not a.dtype.is_complex:
        return _sinc_real(a)
    zero = _C.compare("eq", a, _C.scalar_operand(0, a))
    pz = _C.mul(_C.where(zero, _C.scalar_operand(1, a), a), _C.scalar_operand(math.pi, a))
    return _C.where(zero, _C.scalar_operand(1, a), _C.div(_C.sin(pz), pz))
i0 = _float_unary("i0", I0)


def reciprocal(input):
    """1 / input (float32 for integer inputs)."""
    a = tensor_arg(input, "reciprocal")
    return _C.div(_C.scalar_operand(1, a), a)


@shows_as("Pow")
def square(input):
    """input * input (bool inputs give int64, as torch)."""
    a = tensor_arg(input, "square")
    if a.dtype is _C.bool:
        a = _C.to_dtype(a, _C.int64)
    return _C.mul(a, a)


def _angle_conversion(op, factor):
    def fn(input):
        a = _float(tensor_arg(input, op), op)
        return _C.mul(a, _C.scalar_operand(factor, a))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input): input * {factor!r} (float32 for integer inputs)."
    return fn


deg2rad = _angle_conversion("deg2rad", math.pi / 180.0)
rad2deg = _angle_conversion("rad2deg", 180.0 / math.pi)


def _integer_valued(op, function):
    """floor/ceil/trunc: integer tensors are returned as a copy; zero gradient, as torch."""
    def fn(input):
        a = tensor_arg(input, op)
        if a.dtype is _C.bool:
            raise NotImplementedError(f"{op}: not implemented for bool tensors.")
        refuse_complex(op, a)
        return function.apply(a) if a.dtype.is_floating_point else _C.clone(a)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input), elementwise (zero gradient)."
    return fn


floor = _integer_valued("floor", Floor)
ceil = _integer_valued("ceil", Ceil)
trunc = _integer_valued("trunc", Trunc)


def round(input, *, decimals=0):
    """Rounds half to even, to `decimals` decimal places (negative: to tens, hundreds...); zero gradient."""
    a = tensor_arg(input, "round")
    refuse_complex("round", a)
    decimals = to_int(decimals, "round", "decimals")
    if a.dtype is _C.bool or (decimals != 0 and not a.dtype.is_floating_point):
        raise NotImplementedError(f"round: not implemented for {a.dtype.name} tensors"
                                  f"{' with decimals' if a.dtype is not _C.bool else ''}.")
    return Round.apply(a, decimals) if a.dtype.is_floating_point else _C.clone(a)


def frac(input):
    """input - trunc(input), keeping the sign of input; gradient 1."""
    a = tensor_arg(input, "frac")
    if not a.dtype.is_floating_point:
        raise NotImplementedError(f"frac: not implemented for {a.dtype.name} tensors.")
    return _C.sub(a, Trunc.apply(a))


def sign(input):
    """-1, 0 or 1 (0 for NaN and -0.0, as torch); zero gradient. Complex tensors take sgn, as torch says."""
    a = tensor_arg(input, "sign")
    if a.dtype.is_complex:
        raise RuntimeError("sign: not implemented for complex tensors; use sgn (z / |z|) instead, as torch.")
    return _C.sign(a)


def signbit(input):
    """Whether the sign bit is set (True for -0.0 and negative NaN)."""
    a = tensor_arg(input, "signbit")
    refuse_complex("signbit", a, ordered=True)
    return bridge.host_result(np.signbit(bridge.host_values(a)), _C.bool)


def copysign(input, other):
    """|input| with the sign of other (float32 for integer inputs)."""
    return Copysign.apply(*_float_pair(input, other, "copysign"))


def atan2(input, other):
    """The angle of the point (other, input), in (-pi, pi]."""
    return _C.atan2(*_float_pair(input, other, "atan2", (False, False)))


def hypot(input, other):
    """sqrt(input^2 + other^2) without overflow."""
    return Hypot.apply(*_float_pair(input, other, "hypot", (False, False), integers=False))


def logaddexp(input, other):
    """log(exp(input) + exp(other)) without overflow (complex tensors too: Note [Complex logaddexp])."""
    a, b = _pair(input, other, "logaddexp", (False, False))
    if _C.result_type(a, b).is_complex:
        broadcast_shapes(a.shape, b.shape, "logaddexp")
        dtype = _C.result_type(a, b)
        return complex_logaddexp(_cast(a, dtype), _cast(b, dtype))
    return Logaddexp.apply(*_float_pair(a, b, "logaddexp", (False, False), integers=False))


def _real_of(z):
    return _C.select(_C.view_as_real(z), -1, 0)


def complex_logaddexp(a, b):
    """Note [Complex logaddexp]: torch's, max + log1p(exp(min - max)) with max/min the operand of the larger/smaller
    real part (b when they tie), a composite of complex primitives, so the gradient is the holomorphic chain
    rule's, conj(exp(a) / (exp(a) + exp(b))) for a. Where min's real part is -inf the result is max exactly (its
    term would be exp(nan) when both are -inf), through a where whose other branch is kept finite so that no NaN
    reaches the gradient."""
    first = _C.compare("gt", _real_of(a), _real_of(b))
    hi, lo = _C.where(first, a, b), _C.where(first, b, a)
    empty = _C.compare("eq", _real_of(lo), _C.scalar_operand(-math.inf, _real_of(lo)))
    zero = _C.scalar_operand(0, lo)
    gap = _C.sub(_C.where(empty, zero, lo), _C.where(empty, zero, hi))
    return _C.where(empty, hi, _C.add(hi, _C.log1p(_C.exp(gap))))


def logaddexp2(input, other):
    """log2(2^input + 2^other) without overflow."""
    return Logaddexp2.apply(*_float_pair(input, other, "logaddexp2", (False, False), integers=False))


def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN)."""
    return Xlogy.apply(*_float_pair(input, other, "xlogy", (True, True)))


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0 (NaN counts as < 0); not differentiable."""
    a = tensor_arg(input, "heaviside")
    v = tensor_arg(values, "heaviside", "values")
    refuse_complex("heaviside", a, v, ordered=True)
    if a.dtype is not v.dtype:
        raise RuntimeError(f"heaviside: input and values must have the same dtype, got {a.dtype.name} and "
                           f"{v.dtype.name}.")
    broadcast_shapes(a.shape, v.shape, "heaviside")
    return Heaviside.apply(a, v)


def polygamma(n, input):
    """The n-th derivative of digamma (n >= 0)."""
    n = to_int(n, "polygamma", "n")
    if n < 0:
        raise RuntimeError(f"polygamma: n must be >= 0, got {n}.")
    return Polygamma.apply(n, _float(tensor_arg(input, "polygamma"), "polygamma"))


def polygamma_method(self, n):
    """self.polygamma(n)."""
    return polygamma(n, self)


def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension p: p(p-1)/4 log(pi) + sum_j lgamma(x - j/2)."""
    a = tensor_arg(input, "mvlgamma")
    p = to_int(p, "mvlgamma", "p")
    if a.dtype is _C.bool:
        raise RuntimeError("mvlgamma: the input may not be a bool tensor.")
    if p < 1:
        raise RuntimeError(f"mvlgamma: p must be >= 1, got {p}.")
    a = _float(a, "mvlgamma")
    shifts = bridge.host_result(np.arange(0.0, -p / 2, -0.5), a.dtype)       # 0, -1/2, -1, ... (a +0, not -0)
    terms = Lgamma.apply(_C.add(_C.unsqueeze(a, -1), shifts))
    return _C.add(_C.sum(terms, (-1,), False, None), _C.scalar_operand(p * (p - 1) / 4 * math.log(math.pi), a))


def logit(input, eps=None):
    """log(input / (1 - input)), input first clamped to [eps, 1 - eps] when eps is given."""
    a = _float(tensor_arg(input, "logit"), "logit")
    if eps is not None:
        eps = float(number(eps, "logit", "eps"))
    return Logit.apply(a, eps)


# ----- comparisons and tests -------------------------------------------------------------------------------------

def _comparison(op):
    def fn(input, other):
        return _C.compare(op, *operands(input, other, op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"input {op} other, elementwise (bool result)."
    return fn


eq, ne, lt, le, gt, ge = (_comparison(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def _infinity_test(op, signs):
    def fn(input):
        a = tensor_arg(input, op)
        if a.dtype.is_complex:
            if len(signs) == 1:                    # isposinf/isneginf: complex numbers have no sign (torch)
                refuse_complex(op, a, ordered=True)
            pairs = _C.view_as_real(a)             # isinf: either part infinite (torch's)
            return _C.logical_or(fn(_C.select(pairs, -1, 0)), fn(_C.select(pairs, -1, 1)))
        if not a.dtype.is_floating_point:
            return _C.full(tuple(a.shape), False, _C.bool)
        hits = [_C.compare("eq", a, _C.scalar_operand(s * math.inf, a)) for s in signs]
        return hits[0] if len(hits) == 1 else _C.logical_or(*hits)
    fn.__name__ = fn.__qualname__ = op
    return fn


isinf = _infinity_test("isinf", (1, -1))
isposinf = _infinity_test("isposinf", (1,))
isneginf = _infinity_test("isneginf", (-1,))


def isreal(input):
    """Whether each element is real: True everywhere for a real tensor, where the imaginary part is 0 for a
    complex one."""
    a = tensor_arg(input, "isreal")
    if a.dtype.is_complex:
        im = _C.select(_C.view_as_real(a), -1, 1)
        return _C.compare("eq", im, _C.scalar_operand(0, im))
    return _C.full(tuple(a.shape), True, _C.bool)


def _close_pair(input, other, rtol, atol, op):
    a = tensor_arg(input, op)
    b = tensor_arg(other, op, "other")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{op}: input and other must have the same dtype, got {a.dtype.name} and {b.dtype.name}.")
    broadcast_shapes(a.shape, b.shape, op)
    rtol, atol = float(number(rtol, op, "rtol")), float(number(atol, op, "atol"))
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value < 0:
            raise RuntimeError(f"{op}: {name} must be >= 0, got {value}.")
    return a, b, rtol, atol


def _isclose_values(a, b, rtol, atol, equal_nan):
    x, y = bridge.host_values(a), bridge.host_values(b)
    with np.errstate(all="ignore"):
        close = x == y
        if a.dtype is not _C.bool:     # complex values as complex128: |x - y| is the modulus (torch's)
            wide = np.complex128 if a.dtype.is_complex else np.float64
            x, y = x.astype(wide), y.astype(wide)
            if equal_nan:
                close = close | (np.isnan(x) & np.isnan(y))
            if is_half(a.dtype):     # torch's arithmetic in the half type: each step rounded to it
                r = lambda v: bridge.round_to(v, a.dtype)  # noqa: E731
                error, allowed = np.abs(r(x - y)), r(atol + np.abs(r(rtol * y)))
            else:
                error, allowed = np.abs(x - y), atol + rtol * np.abs(y)
            close = close | (np.isfinite(error) & (error <= allowed))
    return close


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (equal infinities are close; NaN only with
    equal_nan)."""
    a, b, rtol, atol = _close_pair(input, other, rtol, atol, "isclose")
    return bridge.host_result(_isclose_values(a, b, rtol, atol, bool(equal_nan)), _C.bool)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether isclose holds everywhere (a Python bool)."""
    a, b, rtol, atol = _close_pair(input, other, rtol, atol, "allclose")
    return bool(np.all(_isclose_values(a, b, rtol, atol, bool(equal_nan))))


def equal(input, other):
    """Whether the two tensors have the same shape and the same values (a Python bool; NaN is never equal)."""
    a = tensor_arg(input, "equal")
    b = tensor_arg(other, "equal", "other")
    return tuple(a.shape) == tuple(b.shape) and bool(np.all(bridge.host_values(a) == bridge.host_values(b)))


# ----- logic and bits ----------------------------------------------------------------------------------------------

def _logical(op):
    kernel = core(op)

    def fn(input, other):
        return kernel(tensor_arg(input, op), tensor_arg(other, op, "other"))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input, other): a bool result, any dtype read as nonzero = True."
    return fn


logical_and, logical_or, logical_xor = (_logical(n) for n in ("logical_and", "logical_or", "logical_xor"))


def _integer_operands(input, other, op, bools=True):
    a, b = _pair(input, other, op, (True, True))
    broadcast_shapes(a.shape, b.shape, op)
    dtype = _C.result_type(a, b)
    if dtype.is_floating_point or (dtype is _C.bool and not bools):
        raise NotImplementedError(f"{op}: expected integer{' or bool' if bools else ''} tensors, got {dtype.name}.")
    return bridge.host_values(a, dtype), bridge.host_values(b, dtype), dtype


def _bitwise(op, kernel):
    def fn(input, other):
        x, y, dtype = _integer_operands(input, other, op)
        return bridge.host_result(kernel(x, y), dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input, other) of integer or bool tensors (numbers allowed on either side)."
    return fn


bitwise_and = _bitwise("bitwise_and", np.bitwise_and)
bitwise_or = _bitwise("bitwise_or", np.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", np.bitwise_xor)


def bitwise_not(input):
    """~input: the bits flipped (logical not for bool)."""
    a = tensor_arg(input, "bitwise_not")
    if a.dtype.is_floating_point:
        raise NotImplementedError(f"bitwise_not: expected an integer or bool tensor, got {a.dtype.name}.")
    return bridge.host_result(np.invert(bridge.host_values(a)), a.dtype)


def _shift_left(x, s):
    """torch's x << s on int64: the bits shifted out are lost; shifts below 0 or of 64 and more give 0."""
    inside = (s >= 0) & (s < 64)
    shifted = np.left_shift(x.astype(np.uint64), np.where(inside, s, 0).astype(np.uint64)).astype(np.int64)
    return np.where(inside, shifted, 0)


def _shift_right(x, s):
    """torch's x >> s on int64: arithmetic (sign-filling); shifts below 0 or of 64 and more shift by 63."""
    return np.right_shift(x, np.where((s >= 0) & (s < 64), s, 63))


def _shift(op, kernel):
    def fn(input, other):
        x, y, dtype = _integer_operands(input, other, op, bools=False)
        return bridge.host_result(kernel(x, y), dtype)
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input, other) of integer tensors (numbers allowed on either side)."
    return fn


bitwise_left_shift = _shift("bitwise_left_shift", _shift_left)
bitwise_right_shift = _shift("bitwise_right_shift", _shift_right)


# ----- integer and floating-point bit helpers ----------------------------------------------------------------------

return_frexp = collections.namedtuple("frexp", ["mantissa", "exponent"])


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
    return bridge.host_result(np.gcd(bridge.host_values(a), bridge.host_values(b)), dtype)


def lcm(input, other):
    """The least common multiple of each pair of elements (non-negative). Integers only."""
    a, b, dtype = _integer_pair(input, other, "lcm")
    with np.errstate(all="ignore"):
        return bridge.host_result(np.abs(np.lcm(bridge.host_values(a), bridge.host_values(b))), dtype)


def ldexp(input, other):
    """input * 2**other, in input and other's promoted float dtype (float for integer inputs)."""
    a, b = tensor_arg(input, "ldexp"), tensor_arg(other, "ldexp", "other")
    dtype = _C.result_type(a, b)
    if dtype.is_complex:                      # a complex mantissa: the same product, in the complex dtype
        broadcast_shapes(a.shape, b.shape, "ldexp")
        if not (b.dtype.is_floating_point or b.dtype.is_complex):
            b = _C.to_dtype(b, _C.float64 if dtype is _C.complex128 else _C.float32)
        return _C.mul(_cast(a, dtype), _C.pow(_C.full((), 2.0, b.dtype), b))
    a, b = _float_pair(a, b, "ldexp", numbers=(False, False))
    return _C.mul(a, _C.pow(_C.full((), 2.0, b.dtype), b))


class Frexp(_NumpyFunction):
    """The mantissa of frexp; d mantissa / dx = 2**-exponent (the exponent is piecewise constant)."""

    @classmethod
    def forward(cls, ctx, x):
        mantissa, exponent = np.frexp(bridge.host_values(x))
        ctx.scale = np.ldexp(np.ones_like(mantissa), -exponent)
        ctx.dtype = x.dtype
        return bridge.host_result(mantissa, x.dtype)

    @classmethod
    def backward(cls, ctx, grad):
        return _C.mul(grad, bridge.host_result(ctx.scale, ctx.dtype))

    jvp = backward        # the same diagonal map on the tangent (torch: self_t / exponent.exp2())


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent and 0.5 <= |mantissa| < 1 (0 for 0): mantissa of
    input's dtype, exponent int32. Floating-point inputs only."""
    a = tensor_arg(input, "frexp")
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"frexp: only supports floating-point dtypes, got {a.dtype.name}.")
    work = a if a.dtype.name in ("float32", "float64", "float16") else _C.to_dtype(a, _C.float32)
    mantissa = Frexp.apply(work)
    exponent = bridge.host_result(np.frexp(bridge.host_values(work))[1], _C.int32)
    return return_frexp(_cast(mantissa, a.dtype), exponent)


def _nextafter_derivative(g, out, x, y, dtype_name):
    # torch's convention: the gradient passes to input where input != other (0 where they are equal, the result
    # then being other), none to other
    moved = _C.compare("ne", x.detach(), y.detach())
    return _C.where(moved, g, _C.scalar_operand(0.0, g)), (_C.full(tuple(y.shape), 0, y.dtype) if y.requires_grad
                                                           else None), None


# on the grid of the result's dtype: a half type's values arrive as float32 (Note [Half types on the host]), whose
# next value would round back to the input
_Nextafter = _numpy_function("Nextafter", sn.nextafter, _nextafter_derivative)


def nextafter(input, other):
    """The next representable value after input towards other, in their promoted float dtype. Floats only; its
    gradient passes to input where input != other (torch's convention), none to other."""
    a, b = tensor_arg(input, "nextafter"), tensor_arg(other, "nextafter", "other")
    dtype = _C.result_type(a, b)
    if not dtype.is_floating_point:
        raise NotImplementedError(f"nextafter: expected floating-point tensors, got {a.dtype.name} and "
                                  f"{b.dtype.name}.")
    shape = broadcast_shapes(a.shape, b.shape, "nextafter")
    # both at the result's shape first: the Function's gradient then has input's shape after expand's backward
    return _Nextafter.apply(_C.expand(_cast(a, dtype), shape), _C.expand(_cast(b, dtype), shape), dtype.name)
