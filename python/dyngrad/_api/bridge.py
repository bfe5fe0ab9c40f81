"""The numpy bridge: the one place where a tensor's values go to numpy and where numpy values come back as a
tensor. Everything here sits on the engine's core alone, below the rest of _api.

Note [The numpy bridge]
About a quarter of the shared API computes on the host with numpy: the ops the core has no kernel for (tan, sort,
cumsum, the factorisations, the special functions, ...), the index arithmetic of pooling, padding and embeddings,
the checks that read an argument's values, the factories that fill through numpy (arange, eye, windows), and the
conversions (tolist, numpy(), repr, DLPack). Each crossing is a call of this module, made qualified
(`bridge.host_values(t)`, `bridge.view(t)`, `bridge.share(arr)`, ...): tests/test_numpy_bridge.py refuses
`_numpy_view`, `_C.from_numpy` and `_C.copy_from_numpy` anywhere else in shared code and any import of the
crossing functions by name, so that the crossings of a call can be counted here. tests/bridge_driver.py counts them while it calls
every row of the table on small inputs: a row that reaches the bridge must say `numpy` in its `uses` column, and
one that says so must reach it (those are the rows a C++ kernel would serve; docs/coverage.md lists them).

The crossing functions, reading: view (t's memory as it is), host_array (exact values; bfloat16 as float32),
host_values (values to compute with: Note [Half types on the host]), validate (views handed to a check that raises
or passes: Note [Checks of values replay as checks]); writing back: share (a tensor over an array's
memory), copy, from_array (a copy in a dtype), host_result (a result, rounded once into the op's dtype), round_to.
numpy_dtype, compute_dtype, is_half and canonical_bools only map dtypes and arrays: they cross nothing.
Gradients are unchanged by the bridge: a crossing makes a tensor without history, and the op that crossed records
its own node (a custom Function's, or the core ops it applies to the host-computed constants), as before.
"""
import numpy as np

from .. import _C


# Note [Half types on the host]: ops with a numpy forward (pointwise's _NumpyFunction, scans, sorts, unique, ...)
# see float16 and bfloat16 values as float32: numpy has no bfloat16, and its float16 loops round every step (a
# float16 cumsum accumulates in float16). torch's CPU kernels compute both in float32 and round once, to nearest
# even; host_values() widens the input and host_result() rounds a result back to the op's dtype, for every such op.


# ----- dtypes and arrays (no crossing) ---------------------------------------------------------------------------

def numpy_dtype(dtype):
    """The numpy dtype holding `dtype`'s values: its own, or float32 for bfloat16 (numpy has none; the values are
    rounded when the tensor is made, see from_array)."""
    return np.dtype(np.float32 if dtype.name == "bfloat16" else dtype.name)


def is_half(dtype):
    return dtype.name in ("float16", "bfloat16")


def compute_dtype(dtype):
    """The numpy dtype a numpy forward computes `dtype` in: its own, float32 for the half types."""
    return np.dtype(np.float32) if is_half(dtype) else numpy_dtype(dtype)


def canonical_bools(arr):
    """A numpy bool array may hold bytes other than 0 and 1 (a uint8 array viewed as bool): kernels that read the
    byte (sum, casts) would count 2 or 255 as such, where numpy and torch see True. Such an array becomes a copy
    holding 0/1 (a well-formed one is returned as it is)."""
    if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
        return arr.view(np.uint8) != 0
    return arr


# ----- tensor values to numpy ------------------------------------------------------------------------------------

def validate(check, *args):
    """check(*args) with each tensor among args as a numpy view: a check of values that raises or returns None.
    Note [Checks of values replay as checks]: a program recorded by dyngrad.compile replays the check itself on the
    new values, where a plain read of the values would be a guard on them (every new batch of targets a miss)."""
    return check(*[a._numpy_view() if isinstance(a, _C.Tensor) else a for a in args])


def view(t):
    """A numpy view of t's memory, in t's dtype (not bfloat16): reads see t, writes change it (the factories fill
    a new tensor this way)."""
    return t._numpy_view()


def host_array(t):
    """A numpy view of t's values for reading them on the host: bfloat16 (no numpy dtype) is widened to float32."""
    if t.dtype.name == "bfloat16":
        t = _C.to_dtype(t, _C.float32)
    return t._numpy_view()


def host_values(t, dtype=None):
    """t's values as a numpy array to compute with: a view of t's memory (do not write to it), or a float32 copy for
    float16 and bfloat16 (Note [Half types on the host]); converted to the compute dtype of `dtype` when given."""
    t = t.detach()
    if is_half(t.dtype):
        t = _C.to_dtype(t, _C.float32)
    values = t._numpy_view()
    return values if dtype is None else values.astype(compute_dtype(dtype), copy=False)


# ----- numpy values back as tensors ------------------------------------------------------------------------------

def share(arr):
    """A tensor sharing the memory of a numpy array of a dyngrad dtype (no copy)."""
    return _C.from_numpy(arr)


def copy(arr, requires_grad=False):
    """A new tensor holding a copy of a numpy array of a dyngrad dtype."""
    return _C.copy_from_numpy(arr, requires_grad)


def from_array(arr, dtype, requires_grad=False):
    """A new tensor of `dtype` holding a copy of the numpy array (of numpy_dtype(dtype)); bfloat16, which numpy
    lacks, arrives as float32 and is rounded here."""
    t = _C.copy_from_numpy(np.asarray(arr), False)
    if dtype is not None and t.dtype is not dtype:
        t = _C.to_dtype(t, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def host_result(values, dtype=None):
    """A new tensor holding a numpy result (copied unless it is a contiguous, writable array of its own),
    converted to `dtype` when given: a float32 result of a half-type op is rounded to it here."""
    arr = np.asarray(values)
    if dtype is not None:
        arr = arr.astype(compute_dtype(dtype), copy=False)
    if not (arr.flags.c_contiguous and arr.flags.owndata and arr.flags.writeable):
        arr = np.array(arr, order="C")
    t = _C.from_numpy(arr)
    return t if dtype is None or t.dtype is dtype else _C.to_dtype(t, dtype)


def round_to(values, dtype):
    """numpy values rounded to `dtype`, in its compute dtype (float32 for the half types): what a C++ expression of
    torch's in that dtype holds after each operation (c10::Half and c10::BFloat16 round every result)."""
    return host_values(host_result(values, dtype))
