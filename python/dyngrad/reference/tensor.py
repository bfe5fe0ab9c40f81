"""Reference engine: the Tensor's core. Mirrors csrc/dyngrad/tensor.h (Storage + TensorImpl) and
csrc/bindings/tensor_bind.cpp.

A Tensor wraps one numpy array. Views (reshape, transpose, slicing, expand, ...) wrap numpy views of the same
memory and share the `Storage` object, which holds the version counter that every in-place write bumps
(see Note [Saved tensor versions] in csrc/dyngrad/node.h). The autograd fields are those of TensorImpl:
requires_grad (leaves only), grad, grad_fn + output_nr (non-leaves), retains_grad and hooks.
"""
import weakref

import numpy as np

from . import dtypes as _dt
from . import errors
from ._user_frame import warn
from .grad_mode import is_grad_enabled


class Storage:
    """What views of one buffer share: the version counter (the buffer itself is numpy's)."""

    __slots__ = ("version",)

    def __init__(self):
        self.version = 0


# Python helpers of the shared layer (python/dyngrad/_api/), registered at import as in the C++ engine
# (_C._register_helpers): Size, the type of .shape.
HELPERS = {"Size": tuple}


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


# Same text in csrc/bindings/tensor_bind.cpp.
NON_LEAF_GRAD_WARNING = ("grad: reading .grad of a non-leaf tensor (one with a grad_fn): backward() does not fill it "
                         "in. Call .retain_grad() on it before backward() to keep its gradient, or read .grad of the "
                         "leaf tensors.")


class Tensor:
    """The core of the reference Tensor: one numpy array and the autograd fields. The torch-facing methods
    (operators, ops as methods, repr, conversions, in-place variants) are attached by the shared layer
    (written once for both engines), as on the C++ engine's Tensor."""

    # Autograd fields default to "a leaf that does not require grad" at class level, so that creating a tensor
    # only sets what differs (instances keep them in their __dict__ once set).
    _requires_grad = False
    grad_fn = None
    output_nr = 0
    _grad = None
    _retains_grad = False
    _hooks = None
    _post_accumulate_grad_hooks = None
    _base = None
    _grad_accumulator = None
    _wrapped_number = False            # a Python number as a 0-d operand (ops_math.scalar_operand)
    __array_priority__ = 1000          # numpy defers `ndarray * tensor` to Tensor.__rmul__

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, src):
        """A new tensor object sharing src's memory and version counter, without history (as the C++ engine)."""
        if not isinstance(src, Tensor):
            raise TypeError(f"Tensor: expected a Tensor, got {type(src).__name__}.")
        self._data = src._data
        self._storage = src._storage

    def __getattr__(self, name):
        # reached only when normal lookup fails: a tensor made by Tensor.__new__ whose __init__ never ran has no
        # memory (the C++ engine's binding says the same, csrc/bindings/common.h)
        if name in ("_data", "_storage"):
            raise TypeError("this Tensor was never initialised (Tensor.__new__ without Tensor.__init__); make "
                            "tensors with dyngrad.tensor(...), dyngrad.empty(...) or Tensor(...).")
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    # ----- shape and type -------------------------------------------------------------------------------
    @property
    def shape(self):
        return HELPERS["Size"](self._data.shape)

    @property
    def dtype(self):
        return _dt.from_numpy_dtype(self._data.dtype)

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    def element_size(self):
        return self._data.itemsize

    def size(self, dim=None):
        if dim is None:
            return HELPERS["Size"](self._data.shape)
        return self._data.shape[wrap_dim(dim, self.ndim, "size")] if self.ndim else 1

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

    def _storage_id(self):
        return id(self._storage)

    def __hash__(self):
        return id(self)

    # ----- autograd fields -----------------------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, flag):
        if self.grad_fn is not None:
            if not flag:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf tensors. If you want to use a computed tensor "
                    "in a subgraph that doesn't require differentiation use x_no_grad = x.detach().")
            return
        if flag and self._data.dtype.kind not in "fc":
            raise RuntimeError(errors.ERR_INT_REQUIRES_GRAD.format(dtype=self.dtype.name))
        self._requires_grad = bool(flag)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def grad(self):
        if self._grad is None and self.grad_fn is not None and not self._retains_grad:
            warn(NON_LEAF_GRAD_WARNING, UserWarning)       # as torch
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad: expected a Tensor or None, got {type(value).__name__}.")
            if value.shape != self.shape:
                raise RuntimeError(f"assigned grad has shape {errors.shape_str(value.shape)} but the tensor has "
                                   f"shape {errors.shape_str(self.shape)}.")
            if value.dtype is not self.dtype:
                raise RuntimeError(f"assigned grad has dtype {value.dtype.name} but the tensor has dtype "
                                   f"{self.dtype.name}.")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def retains_grad(self):
        return self._retains_grad

    def retain_grad(self):
        """Keep .grad for this non-leaf tensor after backward (a no-op on leaves, as in torch)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that doesn't require grad.")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        self.grad_fn.add_retain_grad(self.output_nr, weakref.ref(self))

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient is computed; a non-None return replaces the gradient."""
        if not callable(hook):
            raise TypeError(f"register_hook: expected a callable as hook, got {type(hook).__name__}.")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient.")
        if self.grad_fn is not None:
            hooks = self.grad_fn.tensor_pre_hooks(self.output_nr)
        else:
            if self._hooks is None:
                self._hooks = _HookList()
            hooks = self._hooks
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call hook(tensor) after the leaf's .grad received its gradient in a backward pass; it returns None."""
        if not callable(hook):
            raise TypeError(f"register_post_accumulate_grad_hook: hook must be callable, got {type(hook).__name__}.")
        if not self.requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't "
                               "require gradient.")
        if self.grad_fn is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered "
                               f"on non-leaf tensors (this one has grad_fn={self.grad_fn.name()}).")
        if self._post_accumulate_grad_hooks is None:
            self._post_accumulate_grad_hooks = _HookList()
        self._post_accumulate_grad_hooks.append(hook)
        return RemovableHandle(self._post_accumulate_grad_hooks, hook)

    @property
    def _version(self):
        return self._storage.version

    @property
    def data(self):
        """A detached alias of the same memory."""
        return make_tensor(self._data, self._storage)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}.")
        if self.requires_grad and not (value.dtype.is_floating_point or value.dtype.is_complex):    # as torch (and the C++ engine)
            raise RuntimeError(f"data: a tensor that requires grad can only be given floating-point data, got "
                               f"{value.dtype.name}.")
        self._data = value._data
        self._storage = value._storage

    def detach(self):
        """A tensor sharing memory and version counter with this one, cut from the graph."""
        return make_tensor(self._data, self._storage)

    def detach_(self):
        self.grad_fn = None
        self.output_nr = 0
        self._requires_grad = False
        return self

    # ----- values --------------------------------------------------------------------------------------
    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"item: a tensor with {self._data.size} elements cannot be converted to a Python "
                               f"number (shape {errors.shape_str(self.shape)}); expected exactly one element.")
        return self._data.reshape(()).item()

    def _numpy_view(self):
        """A numpy array over this tensor's memory (no copy, no requires_grad check)."""
        if self._data.dtype.metadata is not None:      # Note [Reference bfloat16]: as C++ (and torch), refuse
            raise TypeError("numpy: bfloat16 has no numpy dtype; convert with .float() first.")
        return self._data


_new_tensor = object.__new__


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
    return make_tensor(np.array(dtype.cast(value)))


def empty(shape, dtype):
    """An uninitialised tensor (no autograd); dtype is a dyngrad dtype."""
    check_allocation(tuple(shape), dtype.np)
    return make_tensor(np.empty(shape, dtype.np))


def full(shape, value, dtype):
    if isinstance(value, complex) and not dtype.is_complex:    # as csrc/dyngrad/tensor.cpp full_complex
        raise TypeError(f"full: a complex value cannot fill a tensor of dtype {dtype.name}; use a complex dtype or "
                        "take its real part.")
    check_allocation(tuple(shape), dtype.np)
    return make_tensor(np.full(shape, dtype.cast(value), dtype.np))


def from_numpy(ndarray):
    """A tensor sharing the array's memory (no copy)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(ndarray).__name__}.")
    if ndarray.dtype not in _dt.NUMPY_DTYPES:
        raise TypeError(f"from_numpy: arrays of dtype {ndarray.dtype} are not supported; dyngrad has float64, "
                        "float32, float16, int64, int32, int16, int8, uint8, bool, complex128 and complex64 (use "
                        "dyngrad.tensor to convert).")
    if not ndarray.flags.writeable:   # Note [Writable tensors] in csrc/dyngrad/tensor.h: shared, never written
        warn("from_numpy: the given numpy array is not writable; the tensor shares its memory read-only, so "
             "in-place operations on it will raise. Copy the array (dyngrad.tensor(array)) to get a "
             "writable tensor.", UserWarning)
    return make_tensor(ndarray)


def copy_from_numpy(ndarray, requires_grad):
    """A new tensor with its own memory holding a copy of the array."""
    if isinstance(ndarray, np.ndarray) and not ndarray.dtype.isnative:     # a copy may convert the byte order
        ndarray = ndarray.astype(ndarray.dtype.newbyteorder("="))
    if not isinstance(ndarray, np.ndarray) or ndarray.dtype not in _dt.NUMPY_DTYPES:
        from_numpy(ndarray)                       # its errors
    t = make_tensor(np.array(ndarray, copy=True, order="C"))
    if requires_grad:
        t.requires_grad = True
    return t
