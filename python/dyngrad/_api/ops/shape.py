"""Shape ops with torch's signatures: reshape/view (varargs or a tuple as methods), transpose, movedim, squeeze,
cat and the stacks, split/tensor_split, narrow, select, unbind, flips and rolls, repeats, triangles and diagonals,
the *_scatter ops, meshgrid, cdist, trapezoid, and the in-place view methods (t_, unsqueeze_, ...).

Views share memory with their input (the core decides). Ops that reorder or repeat elements (flip, roll, rot90,
repeat, tile, the diagonals of a matrix whose two dims cannot be merged) read them with ONE core take at positions
numpy computes from the shape; ops that write some elements (diag_embed, *_scatter) put them: both are
differentiable core ops, so every op here has its gradient, and its gradient's gradient, from the core.
"""
import builtins
import itertools
import math

import numpy as np

from ... import _C
from ..._user_frame import warn
from ...autograd.grad_mode import no_grad
from .. import bridge
from ..args import (Size, Tensor, broadcast_shapes as broadcast_pair, dims_arg, dtype_arg, number, shape_arg,
                    shape_args, shape_str, tensor_arg, tensor_list, to_int, type_name, wrap_dim)
from ..bridge import numpy_dtype
from ..device import check_device
from ..inplace import overwrite
from ..node_names import shows_as
# ----- positions (non-differentiable index arithmetic, done with numpy) ------------------------------------------

def _grid(shape):
    """The flat (row-major) position of every element of a tensor of `shape`, laid out in that shape."""
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape)


def _index(positions):
    return bridge.copy(np.asarray(positions, dtype=np.int64, order="C"), False)


def _take(a, positions):
    """a's elements at the flat positions `positions` (an int array; the result has its shape)."""
    return _C.take(a, _index(positions))


def _put(a, positions, v):
    """a with the elements at flat `positions` replaced by v (broadcast to positions' shape)."""
    return _C.put(a, _index(positions), v)


def _zeros(shape, dtype):
    return _C.full(tuple(shape), 0, dtype)


def _int_seq(o, op, name):
    """A tuple of ints from a list or tuple (torch's int[] arguments refuse a bare int)."""
    if not isinstance(o, (tuple, list)):
        raise TypeError(f"{op}: expected a tuple of ints as {name}, got {type_name(o)}.")
    return tuple(to_int(v, op, name) for v in o)


def _int_or_seq(o, op, name):
    """An int or a tuple of ints (torch's int[1] arguments), as a tuple."""
    if isinstance(o, (tuple, list)):
        return tuple(to_int(v, op, name) for v in o)
    return (to_int(o, op, name),)


def _unique_dims(dims, ndim, op, name="dims"):
    wrapped = tuple(wrap_dim(d, ndim, op) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"{op}: {name} must be unique, got {shape_str(dims)}.")
    return wrapped


def reshape(input, shape):
    return _C.reshape(tensor_arg(input, "reshape"), shape_arg(shape, "reshape"))


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(tensor_arg(input, "flatten"), to_int(start_dim, "flatten", "start_dim"),
                      to_int(end_dim, "flatten", "end_dim"))


@shows_as("Transpose")
def transpose(input, dim0, dim1):
    return _C.transpose(tensor_arg(input, "transpose"), to_int(dim0, "transpose", "dim0"),
                        to_int(dim1, "transpose", "dim1"))


def swapdims(input, dim0, dim1):
    return _C.transpose(tensor_arg(input, "swapdims"), to_int(dim0, "swapdims", "dim0"),
                        to_int(dim1, "swapdims", "dim1"))


def swapaxes(input, axis0, axis1):
    return _C.transpose(tensor_arg(input, "swapaxes"), to_int(axis0, "swapaxes", "axis0"),
                        to_int(axis1, "swapaxes", "axis1"))


def movedim(input, source, destination):
    """input with the dims `source` moved to the positions `destination` (ints or tuples); the others keep their
    order."""
    a = tensor_arg(input, "movedim")
    src = _int_or_seq(source, "movedim", "source")
    dst = _int_or_seq(destination, "movedim", "destination")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source {shape_str(src)} and destination {shape_str(dst)} must have the same "
                           "number of dims.")
    src = _unique_dims(src, a.ndim, "movedim", "source")
    dst = _unique_dims(dst, a.ndim, "movedim", "destination")
    if a.ndim == 0:
        return _C.permute(a, ())
    order = [-1] * a.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(a.ndim) if d not in src)
    order = [next(rest) if o < 0 else o for o in order]
    return _C.permute(a, tuple(order))


@shows_as("T")
def t(input):
    """The transpose of a matrix (0-d and 1-d tensors are returned as they are)."""
    a = tensor_arg(input, "t")
    if a.ndim > 2:
        raise RuntimeError(f"t: expects a tensor with <= 2 dimensions, got shape {shape_str(a.shape)}; use "
                           "transpose or mT.")
    return a if a.ndim < 2 else _C.transpose(a, 0, 1)


def permute(input, dims):
    return _C.permute(tensor_arg(input, "permute"), shape_arg(dims, "permute", "dims"))


@shows_as("Squeeze")
def squeeze(input, dim=None):
    a = tensor_arg(input, "squeeze")
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        return _C.reshape(a, tuple(a.shape))        # no dims to squeeze: a view of input, as torch
    return _C.squeeze(a, None if dim is None else dims_arg(dim, "squeeze"))


@shows_as("Unsqueeze")
def unsqueeze(input, dim):
    return _C.unsqueeze(tensor_arg(input, "unsqueeze"), to_int(dim, "unsqueeze", "dim"))


def broadcast_to(input, size):
    return _C.expand(tensor_arg(input, "broadcast_to"), shape_arg(size, "broadcast_to", "size"))


def broadcast_to_method(self, *size):
    return _C.expand(self, shape_args(size, "broadcast_to", "size"))


def broadcast_shapes(*shapes):
    """The shape every one of `shapes` (ints or sequences of ints) broadcasts to, as a Size."""
    out = ()
    for i, s in enumerate(shapes):
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            s = (int(s),)
        elif isinstance(s, (tuple, list)) and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                                                 for n in s):
            s = tuple(int(n) for n in s)
        else:
            raise RuntimeError(f"broadcast_shapes: shapes must be ints or sequences of ints, got {type_name(s)} at "
                               f"position {i}.")
        if any(n < 0 for n in s):
            raise ValueError(f"broadcast_shapes: shape {shape_str(s)} at position {i} has a negative size.")
        out = broadcast_pair(out, s, "broadcast_shapes")
    return Size(out)


def broadcast_tensors(*tensors):
    """Views of the tensors expanded to their common broadcast shape."""
    ts = tensor_list(list(tensors), "broadcast_tensors")
    shape = ()
    for t in ts:
        shape = broadcast_pair(shape, tuple(t.shape), "broadcast_tensors")
    return tuple(_C.expand(t, shape) for t in ts)


def cat(tensors, dim=0):
    return _C.cat(tensor_list(tensors, "cat"), to_int(dim, "cat", "dim"))


@shows_as("Stack")
def stack(tensors, dim=0):
    return _C.stack(tensor_list(tensors, "stack"), to_int(dim, "stack", "dim"))


@shows_as("Split")
def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size_or_sections` elements along dim (the last may be smaller), or of the listed sizes."""
    a = tensor_arg(tensor, "split", "tensor")
    d = to_int(dim, "split", "dim")
    if isinstance(split_size_or_sections, (list, tuple)):
        return tuple(_C.split(a, shape_arg(split_size_or_sections, "split", "split_size_or_sections"), d))
    return tuple(_C.split_size(a, to_int(split_size_or_sections, "split", "split_size_or_sections"), d))


def split_method(self, split_size, dim=0):
    """Tensor.split: torch names the size argument split_size here."""
    return split(self, split_size, dim)


@shows_as("Split")
def chunk(input, chunks, dim=0):
    return tuple(_C.chunk(tensor_arg(input, "chunk"), to_int(chunks, "chunk", "chunks"), to_int(dim, "chunk", "dim")))


@shows_as("Unbind")
def unbind(input, dim=0):
    """The slices along dim, as a tuple of views."""
    a = tensor_arg(input, "unbind")
    if a.ndim == 0:
        raise IndexError("unbind: cannot unbind a 0-d tensor; it has no dimension to unbind along.")
    d = wrap_dim(to_int(dim, "unbind", "dim"), a.ndim, "unbind")
    return tuple(_C.select(a, d, i) for i in range(a.shape[d]))


def narrow(input, dim, start, length):
    """The view input[..., start:start + length, ...] along dim; a negative start counts from the end."""
    a = tensor_arg(input, "narrow")
    if a.ndim == 0:
        raise RuntimeError("narrow: cannot narrow a 0-d tensor; it has no dimension.")
    d = wrap_dim(to_int(dim, "narrow", "dim"), a.ndim, "narrow")
    start, length = to_int(start, "narrow", "start"), to_int(length, "narrow", "length")
    n = a.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} is out of range for dimension {d} of size {n} (expected {-n}..{n}).")
    if length < 0:
        raise RuntimeError(f"narrow: length must be non-negative, got {length}.")
    start = start + n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension {d} of size {n}.")
    return _C.slice(a, d, start, start + length, 1)


@shows_as("Select")
def select(input, dim, index):
    return _C.select(tensor_arg(input, "select"), to_int(dim, "select", "dim"), to_int(index, "select", "index"))


def unflatten(input, dim, sizes):
    """The view of input with dim split into `sizes` (one of them may be -1)."""
    a = tensor_arg(input, "unflatten")
    sizes = _int_seq(sizes, "unflatten", "sizes")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty.")
    if a.ndim == 0:
        raise RuntimeError("unflatten: cannot unflatten a 0-d tensor; it has no dimension.")
    d = wrap_dim(to_int(dim, "unflatten", "dim"), a.ndim, "unflatten")
    n = a.shape[d]
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes) or (
            n != known if -1 not in sizes else (known == 0 or n % known)):
        raise RuntimeError(f"unflatten: sizes {shape_str(sizes)} don't multiply up to the size of dim {d} ({n}) of "
                           f"the input, of shape {shape_str(a.shape)}.")
    sizes = tuple(n // known if s == -1 else s for s in sizes)
    return _C.view(a, tuple(a.shape[:d]) + sizes + tuple(a.shape[d + 1:]))


def ravel(input):
    """input as a 1-D tensor (a view when its memory allows it, else a contiguous copy)."""
    return _C.reshape(tensor_arg(input, "ravel"), (-1,))


_MAX_PIECES = 2 ** 24


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input along dim: `sections` pieces of near-equal size (the first n % sections one longer), or the
    pieces between the given indices."""
    a = tensor_arg(input, "tensor_split")
    if a.ndim == 0:
        raise RuntimeError("tensor_split: expected at least a 1-dimensional tensor, got a 0-d tensor.")
    d = wrap_dim(to_int(dim, "tensor_split", "dim"), a.ndim, "tensor_split")
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not _C.int64:
            raise RuntimeError(f"tensor_split: a tensor of indices or sections must be int64, got {spec.dtype.name}.")
        if spec.ndim > 1:
            raise RuntimeError(f"tensor_split: a tensor of indices or sections must be 0-d or 1-D, got shape "
                               f"{shape_str(spec.shape)}.")
        spec = spec.item() if spec.ndim == 0 else bridge.view(spec).tolist()
    n = a.shape[d]
    if isinstance(spec, (tuple, list)):
        bounds = [0] + [to_int(i, "tensor_split", "indices") for i in spec] + [n]
    else:
        sections = to_int(spec, "tensor_split", "sections")
        if sections <= 0:
            raise RuntimeError(f"tensor_split: the number of sections must be positive, got {sections}.")
        if sections > _MAX_PIECES:      # one tensor object per section (torch runs out of memory trying)
            raise MemoryError(f"tensor_split: {sections} sections would make {sections} tensors (at most "
                              f"{_MAX_PIECES} are made).")
        q, r = divmod(n, sections)
        bounds = [0]
        for k in range(sections):
            bounds.append(bounds[-1] + q + (1 if k < r else 0))
    return tuple(_C.slice(a, d, start, stop, 1) for start, stop in zip(bounds, bounds[1:]))


def _split_along(input, indices_or_sections, op, min_ndim, dim_of):
    a = tensor_arg(input, op)
    if a.ndim < min_ndim:
        raise RuntimeError(f"{op}: expects a tensor with at least {min_ndim} dimension{'s' * (min_ndim > 1)}, got "
                           f"shape {shape_str(a.shape)}.")
    d = dim_of(a.ndim)
    if not isinstance(indices_or_sections, (tuple, list)):
        sections = to_int(indices_or_sections, op, "indices_or_sections")
        if sections == 0 or a.shape[d] % sections:
            raise RuntimeError(f"{op}: dimension {d} of size {a.shape[d]} cannot be split into {sections} equal "
                               "parts.")
    return tensor_split(a, indices_or_sections, d)


def hsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, "hsplit", 1, lambda n: 1 if n > 1 else 0)


def vsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, "vsplit", 2, lambda n: 0)


def dsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, "dsplit", 3, lambda n: 2)


# ----- at least n dims, stacks, grids ------------------------------------------------------------------------------

def _at_least(a, n):
    """A view of a with at least n dims: 0-d -> (1,)*n; 1-d (k) -> (1, k) or (1, k, 1); 2-d (m, k) -> (m, k, 1)."""
    if a.ndim >= n:
        return a
    if n == 3 and a.ndim == 2:
        return _C.unsqueeze(a, 2)
    if n == 3 and a.ndim == 1:
        return _C.reshape(a, (1, a.shape[0], 1))
    if a.ndim == 1:
        return _C.unsqueeze(a, 0)
    return _C.reshape(a, (1,) * n)


def _at_least_fn(n):
    op = f"atleast_{n}d"

    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return _at_least(tensors[0], n)
        ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else list(tensors)
        return tuple(_at_least(t, n) for t in tensor_list(list(ts), op))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"Each input as a view with at least {n} dimensions (one tensor, or a tuple for several)."
    return fn


atleast_1d, atleast_2d, atleast_3d = _at_least_fn(1), _at_least_fn(2), _at_least_fn(3)


def _stack_inputs(tensors, op):
    ts = tensor_list(tensors, op)
    if not ts:
        raise RuntimeError(f"{op}: expects a non-empty list of tensors.")
    return ts


def hstack(tensors):
    """Concatenation along the first dim for 1-D inputs (0-d become 1-D), the second otherwise."""
    ts = [_at_least(t, 1) for t in _stack_inputs(tensors, "hstack")]
    return _C.cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenation along the first dim of the inputs made at least 2-D (a 1-D input is one row)."""
    return _C.cat([_at_least(t, 2) for t in _stack_inputs(tensors, "vstack")], 0)


def dstack(tensors):
    """Concatenation along the third dim of the inputs made at least 3-D."""
    return _C.cat([_at_least(t, 3) for t in _stack_inputs(tensors, "dstack")], 2)


def column_stack(tensors):
    """0-d and 1-D inputs as columns, concatenated along the second dim with the (at least 2-D) others."""
    ts = _stack_inputs(tensors, "column_stack")
    return _C.cat([_C.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in ts], 1)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids (expanded views) of 0-d/1-D inputs: 'ij' (matrix) or 'xy' (Cartesian: the first two dims
    swapped)."""
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else list(tensors)
    ts = tensor_list(list(ts), "meshgrid")
    if indexing is None:        # torch warns before looking at the tensors (after checking their types)
        warn("meshgrid: in an upcoming release it will be required to pass the indexing argument (as in "
             "torch); indexing='ij' is used.", UserWarning)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}.")
    if not ts:
        raise RuntimeError("meshgrid: expects a non-empty list of tensors.")
    for i, t in enumerate(ts):
        if t.ndim > 1:
            raise RuntimeError(f"meshgrid: expects 0-d or 1-D tensors, got shape {shape_str(t.shape)} at position {i}.")
        if t.dtype is not ts[0].dtype:
            raise RuntimeError(f"meshgrid: expects all tensors to have the same dtype, got {ts[0].dtype.name} and "
                               f"{t.dtype.name}.")
    return meshgrid_views(ts, indexing, lambda t, along, shape: _C.expand(_C.reshape(t, along), shape))


def meshgrid_views(ts, indexing, view):
    """meshgrid's grids of checked 0-d/1-D tensors: view(t, along, shape) expands t, reshaped to `along` (its
    numel on its axis, 1 elsewhere), to the grid's shape; vmap's meshgrid rule passes the rows' methods."""
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(ts)
    for t, axis in zip(ts, axes):
        shape[axis] = t.numel()
    out = []
    for t, axis in zip(ts, axes):
        along = [1] * len(ts)
        along[axis] = t.numel()
        out.append(view(t, tuple(along), tuple(shape)))
    return tuple(out)


def cartesian_prod(*tensors):
    """The rows of every combination of one element from each 1-D input (one input: itself)."""
    ts = tensor_list(list(tensors), "cartesian_prod")
    for t in ts:
        if t.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expects 1-D tensors, got shape {shape_str(t.shape)}.")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(ts, indexing="ij")
    return _C.stack([_C.reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The rows of every length-r combination of the elements of a 1-D input, in lexicographic order."""
    a = tensor_arg(input, "combinations")
    r = to_int(r, "combinations", "r")
    if a.ndim != 1:
        raise RuntimeError(f"combinations: expects a 1-D tensor, got shape {shape_str(a.shape)}.")
    if r < 0:
        raise RuntimeError(f"combinations: r must be non-negative, got {r}.")
    if r == 0:
        return _take(a, np.zeros(0, dtype=np.int64))
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = np.array(list(pick(range(a.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    return _take(a, rows)


def block_diag(*tensors):
    """A block-diagonal matrix of the inputs (0-d: 1x1, 1-D: one row), zeros elsewhere; dtypes promote."""
    ts = tensor_list(list(tensors), "block_diag")
    blocks = []
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: expects tensors with at most 2 dimensions, got shape "
                               f"{shape_str(t.shape)} at position {i}.")
        blocks.append(_C.reshape(t, (1, t.numel())) if t.ndim < 2 else t)
    if not blocks:
        return _zeros((1, 0), _C.float32)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        h, w = b.shape
        rows.append(_C.cat([_zeros((h, left), b.dtype), b, _zeros((h, width - left - w), b.dtype)], 1))
        left += w
    return _C.cat(rows, 0)


# ----- reordering and repeating elements (one take at computed positions) -----------------------------------------

def flip(input, dims):
    """A copy of input with the order of elements reversed along dims."""
    a = tensor_arg(input, "flip")
    dims = _unique_dims(_int_seq(dims, "flip", "dims"), a.ndim, "flip")
    if a.ndim == 0:
        return _C.clone(a)
    return _take(a, _grid(a.shape)[tuple(slice(None, None, -1) if d in dims else slice(None) for d in range(a.ndim))])


def _varargs_ints(args, keyword, op, name):
    """A method's ints as varargs (x.flip(0, 1)), one sequence (x.flip((0, 1))) or the keyword (x.flip(dims=(0,))), as
    torch's Tensor methods take them (its functions take a sequence only); the keyword takes a sequence."""
    if keyword is not None:
        if args:
            raise TypeError(f"{op}: {name} given both as arguments and as a keyword.")
        return _int_seq(keyword, op, name)
    if not args:
        raise TypeError(f"{op}: missing the required argument {name}.")
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return _int_seq(args[0], op, name)
    return tuple(to_int(v, op, name) for v in args)


def flip_method(self, *args, dims=None):
    return flip(self, _varargs_ints(args, dims, "flip", "dims"))


def fliplr(input):
    a = tensor_arg(input, "fliplr")
    if a.ndim < 2:
        raise RuntimeError(f"fliplr: input must be at least 2-D, got shape {shape_str(a.shape)}.")
    return flip(a, (1,))


def flipud(input):
    a = tensor_arg(input, "flipud")
    if a.ndim < 1:
        raise RuntimeError("flipud: input must be at least 1-D, got a 0-d tensor.")
    return flip(a, (0,))


def roll(input, shifts, dims=None):
    """input with its elements shifted circularly along dims (of the flattened tensor when dims is None)."""
    a = tensor_arg(input, "roll")
    shifts = _int_or_seq(shifts, "roll", "shifts")
    dims = () if dims is None else _int_or_seq(dims, "roll", "dims")
    if not shifts:
        raise RuntimeError("roll: shifts must not be empty.")
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise RuntimeError(f"roll: shifts {shape_str(shifts)} and dims {shape_str(dims)} must have the same length.")
    if not dims:
        return _take(a, np.roll(_grid((a.numel(),)), shifts[0]).reshape(a.shape))
    if a.ndim == 0:
        raise IndexError(f"roll: dim {dims[0]} is out of range for a 0-d tensor.")
    axes = tuple(wrap_dim(d, a.ndim, "roll") for d in dims)
    return _take(a, np.roll(_grid(a.shape), shifts, axes))


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by 90 degrees k times in the plane of dims, from the first towards the second."""
    a = tensor_arg(input, "rot90")
    dims = _int_seq(dims, "rot90", "dims")
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expects 2 rotation dims, got {shape_str(dims)}.")
    if a.ndim < 2:
        raise RuntimeError(f"rot90: expects a tensor with at least 2 dimensions, got shape {shape_str(a.shape)}.")
    d0, d1 = wrap_dim(dims[0], a.ndim, "rot90"), wrap_dim(dims[1], a.ndim, "rot90")
    if d0 == d1:
        raise RuntimeError(f"rot90: the rotation dims must differ, got {shape_str(dims)}.")
    return _take(a, np.rot90(_grid(a.shape), to_int(k, "rot90", "k") % 4, (d0, d1)))


def _tiled(a, reps, op):
    if any(r < 0 for r in reps):
        raise RuntimeError(f"{op}: repeats must be non-negative, got {shape_str(reps)}.")
    if not reps:
        return _C.clone(a)
    return _take(a, np.tile(_grid(a.shape), reps))


def repeat(self, *repeats):
    """self repeated along each dim (leading repeats add dims), as numpy's tile."""
    if not repeats:
        raise TypeError("repeat: missing the required argument repeats.")
    reps = shape_args(repeats, "repeat", "repeats")
    if len(reps) < self.ndim:
        raise RuntimeError(f"repeat: the number of repeats ({len(reps)}) can not be smaller than the number of "
                           f"dimensions of the tensor ({self.ndim}).")
    return _tiled(self, reps, "repeat")


def tile(input, dims):
    """input repeated dims[i] times along dim i; fewer dims than input's are padded with ones in front."""
    a = tensor_arg(input, "tile")
    reps = _int_seq(dims, "tile", "dims")
    return _tiled(a, (1,) * (a.ndim - len(reps)) + reps, "tile")


def tile_method(self, *args, dims=None):
    return tile(self, _varargs_ints(args, dims, "tile", "dims"))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (each slice along dim) repeated `repeats` times in place, repeats an int or a tensor of counts;
    repeat_interleave(repeats) alone gives the indices 0..n-1 repeated so."""
    if repeats is None:
        counts = tensor_arg(input, "repeat_interleave", "repeats")
        if counts.ndim != 1:
            raise RuntimeError(f"repeat_interleave: repeats must be a 1-D tensor, got shape "
                               f"{shape_str(counts.shape)}.")
        return bridge.copy(_repeat_positions(counts, counts.shape[0], output_size), False)
    a = tensor_arg(input, "repeat_interleave")
    if dim is None:
        a, d = _C.reshape(a, (-1,)), 0
    else:
        if a.ndim == 0:       # torch flattens first, then finds no dim 1
            raise IndexError(f"repeat_interleave: dim {dim} is out of range for a 0-d tensor; leave dim=None.")
        d = wrap_dim(to_int(dim, "repeat_interleave", "dim"), a.ndim, "repeat_interleave")
    return _C.index_select(a, d, _index(_repeat_positions(repeats, a.shape[d], output_size)))


def _repeat_positions(repeats, n, output_size):
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError(f"repeat_interleave: repeats must be 0-d or 1-D, got shape {shape_str(repeats.shape)}.")
        if repeats.dtype is not _C.int64:
            raise NotImplementedError(f"repeat_interleave: repeats must be an integer tensor, got "
                                      f"{repeats.dtype.name}.")
        counts = bridge.view(repeats).reshape(-1)
        if counts.size != 1 and counts.size != n:
            raise RuntimeError(f"repeat_interleave: repeats must have one count per element along dim ({n}), got "
                               f"{counts.size}.")
    else:
        counts = np.array([to_int(repeats, "repeat_interleave", "repeats")])
    if (counts < 0).any():
        raise RuntimeError("repeat_interleave: repeats must be non-negative.")
    positions = np.repeat(np.arange(n, dtype=np.int64), np.broadcast_to(counts, (n,)))
    if output_size is not None and to_int(output_size, "repeat_interleave", "output_size") != positions.size:
        raise RuntimeError(f"repeat_interleave: output_size is {output_size} but the repeats give {positions.size} "
                           "elements.")
    return positions


def unfold(self, dimension, size, step):
    """The windows of `size` elements every `step` along `dimension`, as a new last dim (a view when the windows
    do not overlap and tile the dim; torch's overlapping windows share memory, which the core's views cannot
    express, so those are a copy)."""
    d = wrap_dim(to_int(dimension, "unfold", "dimension"), self.ndim, "unfold")
    size, step = to_int(size, "unfold", "size"), to_int(step, "unfold", "step")
    n = self.shape[d] if self.ndim else 1
    if size < 0:
        raise RuntimeError(f"unfold: size must be non-negative, got {size}.")
    if step <= 0:
        raise RuntimeError(f"unfold: step must be positive, got {step}.")
    if size > n:
        raise RuntimeError(f"unfold: size {size} is larger than dimension {d} (of size {n}).")
    if self.ndim == 0:
        return _C.reshape(self, (1,)) if size == 1 else _take(self, np.zeros(0, dtype=np.int64))
    count = (n - size) // step + 1
    if size <= step and count * step <= n:      # disjoint windows: split the dim, keep the first `size` of each
        shape = tuple(self.shape)
        whole = _C.view(_C.slice(self, d, 0, count * step, 1), shape[:d] + (count, step) + shape[d + 1:])
        return movedim(_C.slice(whole, d + 1, 0, size, 1), d + 1, -1)
    starts = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)
    return _take(self, np.moveaxis(np.take(_grid(self.shape), starts, axis=d), d + 1, -1))


def as_strided(input, size, stride, storage_offset=None):
    """The elements at storage positions offset + sum(i_k * stride_k), read as a copy (a composite, not a view:
    the core has no arbitrary-stride views) from the input's own elements."""
    a = tensor_arg(input, "as_strided")
    size, stride = _int_seq(size, "as_strided", "size"), _int_seq(stride, "as_strided", "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: size {shape_str(size)} and stride {shape_str(stride)} differ in length.")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: negative strides are not supported, got {shape_str(stride)}.")
    if any(s < 0 for s in size):
        raise RuntimeError(f"as_strided: negative sizes are not allowed, got {shape_str(size)}.")
    offset = a.storage_offset() if storage_offset is None else to_int(storage_offset, "as_strided",
                                                                         "storage_offset")
    wanted = np.full(size, offset, dtype=np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        wanted = wanted + (np.arange(n, dtype=np.int64) * s).reshape((1,) * k + (n,) + (1,) * (len(size) - k - 1))
    held = np.full(a.shape, a.storage_offset(), dtype=np.int64)
    for k, (n, s) in enumerate(zip(a.shape, a.stride())):
        held = held + (np.arange(n, dtype=np.int64) * s).reshape((1,) * k + (n,) + (1,) * (a.ndim - k - 1))
    top = max(int(wanted.max(initial=0)), int(held.max(initial=0))) + 1
    logical = np.full(top, -1, dtype=np.int64)
    logical[held.reshape(-1)] = np.arange(a.numel(), dtype=np.int64)
    positions = logical[wanted]
    if (positions < 0).any():
        raise RuntimeError(f"as_strided: size {shape_str(size)}, stride {shape_str(stride)} and storage offset "
                           f"{offset} reach storage positions outside the input's elements (shape "
                           f"{shape_str(a.shape)}, strides {shape_str(a.stride())}, offset {a.storage_offset()}).")
    return _take(a, positions)


# ----- triangles and diagonals ------------------------------------------------------------------------------------

def _triangle(input, diagonal, op, lower):
    a = tensor_arg(input, op)
    if a.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got shape {shape_str(a.shape)}.")
    k = to_int(diagonal, op, "diagonal")
    n, m = a.shape[-2:]
    keep = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    return _C.where(bridge.copy(keep, False), a, _zeros((), a.dtype))


def tril(input, diagonal=0):
    """The lower triangle (j <= i + diagonal) of the last two dims; zeros elsewhere."""
    return _triangle(input, diagonal, "tril", True)


def triu(input, diagonal=0):
    """The upper triangle (j >= i + diagonal) of the last two dims; zeros elsewhere."""
    return _triangle(input, diagonal, "triu", False)


def _triangle_indices(row, col, offset, dtype, device, layout, op, lower):
    check_device(device, op)
    if layout is not None:
        raise RuntimeError(f"{op}: only the strided layout is supported.")
    row, col, offset = (to_int(v, op, n) for v, n in ((row, "row"), (col, "col"), (offset, "offset")))
    for v, n in ((row, "row"), (col, "col")):
        if v < 0:
            raise RuntimeError(f"{op}: {n} must be non-negative, got {v}.")
    dt = _C.int64 if dtype is None else dtype_arg(dtype, op)
    if dt.is_floating_point or dt is _C.bool:
        raise NotImplementedError(f"{op}: dtype must be an integer type, got {dt.name}.")
    keep = np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
    return bridge.copy(np.stack(np.nonzero(keep)).reshape(2, -1).astype(numpy_dtype(dt)), False)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix, row by row."""
    return _triangle_indices(row, col, offset, dtype, device, layout, "tril_indices", True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) row and column indices of the upper triangle of a row x col matrix, row by row."""
    return _triangle_indices(row, col, offset, dtype, device, layout, "triu_indices", False)


def _diagonal_dims(a, dim1, dim2, op):
    d1 = wrap_dim(to_int(dim1, op, "dim1"), a.ndim, op)
    d2 = wrap_dim(to_int(dim2, op, "dim2"), a.ndim, op)
    if d1 == d2:
        raise RuntimeError(f"{op}: dim1 and dim2 must differ, got {dim1} and {dim2}.")
    return d1, d2


def _diagonal_by_merge(a, offset, d1, d2):
    """The diagonal as a view: dims d1, d2 moved last and merged into one (when their strides allow it), then every
    (m + 1)-th element from the first of the diagonal; None when the view cannot be made."""
    rest = tuple(d for d in range(a.ndim) if d not in (d1, d2))
    p = _C.permute(a, rest + (d1, d2))
    n, m = p.shape[-2], p.shape[-1]
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = min(n - r0, m - c0)
    if length <= 0:
        return None
    try:
        merged = _C.view(p, tuple(p.shape[:-2]) + (n * m,))
    except RuntimeError:
        return None
    start = r0 * m + c0
    return _C.slice(merged, -1, start, start + (length - 1) * (m + 1) + 1, m + 1)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The elements [i, i + offset] of dims (dim1, dim2), as a new last dim: a view when the two dims can be merged
    (in either order), else a copy."""
    a = tensor_arg(input, "diagonal")
    offset = to_int(offset, "diagonal", "offset")
    d1, d2 = _diagonal_dims(a, dim1, dim2, "diagonal")
    # the diagonal of (d1, d2) at offset k holds the elements of the one of (d2, d1) at -k, in the same order
    for view in (lambda: _diagonal_by_merge(a, offset, d1, d2), lambda: _diagonal_by_merge(a, -offset, d2, d1)):
        out = view()
        if out is not None:
            return out
    return _take(a, np.diagonal(_grid(a.shape), offset, d1, d2))


def diag(input, diagonal=0):
    """A 1-D input as the `diagonal`-th diagonal of a square matrix, or the `diagonal`-th diagonal of a matrix (a
    copy)."""
    a = tensor_arg(input, "diag")
    k = to_int(diagonal, "diag", "diagonal")
    if a.ndim == 1:
        return diag_embed(a, k, 0, 1)
    if a.ndim == 2:
        return _take(a, np.diagonal(_grid(a.shape), k))
    raise RuntimeError(f"diag: expects a 1-D or 2-D tensor, got shape {shape_str(a.shape)}.")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Zeros with input's last dim written on the `offset`-th diagonal of the new dims (dim1, dim2)."""
    a = tensor_arg(input, "diag_embed")
    offset = to_int(offset, "diag_embed", "offset")
    nd = a.ndim + 1
    d1 = wrap_dim(to_int(dim1, "diag_embed", "dim1"), nd, "diag_embed")
    d2 = wrap_dim(to_int(dim2, "diag_embed", "dim2"), nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}.")
    size = a.shape[-1] + abs(offset)
    shape = list(a.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, size)
    return _put(_zeros(shape, a.dtype), np.diagonal(_grid(shape), offset, d1, d2), a)


def diagflat(input, offset=0):
    """The flattened input on the `offset`-th diagonal of a square matrix."""
    a = tensor_arg(input, "diagflat")
    return diag_embed(_C.reshape(a, (-1,)), to_int(offset, "diagflat", "offset"), 0, 1)


# ----- writing a part: select/slice/diagonal_scatter ---------------------------------------------------------------

def _scatter_part(a, src, positions, op):
    src = tensor_arg(src, op, "src")
    if tuple(src.shape) != positions.shape:
        raise RuntimeError(f"{op}: src must have the shape of the part it is written to, {shape_str(positions.shape)};"
                           f" got {shape_str(src.shape)}.")
    return _put(a, positions, src if src.dtype is a.dtype else _C.to_dtype(src, a.dtype))


def select_scatter(input, src, dim, index):
    """input with input.select(dim, index) replaced by src."""
    a = tensor_arg(input, "select_scatter")
    if a.ndim == 0:
        raise IndexError("select_scatter: cannot select from a 0-d tensor.")
    d = wrap_dim(to_int(dim, "select_scatter", "dim"), a.ndim, "select_scatter")
    i, n = to_int(index, "select_scatter", "index"), a.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select_scatter: index {i} is out of range for dimension {d} of size {n}.")
    return _scatter_part(a, src, np.take(_grid(a.shape), i % n, axis=d), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with input[..., start:end:step, ...] (along dim) replaced by src."""
    a = tensor_arg(input, "slice_scatter")
    d = wrap_dim(to_int(dim, "slice_scatter", "dim"), a.ndim, "slice_scatter")
    if a.ndim == 0:
        raise RuntimeError("slice_scatter: cannot slice a 0-d tensor.")
    step = to_int(step, "slice_scatter", "step")
    if step <= 0:
        raise RuntimeError(f"slice_scatter: step must be positive, got {step}.")
    start = None if start is None else to_int(start, "slice_scatter", "start")
    end = None if end is None else to_int(end, "slice_scatter", "end")
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_part(a, src, _grid(a.shape)[key], "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal (as diagonal(input, offset, dim1, dim2) reads it) replaced by src."""
    a = tensor_arg(input, "diagonal_scatter")
    offset = to_int(offset, "diagonal_scatter", "offset")
    d1, d2 = _diagonal_dims(a, dim1, dim2, "diagonal_scatter")
    return _scatter_part(a, src, np.diagonal(_grid(a.shape), offset, d1, d2), "diagonal_scatter")


# ----- distances and integrals ------------------------------------------------------------------------------------


def _no_grad():
    return no_grad()


# ----- in-place view methods (t_, unsqueeze_, ...) -----------------------------------------------------------------

def _inplace_view(self, make, op):
    """self becomes make(self) (a view of its own memory with new sizes and strides), as torch's in-place view ops.

    `data =` gives self the view's shape and strides over the same memory; assign_inplace then writes the (equal)
    values into it, which bumps the version counter (so a saved copy of the old shape is detected) and moves
    self's history to make(old value) (Note [In-place ops] in reference/ops_shape.py)."""
    base = self._base
    recording = (_C.is_grad_enabled() and (self.requires_grad or (base is not None and base.requires_grad))) or \
        _C._current_dual_level() >= 0      # forward AD: self's tangent takes the same view (it kept its old shape)
    if not recording:
        self.data = make(self.detach())
        try:
            _C.assign_inplace(self, _C.clone(self), op)      # the version bump
        except RuntimeError:
            pass      # an expanded (overlapping) view takes no write: the new shape stands without the bump
        return self
    before = _C.inplace_input(self, op, False)
    result = make(before)
    self.data = make(self.detach())
    _C.assign_inplace(self, result, op)
    return self


def unsqueeze_(self, dim):
    return _inplace_view(self, lambda t: unsqueeze(t, dim), "unsqueeze_")


def squeeze_(self, dim=None):
    return _inplace_view(self, lambda t: squeeze(t, dim), "squeeze_")


def t_(self):
    return _inplace_view(self, t, "t_")


def transpose_(self, dim0, dim1):
    return _inplace_view(self, lambda x: transpose(x, dim0, dim1), "transpose_")


def swapdims_(self, dim0, dim1):
    return _inplace_view(self, lambda x: swapdims(x, dim0, dim1), "swapdims_")


def swapaxes_(self, axis0, axis1):
    return _inplace_view(self, lambda x: swapaxes(x, axis0, axis1), "swapaxes_")


def as_strided_(self, size, stride, storage_offset=None):
    """self becomes as_strided(self, ...): its elements are those the strides pick (as_strided here is a copy of
    them, so self's memory is its own afterwards)."""
    return _inplace_view(self, lambda x: as_strided(x, size, stride, storage_offset), "as_strided_")


# ----- Tensor-only forms -----------------------------------------------------------------------------------------

def reshape_method(self, *shape):
    return _C.reshape(self, shape_args(shape, "reshape", "shape"))


@shows_as("View")
def view(self, *shape):
    """A view with a new shape (never a copy); view(dtype) reinterprets the elements' type."""
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)) and not hasattr(shape[0], "__index__"):
        return _C.to_dtype(self, dtype_arg(shape[0], "view"))
    return _C.view(self, shape_args(shape, "view", "shape"))


@shows_as("View")
def view_as(self, other):
    return _C.view(self, tuple(tensor_arg(other, "view_as", "other").shape))


def reshape_as(self, other):
    return _C.reshape(self, tuple(tensor_arg(other, "reshape_as", "other").shape))


def permute_method(self, *dims):
    return _C.permute(self, shape_args(dims, "permute", "dims"))


def expand(self, *sizes):
    return _C.expand(self, shape_args(sizes, "expand", "size"))


def expand_as(self, other):
    return _C.expand(self, tuple(tensor_arg(other, "expand_as", "other").shape))


def T(self):
    return _C.permute(self, tuple(range(self.ndim - 1, -1, -1)))


@shows_as("Transpose")
def mT(self):
    return _C.mT(self)


def contiguous(self):
    return _C.contiguous(self)


def clone(input):
    return _C.clone(tensor_arg(input, "clone"))


# ----- concatenate, the split aliases, as_strided_scatter ----------------------------------------------------------

def concatenate(tensors, axis=0, *, dim=None):
    """cat under numpy's name: torch takes axis= (and dim=)."""
    return _C.cat(tensor_list(tensors, "concatenate"), to_int(axis if dim is None else dim, "concatenate", "axis"))


@shows_as("SplitWithSizes")
def split_with_sizes(input, split_sizes, dim=0):
    """Pieces of the listed sizes along dim; the sizes must be non-negative and add up to the dim's size."""
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
    return chunk(input, chunks, dim)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    """split (torch's unsafe_ variant only skips view tracking)."""
    return split(tensor, split_size_or_sections, dim)


def unsafe_split_method(self, split_size, dim=0):
    return unsafe_split(self, split_size, dim)


def fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal (in place). Every dim must have the same length beyond 2-D; a tall
    matrix's diagonal restarts after every (columns + 1) rows when wrap=True, as numpy's fill_diagonal."""
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
    index = bridge.host_result(flat, _C.int64)
    result = _C.put(before, index, _C.scalar_operand(value, before))
    _C.assign_inplace(self, overwrite(before, result, "fill_diagonal_"), "fill_diagonal_")
    return self


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """split_with_sizes (the unsafe_ variant only skips view tracking)."""
    return split_with_sizes(input, split_sizes, dim)


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with the elements that input.as_strided(size, stride, storage_offset) reads (of input laid out
    contiguously) replaced by src."""
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


# ----- the *_copy forms of the view ops ----------------------------------------------------------------------------

def _slice(input, dim=0, start=None, end=None, step=1):
    a = tensor_arg(input, "slice_copy")
    d = wrap_dim(to_int(dim, "slice_copy", "dim"), a.ndim, "slice_copy")
    step = to_int(step, "slice_copy", "step")
    if step <= 0:
        raise RuntimeError(f"slice_copy: step must be positive, got {step}.")
    begin, stop, _ = builtins.slice(start, end).indices(a.shape[d])
    return _C.slice(a, d, begin, max(begin, stop), step)


def _copy_form(name, view, signature=None):
    """torch.NAME: the view op `view` whose results are new tensors (clones, with the view's gradient) rather
    than views of input."""
    import inspect

    def fn(*args, **kwargs):
        out = view(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_C.clone(t) for t in out)
        return _C.clone(out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name[:-5]}, returning a new tensor (a copy) instead of a view."
    try:
        params = list((signature or inspect.signature(view)).parameters.values())
        if params and params[0].name == "self":
            params[0] = params[0].replace(name="input")
        fn.__signature__ = inspect.Signature(params)
    except (TypeError, ValueError):
        pass
    return fn


def _copy_forms():
    import inspect
    P = inspect.Parameter

    def sig(*names):
        return inspect.Signature([P(n, P.POSITIONAL_OR_KEYWORD) if "=" not in n else
                                  P(n.split("=")[0], P.POSITIONAL_OR_KEYWORD, default=eval(n.split("=")[1]))
                                  for n in names])
    forms = {
        "as_strided_copy": (as_strided, None),
        "diagonal_copy": (diagonal, None),
        "expand_copy": (lambda input, size, *, implicit=False: expand(tensor_arg(input, "expand_copy"),
                                                                             *_sizes(size)),
                        None),
        "permute_copy": (permute, None),
        "select_copy": (select, None),
        "slice_copy": (_slice, None),
        "squeeze_copy": (squeeze, None),
        "t_copy": (t, None),
        "transpose_copy": (transpose, None),
        "unbind_copy": (unbind, None),
        "unfold_copy": (lambda input, dimension, size, step: unfold(tensor_arg(input, "unfold_copy"),
                                                                          dimension, size, step),
                        sig("input", "dimension", "size", "step")),
        "unsqueeze_copy": (unsqueeze, None),
        "view_copy": (lambda input, size: view(tensor_arg(input, "view_copy"), size), sig("input", "size")),
        "split_copy": (split, sig("input", "split_size", "dim=0")),
        "split_with_sizes_copy": (split_with_sizes, None),
        "detach_copy": (lambda input: tensor_arg(input, "detach_copy").detach(), sig("input")),
        "alias_copy": (lambda input: tensor_arg(input, "alias_copy"), sig("input")),
        "narrow_copy": (narrow, None),
    }
    out = {}
    for name, (view_fn, signature) in forms.items():
        if signature is None and view_fn.__name__ == "<lambda>":
            signature = inspect.signature(view_fn)
        out[name] = _copy_form(name, view_fn, signature)
    return out


def _sizes(size):
    return tuple(size) if isinstance(size, (tuple, list)) else (size,)


COPY_FORMS = _copy_forms()


def narrow_copy_method(self, dim, start, length):
    return COPY_FORMS["narrow_copy"](self, dim, start, length)
