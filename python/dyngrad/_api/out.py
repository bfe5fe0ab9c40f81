"""torch's out= keyword: the result is written into a given tensor (resized if its shape differs, with torch's
warning when it held elements), which is also returned. Rows of the table with the kind `out` get it."""
import functools
import inspect

from .. import _C
from .._user_frame import warn
from .args import shape_str, type_name


def write_out(result, out, op):
    """Writes `result` (a tensor, or a tuple of them for a tuple `out`) into `out` and returns `out`."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{op}: out= must be a tuple of {len(result)} tensors, got {type_name(out)}.")
        written = tuple(write_out(r, o, op) for r, o in zip(result, out))
        return type(result)(*written) if hasattr(result, "_fields") else written
    if not isinstance(out, _C.Tensor):
        raise TypeError(f"{op}: out= must be a Tensor, got {type_name(out)}.")
    if _C.is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, but "
                           "one of the arguments requires grad.")
    def category(dtype):             # bool < integer < floating < complex: torch's canCast
        return 0 if dtype.name == "bool" else 3 if dtype.is_complex else 2 if dtype.is_floating_point else 1
    category, out_category = category(result.dtype), category(out.dtype)
    if category > out_category:
        raise RuntimeError(f"{op}: result type {result.dtype.name} can't be cast to the desired output type "
                           f"{out.dtype.name}.")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            warn(f"{op}: an output with one or more elements was resized since it had shape "
                 f"{shape_str(out.shape)}, which does not match the required output shape "
                 f"{shape_str(result.shape)}. Resize it to zero elements (out.resize_(0)) to silence this "
                 "warning.", UserWarning)
        out.data = result if result.dtype is out.dtype else _C.to_dtype(result, out.dtype)
        return out
    _C.copy_(out, result)
    return out


def with_out(fn, op):
    """fn with an out= keyword (when out is None the call is fn's own)."""
    @functools.wraps(fn)
    def call(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        return result if out is None else write_out(result, out, op)
    try:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if "out" not in sig.parameters:
            at = next((i for i, p in enumerate(params) if p.kind == p.VAR_KEYWORD), len(params))
            params.insert(at, inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
        call.__signature__ = sig.replace(parameters=params)
    except (TypeError, ValueError):
        pass
    return call
