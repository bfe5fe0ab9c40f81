"""dyngrad.random (torch.random): the global generator's seed and state, and fork_rng.

The generator objects themselves live in _api/generator.py (Note [Generators as swapped core states]); this module
gives torch.random's names for the global one.
"""
import contextlib

from ._api.generator import default_generator  # noqa: F401  (torch.random.default_generator)
from ._api.generator import get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: F401

__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng",
           "thread_safe_generator"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
    """Inside the block, draw from the global generator as you like: on exit its state is restored (what was drawn
    inside leaves no trace on the numbers drawn after). dyngrad runs on the CPU, so `devices` must be None or
    empty and `device_type` None or "cpu"."""
    if device_type not in (None, "cpu"):
        raise RuntimeError(f"{_caller}: device_type {device_type!r} is not available; dyngrad runs on the CPU.")
    if devices:
        raise RuntimeError(f"{_caller}: {_devices_kw}={list(devices)!r} names accelerator devices; dyngrad runs on "
                           f"the CPU (pass {_devices_kw}=None or []).")
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def thread_safe_generator():
    """The generator a DataLoader thread worker should draw from; dyngrad's workers are processes (or the main
    thread), which draw from the global generator: None, as torch returns there."""
    return None
