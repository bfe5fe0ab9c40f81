"""torch.cpu.amp: deprecated aliases of torch.amp.autocast("cpu") and torch.amp.GradScaler("cpu"), which work."""

from .._user_frame import warn
from ..amp import autocast_mode as _autocast_mode
from ..amp import grad_scaler as _grad_scaler
from .. import bfloat16 as _bfloat16

__all__ = ["autocast", "GradScaler"]


def _deprecated(old, new):
    warn(f"`torch.cpu.amp.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning)


class autocast(_autocast_mode.autocast):
    """torch.cpu.amp.autocast(enabled=True, dtype=bfloat16, cache_enabled=True): torch.autocast("cpu", ...)."""

    def __init__(self, enabled=True, dtype=_bfloat16, cache_enabled=True):
        _deprecated("autocast", "torch.amp.autocast('cpu', args...)")
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


GradScaler = _grad_scaler.device_scaler("cpu")
