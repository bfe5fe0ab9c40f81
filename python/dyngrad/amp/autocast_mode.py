"""torch.amp.autocast_mode: autocast (Note [Autocast] in python/dyngrad/_api/autocast.py) and the decorators of a
custom autograd Function's forward and backward under autocast."""
import functools

from .._api.autocast import autocast, is_autocast_available, is_autocast_enabled, get_autocast_dtype
from .. import Tensor

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available"]


def _cast(value, device_type, dtype):
    """value with its floating-point tensors (float64 excepted) cast to dtype, through containers (torch's)."""
    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype.name != "float64" else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorates a custom Function's forward: with cast_inputs, inside an enabled region its floating-point tensor
    arguments are cast to cast_inputs and forward runs with autocast off; without, forward sees the region as is.
    Records the state for custom_bwd."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorates a custom Function's backward: it runs with the autocast state its forward ran with."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
