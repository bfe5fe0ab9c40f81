"""Reference engine: the Tensor. Mirrors csrc/dyngrad/tensor.h (Storage + TensorImpl).

A Tensor wraps one numpy array. Views (reshape, transpose, slicing, expand, ...) wrap numpy views of the same
memory and share the `Storage` object, which holds the version counter that every in-place write bumps
(see Note [Saved tensor versions] in csrc/dyngrad/node.h). The autograd fields are those of TensorImpl:
requires_grad (leaves only), grad, grad_fn + output_nr (non-leaves), retains_grad and hooks.
"""
import weakref

import numpy as np

from . import dtypes as _dt
from . import errors
from .grad_mode import is_grad_enabled


class Storage:
    """What views of one buffer share: the version counter (the buffer itself is numpy's)."""

    __slots__ = ("version",)

    def __init__(self):
        self.version = 0


class Size(tuple):
    """A tensor's shape: a tuple that prints as `dyngrad.Size([2, 3])`."""

    def __repr__(self):
        return f"dyngrad.Size({list(self)})"

    __str__ = __repr__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


class RemovableHandle:
    """Returned by register_hook; `remove()` takes the hook out again."""

    def __init__(self, hooks, hook):
        self._hooks = weakref.ref(hooks) if hooks is not None else None
        self._hook = hook

    def remove(self):
        hooks = self._hooks() if self._hooks is not None else None
        if hooks is not None and self._hook in hooks:
            hooks.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookList(list):
    """A list that can be weakly referenced by a RemovableHandle."""

    __slots__ = ("__weakref__",)


def make_tensor(arr, storage=None, base=None):
    """Wrap a numpy array (no copy). `storage` is shared with the tensor this one is a view of."""
    t = _new_tensor(Tensor)
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    t._data = arr
    t._storage = storage if storage is not None else Storage()
    if base is not None:
        t._base = base
    return t


class Tensor:
    """An n-dimensional array of float32, float64, int64 or bool that records operations for autograd."""

    # Autograd fields default to "a leaf that does not require grad" at class level, so that creating a tensor
    # only sets what differs (instances keep them in their __dict__ once set).
    _requires_grad = False
    grad_fn = None
    output_nr = 0
    _grad = None
    _retains_grad = False
    _hooks = None
    _base = None
    _grad_accumulator = None
    _FIELDS = ("_data", "_storage", "_requires_grad", "grad_fn", "output_nr", "_grad", "_retains_grad", "_hooks",
               "_base", "_grad_accumulator")
    __array_priority__ = 1000          # numpy defers `ndarray * tensor` to Tensor.__rmul__

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, dtype=None, requires_grad=False):
        """`Tensor(data)` copies data as float32 (torch.Tensor); `Tensor(2, 3)` is an uninitialised 2x3."""
        from .ops_creation import tensor as _tensor, empty as _empty
        if len(args) == 1 and isinstance(args[0], Tensor) and dtype is None:
            # as in the C++ engine: a new tensor object sharing src's memory, without history (nn.Parameter)
            src = args[0].detach()
        elif len(args) == 1 and not isinstance(args[0], int):
            src = _tensor(args[0], dtype=dtype or _dt.get_default_dtype())
        else:
            src = _empty(*args, dtype=dtype)
        for name in Tensor._FIELDS:
            setattr(self, name, getattr(src, name))
        if requires_grad:
            self.requires_grad_(True)

    # ----- shape and type -------------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._data.shape)

    @property
    def dtype(self):
        return _dt.from_numpy_dtype(self._data.dtype)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def device(self):
        return "cpu"

    @property
    def is_cuda(self):
        return False

    def dim(self):
        return self._data.ndim

    def ndimension(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    def nelement(self):
        return int(self._data.size)

    def element_size(self):
        return self._data.itemsize

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[wrap_dim(dim, self.ndim, "size")]

    def stride(self, dim=None):
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        if dim is None:
            return strides
        return strides[wrap_dim(dim, self.ndim, "stride")]

    def storage_offset(self):
        return 0

    def is_contiguous(self):
        return bool(self._data.flags.c_contiguous)

    def data_ptr(self):
        return self._data.__array_interface__["data"][0]

    # ----- autograd fields -----------------------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, flag):
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    f"requires_grad: you can only change requires_grad flags of leaf tensors; this tensor has "
                    f"grad_fn=<{self.grad_fn.name()}>. Use detach() to get a tensor that does not require grad.")
            return
        if flag and not self.is_floating_point():
            raise RuntimeError(errors.ERR_INT_REQUIRES_GRAD.format(dtype=self.dtype.name))
        self._requires_grad = bool(flag)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}.")
            if value.shape != self.shape:
                raise RuntimeError(f"grad: assigned grad has shape {errors.shape_str(value.shape)}, but the "
                                   f"tensor has shape {errors.shape_str(self.shape)}; they must match.")
            if value.dtype is not self.dtype:
                raise RuntimeError(f"grad: assigned grad has dtype {value.dtype}, but the tensor has dtype "
                                   f"{self.dtype}; they must match.")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        """Keep .grad for this non-leaf tensor after backward (a no-op on leaves, as in torch)."""
        if self.grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("retain_grad: can't retain_grad on a tensor that has requires_grad=False.")
            return
        if not self._retains_grad:
            self._retains_grad = True
            self.grad_fn.add_retain_grad(self.output_nr, weakref.ref(self))

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a non-None return replaces the gradient."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient.")
        if self.grad_fn is not None:
            hooks = self.grad_fn.tensor_pre_hooks(self.output_nr)
        else:
            if self._hooks is None:
                self._hooks = _HookList()
            hooks = self._hooks
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    @property
    def _version(self):
        return self._storage.version

    @property
    def _is_view(self):
        return self._base is not None

    @property
    def data(self):
        """A detached alias of the same memory (with its own version counter, as torch's .data)."""
        return make_tensor(self._data)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}.")
        self._data = value._data

    def detach(self):
        """A tensor sharing memory and version counter with this one, cut from the graph."""
        return make_tensor(self._data, self._storage)

    def detach_(self):
        if self._base is not None and self._base.requires_grad:
            raise RuntimeError("detach_: can't detach a view of a tensor that requires grad in place; use detach().")
        self.grad_fn = None
        self.output_nr = 0
        self._requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from .autograd import backward as _backward
        _backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ----- Python and numpy conversions ---------------------------------------------------------------
    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"item: a tensor with {self._data.size} elements cannot be converted to a Python "
                               f"number (shape {errors.shape_str(self.shape)}); expected exactly one element.")
        return self._data.reshape(()).item()

    def tolist(self):
        return self._data.tolist()

    def numpy(self, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("numpy: can't call numpy() on a tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"bool: the truth value of a tensor with {self._data.size} elements is ambiguous; "
                               "use .any() or .all().")
        return bool(self._data.reshape(()))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data.copy(), self.requires_grad))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("deepcopy: only leaf tensors (created by the user) support the deepcopy protocol.")
        out = make_tensor(self._data.copy())
        out._requires_grad = self._requires_grad
        if self._grad is not None:
            out._grad = make_tensor(self._grad._data.copy())
        memo[id(self)] = out
        return out

    def __repr__(self):
        return format_tensor(self)

    def __format__(self, spec):
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # ----- conversions that are ops ----------------------------------------------------------------------
    def to(self, *args, dtype=None, **kwargs):
        """`to(dtype)`, `to(other_tensor)`, `to("cpu")`, `to("cpu", dtype)`."""
        target = dtype
        for arg in args:
            if isinstance(arg, Tensor):
                target = arg.dtype
            elif isinstance(arg, str) and arg.startswith("cpu"):
                continue
            elif arg is not None:
                target = _dt.to_dtype(arg, "to")
        if target is None:
            return self
        return _to_dtype(self, target)

    def type(self, dtype=None):
        if dtype is None:
            return "dyngrad." + {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor",
                                 "bool": "BoolTensor"}[self.dtype.name]
        return self.to(dtype)

    def cpu(self):
        return self

    def float(self):
        return _to_dtype(self, _dt.float32)

    def double(self):
        return _to_dtype(self, _dt.float64)

    def long(self):
        return _to_dtype(self, _dt.int64)

    def int(self):
        return _to_dtype(self, _dt.int64)

    def bool(self):
        return _to_dtype(self, _dt.bool_)

    # ----- views spelled as attributes -------------------------------------------------------------------
    @property
    def T(self):
        return _shape_ops().permute(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return _shape_ops().mT(self)

    # The operators (+ - * / ** @ == ...), in-place methods, indexing and op methods are attached by
    # tensor_bind.py, as csrc/bindings/tensor_bind.cpp binds them on the C++ Tensor.


_new_tensor = object.__new__


def _rebuild(arr, requires_grad):
    t = make_tensor(arr)
    t._requires_grad = requires_grad
    return t


def wrap_dim(dim, ndim, op):
    """A possibly negative dim as 0..ndim-1; IndexError naming `op` when out of range (a 0-d tensor takes -1..0)."""
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}.")
    if not -n <= dim < n:
        raise errors.dim_error(op, dim, ndim)
    return int(dim) + n if dim < 0 else int(dim)


def broadcast_shapes(a, b, op):
    """numpy/torch broadcasting of two shapes, or the shared RuntimeError naming the first mismatching dim."""
    if a == b:
        return tuple(a)
    n = max(len(a), len(b))
    out = []
    for i in range(n, 0, -1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(errors.ERR_BROADCAST.format(op=op, a=errors.shape_str(a), b=errors.shape_str(b),
                                                           d=-i, x=x, y=y))
        out.append(x if y == 1 else y)
    return tuple(out)


_INT64_MAX = 2 ** 63 - 1
_MAX_BYTES = 2 ** 62     # C++ refuses allocations above SIZE_MAX / 4 before asking malloc


def shape_numel(shape):
    """The element count, or shape_numel's ValueError of csrc/dyngrad/tensor.cpp when it does not fit in int64."""
    n = 1
    for s in shape:
        if s < 0:
            raise ValueError(f"negative dimension {s} in shape {errors.shape_str(shape)}.")
        if s != 0 and n > _INT64_MAX // s:
            raise ValueError(f"shape {errors.shape_str(shape)} has more elements than fit in 64 bits.")
        n *= s
    return n


def check_allocation(shape, np_dtype):
    """What empty() in csrc/dyngrad/tensor.cpp checks before allocating, with its messages: ValueError when the
    element count does not fit in int64, MemoryError when the bytes are beyond any address space (numpy would say
    "array is too big", a ValueError)."""
    if shape_numel(shape) * np.dtype(np_dtype).itemsize > _MAX_BYTES:
        raise cannot_allocate(shape, np_dtype)


def cannot_allocate(shape, np_dtype):
    """The MemoryError of a tensor that cannot be allocated, with the message of C++'s empty()."""
    nbytes = np.dtype(np_dtype).itemsize
    for s in shape:
        nbytes *= s
    if nbytes >= 2 ** 64:
        size = "more than 2**64 bytes"
    else:
        gib = nbytes / 2 ** 30
        size = f"{nbytes} bytes ({gib / 1024:.3g} TiB)" if gib >= 1024 else f"{nbytes} bytes ({gib:.3g} GiB)"
    return MemoryError(f"cannot allocate memory for a tensor of shape {errors.shape_str(shape)} and dtype "
                       f"{_dt.from_numpy_dtype(np.dtype(np_dtype)).name}: it needs {size}.")


def scalar_tensor(value, dtype):
    """A 0-d tensor of `dtype` (no autograd)."""
    return make_tensor(np.array(value, dtype=dtype.np))


def _shape_ops():
    from . import ops_shape
    return ops_shape


def _to_dtype(t, dtype):
    return _shape_ops().to_dtype(t, _dt.to_dtype(dtype, "to"))


# ----- repr in torch's style --------------------------------------------------------------------------------
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
    arr = t._data
    summarize = arr.size > _SUMMARIZE_ABOVE
    suffixes = []
    if arr.size == 0:
        body = "[]"
        if arr.shape != (0,):
            suffixes.append(f"size={errors.shape_str(arr.shape)}")
    else:
        fmt = _make_formatter(arr, summarize)
        body = _format_array(arr, fmt, len(prefix), summarize)
    dtype = t.dtype
    if dtype not in (_dt.get_default_dtype(), _dt.int64, _dt.bool_):
        suffixes.append(f"dtype={dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffixes) + ")"

