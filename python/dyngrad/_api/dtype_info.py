"""dtype queries with torch's rules: finfo, iinfo, promote_types, result_type, can_cast, set_default_dtype.

The promotion lattice here is the one of csrc/dyngrad/dtype.h (promote) and reference/dtypes.py, for dtypes given
by name rather than tensors: bool < {uint8, int8} < int16 < int32 < int64 < {float16, bfloat16} < float32 < float64,
where the incomparable pairs meet one step up (uint8 + int8 -> int16, float16 + bfloat16 -> float32), and a complex
dtype next to another dtype gives the complex dtype of the larger value type (complex64 + float64 -> complex128).
"""
import numpy as np

from .. import _C
from .args import Tensor, dtype_arg, get_default_dtype, type_name

_RANK = {"bool": 0, "uint8": 1, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5, "bfloat16": 5,
         "float32": 6, "float64": 7, "complex64": 8, "complex128": 9}
_BY_RANK = {2: "int16", 5: "float32"}      # where two different dtypes of one rank meet (the rank above)


def _category(dtype):
    """bool 0 < integer 1 < floating 2 < complex 3: the order of torch's casting and scalar rules."""
    return 0 if dtype.name == "bool" else (3 if dtype.is_complex else 2 if dtype.is_floating_point else 1)


def _value_type(d):
    return {"complex64": _C.float32, "complex128": _C.float64}.get(d.name, d)


def _complex_of(d):
    """torch's toComplexType: the complex dtype of a float dtype's precision (float16: complex32, refused; bfloat16:
    complex64)."""
    if d.is_complex:
        return d
    if d.name == "float16":
        raise TypeError(f"complex32 (chalf), the complex type of {d.name}, is not supported; dyngrad has complex64 "
                        "and complex128: convert with .float() first.")
    return _C.complex128 if d.name == "float64" else _C.complex64


def _combine(higher, lower):
    """torch's combine_categories (csrc/dyngrad/dtype.h): a lower-priority group only counts when its category is
    higher, and a complex one next to a float keeps the float's precision (float64 * 1j is complex128)."""
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return _complex_of(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher.name == "bool" or lower.is_floating_point:
        return _promote(higher, lower)
    return higher


def _promote(a, b):
    if a is b:
        return a
    if a.is_complex or b.is_complex:
        va, vb = _value_type(a), _value_type(b)
        return _complex_of(va if _RANK[va.name] >= _RANK[vb.name] else vb)
    ra, rb = _RANK[a.name], _RANK[b.name]
    if ra == rb:
        return getattr(_C, _BY_RANK[ra + 1] if ra == 1 else _BY_RANK[ra])
    return a if ra > rb else b


def promote_types(type1, type2):
    """The smallest dtype to which both dtypes can be converted without losing their category."""
    return _promote(dtype_arg(type1, "promote_types"), dtype_arg(type2, "promote_types"))


def _operand_dtype(x):
    if isinstance(x, bool):
        return _C.bool
    if isinstance(x, int):
        return _C.int64
    if isinstance(x, float):
        return get_default_dtype()
    if isinstance(x, complex):
        return _complex_of(get_default_dtype())
    raise TypeError(f"result_type: expected a Tensor or a Python number, got {type_name(x)}.")


def result_type(tensor1, tensor2):
    """The dtype of an arithmetic op on the two operands (tensors or Python numbers), by torch's rule: tensors with
    dims outrank 0-d tensors, which outrank Python numbers; a lower group only counts when its category (bool < int
    < float) is higher than the result's so far."""
    groups = ([], [], [])
    for x in (tensor1, tensor2):
        if isinstance(x, Tensor):
            groups[0 if x.ndim > 0 else 1].append(x.dtype)
        else:
            groups[2].append(_operand_dtype(x))
    result = None
    for group in groups:
        if not group:
            continue
        d = group[0]
        for other in group[1:]:
            d = _promote(d, other)
        result = d if result is None else _combine(result, d)
    return result


def can_cast(from_, to):
    """torch's casting rule: a conversion is allowed unless it lowers the category (float -> int, int -> bool)."""
    return _category(dtype_arg(from_, "can_cast")) <= _category(dtype_arg(to, "can_cast"))


def set_default_dtype(d):
    """The dtype of Python floats in new tensors and of integer inputs to float ops (float32 unless set)."""
    dt = dtype_arg(d, "set_default_dtype")
    if not dt.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes can be the default, got {dt.name}.")
    _C._set_default_dtype(dt)


# ----- finfo / iinfo ---------------------------------------------------------------------------------------------

# bfloat16 (numpy has none): float32's exponent range with 8 significand bits
_BF16 = dict(bits=16, eps=2.0 ** -7, max=float.fromhex("0x1.fe00000000000p+127"), tiny=2.0 ** -126, resolution=0.01)


class finfo:
    """Machine limits of a floating-point dtype (the default dtype without an argument): bits, eps, max, min, tiny
    (= smallest_normal), resolution, dtype (its name)."""

    def __init__(self, type=None):
        dt = get_default_dtype() if type is None else dtype_arg(type, "finfo")
        dt = _value_type(dt)          # a complex dtype's limits are its parts' (torch)
        if not dt.is_floating_point:
            raise TypeError(f"finfo: requires a floating-point dtype, got {dt.name}; use iinfo for integers.")
        if dt.name == "bfloat16":
            info = _BF16
        else:
            f = np.finfo(np.dtype(dt.name))
            info = dict(bits=int(f.bits), eps=float(f.eps), max=float(f.max), tiny=float(f.smallest_normal),
                        resolution=10.0 ** -int(f.precision))     # exact, as torch (numpy's is rounded to the dtype)
        self.bits = info["bits"]
        self.eps = info["eps"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = self.smallest_normal = info["tiny"]
        self.resolution = info["resolution"]
        self.dtype = dt.name

    def __eq__(self, other):
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype: bits, min, max, dtype (its name)."""

    def __init__(self, type):
        dt = dtype_arg(type, "iinfo")
        if dt.is_floating_point or dt.is_complex:
            raise TypeError(f"iinfo: requires an integer dtype, got {dt.name}; use finfo for floating point.")
        if dt.name == "bool":
            raise TypeError("iinfo: bool is not supported (as in torch).")
        i = np.iinfo(np.dtype(dt.name))
        self.bits, self.min, self.max = int(i.bits), int(i.min), int(i.max)
        self.dtype = dt.name

    def __eq__(self, other):
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"     # as torch: %g
