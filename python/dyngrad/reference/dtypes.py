"""Reference engine: dtypes and type promotion. Mirrors csrc/dyngrad/dtype.h (named dtypes.py so that `dg.dtype` can be the dtype class)."""
import numpy as np


class DType:
    """One of dyngrad's four element types; `str(float32) == "dyngrad.float32"`."""

    __slots__ = ("name", "np", "is_floating_point", "category", "itemsize")

    def __init__(self, name, np_type, category):
        self.name = name
        self.np = np.dtype(np_type)
        self.category = category                      # bool 0 < int 1 < float 2 (promotion order)
        self.is_floating_point = category == 2
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return "dyngrad." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = DType("bool", np.bool_, 0)
int64 = DType("int64", np.int64, 1)
float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)
ALL_DTYPES = (bool_, int64, float32, float64)
_BY_NUMPY = {d.np: d for d in (bool_, int64, float32, float64)}
NUMPY_DTYPES = tuple(_BY_NUMPY)
_RANK = {bool_: 0, int64: 1, float32: 2, float64: 3}     # bool < int64 < float32 < float64
_default_dtype = [float32]


def _by_name(name):
    return {d.name: d for d in ALL_DTYPES}[name]


def get_default_dtype():
    return _default_dtype[0]


def set_default_dtype(dtype):
    dtype = to_dtype(dtype)
    if not dtype.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes can be the default, got {dtype}.")
    _default_dtype[0] = dtype


def from_numpy_dtype(np_dtype, op="tensor"):
    """The dyngrad dtype holding values of a numpy dtype; float16 widens to float32, other ints to int64."""
    found = _BY_NUMPY.get(np_dtype)
    if found is not None:
        return found
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.float64:
        return float64
    if np_dtype.kind == "f":
        return float32
    if np_dtype.kind in "iu":
        return int64
    if np_dtype.kind == "b":
        return bool_
    raise TypeError(f"{op}: numpy dtype {np_dtype} is not supported; expected float32, float64, int64 or bool.")


def to_dtype(dtype, op="dtype"):
    """Accept a dyngrad dtype, a numpy dtype or type, or the Python types float/int/bool (float is float64)."""
    if isinstance(dtype, DType):
        return dtype
    if dtype is float:
        return float64
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str) and dtype in ("float32", "float64", "int64", "bool", "float", "double", "long"):
        return {"float": float32, "double": float64, "long": int64}.get(dtype) or _by_name(dtype)
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype; expected dyngrad.float32, float64, int64 or bool.") from None
    return from_numpy_dtype(np_dtype, op)


def promote(a, b):
    """The wider of two dtypes in the order bool < int64 < float32 < float64."""
    return a if _RANK[a] >= _RANK[b] else b


def scalar_dtype(value):
    """The dtype a Python scalar would have alone: bool, int64, or the default float dtype."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return get_default_dtype()
    raise TypeError(f"expected a number, got {type(value).__name__}")


def result_dtype(tensors=(), scalars=()):
    """torch's promotion: tensors with dims > 0-d tensors > Python scalars; a lower-priority operand only
    changes the result when its category (bool < int < float) is higher than the result's so far."""
    result = None
    for group in ([t.dtype for t in tensors if t.ndim > 0], [t.dtype for t in tensors if t.ndim == 0],
                  [scalar_dtype(s) for s in scalars]):
        if not group:
            continue
        group_dtype = group[0]
        for d in group[1:]:
            group_dtype = promote(group_dtype, d)
        if result is None:
            result = group_dtype
        elif group_dtype.category > result.category:
            result = group_dtype
    return result if result is not None else get_default_dtype()
