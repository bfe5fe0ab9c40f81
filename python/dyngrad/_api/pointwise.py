"""Elementwise ops with torch's signatures: arithmetic (numbers as operands, alpha=), unary math, comparisons and
logic. Each is one or two core calls (_C.<op>); the core does the dtype promotion, broadcasting and checks."""
from .. import _C
from .args import Tensor, number, operand_or_throw, operands, tensor_arg


# ----- arithmetic ------------------------------------------------------------------------------------------------

def _scaled(b, alpha, op):
    """alpha * b (b itself when alpha is absent or the int 1)."""
    if alpha is None or (type(alpha) is int and alpha == 1):
        return b
    return _C.mul(b, _C.scalar_operand(number(alpha, op, "alpha"), b))


def add(input, other, *, alpha=1):
    """input + alpha * other."""
    a, b = operands(input, other, "add")
    return _C.add(a, _scaled(b, alpha, "add"))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    a, b = operands(input, other, "sub")
    return _C.sub(a, _scaled(b, alpha, "sub"))


def mul(input, other):
    return _C.mul(*operands(input, other, "mul"))


def div(input, other, *, rounding_mode=None):
    """True division (int inputs give float32); rounding_mode is not supported yet."""
    if rounding_mode is not None:
        raise NotImplementedError("div: rounding_mode is not supported yet; use true division.")
    return _C.div(*operands(input, other, "div"))


def true_divide(dividend, divisor):
    return _C.div(*operands(dividend, divisor, "true_divide"))


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2 (broadcast)."""
    a = tensor_arg(input, "addcmul")
    product = _C.mul(tensor_arg(tensor1, "addcmul", "tensor1"), tensor_arg(tensor2, "addcmul", "tensor2"))
    return _C.add(a, _scaled(product, value, "addcmul"))


def pow(input, exponent):
    """input ** exponent; a number exponent keeps the tensor's dtype."""
    if isinstance(input, Tensor) and isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
        return _C.pow_scalar(input, float(exponent))
    return _C.pow(*operands(input, exponent, "pow"))


def neg(input):
    return _C.neg(tensor_arg(input, "neg"))


def maximum(input, other):
    return _C.maximum(tensor_arg(input, "maximum"), operand_or_throw(other, input, "maximum"))


def minimum(input, other):
    return _C.minimum(tensor_arg(input, "minimum"), operand_or_throw(other, input, "minimum"))


def where(condition, input=None, other=None):
    """input where condition, else other (either may be a number); where(condition) alone is
    nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        from .indexing import nonzero
        return nonzero(tensor_arg(condition, "where", "condition"), as_tuple=True)
    if input is None or other is None:
        raise TypeError("where: expected where(condition) or where(condition, input, other).")
    a, b = operands(input, other, "where")
    return _C.where(tensor_arg(condition, "where", "condition"), a, b)


def where_method(self, condition, other):
    """self.where(condition, other): self where condition, else other."""
    return _C.where(tensor_arg(condition, "where", "condition"), self, operand_or_throw(other, self, "where"))


def clamp(input, min=None, max=None):
    """input limited to [min, max]; bounds may be numbers or tensors."""
    a = tensor_arg(input, "clamp")
    if isinstance(min, Tensor) or isinstance(max, Tensor):    # tensor bounds: compose from maximum/minimum
        if min is not None:
            a = _C.maximum(a, operand_or_throw(min, a, "clamp", "min"))
        if max is not None:
            a = _C.minimum(a, operand_or_throw(max, a, "clamp", "max"))
        return a
    lo = None if min is None else number(min, "clamp", "min")
    hi = None if max is None else number(max, "clamp", "max")
    if lo is None and hi is None:
        raise RuntimeError("clamp: at least one of min or max must not be None.")
    # an integer tensor clamped to float bounds is float32, as torch promotes it
    if (isinstance(lo, float) or isinstance(hi, float)) and not a.dtype.is_floating_point:
        a = _C.to_dtype(a, _C.float32)
    return _C.clamp(a, None if lo is None else float(lo), None if hi is None else float(hi))


# ----- unary -----------------------------------------------------------------------------------------------------

def _unary(op):
    kernel = getattr(_C, op)

    def fn(input):
        return kernel(tensor_arg(input, op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{op}(input), elementwise."
    return fn


exp, log, sqrt, rsqrt, abs, sin, cos = (_unary(n) for n in ("exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos"))
tanh, sigmoid, relu, sign, erf = (_unary(n) for n in ("tanh", "sigmoid", "relu", "sign", "erf"))
logical_not, isnan, isfinite = (_unary(n) for n in ("logical_not", "isnan", "isfinite"))


def square(input):
    a = tensor_arg(input, "square")
    return _C.mul(a, a)


# ----- comparisons and logic -------------------------------------------------------------------------------------

def _comparison(op):
    def fn(input, other):
        return _C.compare(op, *operands(input, other, op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"input {op} other, elementwise (bool result)."
    return fn


eq, ne, lt, le, gt, ge = (_comparison(n) for n in ("eq", "ne", "lt", "le", "gt", "ge"))


def _logical(op):
    kernel = getattr(_C, op)

    def fn(input, other):
        return kernel(tensor_arg(input, op), operand_or_throw(other, input, op))
    fn.__name__ = fn.__qualname__ = op
    return fn


logical_and, logical_or, logical_xor = (_logical(n) for n in ("logical_and", "logical_or", "logical_xor"))
