"""Reference engine: thread-local grad mode. Mirrors csrc/dyngrad/grad_mode.h.

Each thread starts with grad mode on; changing it in one thread never affects another. The context managers
(no_grad, enable_grad, ...) are shared by both engines: python/dyngrad/autograd/grad_mode.py.
"""
import threading


class _GradState(threading.local):
    def __init__(self):
        self.enabled = True


_state = _GradState()


def is_grad_enabled():
    return _state.enabled


def _set_enabled(mode):
    _state.enabled = bool(mode)


class GradModeGuard:
    """`with GradModeGuard(False):` sets the mode for a block and restores it (C++'s GradModeGuard)."""

    def __init__(self, mode):
        self.mode = bool(mode)

    def __enter__(self):
        self._previous = _state.enabled
        _state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled = self._previous
        return False
