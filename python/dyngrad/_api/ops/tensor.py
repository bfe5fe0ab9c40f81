"""The Tensor methods that are not ops: construction in torch's legacy forms, Python and numpy conversions,
dtype conversions, operators, in-place variants, autograd conveniences. Attached to each engine's Tensor by
install() (python/dyngrad/_api/__init__.py) as the table lists them."""
import builtins
import math

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.engine import backward as autograd_backward
from .. import bridge
from ..args import (Size, Tensor, core, broadcast_shapes, checked_write, dtype_arg, number, operand, operand_or_throw,
                    shape_str, sizes_arg, tensor_arg, type_name, warn_complex_to_real)
from ..device import check_device, device as device_type
from ..inplace import overwrite
from ..node_names import rename
from ..printing import format_tensor
from . import pointwise
from .creation import empty, tensor


# ----- construction ----------------------------------------------------------------------------------------------

_core_init = Tensor.__init__


def __init__(self, *args, dtype=None, device=None, requires_grad=False):
    """torch.Tensor's constructor: Tensor(data) copies data as float32, Tensor(2, 3) and Tensor(Size([2, 3])) are
    uninitialised, Tensor(t) shares t's memory without its history (as nn.Parameter uses it)."""
    check_device(device, "Tensor")
    if not args:
        src = empty(0, dtype=dtype)
    elif len(args) == 1 and isinstance(args[0], Tensor):
        src = args[0] if dtype is None else _C.to_dtype(args[0], dtype_arg(dtype, "Tensor"))
    elif len(args) == 1 and not isinstance(args[0], (int, np.integer, Size)):
        src = tensor(args[0], dtype=_C.float32 if dtype is None else dtype)
    else:
        src = empty(*args, dtype=dtype)
    _core_init(self, src)
    if requires_grad:
        self.requires_grad = True


class tensortype(type):
    """The metaclass of the legacy FloatTensor, DoubleTensor, LongTensor, BoolTensor: calling one makes a Tensor of
    its dtype (FloatTensor([1, 2]), LongTensor(3)); isinstance(t, FloatTensor) asks whether t is a float32 tensor,
    as in torch (type(t) stays Tensor, and FloatTensor is not a Tensor subclass)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __call__(cls, *args, device=None):
        name = cls.__name__
        if len(args) == 1 and isinstance(args[0], Tensor):
            if args[0].dtype is not cls.dtype:   # torch refuses rather than converts
                raise TypeError(f"{name}: expected a tensor of dtype {cls.dtype.name}, got {args[0].dtype.name}; "
                                f"use .to({cls.dtype.name}).")
            if type(args[0]).__name__ == "BatchedTensor":    # a row inside vmap: the row, without its history
                check_device(device, name)
                return args[0].detach()
            return Tensor(args[0], device=device)
        if len(args) == 1 and isinstance(args[0], (float, bool)):
            raise TypeError(f"{name}: data must be a sequence (got {type_name(args[0])})")
        return Tensor(*args, dtype=cls.dtype, device=device)

    def __repr__(cls):
        return f"<class 'dyngrad.{cls.__name__}'>"


def _legacy_type(name, dtype_name):
    return tensortype(name, (), {"dtype": getattr(_C, dtype_name), "is_cuda": False, "is_sparse": False,
                                 "__module__": "dyngrad",
                                 "__doc__": f"torch's legacy {name}: Tensor(...) of dtype {dtype_name}."})


# ----- Python and numpy conversions ------------------------------------------------------------------------------

def __repr__(self):
    return format_tensor(self)


def __format__(self, spec):
    """A 0-d tensor formats as its value ('{:.2f}'.format(t), f"{t}"); other tensors take no format spec (as
    torch)."""
    if self.ndim == 0 and type(self) is Tensor:
        return format(self.item(), spec)
    return object.__format__(self, spec)


def tolist(self):
    return bridge.host_array(self).tolist()


def numpy(self, *, force=False):
    """A numpy array sharing this tensor's memory (torch refuses while it requires grad; force=True detaches)."""
    if self.requires_grad and not force:
        raise RuntimeError("numpy: can't call numpy() on a tensor that requires grad; use tensor.detach().numpy() "
                           "instead.")
    return bridge.view(self)


def __array__(self, dtype=None, copy=None):
    arr = numpy(self)
    if dtype is not None and arr.dtype != dtype:
        return arr.astype(dtype)
    return arr.copy() if copy else arr


def __len__(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def __iter__(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(_C.select(self, 0, i) for i in range(self.shape[0]))


def _one_value(self, op):
    if self.numel() != 1:
        raise RuntimeError(f"{op}: a tensor with {self.numel()} elements cannot be converted to a Python number "
                           f"(shape {shape_str(self.shape)}); expected exactly one element.")
    return self.item()


def __bool__(self):
    if self.numel() != 1:
        raise RuntimeError(f"bool: the truth value of a tensor with {self.numel()} elements is ambiguous (shape "
                           f"{shape_str(self.shape)}); use .any() or .all().")
    return bool(self.item())


def __float__(self):
    return float(_one_value(self, "float"))


def __int__(self):
    return int(_one_value(self, "int"))


def __complex__(self):
    return complex(_one_value(self, "complex"))


def __index__(self):
    if self.dtype.is_floating_point or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(self.item())


def __contains__(self, element):
    """`element in t`: whether some entry equals it (a number or a tensor), as torch."""
    if not isinstance(element, (Tensor, int, float, bool)):
        raise RuntimeError(f"__contains__: expected a Tensor or a number, got {type_name(element)}.")
    hits = _C.compare("eq", self, operand_or_throw(element, self, "__contains__"))
    return bool(_C.sum(hits, (), False).item())


def __reduce_ex__(self, protocol):
    if self.dtype.name == "bfloat16":     # numpy has no bfloat16: pickled as float32 values (exact), with the name
        return (_rebuild, (np.array(bridge.host_array(self)), self.requires_grad, "bfloat16"))
    return (_rebuild, (np.array(bridge.view(self)), self.requires_grad))


def _rebuild(array, requires_grad, dtype_name=None):
    t = bridge.copy(np.asarray(array, order="C"), False)
    if dtype_name is not None:
        t = _C.to_dtype(t, getattr(_C, dtype_name))
    if requires_grad:
        t.requires_grad = True
    return t


def __deepcopy__(self, memo):
    if not self.is_leaf:
        raise RuntimeError("deepcopy: only leaf tensors (created by the user) support the deepcopy protocol.")
    if self.dtype.name == "bfloat16":    # no numpy dtype to go through
        out = _C.clone(self.detach())
        out.requires_grad = self.requires_grad
    else:
        out = bridge.copy(np.array(bridge.view(self)), self.requires_grad)
    if self.grad is not None:
        out.grad = _C.clone(self.grad.detach())
    memo[id(self)] = out
    return out


# ----- dtype and device ------------------------------------------------------------------------------------------

def _is_device(o):
    return isinstance(o, (str, device_type)) or (isinstance(o, int) and not isinstance(o, bool))


def to(self, *args, **kwargs):
    """torch's three forms: to(dtype, non_blocking=False, copy=False), to(device=None, dtype=None,
    non_blocking=False, copy=False) and to(other, non_blocking=False, copy=False) (other's dtype and device).
    A device other than the CPU raises, naming it."""
    dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to: unexpected keyword argument '{next(iter(kwargs))}'.")
    rest = list(args)
    if rest:
        first = rest.pop(0)
        if isinstance(first, Tensor):
            dtype = first.dtype
        elif _is_device(first):
            device = first
            if rest and not isinstance(rest[0], bool):
                dtype = rest.pop(0)
        elif first is not None:
            dtype = first
    if rest:                                  # non_blocking, copy
        copy = rest[1] if len(rest) > 1 else copy
        if len(rest) > 2:
            raise TypeError(f"to: too many positional arguments ({len(args)}).")
    check_device(device, "to")
    if dtype is None:
        return _C.clone(self) if copy else self
    dt = dtype_arg(dtype, "to")
    if dt is self.dtype and not copy:
        return self
    warn_complex_to_real(self.dtype, dt)
    return rename(_C.to_dtype(self, dt), "ToCopyBackward", (self,))


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "bool": "BoolTensor",
               "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
               "float16": "HalfTensor", "bfloat16": "BFloat16Tensor"}


def type_method(self, dtype=None, non_blocking=False):
    """The type name ('dyngrad.FloatTensor') without an argument, else a conversion to a dtype, a legacy type
    (FloatTensor) or a type name ('torch.DoubleTensor' or 'dyngrad.DoubleTensor')."""
    if dtype is None:
        return "dyngrad." + _TYPE_NAMES.get(self.dtype.name, self.dtype.name)
    if isinstance(dtype, tensortype):
        dtype = dtype.dtype
    elif isinstance(dtype, str):
        module, _, name = dtype.rpartition(".")
        names = {v: k for k, v in _TYPE_NAMES.items()}
        if module not in ("torch", "dyngrad") or name not in names:
            raise ValueError(f"type: invalid type '{dtype}' (expected e.g. 'torch.FloatTensor').")
        dtype = getattr(_C, names[name])
    return to(self, dtype)


def _to_named(name):
    def convert(self, memory_format=None):
        return to(self, getattr(_C, name))
    return convert


# Tensor.float(), .double(), .long(), .int(), .bool()
to_float32 = _to_named("float32")
to_float64 = _to_named("float64")
to_int64 = _to_named("int64")
to_bool = _to_named("bool")
to_int32 = _to_named("int32")
to_int16 = _to_named("int16")
to_int8 = _to_named("int8")
to_uint8 = _to_named("uint8")
to_float16 = _to_named("float16")
to_bfloat16 = _to_named("bfloat16")
to_complex64 = _to_named("complex64")
to_complex128 = _to_named("complex128")


def type_as(self, other):
    return to(self, tensor_arg(other, "type_as", "other").dtype)


def cpu(self, memory_format=None):
    return self


def ndimension(self):
    return self.ndim


def nelement(self):
    return self.numel()


def is_floating_point(self):
    return self.dtype.is_floating_point


# ----- autograd conveniences -------------------------------------------------------------------------------------

def requires_grad_(self, requires_grad=True):
    self.requires_grad = requires_grad
    return self


def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradient of this tensor into the .grad of the leaves (of `inputs` only, if given)."""
    if gradient is not None and not isinstance(gradient, Tensor):
        raise TypeError(f"backward: expected a Tensor or None as gradient, got {type_name(gradient)}.")
    if inputs is None:                    # the common call, straight to the core
        retain = create_graph if retain_graph is None else bool(retain_graph)
        _C._run_backward((self,), (gradient,), None, retain, bool(create_graph), True, False)
        return
    autograd_backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)


# ----- operators -------------------------------------------------------------------------------------------------

def _forward(kernel):
    def op(self, other):
        o = operand(other, self)
        return NotImplemented if o is None else kernel(self, o)
    return op


def _reflected(kernel):
    def op(self, other):
        o = operand(other, self)
        return NotImplemented if o is None else kernel(o, self)
    return op


def __pow__(self, other):
    if isinstance(other, (int, float)) and not isinstance(other, bool):
        return pointwise.pow_number(self, other, "__pow__")
    o = operand(other, self)
    return NotImplemented if o is None else _C.pow(self, o)


def __invert__(self):
    if self.dtype.is_floating_point:
        raise TypeError(f"~ (operator.invert) is only implemented on integer and bool tensors, got "
                        f"{self.dtype.name}.")
    return pointwise.bitwise_not(self)


def __pos__(self):
    return self


def __neg__(self):
    return _C.neg(self)


def __abs__(self):
    return _C.abs(self)


def _tensors_only(kernel, reflected=False):
    """@ takes tensors only, as torch (a number operand is Python's TypeError, not a broadcast)."""
    def op(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        return kernel(other, self) if reflected else kernel(self, other)
    return op


def _compare(name):
    return _forward(lambda a, b: _C.compare(name, a, b))


# A number on the left is recorded as torch records it, the tensor first (the C++ fast paths do the same:
# binary_slot in csrc/bindings/fast_paths.cpp): `2 * t` is mul(t, 2); `2 - t` is sub(2, t) shown as torch's
# RsubBackward; `2 / t` is reciprocal(t) * 2, torch's formula (and rounding).
def _rsub(number, t):
    return rename(_C.sub(number, t), "RsubBackward", (t,))


def _rdiv(number, t):
    reciprocal = rename(_C.div(_C.scalar_operand(1, t), t), "ReciprocalBackward", (t,))
    return _C.mul(reciprocal, number)


def _subtraction(kernel, reflected=False):
    """- and its reflection: a bool operand is refused as torch does (pointwise.refuse_bool_subtraction)."""
    def op(self, other):
        pointwise.refuse_bool_subtraction(*((other, self) if reflected else (self, other)))
        o = operand(other, self)
        return NotImplemented if o is None else kernel(o, self) if reflected else kernel(self, o)
    return op


OPERATORS = {
    "__add__": _forward(core("add")), "__radd__": _forward(core("add")),
    "__sub__": _subtraction(core("sub")), "__rsub__": _subtraction(_rsub, reflected=True),
    "__mul__": _forward(core("mul")), "__rmul__": _forward(core("mul")),
    "__truediv__": _forward(core("div")), "__rtruediv__": _reflected(_rdiv),
    "__rdiv__": _reflected(_rdiv),                      # torch keeps Python 2's name of __rtruediv__
    "__matmul__": _tensors_only(core("matmul")), "__rmatmul__": _tensors_only(core("matmul"), reflected=True),
    "__pow__": __pow__, "__rpow__": _reflected(core("pow")),
    "__neg__": __neg__, "__pos__": __pos__, "__abs__": __abs__, "__invert__": __invert__,
    # & | ^ << >> are bitwise, as in torch (on bool tensors & | ^ are the logical ops)
    "__and__": _forward(pointwise.bitwise_and), "__rand__": _reflected(pointwise.bitwise_and),
    "__or__": _forward(pointwise.bitwise_or), "__ror__": _reflected(pointwise.bitwise_or),
    "__xor__": _forward(pointwise.bitwise_xor), "__rxor__": _reflected(pointwise.bitwise_xor),
    "__lshift__": _forward(pointwise.bitwise_left_shift), "__rlshift__": _reflected(pointwise.bitwise_left_shift),
    "__rshift__": _forward(pointwise.bitwise_right_shift),
    "__rrshift__": _reflected(pointwise.bitwise_right_shift),
    "__mod__": _forward(pointwise.remainder), "__rmod__": _reflected(pointwise.remainder),
    "__floordiv__": _forward(pointwise.floor_divide), "__rfloordiv__": _reflected(pointwise.floor_divide),
    "__eq__": _compare("eq"), "__ne__": _compare("ne"), "__lt__": _compare("lt"),
    "__le__": _compare("le"), "__gt__": _compare("gt"), "__ge__": _compare("ge"),
}


# ----- in-place ops ----------------------------------------------------------------------------------------------


def _inplace_operator(kernel, op):
    def method(self, other):
        if op == "sub_":
            pointwise.refuse_bool_subtraction(self, other)
        o = operand(other, self)
        if o is None:
            return NotImplemented
        before = _C.inplace_input(self, op, o.requires_grad)
        _C.assign_inplace(self, kernel(before, o), op)
        return self
    return method


INPLACE_OPERATORS = {
    "__iadd__": _inplace_operator(core("add"), "add_"), "__isub__": _inplace_operator(core("sub"), "sub_"),
    "__imul__": _inplace_operator(core("mul"), "mul_"), "__itruediv__": _inplace_operator(core("div"), "div_"),
    "__imod__": _inplace_operator(pointwise.remainder, "remainder_"),
    "__ifloordiv__": _inplace_operator(pointwise.floor_divide, "floor_divide_"),
    "__iand__": _inplace_operator(pointwise.bitwise_and, "bitwise_and_"),
    "__ior__": _inplace_operator(pointwise.bitwise_or, "bitwise_or_"),
    "__ixor__": _inplace_operator(pointwise.bitwise_xor, "bitwise_xor_"),
    "__ilshift__": _inplace_operator(pointwise.bitwise_left_shift, "bitwise_left_shift_"),
    "__irshift__": _inplace_operator(pointwise.bitwise_right_shift, "bitwise_right_shift_"),
}


def zero_(self):
    _C.zero_(self)
    return self


def _differentiated_value(value, self):
    """Whether fill_'s 0-d tensor value must be written as a tensor, so that its gradient (reverse mode) or tangent
    (forward mode) reaches self: it was read as a Python number (v.grad stayed None, the jvp dropped v's tangent)."""
    if not isinstance(value, Tensor) or not (value.dtype.is_floating_point or value.dtype.is_complex) or \
            not (self.dtype.is_floating_point or self.dtype.is_complex) or \
            (value.dtype.is_complex and not self.dtype.is_complex):
        return False
    return (_C.is_grad_enabled() and value.requires_grad) or \
        any(_C._get_tangent(value, level) is not None for level in _C._open_dual_levels())


def fill_(self, value):
    v = number(value, "fill_", "value")
    if _differentiated_value(value, self):      # number() has checked it is one value
        warn_complex_to_real(value.dtype, self.dtype)
        _C.copy_(self, _C.reshape(value, ()))
        return self
    if isinstance(v, complex):
        if self.dtype.is_complex:                # the core's fill takes a real number: copy a complex 0-d tensor
            _C.copy_(self, _C.full((), v, self.dtype))
            return self
        if not isinstance(value, Tensor) and v.imag != 0:
            raise RuntimeError(f"fill_: value {value!r} cannot be converted to {self.dtype.name} without overflow.")
        if isinstance(value, Tensor):
            warn_complex_to_real(value.dtype, self.dtype)
        v = v.real
    if not isinstance(value, Tensor):            # (a 0-d tensor's value is converted as a copy: it wraps, as torch)
        v = checked_write(v, self.dtype, "fill_")
    _C.fill_(self, v if isinstance(v, int) and not isinstance(v, bool) else float(v))   # ints stay exact
    return self


def copy_(self, src, non_blocking=False):
    src = operand_or_throw(src, self, "copy_", "src")
    warn_complex_to_real(src.dtype, self.dtype)
    _C.copy_(self, src)
    return self


def resize_(self, *sizes, memory_format=None):
    """torch's Tensor.resize_: self takes the shape `sizes` in place (the same object), keeping its first elements
    in row-major order; elements beyond the old ones are zeros (torch leaves them uninitialised, so both engines
    agree on a value torch may give). Unlike torch, the memory is always new
    (torch keeps the storage when it is large enough), so views of self taken before do not see the result."""
    shape = sizes_arg(sizes, "resize_")
    if self.requires_grad:
        raise RuntimeError("resize_: cannot resize a tensor that requires grad (torch refuses to resize variables "
                           "that require grad).")
    if tuple(self.shape) == shape:
        return self
    new = _C.full(list(shape), 0, self.dtype)
    kept = builtins.min(self.numel(), math.prod(shape))
    if kept:
        target = _C.slice(_C.reshape(new, [-1]), 0, 0, kept, 1)
        _C.copy_(target, _C.slice(_C.reshape(self, [-1]), 0, 0, kept, 1))
    self.data = new
    return self


def resize_as_(input, the_template, memory_format=None):
    """resize_ to the shape of `the_template` (torch.resize_as_ and Tensor.resize_as_)."""
    tensor_arg(input, "resize_as_")
    tensor_arg(the_template, "resize_as_", "the_template")
    return resize_(input, tuple(the_template.shape))


FloatTensor = _legacy_type("FloatTensor", "float32")
DoubleTensor = _legacy_type("DoubleTensor", "float64")
LongTensor = _legacy_type("LongTensor", "int64")
BoolTensor = _legacy_type("BoolTensor", "bool")
IntTensor = _legacy_type("IntTensor", "int32")
ShortTensor = _legacy_type("ShortTensor", "int16")
CharTensor = _legacy_type("CharTensor", "int8")
ByteTensor = _legacy_type("ByteTensor", "uint8")
HalfTensor = _legacy_type("HalfTensor", "float16")
BFloat16Tensor = _legacy_type("BFloat16Tensor", "bfloat16")


# ----- about a tensor: predicates and the queries a script asks of any tensor --------------------------------------

def is_nonzero(input):
    """Whether the one element of input is nonzero (an empty or larger tensor is ambiguous: RuntimeError)."""
    a = tensor_arg(input, "is_nonzero")
    n = a.numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise RuntimeError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous.")
    return bool(bridge.host_array(a.detach()).reshape(-1)[0] != 0)


def is_same_size(input, other):
    a, b = tensor_arg(input, "is_same_size"), tensor_arg(other, "is_same_size", "other")
    return tuple(a.shape) == tuple(b.shape)


def is_signed(input):
    """Whether input's dtype holds negative values (every dtype but bool and uint8)."""
    return tensor_arg(input, "is_signed").dtype.name not in ("bool", "uint8")


def nbytes(self):
    return self.numel() * self.element_size()


def itemsize(self):
    return self.element_size()


def new(self, *args, **kwargs):
    """torch's legacy constructor: x.new() is an empty tensor of x's dtype, x.new(2, 3) or x.new(Size) an
    uninitialised one of that size, x.new(data) a copy of data (a sequence) in x's dtype, x.new(tensor) that
    tensor (of the same dtype)."""
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
        return _C.empty(sizes_arg(args, "new"), self.dtype)
    if len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray)):
        return tensor(args[0], dtype=self.dtype)
    raise TypeError(f"new: expected sizes, a sequence of data or a tensor, got "
                    f"{', '.join(type_name(a) for a in args)}.")


def detach(input):
    """input.detach(): the same memory, cut from the graph."""
    return tensor_arg(input, "detach").detach()


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


# ----- Python callables over the elements (CPU, slow, as torch's) --------------------------------------------------

def _elementwise_rewrite(self, op, values):
    if self.requires_grad:
        raise RuntimeError(f"{op}: cannot be called on a tensor that requires grad; use x.detach().{op}(...) "
                           "instead.")
    before = _C.inplace_input(self, op, False)
    result = bridge.host_result(values, self.dtype)
    _C.assign_inplace(self, overwrite(before, result, op), op)
    return self


def _python_values(self):
    arr = bridge.host_array(self.detach())
    return arr, arr.dtype


def apply_(self, callable):
    """Replaces each element x by callable(x) (a Python number in, a number out), in place. Slow: one Python
    call per element, as torch's (CPU tensors only there)."""
    arr, dt = _python_values(self)
    out = np.array([callable(v) for v in arr.reshape(-1).tolist()], dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "apply_", _to_dtype_values(out, dt))


def _broadcast_operand(self, tensor, op, name):
    other = tensor_arg(tensor, op, name)
    shape = broadcast_shapes(tuple(self.shape), tuple(other.shape), op)
    if shape != tuple(self.shape):
        raise RuntimeError(f"{op}: {name} of shape {shape_str(other.shape)} cannot be broadcast to self's shape "
                           f"{shape_str(self.shape)}.")
    return np.broadcast_to(bridge.host_array(other.detach()), tuple(self.shape))


def map_(self, tensor, callable):
    """Replaces each element x by callable(x, y), y the element of `tensor` (broadcast to self's shape), in place."""
    ys = _broadcast_operand(self, tensor, "map_", "tensor")
    arr, dt = _python_values(self)
    out = np.array([callable(x, y) for x, y in zip(arr.reshape(-1).tolist(), ys.reshape(-1).tolist())],
                   dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "map_", _to_dtype_values(out, dt))


def map2_(self, x, y, callable):
    """Replaces each element s by callable(s, a, b), a and b the elements of x and y (broadcast), in place."""
    xs, ys = _broadcast_operand(self, x, "map2_", "x"), _broadcast_operand(self, y, "map2_", "y")
    arr, dt = _python_values(self)
    out = np.array([callable(s, a, b) for s, a, b in zip(arr.reshape(-1).tolist(), xs.reshape(-1).tolist(),
                                                          ys.reshape(-1).tolist())],
                   dtype=object).reshape(arr.shape)
    return _elementwise_rewrite(self, "map2_", _to_dtype_values(out, dt))


def _to_dtype_values(out, dt):
    """Python results stored as the tensor's dtype: floats truncate toward zero into integers, as torch casts."""
    if dt.kind in "iu":
        return np.array([math.trunc(v) for v in out.reshape(-1)], dtype=dt).reshape(out.shape)
    if dt.kind == "b":
        return np.array([bool(v) for v in out.reshape(-1)], dtype=dt).reshape(out.shape)
    return out.astype(dt)
