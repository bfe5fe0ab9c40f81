"""Shapes and indexing (issue 10, "The PyTorch op surface"): flips, rolls, repeats, triangles and diagonals, the
split/stack/grid family, the scatter/index/mask family, searches, views and the in-place view methods.

Three tables, each run on both engines:
- OPS: rows as in test_ops.py (forward vs numpy, float64 gradients vs central differences, float32, non-contiguous
  inputs) and, where torch is installed, the same rows against torch 2.13 (values and gradients);
- CALLS: one call each, run on torch and on both engines; the outcome must be torch's: the same values, shape and
  dtype, or the same exception type, and a UserWarning exactly where torch warns (odd arguments, 0-d and empty
  tensors, negative indices, dtype rules);
- VIEWS: results that share memory with their input exactly where torch's do (checked by writing through them).
"""
import math
import warnings

import numpy as np
import pytest

from helpers import Ints, Mask, as_spec, check_gradgrad, check_op, check_torch, differentiable, draw_inputs, \
    seed_of
from test_ops import Op

try:
    import torch
except ImportError:        # the CALLS table then checks the two engines against each other only
    torch = None


# ---- inputs shared by the tables ----

def t(m, data, dtype=None):
    """A tensor of `data` on module m (torch or an engine); float data is float64 unless dtype says otherwise."""
    arr = np.asarray(data)
    if dtype is not None:
        arr = arr.astype(dtype)
    return m.tensor(arr)


def x34(m, dtype="float64"):
    return t(m, np.arange(12.0).reshape(3, 4), dtype)


def i64(m, data):
    return t(m, np.asarray(data, dtype=np.int64))


def first(n):
    return lambda a: a[:n]


# ---- numpy oracles ----

def np_repeat_interleave(a, reps, dim=None):
    if dim is None:
        return np.repeat(a.reshape(-1), reps)
    return np.repeat(a, reps, axis=dim)


def np_scatter(a, dim, index, src):
    out = a.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] = src[pos]
    return out


def np_scatter_reduce(a, dim, index, src, reduce, include_self=True):
    groups = {}
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        groups.setdefault(tuple(target), []).append(src[pos])
    out = a.copy()
    for target, vals in groups.items():
        vals = ([a[target]] if include_self else []) + vals
        out[target] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vals)
    return out


def np_index_add(a, dim, index, src, alpha=1):
    out = a.copy()
    for k, i in enumerate(index):
        sl = [slice(None)] * a.ndim
        sl[dim] = i
        sk = [slice(None)] * a.ndim
        sk[dim] = k
        out[tuple(sl)] += alpha * src[tuple(sk)]
    return out


def np_masked_scatter(a, mask, src):
    out = np.broadcast_to(a, np.broadcast_shapes(a.shape, mask.shape)).copy()
    m = np.broadcast_to(mask, out.shape)
    out[m] = src.reshape(-1)[:int(m.sum())]
    return out


def np_cdist(a, b, p):
    d = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1).astype(a.dtype)
    if math.isinf(p):
        return d.max(-1)
    return (d ** p).sum(-1) ** (1 / p)


def np_unfold(a, dim, size, step):
    dim = dim % a.ndim
    n = a.shape[dim]
    windows = [np.take(a, range(s, s + size), axis=dim) for s in range(0, n - size + 1, step)]
    return np.moveaxis(np.stack(windows, axis=dim), dim + 1, -1)


def np_trapezoid(y, x=None, dx=1.0, axis=-1):
    return np.trapezoid(y, x, dx, axis) if hasattr(np, "trapezoid") else np.trapz(y, x, dx, axis)


def np_block_diag(*blocks):
    blocks = [np.atleast_2d(b) for b in blocks]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r:r + b.shape[0], c:c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def np_diag_embed(a, offset=0, dim1=-2, dim2=-1):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n))
    idx = np.arange(a.shape[-1])
    out[..., idx + max(-offset, 0), idx + max(offset, 0)] = a
    return np.moveaxis(out, (-2, -1), (dim1, dim2))


def inplace(method, *args, **kwargs):
    """y = x.clone(); y.method(*others, *args): the in-place op recorded on the clone's history."""
    def fn(m, x, *others):
        y = x.clone()
        getattr(y, method)(*others, *args, **kwargs)
        return y
    return fn


IDX24 = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])           # duplicates: positions written twice
PERM24 = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])
SCATTER_UNIQUE = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])   # distinct targets per column: [0,2], [1,0], [2,1], [0,1]

OPS = [
    # ---- reordering and repeating ----
    Op("flip", lambda m, a: m.flip(a, (0, 2)), lambda a: a[::-1, :, ::-1], [[(2, 3, 4)], [(0, 3, 2)]],
       int_cases=[[Ints((2, 3, 2), 0, 9)]], gradgrad=True),
    Op("flip_method_neg", lambda m, a: a.flip([-1]), lambda a: a[..., ::-1], [[(3, 4)]]),
    Op("flip_0d", lambda m, a: m.flip(a, (0,)), lambda a: a, [[()]]),
    Op("fliplr", lambda m, a: m.fliplr(a), np.fliplr, [[(3, 4)]]),
    Op("flipud", lambda m, a: a.flipud(), np.flipud, [[(3, 4)]]),
    Op("roll", lambda m, a: m.roll(a, 1), lambda a: np.roll(a, 1), [[(3, 4)], [()]]),
    Op("roll_dims", lambda m, a: a.roll((2, -1), (1, 0)), lambda a: np.roll(a, (2, -1), (1, 0)), [[(3, 4)]],
       int_cases=[[Ints((3, 4), 0, 9)]]),
    Op("rot90", lambda m, a: m.rot90(a), np.rot90, [[(3, 4)], [(2, 3, 4)]], gradgrad=True),
    Op("rot90_k", lambda m, a: a.rot90(-3, [2, 0]), lambda a: np.rot90(a, -3, (2, 0)), [[(2, 3, 4)]]),
    Op("rot90_k2", lambda m, a: m.rot90(a, 2, (1, 0)), lambda a: np.rot90(a, 2, (1, 0)), [[(3, 4)]]),
    Op("repeat", lambda m, a: a.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [[(3, 4)], [(0, 2)]],
       int_cases=[[Ints((3,), 0, 5)]], gradgrad=True),
    Op("repeat_tuple", lambda m, a: a.repeat((2, 2)), lambda a: np.tile(a, (2, 2)), [[(3,)], [()]]),
    Op("tile", lambda m, a: m.tile(a, (2,)), lambda a: np.tile(a, (1, 2)), [[(3, 4)]]),
    Op("tile_more", lambda m, a: a.tile((2, 1, 2)), lambda a: np.tile(a, (2, 1, 2)), [[(3, 4)]]),
    Op("repeat_interleave", lambda m, a: m.repeat_interleave(a, 2), lambda a: np_repeat_interleave(a, 2),
       [[(3, 4)], [()]], gradgrad=True),
    Op("repeat_interleave_dim", lambda m, a: a.repeat_interleave(3, dim=1), lambda a: np.repeat(a, 3, 1),
       [[(3, 4)]]),
    Op("repeat_interleave_tensor", lambda m, a, r: m.repeat_interleave(a, r, dim=0, output_size=5),
       lambda a, r: np.repeat(a, r, 0), [[(3, 4), np.array([2, 0, 3])]]),
    Op("unfold", lambda m, a: a.unfold(1, 2, 1), lambda a: np_unfold(a, 1, 2, 1), [[(3, 5)], [(2, 3, 4)]],
       gradgrad=True),
    Op("unfold_disjoint", lambda m, a: a.unfold(0, 2, 3), lambda a: np_unfold(a, 0, 2, 3), [[(7, 3)], [(6,)]]),
    Op("unfold_gap_at_end", lambda m, a: a.unfold(-1, 2, 3), lambda a: np_unfold(a, -1, 2, 3), [[(3, 4)]]),
    Op("as_strided", lambda m, a: m.as_strided(a, (3, 3), (1, 3), 1), lambda a: np.lib.stride_tricks.as_strided(
        a.reshape(-1)[1:], (3, 3), (8, 24)), [[(3, 4)]], noncontig=False),
    Op("as_strided_overlap", lambda m, a: a.as_strided((4, 2), (2, 1)), lambda a: np.lib.stride_tricks.as_strided(
        a.reshape(-1), (4, 2), (16, 8)), [[(10,)]], noncontig=False),

    # ---- triangles and diagonals ----
    Op("tril", lambda m, a: m.tril(a), np.tril, [[(4, 3)], [(2, 3, 4)], [(0, 3)]], int_cases=[[Ints((3, 3), 0, 9)]],
       gradgrad=True),
    Op("tril_k", lambda m, a: a.tril(diagonal=-1), lambda a: np.tril(a, -1), [[(3, 4)]]),
    Op("triu", lambda m, a: m.triu(a, 1), lambda a: np.triu(a, 1), [[(4, 3)], [(2, 3, 4)]]),
    Op("tril_", inplace("tril_", 1), lambda a: np.tril(a, 1), [[(3, 4)]]),
    Op("triu_", inplace("triu_"), np.triu, [[(3, 4)]]),
    Op("diag_vector", lambda m, a: m.diag(a), np.diag, [[(3,)], [(0,)]], gradgrad=True),
    Op("diag_vector_k", lambda m, a: a.diag(-2), lambda a: np.diag(a, -2), [[(3,)]]),
    Op("diag_matrix", lambda m, a: m.diag(a, 1), lambda a: np.diag(a, 1), [[(3, 4)], [(4, 3)]]),
    Op("diagonal", lambda m, a: m.diagonal(a), lambda a: np.diagonal(a).copy(), [[(3, 4)], [(4, 3)]],
       gradgrad=True),
    Op("diagonal_offset", lambda m, a: a.diagonal(-1, 0, 2), lambda a: np.diagonal(a, -1, 0, 2).copy(),
       [[(3, 2, 4)], [(4, 2, 3)]]),
    Op("diagonal_reversed_dims", lambda m, a: a.diagonal(1, -1, 0), lambda a: np.diagonal(a, 1, -1, 0).copy(),
       [[(3, 4)], [(2, 3, 4)]]),
    Op("diagonal_empty", lambda m, a: a.diagonal(5), lambda a: np.diagonal(a, 5).copy(), [[(3, 4)]]),
    Op("diag_embed", lambda m, a: m.diag_embed(a), np_diag_embed, [[(2, 3)], [(3,)]], gradgrad=True),
    Op("diag_embed_dims", lambda m, a: a.diag_embed(1, 0, 2), lambda a: np_diag_embed(a, 1, 0, 2), [[(2, 3)]]),
    Op("diag_embed_dims_reversed", lambda m, a: a.diag_embed(-1, 2, 0), lambda a: np_diag_embed(a, -1, 2, 0),
       [[(2, 3)]]),
    Op("diagflat", lambda m, a: m.diagflat(a, -1), lambda a: np.diagflat(a, -1), [[(2, 2)], [()]]),
    Op("diagonal_scatter", lambda m, a, s: m.diagonal_scatter(a, s, 1),
       lambda a, s: _np_set(a, (np.arange(3), np.arange(3) + 1), s), [[(3, 4), (3,)]], gradgrad=True),
    Op("select_scatter", lambda m, a, s: m.select_scatter(a, s, 1, -1), lambda a, s: _np_set(a, (slice(None), -1), s),
       [[(3, 4), (3,)]]),
    Op("slice_scatter", lambda m, a, s: a.slice_scatter(s, 1, 0, None, 2),
       lambda a, s: _np_set(a, (slice(None), slice(0, None, 2)), s), [[(3, 4), (3, 2)]]),
    Op("slice_scatter_default", lambda m, a, s: m.slice_scatter(a, s), lambda a, s: s.copy(), [[(3, 4), (3, 4)]]),

    # ---- views and stacks ----
    Op("movedim", lambda m, a: m.movedim(a, (0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0)),
       [[(2, 3, 4)]]),
    Op("moveaxis", lambda m, a: a.moveaxis(-1, 0), lambda a: np.moveaxis(a, -1, 0), [[(2, 3, 4)]]),
    Op("swapdims", lambda m, a: m.swapdims(a, 0, 2), lambda a: np.swapaxes(a, 0, 2), [[(2, 3, 4)]]),
    Op("swapaxes", lambda m, a: a.swapaxes(axis0=-1, axis1=0), lambda a: np.swapaxes(a, -1, 0), [[(3, 4)]]),
    Op("unflatten", lambda m, a: m.unflatten(a, 1, (2, -1)), lambda a: a.reshape(3, 2, 2), [[(3, 4)]]),
    Op("ravel", lambda m, a: a.ravel(), np.ravel, [[(3, 4)], [()]]),
    Op("narrow_negative_start", lambda m, a: a.narrow(1, -3, 2), lambda a: a[:, 1:3], [[(3, 4)]]),
    Op("tensor_split", lambda m, a: m.tensor_split(a, 3, dim=1), lambda a: tuple(np.array_split(a, 3, 1)),
       [[(2, 7)]]),
    Op("tensor_split_indices", lambda m, a: a.tensor_split([1, 5, -2]), lambda a: tuple(np.split(a, [1, 5, 5])),
       [[(7, 2)]]),
    Op("hsplit", lambda m, a: m.hsplit(a, [1]), lambda a: tuple(np.hsplit(a, [1])), [[(3, 4)]]),
    Op("vsplit", lambda m, a: a.vsplit(3), lambda a: tuple(np.vsplit(a, 3)), [[(3, 4)]]),
    Op("dsplit", lambda m, a: m.dsplit(a, 2), lambda a: tuple(np.dsplit(a, 2)), [[(2, 3, 4)]]),
    Op("hstack", lambda m, a, b: m.hstack([a, b]), lambda a, b: np.hstack([a, b]), [[(3, 4), (3, 2)], [(3,), ()]]),
    Op("vstack", lambda m, a, b: m.vstack((a, b)), lambda a, b: np.vstack([a, b]), [[(3, 4), (4,)]]),
    Op("row_stack", lambda m, a, b: m.row_stack((a, b)), lambda a, b: np.vstack([a, b]), [[(2, 3), (3,)]],
       torch=False),     # torch's row_stack warns that it is deprecated
    Op("dstack", lambda m, a, b: m.dstack([a, b]), lambda a, b: np.dstack([a, b]), [[(3, 4), (3, 4)], [(3,), (3,)]]),
    Op("column_stack", lambda m, a, b, c: m.column_stack([a, b, c]), lambda a, b, c: np.column_stack([a, b, c]),
       [[(3,), (3, 2), (3,)]]),
    Op("atleast_3d", lambda m, a, b, c: m.atleast_3d(a, b, c), lambda a, b, c: tuple(np.atleast_3d(a, b, c)),
       [[(), (3,), (2, 3)]]),
    Op("atleast_2d", lambda m, a: m.atleast_2d(a), np.atleast_2d, [[(3,)], [()]]),
    Op("meshgrid_ij", lambda m, a, b: m.meshgrid(a, b, indexing="ij"),
       lambda a, b: tuple(np.meshgrid(a, b, indexing="ij")), [[(3,), (2,)]]),
    Op("meshgrid_xy", lambda m, a, b, c: m.meshgrid([a, b, c], indexing="xy"), lambda a, b, c: tuple(np.meshgrid(
        a, b, c, indexing="xy")), [[(3,), (2,), (4,)]]),
    Op("broadcast_tensors", lambda m, a, b: m.broadcast_tensors(a, b),
       lambda a, b: tuple(np.broadcast_arrays(a, b)), [[(3, 1), (4,)]]),
    Op("cartesian_prod", lambda m, a, b: m.cartesian_prod(a, b),
       lambda a, b: np.stack([g.reshape(-1) for g in np.meshgrid(a, b, indexing="ij")], 1), [[(3,), (2,)]]),
    Op("combinations", lambda m, a: m.combinations(a), lambda a: np.array(list(__import__("itertools").combinations(
        a, 2))), [[(4,)]]),
    Op("combinations_replacement", lambda m, a: m.combinations(a, 3, with_replacement=True),
       lambda a: np.array(list(__import__("itertools").combinations_with_replacement(a, 3))), [[(3,)]]),
    Op("block_diag", lambda m, a, b, c: m.block_diag(a, b, c), np_block_diag, [[(2, 2), (), (3,)]], gradgrad=True),

    # ---- gathers and scatters ----
    Op("take_along_dim", lambda m, a, i: m.take_along_dim(a, i, 1), lambda a, i: np.take_along_axis(a, i, 1),
       [[(3, 4), np.array([[0, -1], [2, 3], [1, 1]])]], gradgrad=True),
    Op("take_along_dim_broadcast", lambda m, a, i: a.take_along_dim(i, 0),
       lambda a, i: np.take_along_axis(np.broadcast_to(a, (3, 4)), i, 0),
       [[(3, 1), np.array([[0, 1, 2, 0], [2, 2, 1, 0]])]]),
    Op("take_along_dim_flat", lambda m, a, i: m.take_along_dim(a, i), lambda a, i: a.reshape(-1)[i.reshape(-1)],
       [[(3, 4), np.array([[0, 11], [5, 5]])]]),
    Op("scatter", lambda m, a, s: m.scatter(a, 0, t(m, SCATTER_UNIQUE), s),
       lambda a, s: np_scatter(a, 0, SCATTER_UNIQUE, s), [[(3, 4), (2, 4)]], gradgrad=True),
    Op("scatter_larger_src", lambda m, a, s: m.scatter(a, 0, t(m, SCATTER_UNIQUE), s),
       lambda a, s: np_scatter(a, 0, SCATTER_UNIQUE, s), [[(3, 4), (3, 5)]], torch=False),  # torch: no gradient
    Op("scatter_dim1", lambda m, a, s: a.scatter(1, t(m, np.array([[3, 0], [1, 2], [0, 3]])), s),
       lambda a, s: np_scatter(a, 1, np.array([[3, 0], [1, 2], [0, 3]]), s), [[(3, 4), (3, 2)]]),
    Op("scatter_value", lambda m, a: m.scatter(a, 0, t(m, SCATTER_UNIQUE), 2.5),
       lambda a: np_scatter(a, 0, SCATTER_UNIQUE, np.full((2, 4), 2.5)), [[(3, 4)]]),
    Op("scatter_", lambda m, a, i: a.clone().scatter_(1, i, value=-1.0),
       lambda a, i: np_scatter(a, 1, i, np.full(i.shape, -1.0)),
       [[(3, 4), np.array([[1], [3], [0]])]], torch=False),
    Op("scatter_add", lambda m, a, s: m.scatter_add(a, 0, t(m, IDX24), s),
       lambda a, s: np_scatter_reduce(a, 0, IDX24, s, "sum"), [[(3, 4), (2, 4)]], gradgrad=True),
    Op("scatter_add_larger_src", lambda m, a, s: a.scatter_add(0, t(m, IDX24), s),
       lambda a, s: np_scatter_reduce(a, 0, IDX24, s, "sum"), [[(3, 4), (3, 5)]], torch=False),  # torch: no gradient
    *[Op(f"scatter_reduce_{red}{'' if inc else '_exclude'}",
         lambda m, a, s, red=red, inc=inc: m.scatter_reduce(a, 0, t(m, IDX24), s, red, include_self=inc),
         lambda a, s, red=red, inc=inc: np_scatter_reduce(a, 0, IDX24, s[:2], red, inc), [[(3, 4), (2, 4)]],
         gradgrad=red in ("prod", "amax"), int_cases=[[Ints((3, 4), 1, 9), Ints((2, 4), 1, 9)]] if red != "mean"
         else [])
      for red in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)],
    Op("scatter_reduce_larger_src", lambda m, a, s: a.scatter_reduce(1, t(m, np.array([[0, 0], [2, 1]])), s, "amax"),
       lambda a, s: np_scatter_reduce(a, 1, np.array([[0, 0], [2, 1]]), s, "amax"), [[(3, 4), (3, 3)]],
       torch=False),        # torch computes no gradient for a src larger than index
    Op("index_put", lambda m, a, v: m.index_put(a, (t(m, [0, 2]), t(m, [3, 1])), v),
       lambda a, v: _np_set(a, ([0, 2], [3, 1]), v), [[(3, 4), (2,)], [(3, 4), ()]], gradgrad=True),
    Op("index_put_mask", lambda m, a, k, v: a.index_put((k,), v), lambda a, k, v: _np_set(a, k, v),
       [[(3, 4), Mask((3, 4)), ()]]),
    Op("index_put_accumulate", lambda m, a, v: a.index_put([t(m, [0, 0, 2])], v, accumulate=True),
       lambda a, v: _np_add_at(a, [0, 0, 2], v), [[(3, 4), (3, 4)], [(3, 4), (4,)]]),
    Op("index_put_", lambda m, a, i, v: a.clone().index_put_((i,), v, accumulate=True),
       lambda a, i, v: _np_add_at(a, (i,), v),
       [[(3, 4), np.array([2, 2]), (4,)]], torch=False),
    Op("index_fill", lambda m, a: m.index_fill(a, 1, t(m, [0, -1]), -2.0), lambda a: _np_set(a, (slice(None), [0, -1]),
                                                                                          -2.0), [[(3, 4)]]),
    Op("index_fill_tensor", lambda m, a, v: a.index_fill(0, t(m, [1]), v), lambda a, v: _np_set(a, [1], v),
       [[(3, 4), ()]]),
    Op("index_copy", lambda m, a, s: m.index_copy(a, 1, t(m, [3, 0]), s),
       lambda a, s: _np_set(a, (slice(None), [3, 0]), s), [[(3, 4), (3, 2)]], gradgrad=True),
    Op("index_add", lambda m, a, s: m.index_add(a, 0, t(m, [2, 0, 2]), s, alpha=0.5),
       lambda a, s: np_index_add(a, 0, [2, 0, 2], s, 0.5), [[(3, 4), (3, 4)]], gradgrad=True),
    Op("index_add_int", lambda m, a, s: m.index_add(a, 1, t(m, [2, 0, 2]), s),
       lambda a, s: np_index_add(a, 1, [2, 0, 2], s),
       [], int_cases=[[Ints((3, 4), 0, 9), Ints((3, 3), 0, 9)]]),
    Op("index_add_", lambda m, a, i, s: a.clone().index_add_(1, i, s, alpha=2),
       lambda a, i, s: np_index_add(a, 1, i, s, 2),
       [[(3, 4), np.array([1, 1]), (3, 2)]], torch=False),
    Op("masked_select", lambda m, a, k: m.masked_select(a, k), lambda a, k: a[k], [[(3, 4), Mask((3, 4))],
                                                                                   [(), Mask(())]], gradgrad=True),
    Op("masked_select_broadcast", lambda m, a, k: a.masked_select(k),
       lambda a, k: np.broadcast_to(a, (2, 3))[np.broadcast_to(k, (2, 3))], [[(3,), Mask((2, 1))]]),
    Op("masked_scatter", lambda m, a, k, s: m.masked_scatter(a, k, s), np_masked_scatter,
       [[(3, 4), Mask((3, 4)), (12,)], [(4,), Mask((2, 4)), (3, 4)]], gradgrad=True),
    Op("masked_scatter_", inplace("masked_scatter_"), np_masked_scatter, [[(3, 4), Mask((4,)), (3, 4)]], torch=False),
    Op("masked_fill_broadcast", lambda m, a, k: m.masked_fill(a, k, -1.0), lambda a, k: np.where(k, -1.0, a),
       [[(4,), Mask((2, 4))]]),
    Op("masked_fill_tensor_value", lambda m, a, k, v: a.masked_fill(k, v), lambda a, k, v: np.where(k, v, a),
       [[(3, 4), Mask((3, 1)), ()]]),

    # ---- distances and integrals ----
    *[Op(f"cdist_p{p}", lambda m, a, b, p=p: m.cdist(a, b, p=p), lambda a, b, p=p: np_cdist(a, b, p),
         [[(3, 2), (4, 2)], [(2, 3, 2), (1, 4, 2)]], away_from=(0.0,), gradgrad=p == 2)
      for p in (0.0, 0.5, 1.0, 2.0, 3.0, math.inf)],
    Op("trapezoid", lambda m, y: m.trapezoid(y), lambda y: np_trapezoid(y), [[(3, 4)], [(5,)], [(3, 1)]],
       int_cases=[[Ints((4,), 0, 9)]]),
    Op("trapezoid_empty", lambda m, y: m.trapezoid(y), lambda y: np_trapezoid(y), [[(3, 0)]], grad=False),
    Op("trapezoid_dx", lambda m, y: m.trapezoid(y, dx=0.5, dim=0), lambda y: np_trapezoid(y, dx=0.5, axis=0),
       [[(3, 4)]]),
    Op("trapezoid_x", lambda m, y, x: m.trapezoid(y, x, dim=0), lambda y, x: np_trapezoid(y, x, axis=0),
       [[(3, 4), (3,)], [(3, 4), (3, 4)], [(3, 4), (3, 1)]]),
    Op("trapz", lambda m, y, x: m.trapz(y, x), lambda y, x: np_trapezoid(y, x), [[(3, 4), (4,)]]),

    # ---- in-place view methods (on a clone's history) ----
    Op("t_", lambda m, a: a.clone().t_() * 1, lambda a: a.T, [[(3, 4)]], gradgrad=True),
    Op("unsqueeze_", lambda m, a: a.clone().unsqueeze_(1), lambda a: a[:, None], [[(3, 4)]]),
    Op("squeeze_", lambda m, a: a.clone().squeeze_(), np.squeeze, [[(3, 1, 4)]]),
    Op("transpose_", lambda m, a: a.clone().transpose_(0, 2), lambda a: np.swapaxes(a, 0, 2), [[(2, 3, 4)]]),
    Op("swapdims_", lambda m, a: a.clone().swapdims_(-1, 0), lambda a: np.swapaxes(a, -1, 0), [[(3, 4)]]),
    Op("swapaxes_", lambda m, a: a.clone().swapaxes_(1, 0), lambda a: a.T, [[(3, 4)]]),

    # ---- indexing with lists (torch's rule for a list holding sequences) ----
    Op("getitem_nested_list_is_a_tuple", lambda m, a: _quiet(lambda: a[[[0, 1], [1, 2]]]), lambda a: a[[0, 1], [1, 2]],
       [[(3, 4)]]),
    Op("getitem_list_of_slice_and_int", lambda m, a: _quiet(lambda: a[[slice(0, 2), 1]]), lambda a: a[0:2, 1],
       [[(3, 4)]]),
    Op("getitem_32_lists_is_a_tensor", lambda m, a: a[[[0, 1]] * 32], lambda a: a[np.array([[0, 1]] * 32)],
       [[(3,)]]),
    Op("getitem_negative_tensor", lambda m, a, i: a[i], lambda a, i: a[i], [[(3, 4), np.array([-1, -3, 2])]]),
]


def _np_set(a, idx, v):
    out = a.copy()
    out[idx] = v
    return out


def _np_add_at(a, idx, v):
    out = a.copy()
    np.add.at(out, idx, v)
    return out


def _quiet(call):
    """A call torch answers with its deprecation warning (the CALLS table checks that both engines warn too)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return call()


OPS_BY_NAME = {op.name: op for op in OPS}
assert len(OPS_BY_NAME) == len(OPS), "duplicate op names in the table"

FLOAT_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))]
INT_CASES = [pytest.param(op, i, id=f"{op.name}-int{i}") for op in OPS for i in range(len(op.int_cases))]
GRADGRAD = [pytest.param(op, id=op.name) for op in OPS if op.gradgrad]
TORCH_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases)) if op.torch]


@pytest.mark.parametrize("op,case", FLOAT_CASES)
def test_op(dg, op, case):
    check_op(dg, op.cases[case], op.fn, op.np_fn, name=op.name, grad=op.grad, noncontig=op.noncontig, **op.check)


@pytest.mark.parametrize("op,case", INT_CASES)
def test_op_int(dg, op, case):
    check_op(dg, op.int_cases[case], op.fn, op.np_fn, name=op.name, grad=False, dtypes=("float32",),
             out_dtype="float32", noncontig=False)


@pytest.mark.parametrize("op", GRADGRAD)
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], op.fn, name=op.name, **{k: v for k, v in op.check.items()
                                                             if k in ("low", "high", "away_from")})


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("op,case", TORCH_CASES)
def test_op_matches_torch(dg, op, case):
    specs = [as_spec(s, op.check.get("low"), op.check.get("high"), op.check.get("away_from", ()))
             for s in op.cases[case]]
    arrays = draw_inputs(specs, seed_of(op.name, op.cases[case]))
    diff = differentiable(specs, arrays) if op.grad else []
    check_torch(dg, op.fn, arrays, diff, name=op.name)


# ---- CALLS: one call each, the outcome (values or exception type, and whether a UserWarning came) is torch's ----

def _x(m):
    return x34(m)


def _e(m, *shape):
    return t(m, np.zeros(shape))


def _b(m, data):
    return t(m, np.asarray(data, dtype=bool))


CALLS = [
    # flips, rolls, repeats
    ("flip_int_dims", lambda m: m.flip(_x(m), 0)),
    ("flip_duplicate_dims", lambda m: m.flip(_x(m), (0, -2))),
    ("flip_dim_out_of_range", lambda m: m.flip(_x(m), (2,))),
    ("flip_no_dims", lambda m: m.flip(_x(m), ())),
    ("flip_0d", lambda m: m.flip(t(m, 1.5), (-1,))),
    ("flip_bool", lambda m: m.flip(_b(m, [True, False, False]), (0,))),
    ("fliplr_1d", lambda m: m.fliplr(_x(m)[0])),
    ("flipud_0d", lambda m: m.flipud(t(m, 1.0))),
    ("roll_flat", lambda m: m.roll(_x(m), -5)),
    ("roll_two_shifts_no_dims", lambda m: m.roll(_x(m), (1, 2))),
    ("roll_misaligned", lambda m: m.roll(_x(m), (1, 2), (0,))),
    ("roll_0d", lambda m: m.roll(t(m, 2.0), 3)),
    ("roll_0d_dim", lambda m: m.roll(t(m, 2.0), 1, 0)),
    ("roll_empty", lambda m: m.roll(_e(m, 0, 3), 1, 0)),
    ("roll_same_dim_twice", lambda m: m.roll(_x(m), (1, 2), (1, 1))),
    ("rot90_1d", lambda m: m.rot90(_x(m)[0])),
    ("rot90_same_dims", lambda m: m.rot90(_x(m), 1, (0, 0))),
    ("rot90_three_dims", lambda m: m.rot90(_x(m), 1, (0, 1, 1))),
    ("rot90_dim_out_of_range", lambda m: m.rot90(_x(m), 1, (0, 2))),
    ("rot90_k0_copy", lambda m: m.rot90(_x(m), 4)),
    ("repeat_too_few", lambda m: _x(m).repeat(2)),
    ("repeat_negative", lambda m: _x(m).repeat(2, -1)),
    ("repeat_nothing", lambda m: _x(m).repeat()),
    ("repeat_zero", lambda m: _x(m).repeat(0, 2)),
    ("repeat_0d", lambda m: t(m, 3.0).repeat(2, 2)),
    ("tile_int", lambda m: m.tile(_x(m), 2)),
    ("tile_negative", lambda m: m.tile(_x(m), (-1,))),
    ("tile_0d", lambda m: m.tile(t(m, 3.0), (2,))),
    ("repeat_interleave_negative", lambda m: m.repeat_interleave(_x(m), -1)),
    ("repeat_interleave_counts", lambda m: m.repeat_interleave(_x(m), i64(m, [1, 2, 0]), dim=0)),
    ("repeat_interleave_counts_length", lambda m: m.repeat_interleave(_x(m), i64(m, [1, 2]), dim=0)),
    ("repeat_interleave_one_count", lambda m: m.repeat_interleave(_x(m), i64(m, [2]), dim=1)),
    ("repeat_interleave_0d_count", lambda m: m.repeat_interleave(_x(m), i64(m, 2), dim=1)),
    ("repeat_interleave_float_counts", lambda m: m.repeat_interleave(_x(m), t(m, [1.0, 2.0, 0.0]), dim=0)),
    ("repeat_interleave_2d_counts", lambda m: m.repeat_interleave(_x(m), i64(m, [[1, 2, 0]]), dim=0)),
    ("repeat_interleave_counts_alone", lambda m: m.repeat_interleave(i64(m, [1, 2, 0]))),
    ("repeat_interleave_counts_alone_2d", lambda m: m.repeat_interleave(i64(m, [[1, 2]]))),
    ("repeat_interleave_output_size", lambda m: m.repeat_interleave(_x(m), 2, dim=0, output_size=6)),
    ("repeat_interleave_wrong_output_size", lambda m: m.repeat_interleave(_x(m), 2, dim=0, output_size=5)),
    ("repeat_interleave_flat_counts", lambda m: m.repeat_interleave(_x(m), i64(m, [1, 2, 0]))),
    ("repeat_interleave_0d", lambda m: m.repeat_interleave(t(m, 3.0), 2)),
    ("repeat_interleave_0d_dim", lambda m: m.repeat_interleave(t(m, 3.0), 2, dim=0)),
    ("repeat_interleave_bad_dim", lambda m: _x(m).repeat_interleave(2, 2)),
    ("unfold", lambda m: _x(m).unfold(1, 2, 1)),
    ("unfold_0d", lambda m: t(m, 5.0).unfold(0, 1, 1)),
    ("unfold_0d_too_big", lambda m: t(m, 5.0).unfold(0, 2, 1)),
    ("unfold_too_big", lambda m: _x(m).unfold(1, 5, 1)),
    ("unfold_step_0", lambda m: _x(m).unfold(1, 2, 0)),
    ("unfold_size_0", lambda m: _x(m).unfold(1, 0, 1)),
    ("unfold_negative_size", lambda m: _x(m).unfold(1, -1, 1)),
    ("unfold_bad_dim", lambda m: _x(m).unfold(2, 1, 1)),
    ("as_strided", lambda m: m.as_strided(_x(m), (2, 2), (1, 2))),
    ("as_strided_offset", lambda m: _x(m).as_strided((2, 2), (1, 2), 3)),
    ("as_strided_of_a_view", lambda m: m.as_strided(_x(m)[1], (2,), (1,))),
    ("as_strided_of_a_transpose", lambda m: m.as_strided(_x(m).t(), (3,), (4,))),
    ("as_strided_mismatch", lambda m: m.as_strided(_x(m), (2, 2), (1,))),
    ("as_strided_negative_stride", lambda m: m.as_strided(_x(m), (2, 2), (-1, 1))),
    ("as_strided_out_of_storage", lambda m: m.as_strided(_x(m), (2, 2), (10, 2))),
    # triangles and diagonals
    ("tril_1d", lambda m: m.tril(_x(m)[0])),
    ("tril_bool", lambda m: m.tril(_x(m) > 3)),
    ("triu_int", lambda m: m.triu(i64(m, np.arange(12).reshape(3, 4)), -1)),
    ("triu_empty", lambda m: m.triu(_e(m, 2, 0, 3))),
    ("tril_indices", lambda m: m.tril_indices(3, 4, 1)),
    ("tril_indices_far", lambda m: m.tril_indices(3, 3, 10)),
    ("tril_indices_negative", lambda m: m.tril_indices(-1, 4)),
    ("tril_indices_float", lambda m: m.tril_indices(3, 3, dtype=m.float32)),
    ("tril_indices_empty", lambda m: m.tril_indices(0, 3)),
    ("triu_indices", lambda m: m.triu_indices(3, 4, -1)),
    ("triu_indices_far", lambda m: m.triu_indices(3, 3, -10)),
    ("triu_indices_beyond", lambda m: m.triu_indices(3, 3, 5)),
    ("diag_3d", lambda m: m.diag(_e(m, 2, 2, 2))),
    ("diag_0d", lambda m: m.diag(t(m, 1.0))),
    ("diag_far", lambda m: m.diag(_x(m), 10)),
    ("diag_bool", lambda m: m.diag(_b(m, [True, True]))),
    ("diagonal_same_dims", lambda m: m.diagonal(_x(m), 0, 1, 1)),
    ("diagonal_1d", lambda m: m.diagonal(_x(m)[0])),
    ("diagonal_far", lambda m: m.diagonal(_x(m), 5)),
    ("diagonal_far_negative", lambda m: m.diagonal(_x(m), -3)),
    ("diagonal_of_strided", lambda m: m.diagonal(_x(m)[:, ::2])),
    ("diag_embed_same_dims", lambda m: m.diag_embed(_e(m, 2, 3), 1, 0, 0)),
    ("diag_embed_0d", lambda m: m.diag_embed(t(m, 1.0))),
    ("diag_embed_int", lambda m: m.diag_embed(i64(m, [1, 2]))),
    ("diag_embed_dim_out_of_range", lambda m: m.diag_embed(_e(m, 2, 3), 0, 0, 3)),
    ("diagflat_0d", lambda m: m.diagflat(t(m, 2.0))),
    ("diagflat_empty", lambda m: m.diagflat(_e(m, 0), 2)),
    ("select_scatter", lambda m: m.select_scatter(_x(m), t(m, np.ones(4)), 0, 1)),
    ("select_scatter_negative", lambda m: m.select_scatter(_x(m), t(m, np.ones(3)), 1, -1)),
    ("select_scatter_shape", lambda m: m.select_scatter(_x(m), t(m, np.ones(3)), 0, 1)),
    ("select_scatter_out_of_range", lambda m: m.select_scatter(_x(m), t(m, np.ones(4)), 0, 3)),
    ("select_scatter_other_dtype", lambda m: m.select_scatter(_x(m), i64(m, [1, 2, 3, 4]), 0, 1)),
    ("select_scatter_0d", lambda m: m.select_scatter(t(m, 1.0), t(m, 2.0), 0, 0)),
    ("slice_scatter", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 2))), 1, 1, 3)),
    ("slice_scatter_step", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 2))), 1, 0, None, 2)),
    ("slice_scatter_negative", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 1))), 1, -1)),
    ("slice_scatter_shape", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 3))), 1, 1, 3)),
    ("slice_scatter_step_0", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 2))), 1, 0, None, 0)),
    ("slice_scatter_past_end", lambda m: m.slice_scatter(_x(m), t(m, np.ones((3, 0))), 1, 7, 9)),
    ("diagonal_scatter", lambda m: m.diagonal_scatter(_x(m), t(m, np.ones(3)), 1)),
    ("diagonal_scatter_shape", lambda m: m.diagonal_scatter(_x(m), t(m, np.ones(2)), 1)),
    ("diagonal_scatter_dims", lambda m: m.diagonal_scatter(_e(m, 2, 3, 4), t(m, np.ones((3, 2))), 0, 0, 2)),
    # views, splits, stacks, grids
    ("narrow_negative_start", lambda m: m.narrow(_x(m), 1, -2, 2)),
    ("narrow_past_end", lambda m: m.narrow(_x(m), 1, 2, 3)),
    ("narrow_start_out_of_range", lambda m: m.narrow(_x(m), 1, 5, 0)),
    ("narrow_start_at_end", lambda m: m.narrow(_x(m), 1, 4, 0)),
    ("narrow_start_below", lambda m: m.narrow(_x(m), 1, -5, 0)),
    ("narrow_negative_length", lambda m: m.narrow(_x(m), 1, 0, -1)),
    ("narrow_tensor_start", lambda m: _x(m).narrow(1, i64(m, 1), 2)),
    ("narrow_0d", lambda m: m.narrow(t(m, 1.0), 0, 0, 1)),
    ("movedim", lambda m: m.movedim(_e(m, 2, 3, 4), (0, 1), (2, 0)).shape),
    ("movedim_lengths", lambda m: m.movedim(_e(m, 2, 3, 4), (0, 1), (2,))),
    ("movedim_repeated_source", lambda m: m.movedim(_e(m, 2, 3, 4), (0, 0), (1, 2))),
    ("movedim_repeated_destination", lambda m: m.movedim(_e(m, 2, 3, 4), (0, 1), (2, 2))),
    ("movedim_out_of_range", lambda m: m.movedim(_e(m, 2, 3, 4), 3, 0)),
    ("movedim_0d", lambda m: m.movedim(t(m, 1.0), 0, -1)),
    ("moveaxis_list", lambda m: m.moveaxis(_e(m, 2, 3, 4), [0], [-1]).shape),
    ("swapaxes_keywords", lambda m: m.swapaxes(_x(m), axis0=0, axis1=1)),
    ("swapaxes_dim_keywords", lambda m: m.swapaxes(_x(m), dim0=0, dim1=1)),
    ("swapdims_keywords", lambda m: m.swapdims(_x(m), dim0=0, dim1=-1)),
    ("unflatten", lambda m: m.unflatten(_x(m), 1, (2, -1))),
    ("unflatten_empty_sizes", lambda m: m.unflatten(_x(m), 1, ())),
    ("unflatten_wrong_product", lambda m: m.unflatten(_x(m), 1, (3, 2))),
    ("unflatten_int_sizes", lambda m: m.unflatten(_x(m), 1, 4)),
    ("unflatten_two_unknown", lambda m: m.unflatten(_x(m), 1, (-1, -1))),
    ("unflatten_bad_dim", lambda m: _x(m).unflatten(2, (2, 2))),
    ("ravel_0d", lambda m: m.ravel(t(m, 1.0))),
    ("ravel_of_transpose", lambda m: _x(m).t().ravel()),
    ("broadcast_to_keyword", lambda m: m.broadcast_to(_x(m), size=(2, 3, 4)).shape),
    ("broadcast_to_method_varargs", lambda m: _x(m).broadcast_to(2, 3, 4).shape),
    ("broadcast_to_bad", lambda m: m.broadcast_to(_x(m), (3, 3))),
    ("broadcast_tensors", lambda m: m.broadcast_tensors(_e(m, 3, 1), _e(m, 4))),
    ("broadcast_tensors_bad", lambda m: m.broadcast_tensors(_e(m, 3), _e(m, 4))),
    ("broadcast_tensors_none", lambda m: m.broadcast_tensors()),
    ("broadcast_tensors_list", lambda m: m.broadcast_tensors([_e(m, 3, 1), _e(m, 4)])),
    ("broadcast_shapes", lambda m: m.broadcast_shapes((3, 1), (4,), 1, [1, 1])),
    ("broadcast_shapes_int", lambda m: m.broadcast_shapes((3, 4), 4)),
    ("broadcast_shapes_bad", lambda m: m.broadcast_shapes((3,), (4,))),
    ("broadcast_shapes_negative", lambda m: m.broadcast_shapes((-1,), (4,))),
    ("broadcast_shapes_none", lambda m: m.broadcast_shapes()),
    ("broadcast_shapes_tensor", lambda m: m.broadcast_shapes(_e(m, 3))),
    ("broadcast_shapes_zero", lambda m: m.broadcast_shapes((0,), (1,))),
    ("tensor_split_sections", lambda m: m.tensor_split(t(m, np.arange(7.0)), 3)),
    ("tensor_split_indices", lambda m: m.tensor_split(t(m, np.arange(7.0)), [1, 5, 3, 10])),
    ("tensor_split_negative_index", lambda m: m.tensor_split(t(m, np.arange(7.0)), (-2,))),
    ("tensor_split_zero", lambda m: m.tensor_split(t(m, np.arange(7.0)), 0)),
    ("tensor_split_tensor_sections", lambda m: m.tensor_split(t(m, np.arange(7.0)), i64(m, 2))),
    ("tensor_split_tensor_indices", lambda m: m.tensor_split(t(m, np.arange(7.0)), i64(m, [2, 4]))),
    ("tensor_split_float_tensor", lambda m: m.tensor_split(t(m, np.arange(7.0)), t(m, [2.0]))),
    ("tensor_split_2d_tensor", lambda m: m.tensor_split(t(m, np.arange(7.0)), i64(m, [[2]]))),
    ("tensor_split_0d", lambda m: m.tensor_split(t(m, 1.0), 2)),
    ("tensor_split_more_sections_than_elements", lambda m: m.tensor_split(t(m, [1.0, 2.0]), 5)),
    ("tensor_split_no_indices", lambda m: m.tensor_split(_x(m), [])),
    ("tensor_split_dim", lambda m: _x(m).tensor_split(3, dim=-1)),
    ("hsplit", lambda m: m.hsplit(_x(m), 2)),
    ("hsplit_uneven", lambda m: m.hsplit(_x(m), 3)),
    ("hsplit_1d", lambda m: m.hsplit(_x(m)[0], [1])),
    ("hsplit_0d", lambda m: m.hsplit(t(m, 1.0), 1)),
    ("vsplit_1d", lambda m: m.vsplit(_x(m)[0], 2)),
    ("vsplit_zero", lambda m: m.vsplit(_x(m), 0)),
    ("dsplit_2d", lambda m: m.dsplit(_x(m), 2)),
    ("split_sizes", lambda m: m.split(_x(m), [1, 3], 1)),
    ("split_sizes_wrong_sum", lambda m: m.split(_x(m), [1, 2], 1)),
    ("split_zero", lambda m: m.split(_x(m), 0, 1)),
    ("split_negative", lambda m: m.split(_x(m), -1)),
    ("split_bigger_than_dim", lambda m: _x(m).split(5)),
    ("split_0d", lambda m: m.split(t(m, 1.0), 1)),
    ("split_method_keyword", lambda m: _x(m).split(split_size=2, dim=1)),
    ("split_function_keyword", lambda m: m.split(_x(m), split_size_or_sections=[1, 2])),
    ("hstack_0d", lambda m: m.hstack([t(m, 1.0), t(m, 2.0)])),
    ("hstack_empty", lambda m: m.hstack([])),
    ("hstack_tensor", lambda m: m.hstack(_x(m))),
    ("hstack_promotes", lambda m: m.hstack([_x(m)[0], i64(m, [1, 2])])),
    ("vstack_1d", lambda m: m.vstack([_x(m)[0], _x(m)[1]])),
    ("dstack_1d", lambda m: m.dstack([_x(m)[0], _x(m)[1]])),
    ("column_stack", lambda m: m.column_stack([_x(m)[0], t(m, np.ones((4, 1))), t(m, 1.0).expand(4)])),
    ("column_stack_0d", lambda m: m.column_stack([t(m, 1.0), t(m, 2.0)])),
    ("column_stack_mismatch", lambda m: m.column_stack([_x(m)[0], _x(m)])),
    ("atleast_1d_0d", lambda m: m.atleast_1d(t(m, 1.0))),
    ("atleast_1d_several", lambda m: m.atleast_1d(_x(m), t(m, 1.0))),
    ("atleast_1d_list", lambda m: m.atleast_1d([_x(m), t(m, 1.0)])),
    ("atleast_1d_list_of_one", lambda m: m.atleast_1d([_x(m)])),
    ("atleast_1d_none", lambda m: m.atleast_1d()),
    ("atleast_1d_number", lambda m: m.atleast_1d(1.0)),
    ("atleast_2d_1d", lambda m: m.atleast_2d(_x(m)[0])),
    ("atleast_3d_1d", lambda m: m.atleast_3d(_x(m)[0])),
    ("atleast_3d_2d", lambda m: m.atleast_3d(_x(m))),
    ("atleast_3d_4d", lambda m: m.atleast_3d(_e(m, 1, 2, 1, 2))),
    ("meshgrid_default_indexing", lambda m: m.meshgrid(_e(m, 2), _e(m, 3))),
    ("meshgrid_xy", lambda m: [g.shape for g in m.meshgrid(_e(m, 2), _e(m, 3), _e(m, 4), indexing="xy")]),
    ("meshgrid_bad_indexing", lambda m: m.meshgrid(_e(m, 2), _e(m, 3), indexing="ab")),
    ("meshgrid_2d", lambda m: m.meshgrid(_e(m, 2, 2), _e(m, 3), indexing="ij")),
    ("meshgrid_0d", lambda m: m.meshgrid(t(m, 1.0), _e(m, 3), indexing="ij")),
    ("meshgrid_dtypes", lambda m: m.meshgrid(_e(m, 2), i64(m, [1, 2, 3]), indexing="ij")),
    ("meshgrid_list", lambda m: m.meshgrid([_e(m, 2), _e(m, 3)], indexing="ij")),
    ("meshgrid_none", lambda m: m.meshgrid(indexing="ij")),
    ("meshgrid_one_xy", lambda m: m.meshgrid(_x(m)[0], indexing="xy")),
    ("cartesian_prod", lambda m: m.cartesian_prod(i64(m, [1, 2]), i64(m, [3, 4, 5]))),
    ("cartesian_prod_one", lambda m: m.cartesian_prod(i64(m, [1, 2]))),
    ("cartesian_prod_2d", lambda m: m.cartesian_prod(i64(m, [[1, 2]]), i64(m, [3]))),
    ("cartesian_prod_0d", lambda m: m.cartesian_prod(i64(m, 1), i64(m, [3]))),
    ("cartesian_prod_dtypes", lambda m: m.cartesian_prod(t(m, [1.0]), i64(m, [3]))),
    ("cartesian_prod_none", lambda m: m.cartesian_prod()),
    ("cartesian_prod_list", lambda m: m.cartesian_prod([i64(m, [1])])),
    ("combinations", lambda m: m.combinations(i64(m, [1, 2, 3]))),
    ("combinations_replacement", lambda m: m.combinations(i64(m, [1, 2, 3]), 3, True)),
    ("combinations_r0", lambda m: m.combinations(i64(m, [1, 2, 3]), 0)),
    ("combinations_r_too_big", lambda m: m.combinations(i64(m, [1, 2, 3]), 4)),
    ("combinations_r_negative", lambda m: m.combinations(i64(m, [1, 2, 3]), -1)),
    ("combinations_2d", lambda m: m.combinations(_e(m, 2, 2))),
    ("combinations_r1", lambda m: m.combinations(i64(m, [1, 2, 3]), 1)),
    ("combinations_empty", lambda m: m.combinations(_e(m, 0))),
    ("block_diag", lambda m: m.block_diag(t(m, np.ones((2, 2))), t(m, 3.0), t(m, [4.0, 5.0]))),
    ("block_diag_none", lambda m: m.block_diag()),
    ("block_diag_3d", lambda m: m.block_diag(_e(m, 2, 2, 2))),
    ("block_diag_promotes", lambda m: m.block_diag(t(m, np.ones((1, 1))), i64(m, [[2]]))),
    ("block_diag_empty_blocks", lambda m: m.block_diag(_e(m, 0, 2), _e(m, 2, 0))),
    ("block_diag_list", lambda m: m.block_diag([_e(m, 1)])),
    ("block_diag_bool", lambda m: m.block_diag(_b(m, [[True]]), _b(m, [True, False]))),
    # gathers and scatters
    ("take_along_dim", lambda m: m.take_along_dim(_x(m), i64(m, [[0], [1], [2]]), 1)),
    ("take_along_dim_flat", lambda m: m.take_along_dim(_x(m), i64(m, [[0, 11]]))),
    ("take_along_dim_negative", lambda m: m.take_along_dim(_x(m), i64(m, [[-1]]), 1)),
    ("take_along_dim_flat_negative", lambda m: m.take_along_dim(_x(m), i64(m, [-1]))),
    ("take_along_dim_float", lambda m: m.take_along_dim(_x(m), t(m, [[0.0]]), 1)),
    ("take_along_dim_ndim", lambda m: m.take_along_dim(_x(m), i64(m, [0]), 1)),
    ("take_along_dim_broadcast", lambda m: m.take_along_dim(_e(m, 3, 1, 5), i64(m, np.zeros((1, 4, 2))), 2)),
    ("take_along_dim_broadcast_bad", lambda m: m.take_along_dim(_e(m, 3, 2), i64(m, np.zeros((1, 3))), 0)),
    ("scatter", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, SCATTER_UNIQUE[:1]), _x(m))),
    ("scatter_value", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, SCATTER_UNIQUE[:1]), 2.5)),
    ("scatter_value_keyword", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, SCATTER_UNIQUE[:1]), value=2.5)),
    ("scatter_src_keyword", lambda m: _e(m, 3, 4).scatter(0, i64(m, SCATTER_UNIQUE[:1]), src=_x(m))),
    ("scatter_float_value_into_int", lambda m: m.scatter(i64(m, np.zeros((3, 4))), 0, i64(m, [[0, 1]]), 2.7)),
    ("scatter_negative", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, [[-1]]), _x(m))),
    ("scatter_out_of_range", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, [[3]]), _x(m))),
    ("scatter_src_dtype", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, [[0]]), _x(m, "float32"))),
    ("scatter_float_index", lambda m: m.scatter(_e(m, 3, 4), 0, t(m, [[0.0]]), _x(m))),
    ("scatter_index_ndim", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, [0]), _x(m))),
    ("scatter_index_too_big", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, np.zeros((4, 4))), _x(m))),
    ("scatter_index_bigger_than_src", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, np.zeros((2, 4))), _e(m, 1, 4))),
    ("scatter_index_wider_than_input", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, np.zeros((1, 5))), _e(m, 3, 5))),
    ("scatter_reduce_add", lambda m: m.scatter(t(m, np.ones((3, 4))), 0, i64(m, IDX24), _x(m), reduce="add")),
    ("scatter_reduce_multiply", lambda m: m.scatter(t(m, np.full((3, 4), 2.0)), 0, i64(m, IDX24), _x(m),
                                                    reduce="multiply")),
    ("scatter_bad_reduce", lambda m: m.scatter(t(m, np.ones((3, 4))), 0, i64(m, IDX24), _x(m), reduce="max")),
    ("scatter_value_reduce", lambda m: m.scatter(t(m, np.full((3, 4), 2.0)), 0, i64(m, IDX24), 3.0,
                                                 reduce="multiply")),
    ("scatter_0d", lambda m: m.scatter(t(m, 1.0), 0, i64(m, 0), t(m, 5.0))),
    ("scatter_empty_index", lambda m: m.scatter(_e(m, 3, 4), 0, i64(m, np.zeros((0, 4))), _x(m))),
    ("scatter_add", lambda m: m.scatter_add(_e(m, 3, 4), 0, i64(m, IDX24), _x(m))),
    ("scatter_add_negative", lambda m: m.scatter_add(_e(m, 3, 4), 0, i64(m, [[-1]]), _x(m))),
    ("scatter_add_src_dtype", lambda m: m.scatter_add(_e(m, 3, 4), 0, i64(m, IDX24), _x(m, "float32"))),
    ("scatter_add_int", lambda m: m.scatter_add(i64(m, np.zeros((3, 4))), 0, i64(m, IDX24), i64(m, np.ones((3, 4))))),
    ("scatter_add_index_too_big", lambda m: m.scatter_add(_e(m, 3, 4), 0, i64(m, np.zeros((4, 4))), _x(m))),
    ("scatter_add_0d", lambda m: m.scatter_add(t(m, 1.0), 0, i64(m, 0), t(m, 5.0))),
    *[(f"scatter_reduce_{red}_{inc}", lambda m, red=red, inc=inc: m.scatter_reduce(
        t(m, np.full((3, 4), 2.0)), 0, i64(m, IDX24), _x(m), red, include_self=inc))
      for red in ("sum", "prod", "mean", "amax", "amin", "max", "min") for inc in (True, False)],
    ("scatter_reduce_mean_int", lambda m: m.scatter_reduce(i64(m, np.full((3, 4), 2)), 0, i64(m, IDX24),
                                                           i64(m, np.arange(1, 13).reshape(3, 4)), "mean")),
    ("scatter_reduce_mean_int_exclude", lambda m: m.scatter_reduce(i64(m, np.full((3, 4), 2)), 0, i64(m, IDX24),
                                                                   i64(m, -np.arange(1, 13).reshape(3, 4)), "mean",
                                                                   include_self=False)),
    ("scatter_reduce_amax_int", lambda m: m.scatter_reduce(i64(m, np.full((3, 4), 2)), 0, i64(m, IDX24),
                                                           i64(m, np.arange(12).reshape(3, 4)), "amax")),
    ("scatter_reduce_prod_int", lambda m: _x(m).long().scatter_reduce(1, i64(m, [[0, 0, 0]]), i64(m, [[2, 3, 4]]),
                                                                     "prod", include_self=False)),
    ("scatter_reduce_bad", lambda m: m.scatter_reduce(_x(m), 0, i64(m, IDX24), _x(m), "add")),
    ("scatter_reduce_negative", lambda m: m.scatter_reduce(_x(m), 0, i64(m, [[-1]]), _x(m), "sum")),
    ("scatter_reduce_dtype", lambda m: m.scatter_reduce(_x(m), 0, i64(m, IDX24), _x(m, "float32"), "sum")),
    ("scatter_reduce_bool_sum", lambda m: m.scatter_reduce(_b(m, np.zeros((3, 4))), 0, i64(m, IDX24), _x(m) > 3,
                                                           "sum")),
    ("scatter_reduce_inf", lambda m: m.scatter_reduce(t(m, [-np.inf, 1.0]), 0, i64(m, [0, 0]), t(m, [-np.inf, 2.0]),
                                                      "amax")),
    ("scatter_reduce_nan", lambda m: m.scatter_reduce(t(m, [0.0, 1.0]), 0, i64(m, [0, 0]), t(m, [np.nan, 2.0]),
                                                      "amin")),
    ("index_put", lambda m: m.index_put(_x(m), (i64(m, [0, 2]),), t(m, 1.0))),
    ("index_put_list", lambda m: m.index_put(_x(m), [i64(m, [0, 2])], t(m, 1.0))),
    ("index_put_tensor", lambda m: m.index_put(_x(m), i64(m, [0, 2]), t(m, 1.0))),
    ("index_put_two", lambda m: m.index_put(_x(m), (i64(m, [0, 2]), i64(m, [1, 3])), t(m, [5.0, 6.0]))),
    ("index_put_accumulate", lambda m: m.index_put(_x(m), (i64(m, [0, 0]), i64(m, [1, 1])), t(m, [5.0, 6.0]),
                                                   accumulate=True)),
    ("index_put_accumulate_positional", lambda m: m.index_put(_x(m), (i64(m, [0, 0]),), t(m, 1.0), True)),
    ("index_put_mask", lambda m: m.index_put(_x(m), (_x(m) > 5,), t(m, 0.0))),
    ("index_put_number", lambda m: m.index_put(_x(m), (i64(m, [0]),), 1.0)),
    ("index_put_dtype", lambda m: m.index_put(_x(m), (i64(m, [0]),), t(m, 1.0, "float32"))),
    ("index_put_shape", lambda m: m.index_put(_x(m), (i64(m, [0, 1]),), t(m, np.ones(3)))),
    ("index_put_none", lambda m: m.index_put(_x(m), (None, i64(m, [0, 1])), t(m, 7.0))),
    ("index_put_negative", lambda m: m.index_put(_x(m), (i64(m, [-1]),), t(m, 7.0))),
    ("index_put_out_of_range", lambda m: m.index_put(_x(m), (i64(m, [3]),), t(m, 7.0))),
    ("index_put_float_index", lambda m: m.index_put(_x(m), (t(m, [1.0]),), t(m, 7.0))),
    ("index_put_too_many", lambda m: m.index_put(_x(m), (i64(m, [1]),) * 3, t(m, 7.0))),
    ("index_put_int_values", lambda m: m.index_put(_x(m), (i64(m, [1]),), i64(m, 7))),
    ("index_fill", lambda m: m.index_fill(_x(m), 1, i64(m, [0, 2]), -1.0)),
    ("index_fill_negative", lambda m: m.index_fill(_x(m), 1, i64(m, [-1]), -1.0)),
    ("index_fill_out_of_range", lambda m: m.index_fill(_x(m), 1, i64(m, [4]), -1.0)),
    ("index_fill_tensor_value", lambda m: m.index_fill(_x(m), 1, i64(m, [0]), t(m, 3.0))),
    ("index_fill_1d_value", lambda m: m.index_fill(_x(m), 1, i64(m, [0]), t(m, [3.0]))),
    ("index_fill_2d_index", lambda m: m.index_fill(_x(m), 1, i64(m, [[0]]), 1.0)),
    ("index_fill_0d_index", lambda m: m.index_fill(_x(m), 1, i64(m, 0), 1.0)),
    ("index_fill_float_index", lambda m: m.index_fill(_x(m), 1, t(m, [0.0]), 1.0)),
    ("index_fill_float_into_int", lambda m: m.index_fill(_x(m).long(), 1, i64(m, [0]), 2.7)),
    ("index_fill_0d", lambda m: m.index_fill(t(m, 1.0), 0, i64(m, [0]), 5.0)),
    ("index_fill_other_dtype_value", lambda m: m.index_fill(_x(m), 1, i64(m, [0]), t(m, 3.0, "float32"))),
    ("index_copy", lambda m: m.index_copy(_x(m), 1, i64(m, [0, 2]), t(m, np.ones((3, 2))))),
    ("index_copy_negative", lambda m: m.index_copy(_x(m), 1, i64(m, [-1]), t(m, np.ones((3, 1))))),
    ("index_copy_out_of_range", lambda m: m.index_copy(_x(m), 1, i64(m, [4]), t(m, np.ones((3, 1))))),
    ("index_copy_count", lambda m: m.index_copy(_x(m), 1, i64(m, [0]), t(m, np.ones((3, 2))))),
    ("index_copy_slice_shape", lambda m: m.index_copy(_x(m), 1, i64(m, [0]), t(m, np.ones((2, 1))))),
    ("index_copy_dtype", lambda m: m.index_copy(_x(m), 1, i64(m, [0]), t(m, np.ones((3, 1)), "float32"))),
    ("index_copy_2d_index", lambda m: m.index_copy(_x(m), 1, i64(m, [[0]]), t(m, np.ones((3, 1))))),
    ("index_copy_0d_index_1d_source", lambda m: m.index_copy(_x(m), 1, i64(m, 0), t(m, np.ones(3)))),
    ("index_copy_0d_index", lambda m: m.index_copy(_x(m), 1, i64(m, 0), t(m, np.ones((3, 1))))),
    ("index_copy_0d", lambda m: m.index_copy(t(m, 1.0), 0, i64(m, [0]), t(m, 5.0))),
    ("index_copy_0d_1d_source", lambda m: m.index_copy(t(m, 1.0), 0, i64(m, 0), t(m, [5.0]))),
    ("index_add", lambda m: m.index_add(_x(m), 1, i64(m, [0, 0]), t(m, np.ones((3, 2))), alpha=2)),
    ("index_add_negative", lambda m: m.index_add(_x(m), 1, i64(m, [-1]), t(m, np.ones((3, 1))))),
    ("index_add_out_of_range", lambda m: m.index_add(_x(m), 1, i64(m, [4]), t(m, np.ones((3, 1))))),
    ("index_add_count", lambda m: m.index_add(_x(m), 1, i64(m, [0]), t(m, np.ones((3, 2))))),
    ("index_add_dtype", lambda m: m.index_add(_x(m), 1, i64(m, [0]), t(m, np.ones((3, 1)), "float32"))),
    ("index_add_int_float_alpha", lambda m: m.index_add(_x(m).long(), 1, i64(m, [0]), i64(m, np.full((3, 1), 2)),
                                                        alpha=1.5)),
    ("index_add_0d", lambda m: m.index_add(t(m, 1.0), 0, i64(m, [0]), t(m, 5.0))),
    ("index_add_2d_index", lambda m: m.index_add(_x(m), 1, i64(m, [[0]]), t(m, np.ones((3, 1))))),
    ("index_add_float_index", lambda m: m.index_add(_x(m), 1, t(m, [0.0]), t(m, np.ones((3, 1))))),
    ("index_copy_float_index", lambda m: m.index_copy(_x(m), 1, t(m, [0.0]), t(m, np.ones((3, 1))))),
    # masks
    ("masked_select", lambda m: m.masked_select(_x(m), _x(m) > 5)),
    ("masked_select_broadcast", lambda m: m.masked_select(_x(m)[0], _b(m, [[True], [False]]))),
    ("masked_select_int_mask", lambda m: m.masked_select(_x(m), (_x(m) > 5).long())),
    ("masked_select_bad_shape", lambda m: m.masked_select(_x(m), _b(m, [True, False, True]))),
    ("masked_select_0d", lambda m: m.masked_select(t(m, 1.0), _b(m, True))),
    ("masked_scatter", lambda m: m.masked_scatter(_x(m), _x(m) > 5, t(m, np.arange(100.0, 112.0)))),
    ("masked_scatter_short_source", lambda m: m.masked_scatter(_x(m), _x(m) > 5, t(m, [100.0, 101.0]))),
    ("masked_scatter_broadcast_mask", lambda m: m.masked_scatter(_x(m), _b(m, [True, False, True, False]),
                                                                 t(m, np.arange(100.0, 112.0)))),
    ("masked_scatter_broadcast_input", lambda m: m.masked_scatter(_x(m)[0], _b(m, np.ones((2, 4))),
                                                                  t(m, np.arange(100.0, 112.0)))),
    ("masked_scatter_dtype", lambda m: m.masked_scatter(_x(m), _x(m) > 5, i64(m, np.arange(12)))),
    ("masked_scatter_int_mask", lambda m: m.masked_scatter(_x(m), (_x(m) > 5).long(), t(m, np.arange(12.0)))),
    ("masked_scatter_2d_source", lambda m: m.masked_scatter(_x(m), _x(m) > 5, _x(m))),
    ("masked_scatter__broadcast_input", lambda m: _x(m)[0].masked_scatter_(_b(m, np.ones((2, 4))),
                                                                          t(m, np.arange(8.0)))),
    ("masked_fill", lambda m: m.masked_fill(_x(m), _x(m) > 5, 2.5)),
    ("masked_fill_int_mask", lambda m: m.masked_fill(_x(m), (_x(m) > 5).long(), 2.5)),
    ("masked_fill_broadcast_input", lambda m: m.masked_fill(_x(m)[0], _b(m, np.ones((2, 4))), 2.5)),
    ("masked_fill__broadcast_input", lambda m: _x(m)[0].masked_fill_(_b(m, np.ones((2, 4))), 2.5)),
    ("masked_fill_1d_value", lambda m: m.masked_fill(_x(m), _x(m) > 5, t(m, [1.0]))),
    ("masked_fill_float_into_int", lambda m: m.masked_fill(_x(m).long(), _x(m) > 5, 2.5)),
    ("masked_fill_other_dtype_value", lambda m: m.masked_fill(_x(m), _x(m) > 5, t(m, 1.0, "float32"))),
    ("masked_fill_float_into_bool", lambda m: m.masked_fill(_x(m) > 3, _x(m) > 5, 2.5)),
    ("nonzero", lambda m: m.nonzero(_x(m))),
    ("nonzero_as_tuple", lambda m: _x(m).nonzero(as_tuple=True)),
    ("nonzero_0d", lambda m: m.nonzero(t(m, 1.0))),
    ("nonzero_0d_zero", lambda m: m.nonzero(t(m, 0.0))),
    ("nonzero_0d_as_tuple", lambda m: m.nonzero(t(m, 1.0), as_tuple=True)),
    ("nonzero_0d_zero_as_tuple", lambda m: m.nonzero(t(m, 0.0), as_tuple=True)),
    ("nonzero_empty", lambda m: m.nonzero(_e(m, 0, 3))),
    ("nonzero_nan", lambda m: m.nonzero(t(m, [0.0, np.nan, 1.0]))),
    ("argwhere", lambda m: m.argwhere(_b(m, [[True, False], [False, True]]))),
    ("where_condition_only", lambda m: m.where(_x(m) > 5)),
    ("where_condition_only_0d", lambda m: m.where(_b(m, True))),
    ("where_two_arguments", lambda m: m.where(_x(m) > 5, _x(m))),
    ("where_float_condition", lambda m: m.where(_x(m))),
    # sorted search
    ("searchsorted", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), t(m, [0.0, 3, 6, 9]))),
    ("searchsorted_right", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), t(m, [0.0, 3, 6, 9]), right=True)),
    ("searchsorted_side", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), t(m, [0.0, 3, 6, 9]), side="right")),
    ("searchsorted_conflict", lambda m: m.searchsorted(t(m, [1.0, 3]), t(m, [0.0]), side="left", right=True)),
    ("searchsorted_bad_side", lambda m: m.searchsorted(t(m, [1.0, 3]), t(m, [0.0]), side="up")),
    ("searchsorted_number", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), 4)),
    ("searchsorted_input_keyword", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), input=t(m, [4.0]))),
    ("searchsorted_rows", lambda m: m.searchsorted(t(m, [[1.0, 3, 5, 7], [2, 4, 6, 8]]), t(m, [[3.0, 6], [1, 9]]))),
    ("searchsorted_rows_mismatch", lambda m: m.searchsorted(t(m, [[1.0, 3, 5, 7], [2, 4, 6, 8]]), t(m, [[3.0, 6]]))),
    ("searchsorted_1d_boundaries_2d_values", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), t(m, [[3.0, 6], [1, 9]]))),
    ("searchsorted_sorter", lambda m: m.searchsorted(t(m, [7.0, 1, 5, 3]), t(m, [0.0, 3, 6, 9]),
                                                     sorter=i64(m, [1, 3, 2, 0]))),
    ("searchsorted_mixed_dtypes", lambda m: m.searchsorted(i64(m, [1, 3, 5, 7]), t(m, [0.5, 3]))),
    ("searchsorted_0d_boundaries", lambda m: m.searchsorted(t(m, 1.0), t(m, [0.5, 3]))),
    ("searchsorted_0d_values", lambda m: m.searchsorted(t(m, [1.0, 3, 5, 7]), t(m, 4.0))),
    ("searchsorted_empty_boundaries", lambda m: m.searchsorted(_e(m, 0), t(m, [1.0]))),
    ("bucketize", lambda m: m.bucketize(t(m, [0.0, 3, 6, 9]), t(m, [1.0, 3, 5, 7]))),
    ("bucketize_right", lambda m: m.bucketize(t(m, [0.0, 3, 6, 9]), t(m, [1.0, 3, 5, 7]), right=True)),
    ("bucketize_2d_boundaries", lambda m: m.bucketize(t(m, [0.0, 3]), t(m, [[1.0, 3, 5, 7]]))),
    ("bucketize_number", lambda m: m.bucketize(4, t(m, [1.0, 3, 5, 7]))),
    ("bucketize_2d_input", lambda m: m.bucketize(t(m, [[0.0, 3], [6, 9]]), t(m, [1.0, 3, 5, 7]))),
    # new_* methods
    ("new_zeros", lambda m: _x(m).new_zeros(2, 3)),
    ("new_zeros_tuple", lambda m: _x(m).new_zeros((2, 3))),
    ("new_zeros_dtype", lambda m: _x(m).new_zeros(2, dtype=m.int64)),
    ("new_ones_int", lambda m: _x(m).long().new_ones(2)),
    ("new_full", lambda m: _x(m).new_full((2,), 3)),
    ("new_full_int_size", lambda m: _x(m).new_full(2, 3)),
    ("new_empty_shape", lambda m: _x(m).new_empty(2, 3).shape),
    ("new_tensor", lambda m: _x(m).new_tensor([1, 2])),
    ("new_tensor_float_on_int", lambda m: _x(m).long().new_tensor([1.5, 2])),
    ("new_tensor_of_a_tensor", lambda m: _x(m).new_tensor(i64(m, [1, 2]))),
    ("new_tensor_requires_grad", lambda m: _x(m).new_tensor([1, 2], requires_grad=True).requires_grad),
    ("new_zeros_requires_grad", lambda m: _x(m).new_zeros(2, requires_grad=True).requires_grad),
    ("new_zeros_nothing", lambda m: _x(m).new_zeros()),
    ("new_zeros_negative", lambda m: _x(m).new_zeros(-1)),
    # cdist, trapezoid
    ("cdist", lambda m: m.cdist(t(m, [[0.0, 0], [1, 2]]), t(m, [[0.0, 0], [3, 1], [1, 2]]))),
    ("cdist_1d", lambda m: m.cdist(t(m, [0.0, 0]), t(m, [[0.0, 0]]))),
    ("cdist_columns", lambda m: m.cdist(_e(m, 2, 2), _e(m, 3, 3))),
    ("cdist_negative_p", lambda m: m.cdist(_e(m, 2, 2), _e(m, 3, 2), p=-1)),
    ("cdist_int", lambda m: m.cdist(i64(m, np.zeros((2, 2))), i64(m, np.zeros((3, 2))))),
    ("cdist_bad_mode", lambda m: m.cdist(_e(m, 2, 2), _e(m, 3, 2), compute_mode="foo")),
    ("cdist_mode", lambda m: m.cdist(_x(m), _x(m) * 2, compute_mode="donot_use_mm_for_euclid_dist")),
    ("cdist_batch", lambda m: m.cdist(_e(m, 2, 1, 3, 2), _e(m, 4, 5, 2)).shape),
    ("cdist_batch_mismatch", lambda m: m.cdist(_e(m, 2, 3, 2), _e(m, 3, 5, 2))),
    ("cdist_dtypes", lambda m: m.cdist(_e(m, 2, 2), t(m, np.zeros((3, 2)), "float32"))),
    ("cdist_empty", lambda m: m.cdist(_e(m, 0, 2), _e(m, 3, 2))),
    ("cdist_no_columns", lambda m: m.cdist(_e(m, 2, 0), _e(m, 3, 0))),
    ("cdist_inf", lambda m: m.cdist(t(m, [[0.0, 1.0]]), t(m, [[np.inf, 0.0]]), p=math.inf)),
    ("trapezoid", lambda m: m.trapezoid(t(m, [1.0, 4, 9, 16]))),
    ("trapezoid_dx", lambda m: m.trapezoid(t(m, [1.0, 4, 9, 16]), dx=2)),
    ("trapezoid_x", lambda m: m.trapezoid(t(m, [1.0, 4, 9, 16]), t(m, [0.0, 1, 3, 6]))),
    ("trapezoid_x_and_dx", lambda m: m.trapezoid(t(m, [1.0, 4]), t(m, [0.0, 1]), dx=2)),
    ("trapezoid_x_wrong_length", lambda m: m.trapezoid(t(m, [1.0, 4, 9, 16]), t(m, [0.0, 1]))),
    ("trapezoid_0d", lambda m: m.trapezoid(t(m, 1.0))),
    ("trapezoid_empty", lambda m: m.trapezoid(_e(m, 3, 0))),
    ("trapezoid_int", lambda m: m.trapezoid(i64(m, [1, 2, 3]))),
    ("trapezoid_int_x", lambda m: m.trapezoid(i64(m, [1, 2, 3]), i64(m, [1, 2, 4]))),
    ("trapezoid_int_dx", lambda m: m.trapezoid(i64(m, [1, 2, 3]), dx=2)),
    ("trapezoid_one_sample", lambda m: m.trapezoid(t(m, [1.0]))),
    ("trapezoid_number_x", lambda m: m.trapezoid(t(m, [1.0, 2.0]), 2)),
    ("trapezoid_x_broadcast", lambda m: m.trapezoid(_x(m), t(m, [[0.0, 1, 3, 4]]))),
    ("trapz_dx", lambda m: m.trapz(t(m, [1.0, 4, 9, 16]), dx=2)),
    # in-place view methods
    ("t_3d", lambda m: _e(m, 2, 2, 2).t_()),
    ("t_1d", lambda m: _e(m, 3).t_()),
    ("squeeze_", lambda m: _e(m, 2, 1).squeeze_().shape),
    ("squeeze_dims", lambda m: _e(m, 1, 2, 1).squeeze_((0, 2)).shape),
    ("transpose_bad_dim", lambda m: _e(m, 2, 3).transpose_(0, 2)),
    ("unsqueeze_bad_dim", lambda m: _e(m, 2, 3).unsqueeze_(4)),
    ("swapaxes_", lambda m: _x(m).swapaxes_(0, 1)),
    ("t_of_expanded", lambda m: _e(m, 3, 1).expand(3, 4).t_().shape),
    # indexing: torch's rule for lists, negative index tensors
    ("index_nested_list", lambda m: i64(m, np.arange(12).reshape(3, 4))[[[0, 1], [1, 2]]]),
    ("index_list_of_one_list", lambda m: _x(m)[[[0, 1]]]),
    ("index_list_of_tensors", lambda m: _x(m)[[i64(m, [0, 1]), i64(m, [1, 2])]]),
    ("index_list_with_slice", lambda m: _x(m)[[slice(0, 2), 1]]),
    ("index_list_with_none", lambda m: _x(m)[[None, 1]]),
    ("index_list_with_ellipsis", lambda m: _x(m)[[..., 1]]),
    ("index_list_of_ints", lambda m: _x(m)[[0, 1]]),
    ("index_list_of_arrays", lambda m: _x(m)[[np.array([0, 1]), np.array([1, 2])]]),
    ("index_list_of_32_lists", lambda m: t(m, np.arange(40.0))[[[0, 1]] * 32]),
    ("index_list_of_31_lists", lambda m: t(m, np.arange(40.0))[[[0]] * 31]),
    ("index_list_of_0d_tensors", lambda m: _x(m)[[i64(m, 0), i64(m, 1)]]),
    ("index_list_of_bools", lambda m: _x(m)[[True, False, True]]),
    ("index_list_of_a_bool_list", lambda m: _x(m)[[[True, False, True]]]),
    ("index_2d_array", lambda m: _x(m)[np.array([[0, 1], [1, 2]])]),
    ("index_tuple_of_lists", lambda m: _x(m)[([0, 1], [1, 2])]),
    ("index_nested_list_in_tuple", lambda m: _x(m)[[[0, 1], [1, 2]], 0]),
    ("index_string", lambda m: _x(m)["a"]),
    ("index_negative_tensor", lambda m: _x(m)[i64(m, [-1, -3])]),
    ("index_negative_tensor_out_of_range", lambda m: _x(m)[i64(m, [-4])]),
    ("setitem_nested_list", lambda m: _setitem(_x(m), [[0, 1], [1, 2]], -1.0)),
    ("setitem_list_of_ints", lambda m: _setitem(_x(m), [0, 2], -1.0)),
    ("setitem_negative_tensor", lambda m: _setitem(_x(m), i64(m, [-1]), -1.0)),
    ("take_negative", lambda m: m.take(_x(m), i64(m, [-1, -12]))),
    ("take_out_of_range", lambda m: m.take(_x(m), i64(m, [12]))),
]


def _setitem(x, idx, v):
    x[idx] = v
    return x


CALLS_BY_NAME = dict(CALLS)
WARNS_ONCE_IN_TORCH = {"scatter_reduce_add", "scatter_reduce_multiply", "meshgrid_default_indexing"}
assert len(CALLS_BY_NAME) == len(CALLS), "duplicate call names"


def _result(out):
    """A comparable summary of a call's result: tensors as (dtype, shape, values), sequences element-wise."""
    if isinstance(out, (tuple, list)):
        return tuple(_result(o) for o in out)
    if hasattr(out, "detach") and hasattr(out, "dtype"):
        a = np.array(out.detach().numpy())
        return ("tensor", str(out.dtype).split(".")[-1], tuple(a.shape), a)
    return out


def _outcome(m, call):
    """(result or ('raised', exception type name), whether a UserWarning was issued)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = _result(call(m))
        except Exception as exc:  # noqa: BLE001  the outcome is what is compared
            result = ("raised", type(exc).__name__, str(exc))
    return result, any(issubclass(w.category, UserWarning) for w in caught)


def _same_result(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        if a[:1] == ("raised",) or b[:1] == ("raised",):
            return a[:2] == b[:2]
        if a[:1] == ("tensor",) and b[:1] == ("tensor",):
            return a[1:3] == b[1:3] and np.allclose(a[3], b[3], rtol=1e-12, atol=1e-12, equal_nan=True) \
                if a[3].dtype.kind == "f" else a[1:3] == b[1:3] and np.array_equal(a[3], b[3])
        return len(a) == len(b) and all(_same_result(u, v) for u, v in zip(a, b))
    return a == b


def _show(r):
    return repr(r[:3]) if isinstance(r, tuple) and r[:1] == ("raised",) else repr(r)[:300]


@pytest.mark.parametrize("name", list(CALLS_BY_NAME))
def test_call_like_torch(dg, name):
    """The engine's outcome of the call is torch's (or, without torch, the C++ engine's)."""
    call = CALLS_BY_NAME[name]
    got, warned = _outcome(dg, call)
    if torch is not None:
        want, torch_warned = _outcome(torch, call)
    else:
        import dyngrad
        want, torch_warned = _outcome(dyngrad, call)
    assert _same_result(got, want), f"{name}: got {_show(got)}, torch {_show(want)}"
    if name in WARNS_ONCE_IN_TORCH:       # torch warns once per process; the engines warn as Python does
        assert warned, f"{name}: expected a UserWarning"
    else:
        assert warned == torch_warned, f"{name}: {'a' if warned else 'no'} UserWarning, torch {torch_warned}"


# ---- VIEWS: the results share memory with the input exactly where torch's do ----

VIEWS = [
    ("diagonal", lambda m, x: m.diagonal(x)),
    ("diagonal_offset", lambda m, x: x.diagonal(1)),
    ("diagonal_of_transpose", lambda m, x: x.t().diagonal(-1)),
    ("diagonal_reversed_dims", lambda m, x: m.diagonal(x, 0, 1, 0)),
    ("diagonal_batched", lambda m, x: x.reshape(2, 2, 3).diagonal(0, -1, -2)),
    ("diagonal_of_strided", lambda m, x: x[:, ::2].diagonal()),
    ("unfold_disjoint", lambda m, x: x.unfold(1, 2, 2)),
    ("unfold_gaps", lambda m, x: x.reshape(-1).unfold(0, 2, 3)),
    ("movedim", lambda m, x: m.movedim(x, 0, 1)),
    ("moveaxis", lambda m, x: x.moveaxis(1, 0)),
    ("swapdims", lambda m, x: m.swapdims(x, 0, 1)),
    ("swapaxes", lambda m, x: x.swapaxes(0, 1)),
    ("unflatten", lambda m, x: m.unflatten(x, 1, (2, 2))),
    ("unflatten_of_transpose", lambda m, x: x.t().unflatten(0, (2, 2))),
    ("ravel", lambda m, x: m.ravel(x)),
    ("narrow", lambda m, x: m.narrow(x, 1, -2, 2)),
    ("tensor_split", lambda m, x: m.tensor_split(x, [1, 3], dim=1)),
    ("hsplit", lambda m, x: m.hsplit(x, 2)),
    ("vsplit", lambda m, x: x.vsplit([1])),
    ("split_sizes", lambda m, x: x.split([1, 3], 1)),
    ("atleast_3d", lambda m, x: m.atleast_3d(x)),
    ("atleast_2d_of_1d", lambda m, x: m.atleast_2d(x[0])),
    ("meshgrid", lambda m, x: m.meshgrid(x[0], x[1], indexing="xy")),
    ("broadcast_tensors", lambda m, x: m.broadcast_tensors(x, x[0])),
    ("broadcast_to", lambda m, x: x.broadcast_to(2, 3, 4)),
    ("select", lambda m, x: m.select(x, 1, -1)),
    ("unbind", lambda m, x: m.unbind(x, 1)),
    # copies in torch too
    ("flip", lambda m, x: m.flip(x, (0,))),
    ("roll", lambda m, x: m.roll(x, 1)),
    ("rot90_k0", lambda m, x: m.rot90(x, 0)),
    ("repeat", lambda m, x: x.repeat(1, 1)),
    ("tile", lambda m, x: m.tile(x, (1,))),
    ("tril", lambda m, x: m.tril(x)),
    ("diag", lambda m, x: m.diag(x)),
    ("ravel_of_transpose", lambda m, x: x.t().ravel()),
    ("hstack", lambda m, x: m.hstack([x])),
    ("take_along_dim", lambda m, x: m.take_along_dim(x, m.tensor(np.zeros((1, 4), dtype=np.int64)), 0)),
    ("masked_select", lambda m, x: m.masked_select(x, x > 3)),
    ("cartesian_prod", lambda m, x: m.cartesian_prod(x[0], x[1])),
    ("combinations", lambda m, x: m.combinations(x[0])),
    ("slice_scatter", lambda m, x: m.slice_scatter(x, x[:, :1] * 1, 1, 0, 1)),
]

# torch returns a view; dyngrad a copy, because the core has no views with arbitrary strides (documented in shape.py)
# (a diagonal is a view when its two dims can be merged into one: adjacent in memory, in either order)
COPIES_NOT_VIEWS = {"unfold_overlapping": lambda m, x: x.unfold(1, 2, 1),
                    "diagonal_of_unmergeable_dims": lambda m, x: x[:, :3].diagonal(),
                    "diagonal_of_dims_apart": lambda m, x: x.reshape(2, 2, 3).diagonal(0, -1, 0),
                    "as_strided": lambda m, x: m.as_strided(x, (2, 2), (1, 2))}


def _shares(m, result, x):
    results = result if isinstance(result, (tuple, list)) else (result,)
    if m.__name__ == "torch":
        base = x.untyped_storage().data_ptr()
        return [r.untyped_storage().data_ptr() == base for r in results]
    return [np.shares_memory(r._numpy_view(), x._numpy_view()) for r in results]


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_like_torch(dg, name, fn):
    x = np.arange(12.0).reshape(3, 4)
    x_dg, x_t = dg.tensor(x), torch.tensor(x)
    got, want = _shares(dg, fn(dg, x_dg), x_dg), _shares(torch, fn(torch, x_t), x_t)
    assert got == want, f"{name}: shares memory {got}, torch {want}"


@pytest.mark.parametrize("name", list(COPIES_NOT_VIEWS))
def test_documented_copies(dg, name):
    x = dg.tensor(np.arange(12.0).reshape(3, 4))
    assert _shares(dg, COPIES_NOT_VIEWS[name](dg, x), x) == [False]


def test_writing_through_views(dg):
    """Writes into diagonal() and unfold() views reach the input (torch's eye-building idiom)."""
    x = dg.zeros(3, 4)
    x.diagonal().fill_(1.0)
    x.diagonal(1)[1:].add_(2.0)
    expected = np.eye(3, 4)
    expected[[1, 2], [2, 3]] = 2.0
    np.testing.assert_array_equal(x.numpy(), expected)
    y = dg.zeros(6)
    y.unfold(0, 2, 3)[:, 0] = dg.tensor([5.0, 7.0])
    np.testing.assert_array_equal(y.numpy(), [5.0, 0, 0, 7.0, 0, 0])


# ---- in-place view methods: shape, memory, version counter and history, as torch ----

def test_inplace_view_methods(dg):
    x = dg.tensor(np.arange(6.0).reshape(2, 3))
    storage = x._numpy_view()
    v0 = x._version
    assert x.t_() is x and tuple(x.shape) == (3, 2) and x.stride() == (1, 3)
    assert np.shares_memory(x._numpy_view(), storage) and x._version > v0
    x.unsqueeze_(0).transpose_(0, 2).squeeze_(2)
    assert tuple(x.shape) == (2, 3) and x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    x.swapdims_(0, 1).swapaxes_(1, 0)
    assert tuple(x.shape) == (2, 3)


def test_inplace_view_methods_record_history(dg):
    leaf = dg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = leaf * 2
    y.t_()
    assert tuple(y.shape) == (3, 2) and y.grad_fn is not None
    (y * dg.tensor(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), 2 * np.arange(6.0).reshape(3, 2).T)
    with pytest.raises(RuntimeError, match="leaf"):
        dg.ones(2, requires_grad=True).unsqueeze_(0)


def test_inplace_view_method_invalidates_saved_tensors(dg):
    """A tensor saved for backward and then reshaped in place is reported, as torch does (version counter)."""
    leaf = dg.ones(3, requires_grad=True)
    y = leaf * 2
    z = y * y                      # saves y
    y.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()


def test_inplace_view_method_on_a_view(dg):
    base = dg.tensor(np.arange(6.0), requires_grad=True) * 1
    view = base[:4]
    view.unsqueeze_(0)
    assert tuple(view.shape) == (1, 4)
    view.mul_(dg.tensor(np.full((1, 4), 3.0)))
    np.testing.assert_array_equal(base.detach().numpy(), [0.0, 3, 6, 9, 4, 5])


# ---- exact values at ties and zeros, checked against torch ----

EXACT = [
    # name, fn, inputs, expected forward, expected gradients of fn(...).sum()
    ("scatter_reduce_amax_ties", lambda m, a, s: m.scatter_reduce(a, 0, i64(m, [0, 0, 1]), s, "amax"),
     [[2.0, 1.0], [2.0, 0.5, 3.0]], [2.0, 3.0], [[0.5, 0.0], [0.5, 0.0, 1.0]]),
    ("scatter_reduce_amin_three_ties", lambda m, a, s: m.scatter_reduce(a, 0, i64(m, [0, 0]), s, "amin"),
     [[1.0], [1.0, 1.0]], [1.0], [[1 / 3], [1 / 3, 1 / 3]]),
    ("scatter_reduce_prod_zeros", lambda m, a, s: m.scatter_reduce(a, 0, i64(m, [0, 0, 1, 1]), s, "prod"),
     [[2.0, 3.0], [0.0, 5.0, 0.0, 0.0]], [0.0, 0.0], [[0.0, 0.0], [10.0, 0.0, 0.0, 0.0]]),
    ("scatter_reduce_mean_exclude", lambda m, a, s: m.scatter_reduce(a, 0, i64(m, [1, 1]), s, "mean",
                                                                     include_self=False),
     [[7.0, 7.0], [1.0, 2.0]], [7.0, 1.5], [[1.0, 0.0], [0.5, 0.5]]),
    ("cdist_zero_distance", lambda m, a, b: m.cdist(a, b), [[[0.0, 0.0]], [[0.0, 0.0], [0.0, 2.0]]], [[0.0, 2.0]],
     [[[0.0, -1.0]], [[0.0, 0.0], [0.0, 1.0]]]),
    ("cdist_inf_ties", lambda m, a, b: m.cdist(a, b, p=math.inf), [[[0.0, 0.0]], [[1.0, -1.0]]], [[1.0]],
     [[[-1.0, 1.0]], [[1.0, -1.0]]]),
    ("cdist_p1_zero_difference", lambda m, a, b: m.cdist(a, b, p=1), [[[0.0, 1.0]], [[0.0, 3.0]]], [[2.0]],
     [[[0.0, -1.0]], [[0.0, 1.0]]]),
    ("cdist_p_half_zero_difference", lambda m, a, b: m.cdist(a, b, p=0.5), [[[0.0, 1.0]], [[0.0, 5.0]]], [[4.0]],
     [[[0.0, -1.0]], [[0.0, 1.0]]]),
    ("tril_gradient", lambda m, a: m.tril(a, -1), [[[1.0, 2.0], [3.0, 4.0]]], [[0.0, 0.0], [3.0, 0.0]],
     [[[0.0, 0.0], [1.0, 0.0]]]),
    ("index_put_duplicates_accumulate", lambda m, a, v: m.index_put(a, (i64(m, [1, 1]),), v, accumulate=True),
     [[0.0, 0.0], [2.0, 3.0]], [0.0, 5.0], [[1.0, 1.0], [1.0, 1.0]]),
]


@pytest.mark.parametrize("case", EXACT, ids=[c[0] for c in EXACT])
def test_exact(dg, case):
    from helpers import check_exact
    name, fn, vals, expect, expect_grad = case
    check_exact(dg, fn, vals, expect, expect_grad, name=name)


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.parametrize("case", EXACT, ids=[c[0] for c in EXACT])
def test_exact_expectations_are_torchs(case):
    from helpers import check_exact
    name, fn, vals, expect, expect_grad = case
    check_exact(torch, fn, vals, expect, expect_grad, name=name)


# ---- out= where torch has it ----

OUT_CALLS = [
    ("tril", lambda m, out: m.tril(_x(m), out=out), "float64"),
    ("diag", lambda m, out: m.diag(_x(m), 1, out=out), "float64"),
    ("hstack", lambda m, out: m.hstack([_x(m), _x(m)], out=out), "float64"),
    ("column_stack", lambda m, out: m.column_stack([_x(m)[0], _x(m)[1]], out=out), "float64"),
    ("take_along_dim", lambda m, out: m.take_along_dim(_x(m), i64(m, [[2, 0, 1, 1]]), 0, out=out), "float64"),
    ("scatter", lambda m, out: m.scatter(_x(m), 0, i64(m, [[2, 0]]), -1.0, out=out), "float64"),
    ("scatter_reduce", lambda m, out: m.scatter_reduce(_x(m), 0, i64(m, [[2, 0]]), _x(m), "amin", out=out),
     "float64"),
    ("index_add", lambda m, out: m.index_add(_x(m), 0, i64(m, [2]), _x(m)[:1], out=out), "float64"),
    ("index_copy", lambda m, out: m.index_copy(_x(m), 0, i64(m, [2]), _x(m)[:1], out=out), "float64"),
    ("masked_select", lambda m, out: m.masked_select(_x(m), _x(m) > 4, out=out), "float64"),
    ("nonzero", lambda m, out: m.nonzero(_x(m) > 4, out=out), "int64"),
    ("searchsorted", lambda m, out: m.searchsorted(t(m, [1.0, 5.0]), _x(m), out=out), "int64"),
    ("bucketize", lambda m, out: m.bucketize(_x(m), t(m, [1.0, 5.0]), out=out), "int64"),
]


@pytest.mark.parametrize("name,call,dtype", OUT_CALLS, ids=[c[0] for c in OUT_CALLS])
def test_out(dg, name, call, dtype):
    out = dg.empty(0, dtype=getattr(dg, dtype))
    result = call(dg, out)
    assert result is out
    if torch is not None:
        want = call(torch, torch.empty(0, dtype=getattr(torch, dtype)))
        np.testing.assert_array_equal(out.numpy(), want.numpy())


def test_inplace_variants_write_in_place(dg):
    x = dg.tensor(np.arange(12.0).reshape(3, 4))
    ptr = x.data_ptr()
    x.tril_().scatter_(1, i64(dg, [[0], [1], [2]]), 9.0).index_fill_(0, i64(dg, [2]), -1.0)
    x.index_add_(1, i64(dg, [3]), dg.ones(3, 1, dtype=dg.float64)).masked_fill_(x > 8, 0.0)
    x.index_copy_(0, i64(dg, [0]), dg.ones(1, 4, dtype=dg.float64))
    x.index_put_((i64(dg, [1]), i64(dg, [1])), t(dg, 7.0))
    x.masked_scatter_(x < 0, dg.tensor(np.arange(10.0, 22.0)))
    x.scatter_reduce_(0, i64(dg, [[1, 1, 1, 1]]), dg.tensor(np.full((1, 4), 2.0)), "prod")
    assert x.data_ptr() == ptr
    if torch is not None:
        y = torch.tensor(np.arange(12.0).reshape(3, 4))
        y.tril_().scatter_(1, torch.tensor([[0], [1], [2]]), 9.0).index_fill_(0, torch.tensor([2]), -1.0)
        y.index_add_(1, torch.tensor([3]), torch.ones(3, 1, dtype=torch.float64)).masked_fill_(y > 8, 0.0)
        y.index_copy_(0, torch.tensor([0]), torch.ones(1, 4, dtype=torch.float64))
        y.index_put_((torch.tensor([1]), torch.tensor([1])), torch.tensor(7.0, dtype=torch.float64))
        y.masked_scatter_(y < 0, torch.arange(10.0, 22.0, dtype=torch.float64))
        y.scatter_reduce_(0, torch.tensor([[1, 1, 1, 1]]), torch.full((1, 4), 2.0, dtype=torch.float64), "prod")
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_tensor_split_refuses_absurd_section_counts(dg):
    """2**40 sections would be 2**40 tensor objects: MemoryError at once (torch runs out of memory trying)."""
    with pytest.raises(MemoryError, match="tensor_split"):
        dg.tensor_split(dg.ones(3), 2 ** 40)


def test_table_covers_the_issue():
    """Every name of the task has a row in the op table or the call table (guards against a row being dropped)."""
    required = """flip fliplr flipud roll rot90 repeat repeat_interleave tile tril triu diag_vector diag_matrix diagonal
        diag_embed diagflat movedim moveaxis swapdims swapaxes unflatten ravel tensor_split hsplit vsplit dsplit hstack
        vstack dstack column_stack row_stack atleast_3d atleast_2d meshgrid_ij meshgrid_xy broadcast_tensors cartesian_prod
        combinations block_diag take_along_dim scatter scatter_ scatter_add scatter_reduce_sum scatter_reduce_prod
        scatter_reduce_mean scatter_reduce_amax scatter_reduce_amin index_put index_put_ index_fill index_copy
        index_add masked_select masked_scatter cdist_p2.0 trapezoid trapz unfold as_strided select_scatter
        slice_scatter diagonal_scatter t_ unsqueeze_ squeeze_ transpose_ swapdims_ swapaxes_""".split()
    calls = """tril_indices triu_indices broadcast_shapes nonzero argwhere where_condition_only searchsorted bucketize
        new_zeros new_full new_tensor new_empty_shape new_ones_int narrow_negative_start atleast_1d_0d
        index_nested_list""".split()
    missing = [n for n in required if n not in OPS_BY_NAME] + [n for n in calls if n not in CALLS_BY_NAME]
    assert not missing, missing


def test_flip_and_tile_methods_take_varargs(dg):
    """Tensor.flip(1) and Tensor.tile(2, 1) as torch's methods take them (found by the half-type sweep of issue
    10); torch.flip/torch.tile take one sequence, and the keyword a sequence too."""
    torch = pytest.importorskip("torch")
    x, t = dg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    calls = [lambda a: a.flip(1), lambda a: a.flip(0, -1), lambda a: a.flip((0, 1)), lambda a: a.flip(dims=[1]),
             lambda a: a.tile(2), lambda a: a.tile(2, 1), lambda a: a.tile((2, 2)), lambda a: a.tile(dims=(2,))]
    for call in calls:
        assert call(x).tolist() == call(t).tolist()
    for bad in (lambda a: a.flip(), lambda a: a.flip(dims=1)):
        with pytest.raises(TypeError):
            bad(t)
        with pytest.raises(TypeError):
            bad(x)
