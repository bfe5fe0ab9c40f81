"""Anomaly mode and call-site recording (shared by both engines; see Note [Call sites] and Note [Anomaly mode] in
csrc/dyngrad/debug.h).

    with dg.autograd.detect_anomaly():
        loss = model(x)          # each node records the full Python stack of this forward call
        loss.backward()          # every gradient is checked for NaN/Inf; the error names the node and its line

Call sites are recorded by default (each node keeps the file and line that created it; errors in backward name
them). `set_record_call_sites(False)` switches that off for the last bit of per-op speed.
"""
import functools

from . import _engine_debug as _engine


def is_anomaly_enabled():
    return _engine.is_anomaly_enabled()


def _check_nan_supported(check_nan, op):
    # the core's anomaly mode always checks gradients for NaN/Inf; pretending to skip the check would be a lie
    if not check_nan:
        raise NotImplementedError(f"{op}: check_nan=False is not supported: dyngrad's anomaly mode always checks "
                                  "gradients for NaN/Inf.")


def set_anomaly_enabled(enabled, check_nan=True):
    """torch.set_anomaly_enabled: anomaly mode on or off now (detect_anomaly() is the scoped form)."""
    _check_nan_supported(check_nan, "set_anomaly_enabled")
    _engine.set_anomaly_enabled(bool(enabled))


def is_anomaly_check_nan_enabled():
    """Always True: dyngrad's anomaly mode always checks gradients for NaN/Inf (torch's default)."""
    return True


def set_record_call_sites(mode):
    """Record (True, the default) or not the Python line that creates each graph node."""
    _engine.set_record_call_sites(bool(mode))


def is_recording_call_sites():
    return _engine.is_recording_call_sites()


class detect_anomaly:
    """Context manager and decorator: anomaly mode on inside, restored on exit.

    In anomaly mode each node created records the full Python stack of its forward call, and backward() checks
    every gradient a node returns: the first one holding NaN or Inf raises a RuntimeError naming the node, the
    line that created it and that stack. Slow; for debugging only.
    """

    def __init__(self, check_nan=True):
        _check_nan_supported(check_nan, "detect_anomaly")
        self._previous = None

    def __enter__(self):
        self._previous = _engine.is_anomaly_enabled()
        _engine.set_anomaly_enabled(True)
        return self

    def __exit__(self, *exc):
        _engine.set_anomaly_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly():
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """`set_detect_anomaly(True)` switches anomaly mode on now; used as a context manager, it restores the
    previous mode on exit (as torch.autograd.set_detect_anomaly)."""

    def __init__(self, mode, check_nan=True):
        _check_nan_supported(check_nan, "set_detect_anomaly")
        self._previous = _engine.is_anomaly_enabled()
        _engine.set_anomaly_enabled(bool(mode))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _engine.set_anomaly_enabled(self._previous)
        return False
