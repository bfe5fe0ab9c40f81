"""dyngrad.cpu (torch.cpu): the one device dyngrad computes on, answered as torch answers for its CPU, and
torch.cpu.amp (the deprecated CPU spellings of autocast and GradScaler)."""
from . import amp  # noqa: F401

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """Nothing runs asynchronously on the CPU: a no-op, as torch's."""
