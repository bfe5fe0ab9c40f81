"""Argument conversion shared by every public function: Python numbers as operands, shapes, dims, dtypes, pairs,
reduction names. Each helper raises the error the user should see, naming the op and the argument.
"""
import collections
import math
import numbers

import numpy as np

from .. import _C
from . import bridge
from .._user_frame import warn
from .bridge import canonical_bools, numpy_dtype

Tensor = _C.Tensor


class Size(tuple):
    """A tensor's shape: a tuple of ints, as torch.Size."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return "dyngrad.Size([" + ", ".join(str(s) for s in self) + "])"

    __str__ = __repr__


# torch.return_types: (values, indices) pairs that unpack like tuples
return_max = collections.namedtuple("max", ["values", "indices"])
return_min = collections.namedtuple("min", ["values", "indices"])


def core(name):
    """The core function `_C.<name>`, looked up at each call: a function bound when a module loads would bypass
    the recorder that dyngrad.compile swaps in (Note [Capture at the narrow surface] in _api/capture.py)."""
    def call(*args):
        return getattr(_C, name)(*args)
    call.__name__ = call.__qualname__ = name
    return call


def type_name(o):
    return type(o).__name__


def shape_str(shape):
    """(3, 4), (5,) and () as the error messages print shapes (docs/design.md)."""
    shape = tuple(shape)
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# ----- tensors and numbers ---------------------------------------------------------------------------------------

def tensor_arg(o, op, name="input"):
    if not isinstance(o, Tensor):
        raise TypeError(f"{op}: expected a Tensor as {name}, got {type_name(o)}.")
    return o


def optional_tensor(o, op, name):
    return None if o is None else tensor_arg(o, op, name)


def tensor_list(tensors, op, name="tensors"):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of tensors as {name}, got {type_name(tensors)}.")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected a Tensor at position {i} of {name}, got {type_name(t)}.")
    return list(tensors)


def operand(o, like):
    """A Tensor, a number, a numpy array or a list as the operand of an op whose other operand is `like` (a
    Tensor or None); None when `o` is none of these (operators then return NotImplemented).

    A Python number follows the core rule (_C.scalar_operand: it never widens the tensor's dtype within its
    category); a numpy scalar acts like a Python number; arrays and lists are copied into a tensor."""
    if isinstance(o, Tensor):
        return o
    if isinstance(o, (bool, int, float, complex)):
        return _C.scalar_operand(o, like)
    if isinstance(o, np.generic) and o.dtype.kind in "biufc":
        return _C.scalar_operand(o.item(), like)
    if isinstance(o, (np.ndarray, list)):
        return bridge.from_array(array_from_data(o, "tensor"), None)        # as torch.tensor(o)
    return None


def operand_or_throw(o, like, op, name="other"):
    t = operand(o, like)
    if t is None:
        raise TypeError(f"{op}: expected a Tensor or a number as {name}, got {type_name(o)}.")
    return t


def operands(a, b, op):
    """(a, b) as two tensors; either may be a number when the other is a tensor: dg.add(2, t)."""
    if isinstance(a, Tensor):
        return a, operand_or_throw(b, a, op)
    if isinstance(b, Tensor):
        return operand_or_throw(a, b, op, "input"), b
    ta = operand_or_throw(a, None, op, "input")
    return ta, operand_or_throw(b, ta, op)


def number(o, op, name):
    """A Python number (bool, int, float, complex), or a 1-element tensor's value."""
    if isinstance(o, Tensor):
        return o.item()
    if isinstance(o, (bool, int, float, complex)):
        return o
    if isinstance(o, np.generic) and o.dtype.kind in "biufc":
        return o.item()
    raise TypeError(f"{op}: expected a number as {name}, got {type_name(o)}.")


def is_number(o):
    return isinstance(o, numbers.Number) and not isinstance(o, complex)


# ----- ints, shapes, dims ----------------------------------------------------------------------------------------

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def to_int(o, op, name="argument", overflow=ValueError):
    """An int (or anything with __index__ that is not a bool or a float), else a TypeError naming the op; an int
    outside int64 raises `overflow` (torch: ValueError for an int argument, TypeError inside a size)."""
    if isinstance(o, bool) or isinstance(o, float):
        raise TypeError(f"{op}: expected an int as {name}, got {type_name(o)}.")
    if isinstance(o, int):
        v = o
    else:
        try:
            v = int(o.__index__())
        except (AttributeError, TypeError, ValueError, RuntimeError):
            raise TypeError(f"{op}: expected an int as {name}, got {type_name(o)}.") from None
    if not INT64_MIN <= v <= INT64_MAX:
        raise overflow(f"{op}: {name} {v} does not fit in int64.")
    return v


def wrap_dim(dim, ndim, op):
    """A possibly negative dim as 0..ndim-1 (a 0-d tensor takes -1..0), else the shared IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of {ndim} dimensions (expected "
                         f"{-n}..{n - 1}).")
    return dim + n if dim < 0 else dim


def shape_arg(o, op, name="shape"):
    """(3, 4), [3, 4], a Size or a single int."""
    if isinstance(o, (int, np.integer)) and not isinstance(o, bool):
        return (to_int(o, op, name, TypeError),)
    if isinstance(o, (tuple, list)):
        return tuple(to_int(s, op, name, TypeError) for s in o)
    raise TypeError(f"{op}: expected a shape (a tuple of ints) as {name}, got {type_name(o)}.")


def shape_args(args, op, name="size"):
    """Varargs 3, 4 or one sequence (3, 4), as torch's zeros(2, 3) and zeros((2, 3))."""
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        return shape_arg(args[0], op, name)
    return tuple(to_int(s, op, name, TypeError) for s in args)


def sizes_arg(args, op):
    """Sizes of a new tensor: shape_args, each >= 0."""
    shape = shape_args(args, op)
    for s in shape:
        if s < 0:
            raise RuntimeError(f"{op}: negative dimension {s} in size {shape_str(shape)}; sizes must be >= 0.")
    return shape


def dims_arg(o, op, name="dim"):
    """None -> () (every dim, as the core reads it); an int or a sequence of ints."""
    if o is None:
        return ()
    if isinstance(o, (tuple, list)):
        if not o:
            raise RuntimeError(f"{op}: {name} must not be an empty tuple.")
        return tuple(to_int(d, op, name) for d in o)
    return (to_int(o, op, name),)


def pair(o, op, name):
    """An int or a pair of ints, as conv2d's stride=2 or stride=(2, 1)."""
    if isinstance(o, (int, np.integer)) and not isinstance(o, bool):
        return int(o), int(o)
    s = shape_arg(o, op, name)
    if len(s) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {shape_str(s)}.")
    return s


def broadcast_shapes(a, b, op):
    """numpy/torch broadcasting of two shapes, or the shared RuntimeError naming the first mismatching dim."""
    a, b = tuple(a), tuple(b)
    if a == b:
        return a
    out = []
    for i in range(max(len(a), len(b)), 0, -1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"{op}: shapes {shape_str(a)} and {shape_str(b)} cannot be broadcast: dimension {-i} "
                               f"is {x} in the first and {y} in the second.")
        out.append(x if y == 1 else y)
    return tuple(out)


# ----- dtypes and devices ----------------------------------------------------------------------------------------

DTYPE_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
               "complex64", "complex128")


def refuse_complex(op, *tensors, ordered=False):
    """Note [Ops torch refuses on complex tensors]: an op torch has no complex kernel for refuses a complex tensor
    here, rather than computing from its real part (a cast to a real dtype drops the imaginary part silently), an
    order of complex numbers (numpy's lexicographic one, which torch has not), or a formula written for real
    numbers (mse_loss's d * d where |d|^2 is meant)."""
    for t in tensors:
        if t is not None and t.dtype.is_complex:
            why = "; complex numbers have no order" if ordered else ", as in torch"
            raise TypeError(f"{op}: not supported for complex tensors ({t.dtype.name}){why}.")


def refuse_complex32(op):
    raise TypeError(f"{op}: complex32 (chalf) is not supported; dyngrad has complex64 (cfloat) and complex128 "
                    "(cdouble).")


def dtype_arg(o, op="dtype"):
    """A dyngrad dtype from a dyngrad dtype, a numpy dtype or type, or the Python types float/int/bool (float is
    float64, as in torch)."""
    if isinstance(o, _C.dtype):
        return o
    if o is float:
        return _C.float64
    if o is int:
        return _C.int64
    if o is bool:
        return _C.bool
    if o is complex:
        return _C.complex128
    if isinstance(o, str) and o in ("complex32", "chalf"):
        refuse_complex32(op)
    try:
        name = np.dtype(o).name
    except TypeError:
        raise TypeError(f"{op}: expected a dtype (dyngrad.float32, int64, ...), got {o!r}.") from None
    if name not in DTYPE_NAMES:
        raise TypeError(f"{op}: dtype {name} is not supported: dyngrad has {', '.join(DTYPE_NAMES)}.")
    return getattr(_C, name)


def optional_dtype(o, op="dtype"):
    return None if o is None else dtype_arg(o, op)


# Note [Numbers written into tensors]: a Python number written into a tensor (full, fill_, masked_fill, index_fill,
# setitem, ...) must fit the tensor's dtype, as torch's checked conversion demands: int8 300, uint8 -256, int64
# 2**63, an int tensor's inf or NaN, float16 70000 raise RuntimeError ("value cannot be converted ... without
# overflow"). torch's exceptions to the rule are kept: uint8 takes -1..-255 (two's complement: -1 writes 255), a float
# tensor takes inf and NaN, and bool takes anything. Arithmetic with a number wraps instead (int8 + 300), as torch.
_INT_RANGES = {"uint8": (0, 2 ** 8 - 1), "int8": (-2 ** 7, 2 ** 7 - 1), "int16": (-2 ** 15, 2 ** 15 - 1),
               "int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": float.fromhex("0x1.fe00000000000p+127"),
              "float32": float(np.finfo(np.float32).max), "float64": math.inf,
              "complex64": float(np.finfo(np.float32).max), "complex128": math.inf}


def check_int_range(value, op):
    """A Python int must fit torch's numbers, int64 or uint64: OverflowError otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and not -2 ** 63 <= value < 2 ** 64:
        raise OverflowError(f"{op}: the integer {value} does not fit in 64 bits.")


def checked_write(value, dtype, op, *, int64_numbers=False, halves=True):
    """`value` (a Python or numpy number) if it can be written into a tensor of `dtype`; raises where torch does
    (Note [Numbers written into tensors]). int64_numbers=True is torch's __setitem__ and torch.tensor, which read an
    int as int64 (a larger one is a ValueError); halves=False lets the 16-bit floats take any value, rounding to
    inf (torch's __setitem__ and where)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if int64_numbers and isinstance(value, int) and not -2 ** 63 <= value < 2 ** 63:
        raise ValueError(f"{op}: the integer {value} does not fit in int64.")
    check_int_range(value, op)
    name = dtype.name
    if name == "bool" or (not halves and name in ("float16", "bfloat16")):
        return _as_int64_number(value, dtype)
    if name in _INT_RANGES:
        lo, hi = _INT_RANGES[name]
        if isinstance(value, int):
            fits = (-hi <= value <= hi) if name == "uint8" else lo <= value <= hi
        else:                                         # compared as doubles, as torch (NaN fits nowhere)
            fits = float(lo) <= value <= float(hi)
    else:
        fits = not math.isfinite(value) or abs(value) <= _FLOAT_MAX[name]
    if not fits:
        raise RuntimeError(f"{op}: value {value!r} cannot be converted to {name} without overflow.")
    return _as_int64_number(value, dtype)


def _as_int64_number(value, dtype):
    """An int in [2**63, 2**64) (torch's uint64 number), which fits only bool and float tensors, as the number the
    cores take: True or a float."""
    if isinstance(value, int) and value >= 2 ** 63:
        return True if dtype.name == "bool" else float(value)
    return value


def get_default_dtype():
    return _C._get_default_dtype()


def check_factory_options(op, layout=None, pin_memory=None):
    """torch's factory options dyngrad has one value of: the strided layout (None) and unpinned memory."""
    if layout is not None:
        raise RuntimeError(f"{op}: only the strided layout is supported (pass layout=None).")
    if pin_memory:
        raise RuntimeError(f"{op}: pin_memory=True needs an accelerator; dyngrad runs on the CPU.")


def finish(t, requires_grad):
    """requires_grad=True on a new tensor (refused for integer dtypes by the core)."""
    if requires_grad:
        t.requires_grad = True
    return t


# ----- losses ----------------------------------------------------------------------------------------------------

REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def reduction_code(r, op):
    if r not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got '{r}'.")
    return REDUCTIONS[r]


def reduce_loss(losses, code):
    if code == 0:
        return losses
    if code == 1:
        return _C.mean(losses, (), False)
    return _C.sum(losses, (), False)


class RemovableHandle:
    """Returned by the C++ core's register_hook; remove() unregisters the hook (the reference core has its twin)."""

    def __init__(self, tensor, hook_id):
        self._tensor, self._id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self._id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def torch_name(name):
    """Decorator: a function implementing torch.NAME under another Python name (the table row says which) shows
    `name` in its repr and in Python's own argument errors ("softmax() missing 1 required positional argument")."""
    def rename(fn):
        fn.__name__ = fn.__qualname__ = name
        return fn
    return rename


# ----- warnings at the user's line ---------------------------------------------------------------------------------

def warn_complex_to_real(src, dst):
    """torch's warning when a conversion (to(), copy_, a write, fill_ with a complex 0-d tensor) keeps only the real
    part of complex values."""
    if src.is_complex and not dst.is_complex and dst is not _C.bool:
        warn("Casting complex values to real discards the imaginary part (to(), float(), copy_ and writes keep the "
             "real part; take .real, .abs() or .angle() to say which real number is meant).", UserWarning)


def warn_deprecated(message):
    """A UserWarning attributed to the caller's line (Note [Warnings at the user's line] in _user_frame.py)."""
    warn(message, UserWarning)


# ----- Python data as a numpy array (torch.tensor's dtype inference) -----------------------------------------------

def _flatten(data):
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            yield x


def nested_values(data):
    """Nested lists of tensors (or numbers) as nested lists of numbers."""
    if isinstance(data, Tensor):
        return bridge.host_array(data.detach()).tolist()
    if not isinstance(data, (list, tuple)):
        return data
    return [nested_values(x) for x in data]


def array_from_data(data, op, dtype=None):
    """data as a numpy array of `dtype`, or of the dtype torch.tensor would infer: Python floats become the default
    float dtype, numpy arrays and scalars of a dyngrad dtype keep it, other ints become int64, bools stay bool."""
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flatten(data)):
        data = nested_values(data)
    try:
        # an ndarray as it is (the core copies it): a recording then sees the caller's own array, which it reads by
        # reference at every replay (Note [Arrays read by reference] in _api/capture.py)
        arr = data if type(data) is np.ndarray else np.array(data)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"{op}: could not convert data of type {type_name(data)} to a tensor ({exc}).") from None
    kind = arr.dtype.kind
    if kind not in "biufc":
        raise TypeError(f"{op}: could not convert data of type {type_name(data)} (numpy dtype {arr.dtype}) to a "
                        "tensor; expected numbers, bools, nested lists of them or a numpy array.")
    arr = canonical_bools(arr)
    if dtype is not None:
        if kind == "c" and not dtype.is_complex and not isinstance(data, (np.ndarray, np.generic)):
            raise TypeError(f"{op}: can't convert complex numbers to {dtype.name}; use dtype=complex64 or "
                            "complex128, or take .real first.")
        if arr.size and not (dtype.is_floating_point or dtype.is_complex) and \
                not isinstance(data, (np.ndarray, np.generic)):
            for v in (arr.min(), arr.max()):       # Python numbers must fit an integer dtype (numpy arrays wrap)
                checked_write(v.item(), dtype, op, int64_numbers=True)
        return arr.astype(numpy_dtype(dtype))
    if kind == "f":
        keeps = isinstance(data, (np.ndarray, np.generic))       # numpy floats keep their width (float16 too)
        return arr if keeps else arr.astype(numpy_dtype(get_default_dtype()))
    if kind == "c":     # Python complex numbers: the default complex dtype (complex64), as torch; numpy keeps its own
        if isinstance(data, (np.ndarray, np.generic)) and arr.dtype.itemsize in (8, 16):
            return arr
        return arr.astype(np.complex128 if get_default_dtype().name == "float64" else np.complex64)
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
