"""Storages: the dtypes of the file formats, and tensors as views of one storage (Note [Shared storages]).

Note [Shared storages]: torch.save writes each storage once and each tensor as (storage, offset, size, stride),
so tensors that share memory (tied weights, views) share it again after torch.load. dyngrad has no arbitrary-stride
views (as_strided copies), so a loaded tensor is made from its storage's 1-d base tensor with the view ops both
engines have: one contiguous block of the storage `view`ed as a box, a step slice per dimension, `permute`,
`unsqueeze` and `expand` (view_plan). That reaches every layout in which each dimension's elements fit between two
of the next larger stride's (every view torch's slicing, transposing, expanding and narrowing makes, and more);
other layouts (overlapping windows from as_strided or unfold) load as copies. The box may end after the last
element a tensor uses, so `save` writes each storage up to the end of the boxes of the tensors it holds (a few
elements of zeros at most), and a file dyngrad wrote loads as views everywhere.
"""
import functools
import math

import numpy as np


class FileDType:
    """One dtype as the files spell it: torch's name, torch's storage class, the safetensors code, the element
    size and the numpy dtype of the bytes (little-endian; bfloat16 is its 16 bits as uint16)."""

    __slots__ = ("name", "storage", "safetensors", "itemsize", "file_np")

    def __init__(self, name, storage, safetensors, file_np):
        self.name = name
        self.storage = storage
        self.safetensors = safetensors
        self.file_np = np.dtype(file_np)
        self.itemsize = self.file_np.itemsize

    def __repr__(self):
        return f"FileDType({self.name})"


DTYPES = tuple(FileDType(*row) for row in (
    ("bool", "BoolStorage", "BOOL", "u1"),
    ("uint8", "ByteStorage", "U8", "u1"),
    ("int8", "CharStorage", "I8", "i1"),
    ("int16", "ShortStorage", "I16", "<i2"),
    ("int32", "IntStorage", "I32", "<i4"),
    ("int64", "LongStorage", "I64", "<i8"),
    ("float16", "HalfStorage", "F16", "<f2"),
    ("bfloat16", "BFloat16Storage", "BF16", "<u2"),
    ("float32", "FloatStorage", "F32", "<f4"),
    ("float64", "DoubleStorage", "F64", "<f8"),
))
BY_NAME = {d.name: d for d in DTYPES}
BY_STORAGE = {d.storage: d for d in DTYPES}
BY_SAFETENSORS = {d.safetensors: d for d in DTYPES}
# torch dtypes and storages dyngrad does not have: named in the refusal
MISSING_DTYPES = ("complex32", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
                  "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
                  "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8",
                  "bits16", "cfloat", "cdouble", "chalf", "complex", "int1", "int2", "int3", "int4", "int5",
                  "int6", "int7", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7")
MISSING_STORAGES = ("ComplexFloatStorage", "ComplexDoubleStorage", "QInt8Storage", "QUInt8Storage",
                    "QInt32Storage", "QUInt4x2Storage", "QUInt2x4Storage")
MAX_DIMS = 64
MAX_NUMEL = 2 ** 62


# ----- view plans ------------------------------------------------------------------------------------------------
class ViewPlan:
    """Note [Shared storages]: base[start:start + n0*c0].view(box)[slices].select(-1, 0).permute(perm), then
    unsqueeze at `unit_dims` and expand to the target size."""

    __slots__ = ("start", "box", "slices", "perm", "unit_dims", "end")

    def __init__(self, start, box, slices, perm, unit_dims):
        self.start, self.box, self.slices, self.perm, self.unit_dims = start, box, slices, perm, unit_dims
        self.end = start + math.prod(box)


@functools.lru_cache(maxsize=256)
def _divisors(x):
    """The divisors of x, ascending (x itself only, past 2**34: the search would cost more than a copy)."""
    if x > 2 ** 34:
        return (x,)
    small = [d for d in range(1, math.isqrt(x) + 1) if x % d == 0]
    return tuple(small + [x // d for d in reversed(small) if d * d != x])


def view_plan(size, stride, offset, numel=None):
    """The ViewPlan giving the layout (size, stride, offset) of a 1-d storage of `numel` elements (None: as long
    as needed), or None if no chain of view ops gives it. Sizes and strides are non-negative and the layout lies
    inside the storage (the caller checks). Of the possible plans it returns the one whose box ends first.

    Real dims (size > 1, stride > 0) sorted by stride s[0] > s[1] > ...: the box has strides c[0] | s[0],
    c[k] = gcd(s[k], c[k-1]) and a last dim of stride 1; dim k fits in the box if (n[k] - 1) * s[k] < c[k-1].
    The box's first dim spans (n[0] - 1) * s[0] + c[0] elements, so the smallest valid c[0] ends it first."""
    real = sorted((d for d in range(len(size)) if size[d] > 1 and stride[d] > 0), key=lambda d: -stride[d])
    unit_dims = tuple(d for d in range(len(size)) if d not in real)
    if not real:
        return ViewPlan(offset, (1,), ((0, 1, 1),), (), unit_dims)
    n = [size[d] for d in real]
    s = [stride[d] for d in real]
    if any(a == b for a, b in zip(s, s[1:])):
        return None                             # two dims step alike: overlapping elements
    floor = (n[1] - 1) * s[1] if len(s) > 1 else 0
    perm = tuple(sorted(range(len(real)), key=lambda k: real[k]))
    for c0 in _divisors(s[0]):
        if c0 > floor:
            plan = _plan_for(c0, n, s, offset, numel, perm, unit_dims)
            if plan is not None:
                return plan
    return None


def _plan_for(c0, n, s, offset, numel, perm, unit_dims):
    c = [c0]
    for k in range(1, len(s)):
        if (n[k] - 1) * s[k] >= c[-1]:
            return None
        c.append(math.gcd(s[k], c[-1]))
    step = [sk // ck for sk, ck in zip(s, c)]
    box = [(n[0] - 1) * step[0] + 1] + [c[k - 1] // c[k] for k in range(1, len(c))] + [c[-1]]
    top = [None] + [box[k] - 1 - (n[k] - 1) * step[k] for k in range(1, len(c))] + [c[-1] - 1]
    # The box starts `shift` elements before the tensor's first element: as few as the storage's end allows.
    # shift is written in the box's digits (place values c[1:] and 1, digit k at most top[k]); the smallest such
    # number that is at least `need` is found digit by digit, each as small as the digits after it (which reach
    # `reach`, less than its place value) allow.
    length = box[0] * c0
    need = 0 if numel is None else max(0, offset + length - numel)
    places = c[1:] + [1]
    digits, rest = [], need
    for k, place in enumerate(places, start=1):
        reach = sum(top[i] * places[i - 1] for i in range(k + 1, len(places) + 1))
        j = max(0, -(-(rest - reach) // place))
        if j > top[k]:
            return None
        digits.append(j)
        rest = max(0, rest - j * place)
    shift = sum(j * place for j, place in zip(digits, places))
    if shift > offset:
        return None
    slices = [(0, box[0], step[0])]
    for k, j in enumerate(digits, start=1):
        slices.append((j, j + (n[k] - 1) * step[k] + 1, step[k]) if k < len(c) else (j, j + 1, 1))
    return ViewPlan(offset - shift, tuple(box), tuple(slices), perm, unit_dims)


def storage_end(size, stride, offset):
    """One past the last storage element that saving a tensor of this layout needs: its last element, or the end
    of its view plan's box, so that it loads as a view (a few more elements, written as zeros)."""
    span = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
    plan = view_plan(size, stride, offset)
    return max(span, plan.end) if plan is not None else span


def apply_plan(base, plan, size):
    """The view of `base` (a 1-d tensor) that plan describes."""
    t = base[plan.start:plan.end].view(plan.box)
    t = t[tuple(slice(*sl) for sl in plan.slices)].select(-1, 0)
    if plan.perm:
        t = t.permute(plan.perm)
    for d in plan.unit_dims:
        t = t.unsqueeze(d)
    return t.expand(tuple(size))
