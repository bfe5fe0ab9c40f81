"""Reference engine: writing into a tensor (in-place ops). Mirrors csrc/dyngrad/inplace.cpp, function for function.
"""
import numpy as np

from . import errors, forward_ad
from .errors import shape_str
from .grad_mode import is_grad_enabled
from .ops import any_requires_grad
from .ops_index import put, take
from .ops_math import add, where
from .ops_shape import clone, expand, to_dtype, view_as_complex, view_as_real
from .tensor import make_tensor, broadcast_shapes, scalar_tensor


# Note [In-place ops]: an in-place op is computed out of place, from a snapshot of the tensor that carries its
# history (inplace_input), and the result is written back into the tensor's memory (assign_inplace); the tensor's
# grad_fn then moves to the new node, as in torch.

def _is_leaf_requiring_grad(t):
    return t.grad_fn is None and t._requires_grad


def inplace_input(self, op, other_requires_grad):
    """The value of `self` before an in-place op, with self's history: what the out-of-place op is computed from."""
    check_writable(self, op)
    if not is_grad_enabled():
        return self
    if _is_leaf_requiring_grad(self):
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
    base = self._base
    if not self.requires_grad and not other_requires_grad and (base is None or not base.requires_grad):
        return self
    if base is not None:
        if _is_leaf_requiring_grad(base):
            raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
        if not base._data.flags.c_contiguous:
            raise NotImplementedError(f"{op}: in-place writes into a view of a non-contiguous tensor that requires "
                                      "grad are not supported; write into the base tensor or use out-of-place ops.")
    # The out-of-place op reads self's current value, which the write is about to replace; give it a snapshot
    # that carries self's history so that any saved copy stays valid (Note [Saved tensor versions]).
    before = make_tensor(self._data.copy())
    if self.__dict__.get("_tangents"):
        before._tangents = list(self._tangents)   # forward AD: the old value's tangents
    before._requires_grad, before.grad_fn, before.output_nr = self._requires_grad, self.grad_fn, self.output_nr
    return before


def _with_history(t, history_of):
    """A tensor with t's memory and the given history, to feed t's current value into a recorded op."""
    h = make_tensor(t._data, t._storage)
    h._requires_grad, h.grad_fn, h.output_nr = history_of._requires_grad, history_of.grad_fn, history_of.output_nr
    return h


def _view_positions(view, base):
    """Flat positions, in the (contiguous) base, of the view's elements: the view's index map as int64. A real view
    of a complex base (real, imag, view_as_real) counts in the base's (real, imag) pairs."""
    item = view._data.itemsize
    at = (view._data.__array_interface__["data"][0] - base._data.__array_interface__["data"][0]) // item
    pos = np.full(view.shape, at, dtype=np.int64)
    for d, (n, stride) in enumerate(zip(view.shape, view._data.strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * (stride // item)).reshape((1,) * d + (n,) + (1,) * (view.ndim - d - 1))
    return make_tensor(pos)


def _rebase_view_history(view, result, op):
    """Note [In-place writes into views]: writing into a view changes its base too. As torch's CopySlices does, the
    base's history becomes put(base, positions of the view, result) and the view's history becomes a take of that
    new base, so gradients reach both the old base and the value written."""
    base = view._base
    if base.dtype is not view.dtype:          # a real view of a complex base: a put into the base's pairs
        if not base.dtype.is_complex:
            raise RuntimeError(f"{op}: a view of another dtype than its base ({view.dtype.name} of {base.dtype.name}) "
                               "cannot be written with autograd history.")
        pairs = view_as_real(_with_history(base, base))
        positions = _view_positions(view, base)
        new_base = view_as_complex(put(pairs, positions, result))
        base.grad_fn, base.output_nr = new_base.grad_fn, 0
        new_view = take(view_as_real(_with_history(base, base)), positions)
        view.grad_fn, view.output_nr = new_view.grad_fn, 0
        return
    positions = _view_positions(view, base)
    new_base = put(_with_history(base, base), positions, result)
    base.grad_fn, base.output_nr = new_base.grad_fn, 0
    new_view = take(_with_history(base, base), positions)
    view.grad_fn, view.output_nr = new_view.grad_fn, 0


def has_internal_overlap(arr):
    """A dim of more than one element with stride 0: several elements share a memory location."""
    return arr.size > 0 and any(s == 0 and n > 1 for n, s in zip(arr.shape, arr.strides))


def check_writable(t, op):
    """See Note [Writable tensors] in csrc/dyngrad/tensor.h: refuse an in-place write into an expanded view or into
    read-only memory (a numpy array that is not writeable)."""
    arr = t._data
    if arr.size == 0:
        return
    if has_internal_overlap(arr):
        raise RuntimeError(errors.ERR_INTERNAL_OVERLAP.format(
            op=op, shape=shape_str(arr.shape), strides=shape_str(s // arr.itemsize for s in arr.strides)))
    if not arr.flags.writeable:
        raise RuntimeError(errors.ERR_READ_ONLY.format(op=op))


def _write(self, result, op):
    """The plain in-place write (write_into in C++): check, copy (broadcast, cast), bump the version."""
    check_writable(self, op)
    if self._data.size:   # (converted as to_dtype converts: bfloat16 rounds, floats into integers as C++ casts)
        values = result._data if result.dtype is self.dtype else self.dtype.cast(result._data)
        np.copyto(self._data, values, casting="unsafe")
    self._storage.version += 1


def assign_inplace(self, result, op):
    """Writes `result` (computed out of place) into self and moves self's history to result's."""
    if result.shape != self.shape:
        raise RuntimeError(f"{op}: the result of shape {shape_str(result.shape)} does not fit the tensor written in "
                           f"place, of shape {shape_str(self.shape)}.")
    # as torch: a float result is not written into an int tensor, nor an int one into a bool tensor
    if result.dtype.category > self.dtype.category:
        raise RuntimeError(f"{op}: the result type {result.dtype.name} can't be cast to the tensor's type "
                           f"{self.dtype.name}.")
    if is_grad_enabled() and _is_leaf_requiring_grad(self):
        raise RuntimeError(errors.ERR_LEAF_INPLACE.format(op=op))
    _write(self, result, op)
    forward_ad.take_tangents(self, result)
    if result.requires_grad and is_grad_enabled():
        if self._base is not None:
            _rebase_view_history(self, result, op)
        else:
            self.grad_fn, self.output_nr = result.grad_fn, result.output_nr


# self's old value is overwritten entirely: it gets a zero gradient (torch's CopyBackwards), src gets the rest
def copy_(self, src):
    if any_requires_grad(self, src) or (self._base is not None and any_requires_grad(self._base)):
        before = inplace_input(self, "copy_", src.requires_grad)
        written = where(_all_true(self.shape), to_dtype(expand(src, self.shape), self.dtype), before)
        assign_inplace(self, clone(written), "copy_")
        return
    broadcast_shapes(self.shape, src.shape, "copy_")
    _write(self, src, "copy_")
    forward_ad.take_tangents(self, src)


# out = value everywhere; the old value gets a zero gradient (multiplying it by 0 would turn inf into nan)
def fill_(self, value):
    if is_grad_enabled() and (self.requires_grad or (self._base is not None and self._base.requires_grad)):
        before = inplace_input(self, "fill_", False)
        zero, v = scalar_tensor(0, self.dtype), scalar_tensor(value, self.dtype)
        assign_inplace(self, add(where(_all_true(self.shape), zero, before), v), "fill_")
        return
    _write(self, scalar_tensor(value, self.dtype), "fill_")
    forward_ad.take_tangents(self, None)


def zero_(self):
    fill_(self, 0.0)


def _all_true(shape):
    return make_tensor(np.ones(shape, dtype=np.bool_))
