"""torch.cuda.amp: the deprecated CUDA spellings of autocast and GradScaler. Without CUDA both disable themselves with
torch's warning (dyngrad has no GPU), so a script's `torch.cuda.amp.GradScaler(enabled=...)` and
`torch.cuda.amp.autocast()` run, as full-precision passthroughs, exactly as under a CPU-only PyTorch."""
import functools

from .._user_frame import warn
from ..amp import autocast_mode as _autocast_mode
from ..amp import grad_scaler as _grad_scaler

__all__ = ["amp_definitely_not_available", "autocast", "custom_bwd", "custom_fwd", "GradScaler"]


def amp_definitely_not_available():
    """True: there is no CUDA."""
    return True


def _deprecated(old, new):
    warn(f"`torch.cuda.amp.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning)


GradScaler = _grad_scaler.device_scaler("cuda")


class autocast(_autocast_mode.autocast):
    """torch.cuda.amp.autocast: torch.autocast("cuda", ...), which disables itself here."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        _deprecated("autocast", "torch.amp.autocast('cuda', args...)")
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    _deprecated("custom_fwd", "torch.amp.custom_fwd(args..., device_type='cuda')")
    return functools.partial(_autocast_mode.custom_fwd, device_type="cuda")(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    _deprecated("custom_bwd", "torch.amp.custom_bwd(args..., device_type='cuda')")
    return functools.partial(_autocast_mode.custom_bwd, device_type="cuda")(bwd)
