"""dyngrad.signal (torch.signal): its windows subpackage."""
from . import windows

__all__ = ["windows"]
