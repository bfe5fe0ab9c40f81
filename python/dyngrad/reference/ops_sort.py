"""Reference engine: sort, argsort, topk, cummax and cummin along one dim, the twin of csrc/dyngrad/ops_sort.cpp and
kernels/sort.cpp. The order is numpy's stable argsort with NaN the largest value (last ascending, first
descending) and -0.0 equal to 0.0, which is the order the C++ kernel's keys give with stable=True (Note [Sorting by
keys]), so both engines pick the same elements among ties. For stable=False too: a stable order is one of the orders
it allows (the C++ engine's introsort gives another among ties from 17 elements on). The values are
gather(a, dim, order), which carries the gradient."""
import numpy as np

from . import kernels

from .ops_index import gather
from .ops_math import check_not_complex
from .tensor import make_tensor, wrap_dim


def _order(a, d, k, descending):
    """The first k of the stable order of a's values along d (int64, a's shape with k along d)."""
    if a.ndim == 0:
        return make_tensor(np.zeros((), dtype=np.int64))
    arr = a._data
    arr = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.astype(np.int64)  # (bool, uint8: int64 keys)
    if descending:  # the ascending stable order of the reversed array, reversed: equal values keep their order
        n = arr.shape[d]
        order = (n - 1) - np.flip(np.argsort(np.flip(arr, d), axis=d, kind="stable"), d)
    else:
        order = np.argsort(arr, axis=d, kind="stable")
    return make_tensor(np.asarray(np.take(order, np.arange(k), axis=d), order="C").astype(np.int64))


def sort(a, dim, descending, stable):
    check_not_complex(a.dtype, "sort")
    d = wrap_dim(dim, a.ndim, "sort")
    order = _order(a, d, a.shape[d] if a.ndim else 1, descending)
    return gather(a, d, order), order


def argsort(a, dim, descending, stable):
    check_not_complex(a.dtype, "argsort")
    d = wrap_dim(dim, a.ndim, "argsort")
    return _order(a, d, a.shape[d] if a.ndim else 1, descending)


def topk(a, k, dim, largest):
    check_not_complex(a.dtype, "topk")
    d = wrap_dim(dim, a.ndim, "topk")
    n = a.shape[d] if a.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) is out of range for dimension {d} of size {n}.")
    order = _order(a, d, k, largest)
    return gather(a, d, order), order


def _cumulative_extremum(a, dim, is_max):
    op = "cummax" if is_max else "cummin"
    check_not_complex(a.dtype, op)
    d = wrap_dim(dim, a.ndim, op) if a.ndim else (wrap_dim(dim, 0, op), 0)[1]
    index = make_tensor(kernels.cumulative_extremum_index(a._data, d, is_max))
    return gather(a, d, index), index


def cummax(a, dim):
    return _cumulative_extremum(a, dim, True)


def cummin(a, dim):
    return _cumulative_extremum(a, dim, False)
