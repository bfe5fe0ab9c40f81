"""Grad mode switches: context managers that also work as decorators. Thread-local (the flag lives in C++)."""
import functools

from .. import _C


class _GradModeContext:
    enabled = True

    def __enter__(self):
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self.enabled)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    """Ops inside record no graph: for evaluation and parameter updates."""
    enabled = False


class enable_grad(_GradModeContext):
    """Turns recording back on inside a no_grad block."""
    enabled = True


class inference_mode(no_grad):
    """Same as no_grad here (dyngrad has no cheaper mode)."""

    def __init__(self, mode=True):
        self.enabled = not mode


class set_grad_enabled(_GradModeContext):
    """set_grad_enabled(False) sets the mode right away (as a function) and restores it when used with `with`."""

    def __init__(self, mode):
        self._prev = _C.is_grad_enabled()
        self.enabled = bool(mode)
        _C._set_grad_enabled(self.enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)
        mode = self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


def is_grad_enabled():
    return _C.is_grad_enabled()
