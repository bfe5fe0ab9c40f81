"""Reference engine: dtypes and type promotion. Mirrors csrc/dyngrad/dtype.h (named dtypes.py so that `dg.dtype` can be the dtype class)."""
import numpy as np


class DType:
    """One of dyngrad's element types; `str(float32) == "dyngrad.float32"`."""

    __slots__ = ("name", "np", "is_floating_point", "category", "itemsize", "is_signed", "is_complex")

    def __init__(self, name, np_type, category, itemsize=None):
        self.name = name
        self.np = np.dtype(np_type)
        self.category = category                      # bool 0 < int 1 < float 2 < complex 3 (promotion order)
        self.is_floating_point = category == 2
        self.itemsize = itemsize or self.np.itemsize
        self.is_signed = name not in ("bool", "uint8")
        self.is_complex = category == 3

    def cast(self, arr):
        """arr (an array or a number) converted to this dtype: integers wrap (a Python int through int64), floats
        out of an integer's range give what x86 gives (as the C++ casts), bfloat16 rounds (Note [Reference
        bfloat16])."""
        arr = np.asarray(arr)
        if arr.dtype.kind == "c" and self.category < 3:
            # a complex value converts through its real part (torch's cast; to bool: nonzero in either part)
            arr = arr != 0 if self is bool_ else arr.real
        if self is bfloat16:
            return _round_bfloat16(arr)
        if arr.dtype == self.np and arr.dtype.metadata is None:
            return arr
        with np.errstate(invalid="ignore", over="ignore"):
            if self.category == 1 and arr.dtype.kind == "f" and self is not int64:
                # narrower integers go through int32 (INT32_MIN out of range), as csrc/dyngrad/kernels/copy.cpp
                arr = np.where((arr >= -2.0 ** 31) & (arr < 2.0 ** 31), arr, -2.0 ** 31).astype(np.int32)
            return arr.astype(self.np)

    def __repr__(self):
        return "dyngrad." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self.name,))


# Note [Reference bfloat16]: numpy has no bfloat16. The reference engine keeps bfloat16 values in float32 arrays
# whose numpy dtype carries the metadata {"dyngrad": "bfloat16"} (numpy keeps it through views, copies and ufuncs);
# every value is rounded to bfloat16 (to nearest, ties to even) when a tensor of that dtype is made, as the C++
# engine computes half types in float32 and rounds back.
_BF16_NP = np.dtype(np.float32, metadata={"dyngrad": "bfloat16"})

bool_ = DType("bool", np.bool_, 0)
int64 = DType("int64", np.int64, 1)
float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)
uint8 = DType("uint8", np.uint8, 1)
int8 = DType("int8", np.int8, 1)
int16 = DType("int16", np.int16, 1)
int32 = DType("int32", np.int32, 1)
float16 = DType("float16", np.float16, 2)
bfloat16 = DType("bfloat16", _BF16_NP, 2, itemsize=2)
complex64 = DType("complex64", np.complex64, 3)
complex128 = DType("complex128", np.complex128, 3)
ALL_DTYPES = (bool_, int64, float32, float64, uint8, int8, int16, int32, float16, bfloat16, complex64, complex128)
_BY_NUMPY = {d.np: d for d in ALL_DTYPES if d is not bfloat16}
NUMPY_DTYPES = tuple(_BY_NUMPY)
# torch's lattice: bool < {uint8, int8} < int16 < int32 < int64 < {float16, bfloat16} < float32 < float64
_RANK = {bool_: 0, uint8: 1, int8: 1, int16: 2, int32: 3, int64: 4, float16: 5, bfloat16: 5, float32: 6, float64: 7,
         complex64: 8, complex128: 9}
_default_dtype = [float32]


def _round_bfloat16(arr):
    """float values rounded to the nearest bfloat16 (ties to even), as a float32 array of the bfloat16 numpy dtype."""
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.array(arr, dtype=np.float32, copy=True)
    u = f.view(np.uint32)
    nan = np.isnan(f)
    u += np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))
    u &= np.uint32(0xFFFF0000)
    f[nan] = np.nan
    return f.view(_BF16_NP)


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
    """The dyngrad dtype holding values of a numpy dtype; other floats widen to float32, other ints to int64."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype.metadata is not None and np_dtype.metadata.get("dyngrad") == "bfloat16":
        return bfloat16
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
    if np_dtype.kind == "c":
        return complex128 if np_dtype.itemsize >= 16 else complex64
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
    if dtype is complex:
        return complex128
    if isinstance(dtype, str) and dtype in ("float", "double", "long", "int", "short", "half", "cfloat", "cdouble"):
        return {"float": float32, "double": float64, "long": int64, "int": int32, "short": int16,
                "half": float16, "cfloat": complex64, "cdouble": complex128}[dtype]
    if isinstance(dtype, str) and dtype in {d.name for d in ALL_DTYPES}:
        return _by_name(dtype)
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype; expected dyngrad.float32, int64, ...") from None
    return from_numpy_dtype(np_dtype, op)


def value_type(d):
    """complex64 -> float32, complex128 -> float64, else d itself."""
    return float32 if d is complex64 else float64 if d is complex128 else d


def complex_of(d):
    """The complex dtype of a float dtype's precision (torch's toComplexType); float16 would be complex32 (bfloat16,
    of float32's range, gives complex64 as in torch)."""
    if d.is_complex:
        return d
    if d is float16:
        raise TypeError(f"complex32 (chalf), the complex type of {d.name}, is not supported; dyngrad has complex64 "
                        "and complex128: convert with .float() first.")
    return complex128 if d is float64 else complex64


def promote(a, b):
    """The smaller dtype holding both, on torch's lattice (uint8 + int8 -> int16, float16 + bfloat16 -> float32); a
    complex dtype next to another gives the complex dtype of the larger value type (complex64 + float64 ->
    complex128)."""
    if a is b:
        return a
    if a.is_complex or b.is_complex:
        va, vb = value_type(a), value_type(b)
        return complex_of(va if _RANK[va] >= _RANK[vb] else vb)
    ra, rb = _RANK[a], _RANK[b]
    if ra == rb:
        return int16 if ra == 1 else float32
    return a if ra > rb else b


def scalar_dtype(value):
    """The dtype a Python scalar would have alone: bool, int64, or the default float dtype."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return get_default_dtype()
    if isinstance(value, (complex, np.complexfloating)):
        return complex_of(get_default_dtype())
    raise TypeError(f"expected a number, got {type(value).__name__}")


def combine_categories(higher, lower):
    """torch's combine_categories (csrc/dyngrad/dtype.h): a lower-priority operand's dtype only matters when its
    category is higher, and a complex one next to a float keeps the float's precision (float64 * 1j: complex128)."""
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return complex_of(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return promote(higher, lower)
    return higher


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
        else:
            result = combine_categories(result, group_dtype)
    return result if result is not None else get_default_dtype()
